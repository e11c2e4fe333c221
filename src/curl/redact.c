/*
 * Redaction: what of a URL or a header may be shown in events, logs, -v
 * output and metrics.
 *
 * A URL keeps its scheme, host, port and path; userinfo is removed, every
 * query value (and every query item without '=', which may be a bare key)
 * becomes "REDACTED", the fragment is dropped. A URL whose authority cannot
 * be trusted (a port that is not all digits, an unclosed IPv6 bracket: the
 * mark of a password with an unencoded '/', '?' or '#') keeps only its
 * scheme and "REDACTED". Control bytes, spaces and bytes >= 0x7f are
 * percent-encoded, so a redacted URL is one printable line.
 *
 * Invariants: output is written left to right from redacted pieces only, so
 * truncation can cut a redacted URL short but never reveal a secret; the
 * output is always NUL-terminated when size > 0; no allocation.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "curl/internal.h"

#define REDACTED "REDACTED"

/* ---- URL splitting ------------------------------------------------------ */

static bool scheme_char(char c)
{
    return isalnum((unsigned char)c) || c == '+' || c == '-' || c == '.';
}

static void split_authority(const char *u, size_t a, size_t end, stg__url_parts *p)
{
    p->has_authority = true;
    /* Userinfo ends at the LAST '@' of the authority: '@' is not allowed
     * unencoded in a host, and a careless password may contain one. */
    size_t at = SIZE_MAX;
    for (size_t i = a; i < end; i++)
        if (u[i] == '@')
            at = i;
    size_t h = a;
    if (at != SIZE_MAX) {
        p->has_userinfo = true;
        p->userinfo = a;
        p->userinfo_len = at - a;
        h = at + 1;
    }
    size_t colon = SIZE_MAX;
    if (h < end && u[h] == '[') {
        size_t close = SIZE_MAX;
        for (size_t i = h; i < end; i++)
            if (u[i] == ']') {
                close = i;
                break;
            }
        if (close == SIZE_MAX) {
            p->bad_authority = true;
            return;
        }
        p->host = h;
        p->host_len = close + 1 - h;
        if (close + 1 < end) {
            if (u[close + 1] != ':') {
                p->bad_authority = true;
                return;
            }
            colon = close + 1;
        }
    } else {
        for (size_t i = h; i < end; i++)
            if (u[i] == ':') {
                if (colon != SIZE_MAX) {
                    p->bad_authority = true; /* two colons outside brackets */
                    return;
                }
                colon = i;
            }
        p->host = h;
        p->host_len = (colon == SIZE_MAX ? end : colon) - h;
    }
    if (colon != SIZE_MAX) {
        p->has_port = true;
        p->port = colon + 1;
        p->port_len = end - colon - 1;
        for (size_t i = p->port; i < end; i++)
            if (u[i] < '0' || u[i] > '9') {
                p->bad_authority = true;
                return;
            }
    }
}

void stg__url_split(const char *u, stg__url_parts *p)
{
    memset(p, 0, sizeof *p);
    if (!u)
        return;
    size_t n = strlen(u), i = 0;
    size_t j = 0;
    if (isalpha((unsigned char)u[0])) {
        j = 1;
        while (scheme_char(u[j]))
            j++;
    }
    bool authority = false;
    if (j > 0 && u[j] == ':' && u[j + 1] == '/' && u[j + 2] == '/') {
        p->has_scheme = true;
        p->scheme = 0;
        p->scheme_len = j;
        i = j + 3;
        authority = true;
    } else if (u[0] == '/' && u[1] == '/') {
        i = 2; /* network-path reference: //host/path */
        authority = true;
    } else if (u[0] != '/' && u[0] != '?' && u[0] != '#' && u[0] != '\0') {
        authority = true; /* no scheme: "host[:port]/path", as curl reads it */
    }
    if (authority) {
        size_t end = i;
        while (end < n && u[end] != '/' && u[end] != '?' && u[end] != '#')
            end++;
        split_authority(u, i, end, p);
        i = end;
    }
    p->path = i;
    while (i < n && u[i] != '?' && u[i] != '#')
        i++;
    p->path_len = i - p->path;
    if (i < n && u[i] == '?') {
        p->has_query = true;
        p->query = ++i;
        while (i < n && u[i] != '#')
            i++;
        p->query_len = i - p->query;
    }
    if (i < n && u[i] == '#') {
        p->has_fragment = true;
        p->fragment = i + 1;
        p->fragment_len = n - i - 1;
    }
}

/* ---- output ----------------------------------------------------------- */

typedef struct out {
    char *buf;
    size_t size, len;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->size == 0)
        return;
    size_t room = o->size - 1 - o->len;
    if (n > room)
        n = room;
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void puts_(out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Copy bytes, percent-encoding what is not printable ASCII. */
static void put_clean(out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f) {
            put(o, s + i, 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            put(o, e, 3);
        }
    }
}

/* Copy bytes, replacing control characters by '?'. */
/* Printable ASCII only: output goes into log lines and JSON strings, where
 * control bytes could forge lines and a stray byte >= 0x80 is invalid UTF-8
 * (jansson refuses such a string, which would lose the whole field). */
static void put_printable(out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char u = (unsigned char)s[i];
        char c = u < 0x20 || u >= 0x7f ? '?' : s[i];
        put(o, &c, 1);
    }
}

static void put_query(out *o, const char *q, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t s = i;
        while (i < n && q[i] != '&')
            i++;
        const char *eq = memchr(q + s, '=', i - s);
        if (eq) {
            put_clean(o, q + s, (size_t)(eq - (q + s)) + 1);
            if ((size_t)(eq - q) + 1 < i)
                puts_(o, REDACTED);
        } else if (i > s) {
            puts_(o, REDACTED); /* a bare item may be a key: hide it */
        }
        if (i >= n)
            break;
        put(o, "&", 1);
        i++;
    }
}

size_t stg_redact_url(const char *url, char *buf, size_t size)
{
    out o = {buf, size, 0};
    if (size > 0)
        buf[0] = '\0';
    if (!url || size == 0)
        return 0;
    stg__url_parts p;
    stg__url_split(url, &p);
    if (p.has_scheme) {
        put_clean(&o, url + p.scheme, p.scheme_len);
        puts_(&o, "://");
    } else if (p.has_authority && url[0] == '/') {
        puts_(&o, "//");
    }
    if (p.bad_authority) {
        puts_(&o, REDACTED);
        return o.len;
    }
    if (p.has_authority) {
        put_clean(&o, url + p.host, p.host_len);
        if (p.has_port) {
            put(&o, ":", 1);
            put_clean(&o, url + p.port, p.port_len);
        }
    }
    put_clean(&o, url + p.path, p.path_len);
    if (p.has_query) {
        put(&o, "?", 1);
        put_query(&o, url + p.query, p.query_len);
    }
    return o.len;
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
    out o = {buf, size, 0};
    put_clean(&o, url + p.host, p.host_len);
    for (size_t i = 0; i < o.len; i++)
        buf[i] = (char)tolower((unsigned char)buf[i]);
    if (p.has_port && p.port_len > 0) {
        put(&o, ":", 1);
        put(&o, url + p.port, p.port_len);
    }
}

void stg__redact_text(const char *in, char *buf, size_t size)
{
    out o = {buf, size, 0};
    if (size > 0)
        buf[0] = '\0';
    if (!in)
        return;
    size_t n = strlen(in);
    size_t i = 0;
    while (i < n) {
        /* A word: up to whitespace or a quote/bracket. */
        size_t s = i;
        while (i < n && !isspace((unsigned char)in[i]) && !strchr("\"'<>()", in[i]))
            i++;
        if (i > s) {
            const char *sep = NULL;
            for (size_t k = s; k + 2 < i; k++)
                if (in[k] == ':' && in[k + 1] == '/' && in[k + 2] == '/') {
                    sep = in + k;
                    break;
                }
            if (sep) {
                char word[2048], red[2048];
                size_t wn = i - s < sizeof word - 1 ? i - s : sizeof word - 1;
                memcpy(word, in + s, wn);
                word[wn] = '\0';
                stg_redact_url(word, red, sizeof red);
                puts_(&o, red);
            } else {
                put_printable(&o, in + s, i - s);
            }
        }
        if (i < n) {
            char c = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? ' ' : in[i];
            put(&o, &c, 1);
            i++;
        }
    }
}

/* ---- headers ---------------------------------------------------------- */

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

static bool name_contains(const char *name, size_t len, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= len; i++)
        if (strncasecmp(name + i, needle, m) == 0)
            return true;
    return false;
}

bool stg_redact_header_is_secret(const char *name, size_t len, const char *const *extra)
{
    static const char *const exact[] = {"authorization", "proxy-authorization", "cookie",
                                        "set-cookie", "x-api-key", "api-key", NULL};
    static const char *const parts[] = {"token", "secret", "api-key", "apikey", "api_key",
                                        "password", "auth", "signature", "session", NULL};
    if (!name)
        return false;
    while (len > 0 && isspace((unsigned char)name[0])) {
        name++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)name[len - 1]))
        len--;
    for (size_t i = 0; exact[i]; i++)
        if (name_is(name, len, exact[i]))
            return true;
    for (size_t i = 0; parts[i]; i++)
        if (name_contains(name, len, parts[i]))
            return true;
    for (size_t i = 0; extra && extra[i]; i++)
        if (name_is(name, len, extra[i]))
            return true;
    return false;
}

size_t stg_redact_header_line(const char *line, const char *const *extra, char *buf,
                              size_t size)
{
    out o = {buf, size, 0};
    if (size > 0)
        buf[0] = '\0';
    if (!line)
        return 0;
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    const char *colon = memchr(line, ':', n);
    size_t nl = colon ? (size_t)(colon - line) : n;
    put_printable(&o, line, nl);
    if (!colon)
        return o.len; /* a status line */
    put(&o, ":", 1);
    if (stg_redact_header_is_secret(line, nl, extra))
        puts_(&o, " " REDACTED);
    else
        put_printable(&o, colon + 1, n - nl - 1);
    return o.len;
}
