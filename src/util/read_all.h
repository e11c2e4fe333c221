/*
 * A stream read to its end into one buffer, written once (the CLI's
 * `-d @FILE` and header files, `stagger serve`'s PEM files). Header-only,
 * internal.
 *
 * Invariants: the buffer returned is NUL-terminated after its *len bytes
 * (the bytes may hold NULs of their own) and the caller's to free; on
 * failure nothing is allocated, NULL is returned and errno says why: EIO
 * (a read error), ENOMEM, or EFBIG (more than max bytes). The stream is
 * not closed.
 */
#ifndef STG_UTIL_READ_ALL_H
#define STG_UTIL_READ_ALL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static inline char *stg__read_all(FILE *f, size_t max, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    *len = 0;
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    for (;;) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1)
            break; /* the end, or an error */
        char *nb = n >= max ? NULL : realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            errno = n >= max ? EFBIG : ENOMEM;
            return NULL;
        }
        buf = nb;
        cap *= 2;
    }
    if (ferror(f)) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

#endif /* STG_UTIL_READ_ALL_H */
