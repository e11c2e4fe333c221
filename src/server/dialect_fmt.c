/*
 * Value formats the personas write (see dialect.h): Go durations (OpenAI),
 * RFC 3339 instants (Anthropic), decimal seconds (Discord, Shopify), base64
 * byte sequences (the IETF pk parameter), and the header/body collectors.
 *
 * Invariants: every time value is rounded up, never down (a client that
 * honours it exactly is never early); every output is NUL-terminated and
 * truncated, never overflowed; a header that does not fit the answer's
 * table is dropped, and the table never overflows (asserted).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/dialect.h"
#include "util/assert.h"
#include "util/base64.h"

void srv_dout_add(srv_dout *o, const char *name, const char *fmt, ...)
{
    if (o->nh == SRV_HDR_MAX)
        return;
    srv_header *h = &o->h[o->nh++];
    snprintf(h->name, sizeof h->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->value, sizeof h->value, fmt, ap);
    va_end(ap);
    STG_ASSERT(o->nh <= SRV_HDR_MAX);
}

void srv_dout_body(srv_dout *o, const char *ctype, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(o->body);
    o->body = NULL;
    o->len = 0;
    if (n < 0)
        return;
    o->body = malloc((size_t)n + 1);
    if (!o->body)
        return;
    va_start(ap, fmt);
    vsnprintf(o->body, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->len = (size_t)n;
    o->ctype = ctype;
}

int64_t srv_ceil_div(int64_t us, int64_t unit)
{
    if (us <= 0)
        return 0;
    return (us + unit - 1) / unit;
}

void srv_fmt_go_duration(int64_t us, char *buf, size_t n)
{
    int64_t ms = srv_ceil_div(us, 1000);
    if (ms == 0) {
        snprintf(buf, n, "0s");
        return;
    }
    if (ms < 1000) {
        snprintf(buf, n, "%" PRId64 "ms", ms);
        return;
    }
    int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, frac = ms % 1000;
    char sec[32];
    if (frac) {
        char f[8];
        snprintf(f, sizeof f, "%03" PRId64, frac);
        for (int i = 2; i > 0 && f[i] == '0'; i--)
            f[i] = '\0';
        snprintf(sec, sizeof sec, "%" PRId64 ".%ss", s, f);
    } else {
        snprintf(sec, sizeof sec, "%" PRId64 "s", s);
    }
    if (h)
        snprintf(buf, n, "%" PRId64 "h%" PRId64 "m%s", h, m, sec);
    else if (m)
        snprintf(buf, n, "%" PRId64 "m%s", m, sec);
    else
        snprintf(buf, n, "%s", sec);
}

void srv_fmt_rfc3339(int64_t unix_s, char *buf, size_t n)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, n, "1970-01-01T00:00:00Z");
}

void srv_fmt_dec_seconds(int64_t us, int places, char *buf, size_t n)
{
    int64_t unit = 1000000;
    for (int i = 0; i < places; i++)
        unit /= 10;
    int64_t v = srv_ceil_div(us, unit), scale = 1000000 / unit;
    if (places == 0)
        snprintf(buf, n, "%" PRId64, v);
    else
        snprintf(buf, n, "%" PRId64 ".%0*" PRId64, v / scale, places, v % scale);
}

void srv_fmt_base64(const char *s, char *buf, size_t n)
{
    if (n == 0)
        return;
    /* As much of s as fits, whole groups of 4 characters. */
    size_t len = strlen(s), fit = (n - 1) / 4 * 3;
    stg__base64_encode(s, len < fit ? len : fit, buf);
}
