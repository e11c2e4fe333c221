/*
 * The request-head rules of `stagger proxy` (head_check.c): pure functions
 * over libmicrohttpd's parsed view of a request head, with no MHD type in
 * them, so a unit test and a libFuzzer harness (fuzz/fuzz_proxy_head.c)
 * drive them without a socket. Never installed.
 */
#ifndef STAGGER_PROXY_HEAD_CHECK_H
#define STAGGER_PROXY_HEAD_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "util/http_field.h"

/* One header field as the front parsed it: name and value are not
 * NUL-terminated (lengths given); value has no leading whitespace. */
typedef struct px_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} px_field;

/* A request head: method and version as on the request line, target the
 * raw request-target (before any percent-decoding). */
typedef struct px_head {
    const char *method;
    size_t method_len;
    const char *version;
    size_t version_len;
    const char *target;
    size_t target_len;
    const px_field *fields;
    size_t n_fields;
} px_head;

/* A refusal: the status (400, or 501 for a method too long or a transfer
 * coding we do not implement), a short reason for the log and the
 * Stagger-Error field (a static token, never a header value), and a
 * sentence for the answer's body. */
typedef struct px_verdict {
    unsigned status;
    const char *reason;
    const char *msg;
} px_verdict;

/* The longest method accepted (the longest registered one,
 * UPDATEREDIRECTREF, has 17 bytes); a longer token gets 501 (RFC 9112 §3). */
#define PX_METHOD_MAX 32

/* Check h against the rules listed at the top of head_check.c. Returns
 * true when it may go upstream; false with *v filled (v may be NULL).
 * Pure, thread-safe; reads only the memory h points at. */
bool px_head_check(const px_head *h, px_verdict *v);

/* The token (RFC 9110 §5.6.2) and field-value (§5.5) rules are
 * util/http_field.h's, the one home of the rule for every edge that takes
 * a header: stg__http_tchar, stg__http_token, stg__http_value_ok. */

/* Does the Connection field value conn[0..m) list the token name[0..n)
 * (case-insensitive, any length)? */
bool px_conn_lists(const char *conn, size_t m, const char *name, size_t n);

#endif
