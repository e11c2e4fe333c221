/*
 * Growable byte buffer with JSON and CSV escaping (see buf.h).
 *
 * Invariants: len < cap whenever p != NULL, and p[len] == '\0'.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/buf.h"
#include "util/grow.h"

static bool reserve(srv_buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (!stg__reserve(&b->p, &b->cap, b->len + extra + 1, 1, 64))
        b->oom = true;
    return !b->oom;
}

void srv_buf_free(srv_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}

void srv_buf_put(srv_buf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void srv_buf_puts(srv_buf *b, const char *s)
{
    srv_buf_put(b, s, strlen(s));
}

void srv_buf_printf(srv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        srv_buf_put(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0
 * when it is not one (overlongs, surrogates and > U+10FFFF rejected). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

void srv_buf_json_str(srv_buf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    srv_buf_put(b, "\"", 1);
    size_t run = 0; /* start of the pending run of plain bytes */
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t l = utf8_seq(u + i, n - i);
            if (l) {
                i += l;
                continue;
            }
        }
        srv_buf_put(b, s + run, i - run);
        switch (c) {
        case '"': srv_buf_put(b, "\\\"", 2); break;
        case '\\': srv_buf_put(b, "\\\\", 2); break;
        case '\n': srv_buf_put(b, "\\n", 2); break;
        case '\r': srv_buf_put(b, "\\r", 2); break;
        case '\t': srv_buf_put(b, "\\t", 2); break;
        default:
            if (c < 0x20)
                srv_buf_printf(b, "\\u%04x", c);
            else
                srv_buf_put(b, "\\ufffd", 6);
        }
        i++;
        run = i;
    }
    srv_buf_put(b, s + run, n - run);
    srv_buf_put(b, "\"", 1);
}

void srv_buf_csv_field(srv_buf *b, const char *s, size_t n)
{
    if (!memchr(s, ',', n) && !memchr(s, '"', n) && !memchr(s, '\n', n) &&
        !memchr(s, '\r', n)) {
        srv_buf_put(b, s, n);
        return;
    }
    srv_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            srv_buf_put(b, "\"", 1);
        srv_buf_put(b, s + i, 1);
    }
    srv_buf_put(b, "\"", 1);
}

char *srv_buf_take(srv_buf *b, size_t *len)
{
    if (b->oom) {
        srv_buf_free(b);
        return NULL;
    }
    if (!b->p && !reserve(b, 0))
        return NULL;
    if (b->len == 0)
        b->p[0] = '\0';
    char *p = b->p;
    if (len)
        *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}
