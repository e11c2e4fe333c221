/*
 * The RFC 9110 field rules, written once (header-only, no I/O, no state) for
 * every edge that accepts a request header: the engine's stg_engine_submit,
 * the proxy's request-head check (proxy/head_check.c), the CLI's -H, the
 * batch's input (JSONL headers) and the batch runner's last check before a
 * stored or queued job is sent. The SFV parser's token builds on the same
 * character class.
 *
 * - A field name is a token (RFC 9110 §5.1, §5.6.2: tchar, ASCII only,
 *   whatever the locale); nothing may sit between it and its colon.
 * - A field value holds no control character but HTAB (§5.5: CR, LF and NUL
 *   would end or cut the field, and the others are not field-content);
 *   obs-text (bytes 0x80-0xFF) passes.
 * - Some fields are the transport's (stg__http_transport_field): they frame
 *   the message or manage the connection (RFC 9112 §6, §9.6; RFC 9110
 *   §7.6.1). libcurl sets them from the request; a caller's value could end
 *   the message early, so the rest of a body is read as the next request on
 *   a shared connection, another caller's (request smuggling).
 * - Batch input may set none of those, nor Host (a job goes where its URL
 *   says) nor any Proxy-* field (meant for a proxy, not for the API):
 *   stg__http_batch_refused.
 *
 * Invariant: every function here is pure and total (any bytes, any length);
 * a NULL reason means allowed.
 */
#ifndef STG_UTIL_HTTP_FIELD_H
#define STG_UTIL_HTTP_FIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* RFC 9110 tchar: "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" /
 * "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA. */
static inline bool stg__http_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
        return true;
    default:
        return false;
    }
}

/* s[0..n) is a token: n > 0 and every byte a tchar. */
static inline bool stg__http_token(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!stg__http_tchar((unsigned char)s[i]))
            return false;
    return true;
}

/* v[0..n) may be a field value: no CTL (0x00-0x1F, 0x7F) but HTAB. */
static inline bool stg__http_value_ok(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* A header line in one of libcurl's three forms: "Name: value" (sent),
 * "Name:" (libcurl's own field of that name is not sent) or "Name;" (sent
 * with an empty value). Returns Name's length when Name is a token followed
 * at once by ':' (then a valid value) or by ';' ending the line; 0 when the
 * line is none of these. */
static inline size_t stg__http_line_name(const char *h)
{
    size_t n = 0;
    while (stg__http_tchar((unsigned char)h[n]))
        n++;
    if (n == 0)
        return 0;
    if (h[n] == ';')
        return h[n + 1] == '\0' ? n : 0;
    if (h[n] != ':')
        return 0;
    return stg__http_value_ok(h + n + 1, strlen(h + n + 1)) ? n : 0;
}

/* name[0..n) starts with lower (lower-case ASCII), in ASCII case folding
 * (no locale: strncasecmp may fold other bytes). */
static inline bool stg__http_name_starts(const char *name, size_t n, const char *lower)
{
    size_t k = strlen(lower);
    if (n < k)
        return false;
    for (size_t i = 0; i < k; i++) {
        char c = name[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lower[i])
            return false;
    }
    return true;
}

/* name[0..n) is lower (lower-case ASCII), ASCII case folded. */
static inline bool stg__http_name_is(const char *name, size_t n, const char *lower)
{
    return strlen(lower) == n && stg__http_name_starts(name, n, lower);
}

/* Why the transport owns the field name[0..n) (message framing or
 * connection management), or NULL when it is not one of those. */
static inline const char *stg__http_transport_field(const char *name, size_t n)
{
    static const char *const framing[] = {"content-length", "transfer-encoding"};
    static const char *const connection[] = {"connection", "keep-alive", "proxy-connection",
                                             "te", "trailer", "upgrade"};
    for (size_t i = 0; i < sizeof framing / sizeof *framing; i++)
        if (stg__http_name_is(name, n, framing[i]))
            return "frames the message: libcurl sets it from the body (another value could "
                   "smuggle a request onto a shared connection)";
    for (size_t i = 0; i < sizeof connection / sizeof *connection; i++)
        if (stg__http_name_is(name, n, connection[i]))
            return "is connection-level (hop-by-hop): libcurl manages the connection";
    return NULL;
}

/* Why batch input (a JSONL job's headers, batch -H) may not set the field
 * name[0..n), or NULL when it may: the transport's fields, Host and every
 * Proxy-* field. */
static inline const char *stg__http_batch_refused(const char *name, size_t n)
{
    const char *why = stg__http_transport_field(name, n);
    if (why)
        return why;
    if (stg__http_name_is(name, n, "host"))
        return "comes from the job's URL";
    if (stg__http_name_starts(name, n, "proxy-"))
        return "is meant for a proxy, not for the API";
    return NULL;
}

#endif /* STG_UTIL_HTTP_FIELD_H */
