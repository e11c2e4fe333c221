/*
 * What libstagger-curl adds to the core's redaction (src/core/redact.c):
 * the per-host limiter key of a URL, read with the same URL splitter as
 * redaction so that the two never disagree about where a host ends, and the
 * name its callers already use for free-text redaction.
 *
 * Invariants: a key holds only the host (never userinfo, path or query:
 * keys appear in metrics and logs), lower-cased, and is "" when the URL has
 * no trustworthy host; output is NUL-terminated when size > 0.
 */
#include <string.h>

#include <stagger/redact.h>

#include "curl/internal.h"

/* Append s[0..n), percent-encoding what is not printable ASCII, lower-cased
 * (escapes too) when lower; never past size - 1. */
static size_t put_key(char *buf, size_t size, size_t len, const char *s, size_t n, bool lower)
{
    const char *hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[3];
        size_t k = 1;
        if (c > 0x20 && c < 0x7f) {
            e[0] = (char)(lower && c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        } else {
            e[0] = '%', e[1] = hex[c >> 4], e[2] = hex[c & 15];
            k = 3;
        }
        for (size_t j = 0; j < k && len + 1 < size; j++)
            buf[len++] = e[j];
    }
    buf[len] = '\0';
    return len;
}

void stg__url_host_key(const char *url, char *buf, size_t size)
{
    if (size == 0)
        return;
    buf[0] = '\0';
    stg__url_parts p;
    stg__url_split(url, &p);
    if (!p.has_authority || p.bad_authority || p.host_len == 0)
        return;
    size_t len = put_key(buf, size, 0, url + p.host, p.host_len, true);
    if (p.has_port && p.port_len > 0) {
        len = put_key(buf, size, len, ":", 1, false);
        put_key(buf, size, len, url + p.port, p.port_len, false);
    }
}

void stg__redact_text(const char *in, char *buf, size_t size)
{
    stg_redact_text(in, buf, size);
}
