/*
 * cpc_events.c: what the counters of this machine can count, in the manner of the -h option of
 * cputrack(1) and cpustat(1M): the counter interface (cpc_cciname), the number of counters
 * (cpc_npic), the overflow capabilities (cpc_caps), the generic (PAPI_*) and platform events
 * each counter can count (cpc_walk_generic_events_pic, cpc_walk_events_pic), every event
 * (cpc_walk_events_all, cpc_walk_generic_events_all), the request attributes (cpc_walk_attrs),
 * and the reference manual (cpc_cpuref).
 *
 * Counters whose lists are identical are printed together, "event[0-15]: ...". Lists wrap at
 * column 76; continuation lines start with two tabs. The backend is the one the library picks
 * (with perfcompat, PERFCOMPAT_BACKEND: the Linux perf events of this host, or an emulated
 * PMU such as sim:ultrasparc or sim:pentium4).
 *
 * Exit status: 0, or 1 when the counters cannot be opened or there is no event at all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libcpc.h>

#define WIDTH 76

/* A growing list of names, separated by single spaces. */
struct names {
    char *text;
    size_t len, cap;
    int count;
};

static void add_name(struct names *l, const char *name) {
    size_t n = strlen(name);

    if (l->len + n + 2 > l->cap) {
        size_t cap = (l->cap == 0) ? 256 : l->cap;
        char *p;

        while (l->len + n + 2 > cap)
            cap *= 2;
        if ((p = (char *) realloc(l->text, cap)) == NULL) {
            perror("cpc_events: realloc");
            exit(1);
        }
        l->text = p;
        l->cap = cap;
    }
    if (l->len > 0)
        l->text[l->len++] = ' ';
    (void) memcpy(l->text + l->len, name, n + 1);
    l->len += n;
    l->count++;
}

static const char *text(const struct names *l) {
    return ((l->len == 0) ? "" : l->text);
}

/* Print "label" then the words of s, wrapped before WIDTH; continuation lines get two tabs. */
static void print_wrapped(const char *label, const char *s) {
    int col = (int) strlen(label) + 8; /* the label follows a tab */
    const char *w = s;

    (void) printf("\t%s", label);
    while (*w != '\0') {
        size_t n = strcspn(w, " ");

        if (col + 1 + (int) n > WIDTH && col > 16) {
            (void) printf("\n\t\t");
            col = 16;
        } else {
            (void) putchar(' ');
            col++;
        }
        (void) printf("%.*s", (int) n, w);
        col += (int) n;
        w += n;
        while (*w == ' ')
            w++;
    }
    (void) putchar('\n');
}

static void pic_action(void *arg, uint_t picno, const char *event) {
    (void) picno;
    add_name((struct names *) arg, event);
}

static void all_action(void *arg, const char *event) {
    add_name((struct names *) arg, event);
}

/*
 * List, for every counter, what walk() reports; counters with the same list share a line.
 */
static void per_pic(cpc_t *cpc, uint_t npic,
    void (*walk)(cpc_t *, uint_t, void *, void (*)(void *, uint_t, const char *))) {
    struct names *lists;
    uint_t i, j;
    char label[64];

    if ((lists = (struct names *) calloc(npic, sizeof (*lists))) == NULL) {
        perror("cpc_events: calloc");
        exit(1);
    }
    for (i = 0; i < npic; i++)
        walk(cpc, i, &lists[i], pic_action);
    for (i = 0; i < npic; i = j) {
        for (j = i + 1; j < npic && strcmp(text(&lists[i]), text(&lists[j])) == 0; j++)
            continue;
        if (j - i > 1)
            (void) snprintf(label, sizeof (label), "event[%u-%u]:", i, j - 1);
        else
            (void) snprintf(label, sizeof (label), "event%u:", i);
        print_wrapped(label, lists[i].count > 0 ? text(&lists[i]) : "(none)");
    }
    for (i = 0; i < npic; i++)
        free(lists[i].text);
    free(lists);
}

int main(void) {
    cpc_t *cpc;
    uint_t npic, caps;
    struct names all, generic, attrs;
    char label[64];

    (void) memset(&all, 0, sizeof (all));
    (void) memset(&generic, 0, sizeof (generic));
    (void) memset(&attrs, 0, sizeof (attrs));

    if ((cpc = cpc_open(CPC_VER_CURRENT)) == NULL) {
        (void) fprintf(stderr, "cpc_events: cannot access performance counters - %s\n",
            strerror(errno));
        return (1);
    }
    npic = cpc_npic(cpc);
    caps = cpc_caps(cpc);

    (void) printf("CPU performance counter interface: %s\n", cpc_cciname(cpc));
    (void) printf("counters: %u\n", npic);
    (void) printf("capabilities: 0x%x (overflow interrupt: %s, precise overflow: %s)\n", caps,
        (caps & CPC_CAP_OVERFLOW_INTERRUPT) ? "yes" : "no",
        (caps & CPC_CAP_OVERFLOW_PRECISE) ? "yes" : "no");

    (void) printf("generic events:\n");
    per_pic(cpc, npic, cpc_walk_generic_events_pic);
    (void) printf("platform events:\n");
    per_pic(cpc, npic, cpc_walk_events_pic);

    cpc_walk_events_all(cpc, &all, all_action);
    cpc_walk_generic_events_all(cpc, &generic, all_action);
    cpc_walk_attrs(cpc, &attrs, all_action);

    (void) snprintf(label, sizeof (label), "all platform events (%d):", all.count);
    print_wrapped(label, text(&all));
    (void) snprintf(label, sizeof (label), "all generic events (%d):", generic.count);
    print_wrapped(label, text(&generic));
    (void) snprintf(label, sizeof (label), "attributes (%d):", attrs.count);
    print_wrapped(label, text(&attrs));
    print_wrapped("reference:", cpc_cpuref(cpc));

    free(all.text);
    free(generic.text);
    free(attrs.text);
    (void) cpc_close(cpc);

    if (all.count + generic.count == 0) {
        (void) fprintf(stderr, "cpc_events: no events to count on this machine\n");
        return (1);
    }
    return (0);
}
