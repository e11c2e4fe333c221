/*
 * What a refusal's body says, as data: the facts the LLM APIs put in their
 * error JSON rather than in headers, each with what it means for a retry.
 * The transport reads the JSON (core parses none: src/curl/body_hints.c,
 * jansson) and hands every fact here as a (dialect, field, word) triple;
 * stg_hints_body looks the word up in one table and applies its meaning.
 *
 * Sources (tests/vectors/bodies/ holds the bodies, each citing its own):
 *  - Google (Gemini API, Vertex AI): google.rpc.RetryInfo retryDelay, a
 *    protobuf Duration whose JSON form is decimal seconds with an "s"
 *    (protobuf.dev reference google.protobuf.Duration; "up to 9 fractional
 *    digits"); google.rpc.QuotaFailure violations (quotaId
 *    "GenerateRequestsPerDayPerProjectPerModel-FreeTier", quotaMetric
 *    ".../generate_content_requests_per_minute_per_project_per_base_model");
 *    status RESOURCE_EXHAUSTED on 429 (cloud.google.com/apis/design/errors,
 *    ai.google.dev/gemini-api/docs/rate-limits: per-day quotas reset at
 *    midnight Pacific time).
 *  - OpenAI: platform.openai.com/docs/guides/error-codes: 429 "You exceeded
 *    your current quota, please check your plan and billing details" with
 *    type/code insufficient_quota, and the billing codes of the same type
 *    (learn.microsoft.com/microsoft-cloud/dev/dev-proxy/concepts/
 *    openai-insufficient-quota): retrying does not restore access.
 *    rate_limit_exceeded is the throttle.
 *  - Anthropic: docs.claude.com/en/api/errors: 402 billing_error, 429
 *    rate_limit_error, 529 overloaded_error ("temporarily overloaded");
 *    error.details.error_code enforced_spend_limit_reached is a monthly
 *    spend limit (/work/shared/ai-apis-reference.md, after Microsoft's Dev
 *    Proxy pages).
 *
 * Invariants: pure (no clock, no allocation); value is read only within
 * [0, len); a wait is never negative and never above STG_WAIT_MAX_US; a
 * fact either applies whole (its flag, wait and bits) or changes nothing;
 * HARD_STOP and THROTTLE are set only here, never by a header.
 */
#include <string.h>

#include <stagger/hints.h>

#include "core/internal.h"

typedef enum meaning { M_HARD_STOP = 1, M_THROTTLE = 2 } meaning;

typedef struct body_word {
    int dialect;
    unsigned fields; /* bit (1u << stg_body_field) of the fields it may come in */
    const char *word;
    meaning m;
} body_word;

#define F(x) (1u << STG_BODY_##x)
#define TC (F(ERROR_TYPE) | F(ERROR_CODE))

static const body_word words[] = {
    /* OpenAI: a billing stop, whatever the words around it. */
    {STG_DIALECT_OPENAI, TC, "insufficient_quota", M_HARD_STOP},
    {STG_DIALECT_OPENAI, TC, "credit_balance_exhausted", M_HARD_STOP},
    {STG_DIALECT_OPENAI, TC, "organization_spend_limit_exceeded", M_HARD_STOP},
    {STG_DIALECT_OPENAI, TC, "project_spend_limit_exceeded", M_HARD_STOP},
    {STG_DIALECT_OPENAI, TC, "organization_usage_limit_exceeded", M_HARD_STOP},
    {STG_DIALECT_OPENAI, TC, "rate_limit_exceeded", M_THROTTLE},
    /* Anthropic: the error type says which limit was hit. */
    {STG_DIALECT_ANTHROPIC, TC, "billing_error", M_HARD_STOP},
    {STG_DIALECT_ANTHROPIC, TC, "enforced_spend_limit_reached", M_HARD_STOP},
    {STG_DIALECT_ANTHROPIC, TC, "overloaded_error", M_THROTTLE},
    {STG_DIALECT_ANTHROPIC, TC, "rate_limit_error", M_THROTTLE},
    /* Google: the canonical code of a quota refusal. */
    {STG_DIALECT_GOOGLE, F(ERROR_STATUS), "RESOURCE_EXHAUSTED", M_THROTTLE},
};

#undef TC
#undef F

static bool word_is(const char *v, size_t len, const char *w)
{
    return strlen(w) == len && memcmp(v, w, len) == 0;
}

/* A protobuf Duration in JSON: [0-9]+(.[0-9]{1,9})?s. Rounded up to whole
 * microseconds (never earlier than asked). STG_OK, STG_EPARSE or
 * STG_ERANGE (more than STG_DELTA_SECONDS_MAX seconds). */
static int duration_parse(const char *v, size_t len, int64_t *us)
{
    size_t i = 0;
    int64_t s = 0;
    bool big = false;
    if (len < 2 || v[len - 1] != 's')
        return STG_EPARSE;
    len--;
    if (v[0] < '0' || v[0] > '9')
        return STG_EPARSE;
    for (; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
        if (s > STG_DELTA_SECONDS_MAX)
            big = true; /* keep reading: the rest must still be well formed */
        else
            s = s * 10 + (v[i] - '0');
    }
    int64_t frac_ns = 0;
    if (i < len && v[i] == '.') {
        size_t digits = 0;
        for (i++; i < len && v[i] >= '0' && v[i] <= '9'; i++, digits++)
            if (digits < 9)
                frac_ns = frac_ns * 10 + (v[i] - '0');
        if (digits == 0 || digits > 9)
            return STG_EPARSE;
        for (; digits < 9; digits++)
            frac_ns *= 10;
    }
    if (i != len)
        return STG_EPARSE;
    if (big || s > STG_DELTA_SECONDS_MAX)
        return STG_ERANGE;
    *us = s * INT64_C(1000000) + (frac_ns + 999) / 1000;
    return STG_OK;
}

/* Does name hold word (lowercase ASCII), without regard to case, '_' and
 * '-' skipped on both sides ("PerDay", "per_day", "per-day")? */
static bool names(const char *name, size_t len, const char *word)
{
    for (size_t start = 0; start < len; start++) {
        size_t i = start;
        const char *w = word;
        while (*w && i < len) {
            char c = name[i];
            if (c == '_' || c == '-') {
                i++;
                continue;
            }
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            if (c != *w)
                break;
            w++;
            i++;
        }
        if (!*w)
            return true;
    }
    return false;
}

static void mark(stg_hints *h, int dialect)
{
    h->seen |= STG_HINT_BODY;
    h->dialects |= 1u << (unsigned)dialect;
}

int stg_hints_body(stg_hints *h, int status, int dialect, stg_body_field field,
                   const char *value, size_t len)
{
    if (!h || (!value && len))
        return STG_EINVAL;
    if (status < 400 || (dialect != STG_DIALECT_OPENAI && dialect != STG_DIALECT_ANTHROPIC &&
                         dialect != STG_DIALECT_GOOGLE))
        return STG_OK;
    if (field == STG_BODY_RETRY_DELAY) {
        if (dialect != STG_DIALECT_GOOGLE)
            return STG_OK;
        int64_t us = 0;
        int rc = duration_parse(value, len, &us);
        if (rc == STG_EPARSE) {
            h->malformed |= STG_HINT_BODY;
            return rc;
        }
        if (rc == STG_ERANGE) {
            us = STG_WAIT_MAX_US;
            h->oversized |= STG_HINT_BODY;
        }
        STG_ASSERT(us >= 0 && us <= STG_WAIT_MAX_US);
        if (h->retry_after_us < us)
            h->retry_after_us = us; /* several waits: the longest, as Retry-After */
        mark(h, dialect);
        return rc;
    }
    if (field == STG_BODY_QUOTA_ID) {
        if (dialect != STG_DIALECT_GOOGLE)
            return STG_OK;
        if (names(value, len, "perday")) {
            h->flags |= STG_HINTS_HARD_STOP;
            mark(h, dialect);
        } else if (names(value, len, "perminute")) {
            mark(h, dialect);
        }
        return STG_OK;
    }
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        const body_word *w = &words[i];
        if (w->dialect != dialect || !((w->fields >> (unsigned)field) & 1u) ||
            !word_is(value, len, w->word))
            continue;
        if (w->m == M_HARD_STOP) {
            h->flags |= STG_HINTS_HARD_STOP;
        } else {
            if (status != 429 && status < 500)
                return STG_OK; /* a throttle's words on a 400: not a refusal to wait out */
            h->flags |= STG_HINTS_THROTTLE;
        }
        mark(h, dialect);
        return STG_OK;
    }
    return STG_OK;
}
