/*
 * Redaction (stagger/redact.h): URLs, free text, header lines, and the one
 * list of secret words that header names, query parameter names and JSONL
 * headers are all judged by.
 *
 * A URL keeps its scheme, host, port and path; userinfo is removed; a
 * query value is shown unless its name is a secret's (the one list below:
 * "?page=2&api_key=REDACTED"), and a query item without '=' (which may be
 * a bare key) becomes "REDACTED"; so does the value of a path's matrix
 * parameter named like a secret (";jsessionid=..."); the fragment is
 * dropped. One rule for every place a URL is shown (fetch -v, logs,
 * exports, --dry-run; issue #37: hiding every value hid what a user needs
 * to debug, and two rules disagreed). A URL whose authority cannot
 * be trusted keeps only its scheme and "REDACTED". The host key (host[:port],
 * lower-cased) is the one part of a URL shown unredacted. Control bytes, spaces and
 * bytes >= 0x7f are percent-encoded, so a redacted URL is one printable
 * line.
 *
 * Invariants: output is written left to right from redacted pieces only, so
 * truncation can cut a redacted URL short but never reveal a secret; the
 * output is always NUL-terminated when size > 0 and its length never
 * exceeds size - 1 (asserted in put()); no allocation, no locale (ASCII
 * rules from core/internal.h, never ctype or strcasecmp).
 */
#include <string.h>

#include <stagger/redact.h>

#include "core/internal.h"
#include "core/url.h"

#define REDACTED "REDACTED"

/* ---- secret names --------------------------------------------------------- */

/* The one list. Substrings, matched case-insensitively. */
static const char *const secret_words[] = {"auth", "cookie", "cred",    "jwt", "key",
                                           "pass", "private", "pwd",   "secret",
                                           "session", "sig",  "token", NULL};

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static void trim_space(const char **s, size_t *len)
{
    while (*len > 0 && is_space((*s)[0])) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_space((*s)[*len - 1]))
        (*len)--;
}

static bool contains_nocase(const char *s, size_t len, const char *lit)
{
    size_t m = strlen(lit);
    for (size_t i = 0; i + m <= len; i++)
        if (stg__eq_nocase(s + i, m, lit))
            return true;
    return false;
}

/* Idempotency-Key, with '-' or '_'. */
static bool is_idempotency_key(const char *s, size_t len)
{
    static const char want[] = "idempotency-key";
    if (len != sizeof want - 1)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i] == '_' ? '-' : stg__to_lower(s[i]);
        if (c != want[i])
            return false;
    }
    return true;
}

bool stg_redact_name_is_secret(const char *name, size_t len)
{
    if (!name)
        return false;
    trim_space(&name, &len);
    if (is_idempotency_key(name, len))
        return false;
    for (size_t i = 0; secret_words[i]; i++)
        if (contains_nocase(name, len, secret_words[i]))
            return true;
    return false;
}

/* Case-insensitive equality of s[0..len) and the NUL-terminated b. */
static bool eq_icase(const char *s, size_t len, const char *b)
{
    for (size_t i = 0; i < len; i++)
        if (b[i] == '\0' || stg__to_lower(s[i]) != stg__to_lower(b[i]))
            return false;
    return b[len] == '\0';
}

bool stg_redact_header_is_secret(const char *name, size_t len, const char *const *extra)
{
    if (!name)
        return false;
    if (stg_redact_name_is_secret(name, len))
        return true;
    trim_space(&name, &len);
    for (size_t i = 0; extra && extra[i]; i++)
        if (eq_icase(name, len, extra[i]))
            return true;
    return false;
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
    STG_ASSERT(o->len < o->size);
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
    size_t run = 0; /* clean bytes not yet copied: one put per run, since
                       every request's URL passes here (engine submit) */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f) {
            run++;
            continue;
        }
        put(o, s + i - run, run);
        run = 0;
        char e[3] = {'%', hex[c >> 4], hex[c & 15]};
        put(o, e, 3);
    }
    put(o, s + n - run, run);
}

/* Printable ASCII only, anything else as '?': output goes into log lines and
 * JSON strings, where control bytes could forge lines and a stray byte
 * >= 0x80 is invalid UTF-8 (jansson refuses such a string, which would lose
 * the whole field). */
static void put_printable(out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char u = (unsigned char)s[i];
        char c = u < 0x20 || u >= 0x7f ? '?' : s[i];
        put(o, &c, 1);
    }
}

/* ---- URLs ------------------------------------------------------------- */

static void put_query(out *o, const char *q, size_t n)
{
    size_t i = 0;
    for (;;) {
        size_t s = i;
        /* ';' separates items too (some servers read it so): a secret
         * behind it ("a=1;token=x") is judged by its own name */
        while (i < n && q[i] != '&' && q[i] != ';')
            i++;
        const char *eq = memchr(q + s, '=', i - s);
        if (eq) {
            size_t name_len = (size_t)(eq - (q + s));
            put_clean(o, q + s, name_len + 1);
            if ((size_t)(eq - q) + 1 < i) {
                if (stg_redact_name_is_secret(q + s, name_len))
                    puts_(o, REDACTED);
                else
                    put_clean(o, eq + 1, (size_t)(q + i - eq - 1));
            }
        } else if (i > s) {
            puts_(o, REDACTED); /* a bare item may be a key: hide it */
        }
        if (i >= n)
            break;
        put(o, &q[i], 1);
        i++;
    }
}

/* Is path[i..) a matrix parameter (";name=value", up to the next ';' or
 * '/') whose name is secret? Sets *name_end (the '=') and *end. */
static bool secret_param(const char *path, size_t n, size_t i, size_t *eq, size_t *end)
{
    size_t e = i + 1;
    while (e < n && path[e] != ';' && path[e] != '/')
        e++;
    const char *q = memchr(path + i + 1, '=', e - i - 1);
    *end = e;
    *eq = q ? (size_t)(q - path) : e;
    return q && stg_redact_name_is_secret(path + i + 1, *eq - i - 1);
}

/* A path, its matrix parameters named like secrets (";jsessionid=...",
 * "/x;token=..."; stg_redact_name_is_secret) with their values replaced:
 * servers take session ids and tokens there too. */
static void put_path(out *o, const char *path, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t s = i;
        while (i < n && path[i] != ';')
            i++;
        put_clean(o, path + s, i - s);
        if (i >= n)
            break;
        size_t eq, end;
        if (secret_param(path, n, i, &eq, &end)) {
            put_clean(o, path + i, eq + 1 - i);
            puts_(o, REDACTED);
        } else {
            put_clean(o, path + i, end - i);
        }
        i = end;
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
    put_path(&o, url + p.path, p.path_len);
    if (p.has_query) {
        put(&o, "?", 1);
        put_query(&o, url + p.query, p.query_len);
    }
    return o.len;
}

bool stg_redact_url_has_secret(const char *url)
{
    if (!url)
        return false;
    stg__url_parts p;
    stg__url_split(url, &p);
    if (p.has_userinfo || p.has_fragment || p.bad_authority)
        return true;
    for (size_t i = 0; i < p.path_len; i++) {
        size_t eq, end;
        if (url[p.path + i] == ';' && secret_param(url + p.path, p.path_len, i, &eq, &end))
            return true;
    }
    if (!p.has_query)
        return false;
    const char *q = url + p.query;
    size_t n = p.query_len, i = 0;
    while (i < n) {
        size_t s = i;
        while (i < n && q[i] != '&' && q[i] != ';')
            i++;
        const char *eq = memchr(q + s, '=', i - s);
        size_t name_len = eq ? (size_t)(eq - (q + s)) : i - s;
        if (stg_redact_name_is_secret(q + s, name_len))
            return true;
        i++;
    }
    return false;
}

/* ---- free text and header lines --------------------------------------- */

static bool word_break(char c)
{
    return is_space(c) || c == '"' || c == '\'' || c == '<' || c == '>' || c == '(' ||
           c == ')';
}

size_t stg_redact_text(const char *in, char *buf, size_t size)
{
    out o = {buf, size, 0};
    if (size > 0)
        buf[0] = '\0';
    if (!in)
        return 0;
    size_t n = strlen(in), i = 0;
    while (i < n) {
        size_t s = i;
        while (i < n && !word_break(in[i]))
            i++;
        if (i > s) {
            bool url = false;
            for (size_t k = s; k + 2 < i && !url; k++)
                url = in[k] == ':' && in[k + 1] == '/' && in[k + 2] == '/';
            if (url) {
                /* A URL longer than this is redacted by its first part: a
                 * prefix of a redaction shows less, never more. */
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
    return o.len;
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

void stg_redact_host_key(const char *url, char *buf, size_t size)
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
