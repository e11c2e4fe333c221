/*
 * Redaction: what of a URL, a header or a message may be shown in events,
 * logs, -v output, metrics, reports and the batch database.
 *
 * One list of secret words decides for header names, URL query parameter
 * names and JSONL request headers alike (stg_redact_name_is_secret), so
 * that the engine's log, the CLI and the batch store agree on what a
 * secret is. Everything here is pure: no I/O, no allocation, no locale, no
 * global state; output is NUL-terminated when size > 0 and written left to
 * right from redacted pieces only, so truncation can cut it short but never
 * reveal a secret. Thread-safe.
 */
#ifndef STAGGER_REDACT_H
#define STAGGER_REDACT_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True if a header or query parameter named name[0..len) carries a secret:
 * the name (spaces and tabs around it ignored) contains, case-insensitively,
 * one of "auth", "cookie", "cred", "jwt", "key", "pass", "private", "pwd",
 * "secret", "session", "sig" or "token" (so Authorization,
 * Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, X-Access-Key,
 * X-Credential, X-Jwt, X-Private, access_token, api_key, password, ...).
 * The exception is Idempotency-Key (or idempotency_key): a retry marker the
 * server must see again, not a credential. It errs on the side of hiding:
 * "monkey" is secret too. NULL is not secret. */
STG_API bool stg_redact_name_is_secret(const char *name, size_t len);

/* stg_redact_name_is_secret(), or name is one of extra (NULL-terminated,
 * may be NULL; compared case-insensitively, whole name). */
STG_API bool stg_redact_header_is_secret(const char *name, size_t name_len,
                                         const char *const *extra);

/* Write a redacted copy of url into buf (size bytes, NUL-terminated,
 * truncated if needed): scheme, host, port and path kept; userinfo removed;
 * a query value shown unless its name is secret (stg_redact_name_is_secret:
 * "?page=2&api_key=REDACTED"; items are split at '&' and ';'), a query
 * item without '=' (which may be a bare key) replaced as a whole, and so
 * the value of each matrix
 * parameter of the path whose name is secret (stg_redact_name_is_secret:
 * "/a;jsessionid=X/b" gives "/a;jsessionid=REDACTED/b"); fragment removed; bytes that are
 * not printable ASCII percent-encoded. A URL without a scheme is read as
 * curl reads it (host[:port]/path). A malformed authority (non-numeric
 * port, unclosed '[': the mark of a password with an unencoded '/', '?' or
 * '#') gives "scheme://REDACTED". Returns the length written. */
STG_API size_t stg_redact_url(const char *url, char *buf, size_t size);

/* The host key of url: its host, or host:port when a port is given,
 * lower-cased, bytes outside printable ASCII percent-encoded; "" when the
 * URL has no host that can be trusted (no authority, a bad port, an
 * unpaired bracket). Never holds userinfo, path or query, so it is what
 * limiter keys, metrics labels and logs may show of a URL. Written into
 * buf (NUL-terminated when size > 0, cut short to fit); url NULL reads as
 * "". Pure and thread-safe. */
STG_API void stg_redact_host_key(const char *url, char *buf, size_t size);

/* True if url itself holds a secret, so that it must not be stored or shown
 * unredacted: userinfo, a fragment (OAuth implicit-flow tokens travel
 * there), a query parameter or a path's matrix parameter (";name=value")
 * whose name stg_redact_name_is_secret() names,
 * or an authority that cannot be read (see stg_redact_url). NULL: false. */
STG_API bool stg_redact_url_has_secret(const char *url);

/* Copy free text (a transport's error message) into buf, replacing every
 * word that contains "://" by its stg_redact_url() form, other bytes
 * outside printable ASCII by '?' and control characters between words by
 * ' ', so the result is one printable line. NULL in gives "". Returns the
 * length written. */
STG_API size_t stg_redact_text(const char *in, char *buf, size_t size);

/* Write "Name: value" with the value replaced by "REDACTED" when the name is
 * secret (stg_redact_header_is_secret), trailing CR/LF removed and control
 * characters and bytes outside printable ASCII replaced by '?'. A line
 * without a colon (a status line) is copied the same way. Returns the
 * length written. */
STG_API size_t stg_redact_header_line(const char *line, const char *const *extra, char *buf,
                                      size_t size);

#ifdef __cplusplus
}
#endif
#endif
