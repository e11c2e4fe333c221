/*
 * The one hint an answer's body carries: GitHub's secondary rate limit,
 * which answers 403 (or 429) with a JSON body whose "message" says so and
 * often no header that would tell it from an authorization failure. The
 * body is parsed with jansson (never by hand), the message handed to the
 * core's rule (stg_hints_message), which sets STG_HINTS_SECONDARY.
 *
 * Invariants: only a 403 or 429 body is read, and only one of at most
 * STG__BODY_HINTS_MAX bytes (a refusal's body is a sentence; a larger one
 * is not a rate limiter's, and jansson would read all of it); nothing of
 * the body is kept, logged or copied (the message is read in place, and a
 * body may hold anything). Thread-safe for distinct hints.
 */
#include <jansson.h>

#include "curl/internal.h"

bool stg__body_hints_read(int status, const char *body, size_t len, stg_hints *h)
{
    if ((status != 403 && status != 429) || !body || len == 0 || len > STG__BODY_HINTS_MAX)
        return false;
    json_error_t err;
    json_t *root = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!root)
        return false;
    bool got = false;
    json_t *m = json_is_object(root) ? json_object_get(root, "message") : NULL;
    if (json_is_string(m))
        got = stg_hints_message(h, status, json_string_value(m), json_string_length(m));
    json_decref(root);
    return got;
}

void stg__body_hints(stg__xfer *x, int status)
{
    (void)stg__body_hints_read(status, x->body.p, x->body.len, &x->hints);
}
