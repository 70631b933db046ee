/* preload_hostile.c: a program that takes the preloaded library's descriptors away
 * (capi/tests/preload_hostile.rs, issue 44 item 1). Usage:
 *   preload_hostile HOW WITH DATA [END]
 * touches 100 fresh pages, then closes every descriptor from 3 on (HOW: close_range, the
 * system call close_range(3, ~0U, 0), or loop, close(3) .. close(1023)), then opens what takes
 * the freed numbers (WITH: file, DATA opened 8 times for writing, "data\n" written through the
 * first; pipe, 4 pipes whose write ends stay open), touches 100 pages more and ends (END: exit,
 * the default, or _exit). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pages.h"

int main(int argc, char **argv) {
    if (argc < 4)
        return 2;
    touch(100);
    if (!strcmp(argv[1], "close_range")) {
        if (syscall(SYS_close_range, 3U, ~0U, 0) != 0)
            return 3;
    } else {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    }
    if (!strcmp(argv[2], "file")) {
        for (int i = 0; i < 8; i++) {
            int fd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0600);
            if (fd < 0)
                return 4;
            if (i == 0 && write(fd, "data\n", 5) != 5)
                return 5;
        }
    } else {
        for (int i = 0; i < 4; i++) {
            int p[2];
            if (pipe(p) != 0)
                return 4;
        }
    }
    touch(100);
    if (argc > 4 && !strcmp(argv[4], "_exit"))
        _exit(0);
    return 0;
}
