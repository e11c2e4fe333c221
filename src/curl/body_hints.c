/*
 * What a refusal's body says, for the hints no header carries. The body is
 * parsed with jansson (never by hand) and each fact is handed to the
 * core's rules, which parse no JSON:
 *  - GitHub's secondary rate limit: 403 (or 429) with a top-level
 *    "message" saying so (stg_hints_message -> STG_HINTS_SECONDARY);
 *  - Google (Gemini API, Vertex AI): {"error": {"code": 429, "status":
 *    "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/
 *    google.rpc.RetryInfo", "retryDelay": "37s"}, {"@type": ".../google.rpc.
 *    QuotaFailure", "violations": [{"quotaId": ..., "quotaMetric": ...}]}]}},
 *    also wrapped in a one-element array (Vertex's streaming endpoints);
 *  - Anthropic: {"type": "error", "error": {"type": "overloaded_error",
 *    "message": ..., "details": {"error_code": ...}}};
 *  - OpenAI: {"error": {"message": ..., "type": ..., "code": ...}};
 * each fact through stg_hints_body (src/core/hints_body.c has what each
 * word means, and the sources). Whose body it is comes from its shape:
 * a top-level "type": "error" is Anthropic's; an error with "status" or
 * "details" is Google's (google.rpc.Status); any other "error" object is
 * OpenAI's (Azure OpenAI answers the same).
 *
 * Which answers are read: 403 and 429 (rate limits), and 5xx (Anthropic's
 * 529, Google's 503 UNAVAILABLE with a RetryInfo, an overload on a 500):
 * every status a vendor refuses with and a retry policy may retry. A 2xx,
 * 3xx or other 4xx body is never read (it is the program's, and no rule
 * of these vendors turns it into a retry). Google's RESOURCE_EXHAUSTED is
 * always a 429 (google.rpc.Code's HTTP mapping; cloud.google.com/apis/
 * design/errors), so no 400 carries one; OpenAI's and Anthropic's billing
 * answers on other 4xx (Anthropic's 402 billing_error, a 400 "credit
 * balance is too low") are not retried anyway.
 *
 * Invariants: only a body of at most STG__BODY_HINTS_MAX bytes is read (a
 * refusal's body is a few sentences; a larger one is not a rate limiter's,
 * and jansson would read all of it); nothing of the body is kept, logged or
 * copied (strings are read in place, and a body may hold anything); the
 * hints are only added to, never cleared. Thread-safe for distinct hints.
 */
#include <string.h>

#include <jansson.h>

#include "curl/internal.h"

static bool read_status(int status)
{
    return status == 403 || status == 429 || (status >= 500 && status <= 599);
}

/* Feed a string member of o, if it is one. */
static void fact(stg_hints *h, int status, int dialect, stg_body_field f, json_t *o,
                 const char *name)
{
    json_t *v = json_is_object(o) ? json_object_get(o, name) : NULL;
    if (json_is_string(v)) /* a malformed wait is flagged in h->malformed */
        (void)stg_hints_body(h, status, dialect, f, json_string_value(v), json_string_length(v));
}

/* Does the @type of a google.rpc detail name the message (any type URL
 * prefix: "type.googleapis.com/google.rpc.RetryInfo")? */
static bool detail_is(json_t *d, const char *msg)
{
    json_t *t = json_object_get(d, "@type");
    if (!json_is_string(t))
        return false;
    size_t n = json_string_length(t), m = strlen(msg);
    const char *s = json_string_value(t);
    return n >= m && !memcmp(s + n - m, msg, m) && (n == m || s[n - m - 1] == '/');
}

static void google(stg_hints *h, int status, json_t *err)
{
    const int G = STG_DIALECT_GOOGLE;
    fact(h, status, G, STG_BODY_ERROR_STATUS, err, "status");
    json_t *details = json_object_get(err, "details");
    size_t i;
    json_t *d;
    if (!json_is_array(details))
        return;
    json_array_foreach(details, i, d) {
        if (!json_is_object(d))
            continue;
        if (detail_is(d, "google.rpc.RetryInfo")) {
            fact(h, status, G, STG_BODY_RETRY_DELAY, d, "retryDelay");
        } else if (detail_is(d, "google.rpc.QuotaFailure")) {
            json_t *vs = json_object_get(d, "violations"), *v;
            size_t j;
            if (json_is_array(vs))
                json_array_foreach(vs, j, v) {
                    fact(h, status, G, STG_BODY_QUOTA_ID, v, "quotaId");
                    fact(h, status, G, STG_BODY_QUOTA_ID, v, "quotaMetric");
                }
        }
    }
}

/* The vendors' error objects (see the top of the file). */
static void vendor_errors(stg_hints *h, int status, json_t *root)
{
    if (json_is_array(root) && json_array_size(root) == 1)
        root = json_array_get(root, 0); /* Vertex: [{"error": {...}}] */
    json_t *err = json_is_object(root) ? json_object_get(root, "error") : NULL;
    if (!json_is_object(err))
        return;
    json_t *type = json_object_get(root, "type");
    if (json_is_string(type) && !strcmp(json_string_value(type), "error")) {
        const int A = STG_DIALECT_ANTHROPIC;
        fact(h, status, A, STG_BODY_ERROR_TYPE, err, "type");
        fact(h, status, A, STG_BODY_ERROR_CODE, json_object_get(err, "details"),
                   "error_code");
    } else if (json_object_get(err, "status") || json_object_get(err, "details")) {
        google(h, status, err);
    } else {
        const int O = STG_DIALECT_OPENAI;
        fact(h, status, O, STG_BODY_ERROR_CODE, err, "code");
        fact(h, status, O, STG_BODY_ERROR_TYPE, err, "type");
    }
}

bool stg__body_hints_read(int status, const char *body, size_t len, stg_hints *h)
{
    if (!read_status(status) || !body || len == 0 || len > STG__BODY_HINTS_MAX)
        return false;
    json_error_t err;
    json_t *root = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!root)
        return false;
    unsigned flags = h->flags, seen = h->seen, dialects = h->dialects;
    int64_t ra = h->retry_after_us;
    json_t *m = json_is_object(root) ? json_object_get(root, "message") : NULL;
    if (json_is_string(m))
        (void)stg_hints_message(h, status, json_string_value(m), json_string_length(m));
    vendor_errors(h, status, root);
    json_decref(root);
    return h->flags != flags || h->seen != seen || h->dialects != dialects ||
           h->retry_after_us != ra;
}

void stg__body_hints(stg__xfer *x, stg__attempt *a)
{
    if (a->err != STG_NET_NONE)
        return;
    if (stg__body_hints_read(a->status, x->body.p, x->body.len, &x->hints)) {
        int64_t w = STG_UNKNOWN;
        if (stg_hints_server_wait(&x->hints, &w))
            a->hint = w; /* the body's wait, in events and the breaker's probe */
    }
}
