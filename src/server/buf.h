/*
 * A growable byte buffer with the escapes the server writes: JSON strings
 * (any bytes in, valid UTF-8 JSON out) and CSV fields (RFC 4180 quoting).
 *
 * Invariants: p is NUL-terminated whenever it is not NULL; after an
 * allocation failure oom is set and later appends are ignored, so callers
 * check once at the end.
 */
#ifndef STAGGER_SERVER_BUF_H
#define STAGGER_SERVER_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct srv_buf {
    char *p;
    size_t len, cap;
    bool oom;
} srv_buf;

void srv_buf_free(srv_buf *b);
void srv_buf_put(srv_buf *b, const char *s, size_t n);
void srv_buf_puts(srv_buf *b, const char *s);
void srv_buf_printf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as a quoted JSON string. Control characters are escaped; bytes
 * that are not valid UTF-8 become U+FFFD. */
void srv_buf_json_str(srv_buf *b, const char *s, size_t n);
/* Append s as a CSV field, quoted when it holds a comma, quote, CR or LF. */
void srv_buf_csv_field(srv_buf *b, const char *s, size_t n);
/* Take the contents (malloc'd, caller frees); the buffer is left empty.
 * NULL after an allocation failure. */
char *srv_buf_take(srv_buf *b, size_t *len);

#endif
