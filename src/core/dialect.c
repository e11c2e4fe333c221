/*
 * The dialect table: every response header stagger reads, as data. One row
 * says what a header name means (a wait, a quota's limit, remaining count
 * or reset, the quota's key, a global pause, a retry verdict), in which
 * unit, where the quota's key comes from and how the value is written.
 * hints.c is the one reader of this table; adding a dialect is adding rows
 * here, never a branch there.
 *
 * Invariants:
 *   - Patterns are lower case, matched without regard to case (RFC 9110
 *     field names are case-insensitive), and hold at most one '*', which
 *     stands for exactly one word of the row's word list: a name matches
 *     a row only as a whole, so "x-ratelimit-reset-after" never reads as an
 *     OpenAI reset.
 *   - The first matching row wins, so exact names come before patterns.
 *   - Every dialect number has a name (stg_dialect_name) and never changes
 *     meaning: the numbers are in the public header and in stored output.
 *
 * Sources (the rows' meanings; tests/vectors/ holds the examples):
 * RFC 9110 10.2.3; draft-ietf-httpapi-ratelimit-headers-06/-07/-10;
 * platform.openai.com/docs/guides/rate-limits; docs.anthropic.com/en/api/
 * rate-limits; docs.github.com rate-limits-for-the-rest-api; discord.com/
 * developers/docs/topics/rate-limits; docs.x.com/fundamentals/rate-limits;
 * shopify.dev/docs/api/usage/rate-limits; docs.konghq.com rate-limiting
 * plugin; docs.stripe.com/rate-limits; the Stainless SDKs' _base_client.py;
 * AWS SDK retry behaviour (x-amz-retry-after); Azure (x-ms-retry-after-ms).
 */
#include <stagger/hints.h>

#include "core/internal.h"

/* Words a '*' may stand for. Units are the vendors' own spellings. */
static const stg__dialect_word openai_units[] = {
    {"requests", "requests", 0}, {"tokens", "tokens", 0}, {NULL, NULL, 0}};
static const stg__dialect_word anthropic_units[] = {{"requests", "requests", 0},
                                                    {"tokens", "tokens", 0},
                                                    {"input-tokens", "input-tokens", 0},
                                                    {"output-tokens", "output-tokens", 0},
                                                    {NULL, NULL, 0}};
/* Kong's rate-limiting plugin: the window in the name. A month and a year
 * are read as 30 and 365 days: the window only paces, the reset (when
 * given) says when the quota returns. */
static const stg__dialect_word kong_windows[] = {
    {"second", NULL, STG_SEC(1)},           {"minute", NULL, STG_SEC(60)},
    {"hour", NULL, STG_SEC(3600)},          {"day", NULL, STG_SEC(86400)},
    {"month", NULL, STG_SEC(30 * 86400)},   {"year", NULL, STG_SEC(365 * 86400)},
    {NULL, NULL, 0}};

#define ROW(pat, words, dialect, meaning, syntax, key, bit, unit)                          \
    {pat, words, STG_DIALECT_##dialect, STG__M_##meaning, STG__S_##syntax, STG__K_##key, \
     STG_HINT_##bit, unit}

static const stg__dialect_row rows[] = {
    /* Waits. */
    ROW("retry-after", NULL, RETRY_AFTER, WAIT, RETRY_AFTER, HOST, RETRY_AFTER, NULL),
    ROW("retry-after-ms", NULL, RETRY_AFTER_MS, WAIT, MS, HOST, RETRY_AFTER, NULL),
    ROW("x-ms-retry-after-ms", NULL, AZURE, WAIT, MS, HOST, RETRY_AFTER, NULL),
    ROW("x-amz-retry-after", NULL, AWS, WAIT, MS, HOST, RETRY_AFTER, NULL),
    ROW("x-ratelimit-retry-after", NULL, RETRY_AFTER_X, WAIT, RESET, HOST, RETRY_AFTER, NULL),
    /* X-RateLimit-*: GitHub, Discord and many more; the key, when the
     * response names one, is x-ratelimit-resource or X-RateLimit-Bucket. */
    ROW("x-ratelimit-limit", NULL, X_RATELIMIT, LIMIT, COUNT, SCOPE, X_RATELIMIT, NULL),
    ROW("x-ratelimit-remaining", NULL, X_RATELIMIT, REMAINING, COUNT, SCOPE, X_RATELIMIT, NULL),
    ROW("x-ratelimit-reset", NULL, X_RATELIMIT, RESET, RESET, SCOPE, X_RATELIMIT, NULL),
    ROW("x-ratelimit-used", NULL, GITHUB, NOTE, COUNT, SCOPE, X_RATELIMIT, NULL),
    ROW("x-ratelimit-resource", NULL, GITHUB, KEY, TEXT, SCOPE, SCOPE, NULL),
    ROW("x-ratelimit-bucket", NULL, DISCORD, KEY, TEXT, SCOPE, SCOPE, NULL),
    ROW("x-ratelimit-reset-after", NULL, DISCORD, RESET, SECONDS, SCOPE, X_RATELIMIT, NULL),
    ROW("x-ratelimit-global", NULL, DISCORD, GLOBAL, BOOL, SCOPE, SCOPE, NULL),
    ROW("x-ratelimit-scope", NULL, DISCORD, SCOPE, TEXT, SCOPE, SCOPE, NULL),
    /* OpenAI: two quotas at once, resets as Go durations. */
    ROW("x-ratelimit-limit-*", openai_units, OPENAI, LIMIT, COUNT, HOST, X_RATELIMIT, NULL),
    ROW("x-ratelimit-remaining-*", openai_units, OPENAI, REMAINING, COUNT, HOST, X_RATELIMIT,
        NULL),
    ROW("x-ratelimit-reset-*", openai_units, OPENAI, RESET, GO_DURATION, HOST, X_RATELIMIT,
        NULL),
    /* Kong: one quota per window. */
    ROW("x-ratelimit-limit-*", kong_windows, KONG, LIMIT, COUNT, HOST, X_RATELIMIT, NULL),
    ROW("x-ratelimit-remaining-*", kong_windows, KONG, REMAINING, COUNT, HOST, X_RATELIMIT,
        NULL),
    /* Anthropic: requests, tokens, input and output tokens; RFC 3339 resets. */
    ROW("anthropic-ratelimit-*-limit", anthropic_units, ANTHROPIC, LIMIT, COUNT, HOST,
        X_RATELIMIT, NULL),
    ROW("anthropic-ratelimit-*-remaining", anthropic_units, ANTHROPIC, REMAINING, COUNT, HOST,
        X_RATELIMIT, NULL),
    ROW("anthropic-ratelimit-*-reset", anthropic_units, ANTHROPIC, RESET, RFC3339, HOST,
        X_RATELIMIT, NULL),
    /* X (Twitter) v2: epoch resets, 15-minute windows. */
    ROW("x-rate-limit-limit", NULL, X, LIMIT, COUNT, HOST, X_RATELIMIT, NULL),
    ROW("x-rate-limit-remaining", NULL, X, REMAINING, COUNT, HOST, X_RATELIMIT, NULL),
    ROW("x-rate-limit-reset", NULL, X, RESET, RESET, HOST, X_RATELIMIT, NULL),
    /* Shopify REST: "used/bucket size" of a leaky bucket. */
    ROW("x-shopify-shop-api-call-limit", NULL, SHOPIFY, PAIR, PAIR, HOST, X_RATELIMIT, NULL),
    /* Server verdicts. */
    ROW("x-should-retry", NULL, SHOULD_RETRY, VERDICT, BOOL, HOST, VERDICT, NULL),
    ROW("stripe-should-retry", NULL, STRIPE, VERDICT, BOOL, HOST, VERDICT, NULL),
    /* IETF: draft-10 lists of named policies (draft-07 dictionaries are told
     * apart by their form), and the three fields of drafts up to -06. */
    ROW("ratelimit", NULL, IETF, IETF_RATELIMIT, SFV, NAMED, RATELIMIT, NULL),
    ROW("ratelimit-policy", NULL, IETF, IETF_POLICY, SFV, NAMED, RATELIMIT_POLICY, NULL),
    ROW("ratelimit-limit", NULL, IETF_06, IETF_LIMIT, SFV, HOST, RATELIMIT, NULL),
    ROW("ratelimit-remaining", NULL, IETF_06, IETF_REMAINING, SFV, HOST, RATELIMIT, NULL),
    ROW("ratelimit-reset", NULL, IETF_06, RESET, RESET, HOST, RATELIMIT, NULL),
};

#undef ROW

static const char *const dialect_names[STG_DIALECT_COUNT] = {
    "none",        "retry-after", "retry-after-ms", "azure",        "aws",
    "x-ratelimit", "github",      "discord",        "openai",       "anthropic",
    "x",           "shopify",     "kong",           "should-retry", "stripe",
    "ietf",        "ietf-07",     "ietf-06",        "x-ratelimit-retry-after",
    "google"};

const char *stg_dialect_name(int dialect)
{
    return dialect >= 0 && dialect < STG_DIALECT_COUNT ? dialect_names[dialect] : "unknown";
}

/* Does name[0..len) match pattern, its '*' standing for one of words? */
static bool row_match(const stg__dialect_row *r, const char *name, size_t len,
                      stg__dialect_match *m)
{
    const char *star = NULL;
    size_t plen = 0;
    for (const char *p = r->pattern; *p; p++, plen++)
        if (*p == '*')
            star = p;
    if (!star)
        return stg__eq_nocase(name, len, r->pattern);
    size_t pre = (size_t)(star - r->pattern), post = plen - pre - 1;
    if (len <= pre + post)
        return false;
    for (size_t i = 0; i < pre; i++)
        if (stg__to_lower(name[i]) != r->pattern[i])
            return false;
    if (!stg__eq_nocase(name + len - post, post, star + 1))
        return false;
    for (const stg__dialect_word *w = r->words; w && w->word; w++) {
        if (stg__eq_nocase(name + pre, len - pre - post, w->word)) {
            m->unit = w->unit;
            m->window_us = w->window_us ? w->window_us : STG_UNKNOWN;
            return true;
        }
    }
    return false;
}

bool stg__dialect_lookup(const char *name, size_t len, stg__dialect_match *m)
{
    /* Every response header comes here: the first letter (every pattern
     * starts with one, never a '*') turns most of them away at once
     * (Content-Type, Date...), where a full match of each row cost about 3%
     * of a batch's CPU per response. */
    char first = len ? stg__to_lower(name[0]) : '\0';
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        STG_ASSERT(rows[i].pattern[0] && rows[i].pattern[0] != '*');
        if (rows[i].pattern[0] != first)
            continue;
        m->unit = rows[i].unit;
        m->window_us = STG_UNKNOWN;
        if (row_match(&rows[i], name, len, m)) {
            m->row = &rows[i];
            STG_ASSERT(m->row->dialect > STG_DIALECT_NONE && m->row->dialect < STG_DIALECT_COUNT);
            return true;
        }
    }
    m->row = NULL;
    return false;
}

size_t stg__dialect_rows(const stg__dialect_row **out)
{
    *out = rows;
    return sizeof rows / sizeof rows[0];
}
