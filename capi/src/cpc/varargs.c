/*
 * The C side of the libcpc and libpctx ABIs: what Rust cannot do on stable.
 *
 * - A libcpc error handler takes a va_list; only C can make one. Rust calls
 *   perfcompat_cpc_call_errhndlr (version 2's cpc_errhndlr_t) and perfcompat_cpc_call_errfn
 *   (version 1's cpc_errfn_t) with no variable arguments, so the handler gets an empty
 *   va_list started after fmt (the strings passed contain no conversions).
 * - pctx_set_events(pctx, event, fn, event, fn, ..., PCTX_NULL_EVENT) is variadic. Rust
 *   exports pctx_set_events as a naked trampoline that jumps here unchanged (registers, stack
 *   and the vector-register count intact), so this function reads the arguments as a C
 *   variadic callee, and hands each (event, function) pair to Rust.
 *
 * Both functions are hidden: the library exports only the Rust-declared symbols.
 */
#include <stdarg.h>
#include <stddef.h>

typedef void(perfcompat_errhndlr_t)(const char *fn, int subcode, const char *fmt, va_list ap);

__attribute__((visibility("hidden"))) void
perfcompat_cpc_call_errhndlr(perfcompat_errhndlr_t *h, const char *fn, int subcode,
                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    h(fn, subcode, fmt, ap);
    va_end(ap);
}

/* libcpc version 1's error function (cpc_seterrfn): the function's name and the message as a
 * format with no conversions ('%' doubled), with an empty va_list. */
typedef void(perfcompat_errfn_t)(const char *fn, const char *fmt, va_list ap);

__attribute__((visibility("hidden"))) void
perfcompat_cpc_call_errfn(perfcompat_errfn_t *h, const char *fn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    h(fn, fmt, ap);
    va_end(ap);
}

struct __pctx;
typedef void (*perfcompat_pctx_fn_t)(void);

/* Defined in Rust (capi/src/pctx.rs): record one callback; 0 or -1 with errno set. */
int perfcompat_pctx_set_event(struct __pctx *pctx, int event, perfcompat_pctx_fn_t fn);

/* pctx_event_t is an enum, passed as an int; PCTX_NULL_EVENT (0) ends the list. */
__attribute__((visibility("hidden"))) int
perfcompat_pctx_set_events_va(struct __pctx *pctx, ...)
{
    va_list ap;
    int rc = 0;
    /* The handle is checked even when the list is empty (event 0 checks it only). */
    if (perfcompat_pctx_set_event(pctx, 0, (perfcompat_pctx_fn_t)0) != 0)
        return -1;
    va_start(ap, pctx);
    for (;;) {
        int event = va_arg(ap, int);
        perfcompat_pctx_fn_t fn;
        if (event == 0)
            break;
        fn = va_arg(ap, perfcompat_pctx_fn_t);
        if (perfcompat_pctx_set_event(pctx, event, fn) != 0) {
            /* The types of the arguments after an unknown event are unknown: stop. */
            rc = -1;
            break;
        }
    }
    va_end(ap);
    return rc;
}
