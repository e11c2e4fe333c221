/*
 * Server hints: Retry-After, X-RateLimit-*, RateLimit / RateLimit-Policy.
 * This file is the header dispatcher and the meaning of each field; the
 * syntax lives in httpdate.c (HTTP-date) and sfv.c (structured fields).
 *
 * Invariants (besides those of every parser, see core/internal.h):
 *   - Integer maths never overflows: digit strings saturate and report
 *     STG_ERANGE, and every seconds-to-microseconds conversion is bounded
 *     first. A wait is never negative (a moment in the past means 0) and
 *     never longer than STG_DELTA_SECONDS_MAX seconds (longer is
 *     STG_ERANGE, whether it came from delta-seconds, an HTTP-date or a
 *     reset timestamp).
 *   - A header either parses completely and is then merged into the
 *     stg_hints, or it changes nothing but its bit in h->malformed.
 *
 * Choices the RFCs leave open, made here:
 *   - Reset values (X-RateLimit-Reset, RateLimit-Reset, and the t= and
 *     reset= of the RateLimit field) all use STG_RESET_EPOCH_THRESHOLD to
 *     tell delta-seconds from a Unix timestamp, may be decimals, and are
 *     truncated to whole microseconds.
 *   - Several values for the same thing in one response are combined, not
 *     overwritten: Retry-After keeps the longest wait. Remaining/reset go
 *     together as a pair: the least remaining wins, and on a tie the longer
 *     reset; a reset without a remaining count (X-RateLimit-Reset alone)
 *     keeps the longer reset. Limits go with their window: a limit with a
 *     window beats one without, two windows compare by rate (limit/window,
 *     lower wins, then the smaller limit), two bare limits by size.
 *   - A structured field member that lacks its required parameter (r= in
 *     RateLimit, q= in RateLimit-Policy) or has a negative or mistyped one
 *     makes the whole field malformed.
 */
#include <stdio.h>
#include <string.h>

#include <stagger/hints.h>

#include "core/internal.h"

/* ---- Numbers ------------------------------------------------------- */

/* All of s[0..len) must be digits (at least one). STG_ERANGE if the value
 * exceeds max; the digits are still all checked first, so garbage is
 * STG_EPARSE however long it is. */
static int parse_digits(const char *s, size_t len, int64_t max, int64_t *out)
{
    int64_t v = 0;
    bool big = false;
    if (len == 0)
        return STG_EPARSE;
    for (size_t i = 0; i < len; i++) {
        if (!stg__is_digit(s[i]))
            return STG_EPARSE;
        int d = s[i] - '0';
        if (big || v > (max - d) / 10)
            big = true;
        else
            v = v * 10 + d;
    }
    if (big)
        return STG_ERANGE;
    *out = v;
    return STG_OK;
}

/* A non-negative decimal: 1*DIGIT [ "." 1*DIGIT ]. The integer part must be
 * at most max (else STG_ERANGE); the fraction is truncated to microseconds. */
static int parse_udecimal(const char *s, size_t len, int64_t max, int64_t *ipart,
                          int64_t *frac_us)
{
    size_t dot = 0;
    while (dot < len && s[dot] != '.')
        dot++;
    if (dot < len) {
        int64_t f = 0, scale = STG__US_PER_SEC;
        if (dot + 1 == len)
            return STG_EPARSE;
        for (size_t i = dot + 1; i < len; i++) {
            if (!stg__is_digit(s[i]))
                return STG_EPARSE;
            if (scale > 1) {
                scale /= 10;
                f += (s[i] - '0') * scale;
            }
        }
        *frac_us = f;
    } else {
        *frac_us = 0;
    }
    return parse_digits(s, dot, max, ipart);
}

/* a - b for a wait: negative results become 0; STG_ERANGE when the result
 * is above STG_DELTA_SECONDS_MAX seconds (or would overflow). */
static int wait_until(int64_t target_us, int64_t now_us, int64_t *wait_us)
{
    const int64_t max_us = STG_DELTA_SECONDS_MAX * STG__US_PER_SEC;
    if (now_us < 0 && target_us > INT64_MAX + now_us)
        return STG_ERANGE;
    if (now_us > 0 && target_us < INT64_MIN + now_us) {
        *wait_us = 0;
        return STG_OK;
    }
    int64_t d = target_us - now_us;
    if (d > max_us)
        return STG_ERANGE;
    *wait_us = d < 0 ? 0 : d;
    STG_ASSERT(*wait_us >= 0 && *wait_us <= max_us);
    return STG_OK;
}

/* Seconds (whole part ipart, fraction frac_us) of a reset value into the
 * time until the reset, using STG_RESET_EPOCH_THRESHOLD. */
static int reset_to_us(int64_t ipart, int64_t frac_us, int64_t wall_now_us, int64_t *out)
{
    if (ipart > STG__MAX_SECS_TO_US)
        return STG_ERANGE;
    int64_t us = ipart * STG__US_PER_SEC + frac_us;
    if (ipart < STG_RESET_EPOCH_THRESHOLD) {
        *out = us;
        return STG_OK;
    }
    return wait_until(us, wall_now_us, out);
}

/* ---- Retry-After and reset values ---------------------------------- */

int stg_retry_after_parse(const char *value, size_t len, int64_t wall_now_us, int64_t *wait_us)
{
    int64_t v;
    int rc;

    if (!wait_us)
        return STG_EINVAL;
    if (!value)
        len = 0;
    stg__trim_ows(&value, &len);
    if (len == 0)
        return STG_EPARSE;
    if (stg__is_digit(value[0])) {
        rc = parse_digits(value, len, STG_DELTA_SECONDS_MAX, &v);
        if (rc == STG_OK)
            *wait_us = v * STG__US_PER_SEC;
        return rc;
    }
    rc = stg_http_date_parse(value, len, wall_now_us, &v);
    if (rc != STG_OK)
        return rc;
    /* |v| <= MAX_DATE_S, so v * 10^6 fits easily. */
    return wait_until(v * STG__US_PER_SEC, wall_now_us, wait_us);
}

int stg_ratelimit_reset_parse(const char *value, size_t len, int64_t wall_now_us,
                              int64_t *reset_us)
{
    int64_t ipart, frac_us, out;
    int rc;

    if (!reset_us)
        return STG_EINVAL;
    if (!value)
        len = 0;
    stg__trim_ows(&value, &len);
    rc = parse_udecimal(value, len, INT64_MAX, &ipart, &frac_us);
    if (rc == STG_OK)
        rc = reset_to_us(ipart, frac_us, wall_now_us, &out);
    if (rc == STG_OK)
        *reset_us = out;
    return rc;
}

/* ---- Merging several values into one stg_hints --------------------- */

/* 128-bit product of two 64-bit numbers. */
static void mul_u128(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32;
    uint64_t b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    *lo = (mid << 32) | (p00 & 0xffffffffu);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* Sign of q1/w1 - q2/w2, all arguments non-negative and w1, w2 > 0. */
static int cmp_rate(int64_t q1, int64_t w1, int64_t q2, int64_t w2)
{
    uint64_t h1, l1, h2, l2;
    mul_u128((uint64_t)q1, (uint64_t)w2, &h1, &l1);
    mul_u128((uint64_t)q2, (uint64_t)w1, &h2, &l2);
    if (h1 != h2)
        return h1 < h2 ? -1 : 1;
    if (l1 != l2)
        return l1 < l2 ? -1 : 1;
    return 0;
}

/* A limit q (>= 0) with its window (> 0, or STG_UNKNOWN). */
static void merge_policy(stg_hints *h, int64_t q, int64_t window_us)
{
    STG_ASSERT(q >= 0 && (window_us == STG_UNKNOWN || window_us > 0));
    if (h->limit == STG_UNKNOWN) {
        h->limit = q;
        h->window_us = window_us;
    } else if (window_us != STG_UNKNOWN && h->window_us != STG_UNKNOWN) {
        int c = cmp_rate(q, window_us, h->limit, h->window_us);
        if (c < 0 || (c == 0 && q < h->limit)) {
            h->limit = q;
            h->window_us = window_us;
        }
    } else if (window_us != STG_UNKNOWN) {
        h->limit = q;
        h->window_us = window_us;
    } else if (h->window_us == STG_UNKNOWN && q < h->limit) {
        h->limit = q;
    }
}

/* A remaining count and its reset; either may be STG_UNKNOWN. */
static void merge_pair(stg_hints *h, int64_t remaining, int64_t reset_us)
{
    STG_ASSERT(remaining >= STG_UNKNOWN && reset_us >= STG_UNKNOWN);
    if (remaining == STG_UNKNOWN) {
        if (reset_us > h->reset_us)
            h->reset_us = reset_us;
    } else if (h->remaining == STG_UNKNOWN || remaining < h->remaining) {
        h->remaining = remaining;
        if (reset_us != STG_UNKNOWN)
            h->reset_us = reset_us;
    } else if (remaining == h->remaining && reset_us > h->reset_us) {
        h->reset_us = reset_us;
    }
}

/* A count (r=, q=, limit=, remaining=): a non-negative integer. */
static int sf_count(const stg__sf_item *it, int64_t *out)
{
    if (it->type != STG__SF_INT || it->neg)
        return STG_EPARSE;
    if (it->big)
        return STG_ERANGE;
    *out = it->ipart;
    return STG_OK;
}

/* A reset (t=, reset=): non-negative integer or decimal seconds. */
static int sf_reset(const stg__sf_item *it, int64_t wall_now_us, int64_t *out)
{
    if ((it->type != STG__SF_INT && it->type != STG__SF_DEC) || it->neg)
        return STG_EPARSE;
    if (it->big)
        return STG_ERANGE;
    return reset_to_us(it->ipart, it->frac_us, wall_now_us, out);
}

/* A window (w=): positive seconds, integer or decimal. */
static int sf_window(const stg__sf_item *it, int64_t *out)
{
    if ((it->type != STG__SF_INT && it->type != STG__SF_DEC) || it->neg)
        return STG_EPARSE;
    if (it->big || it->ipart > STG__MAX_SECS_TO_US)
        return STG_ERANGE;
    *out = it->ipart * STG__US_PER_SEC + it->frac_us;
    return *out > 0 ? STG_OK : STG_EPARSE;
}

/* What one field contributes before it is merged into the caller's hints. */
typedef struct field_acc {
    stg_hints h;
    int64_t wall_now_us;
    int64_t dict_remaining; /* RateLimit dictionary form */
    int64_t dict_reset_us;
    bool saw_dict;          /* a key=value member */
    bool bare_token;        /* a token without r=: a bare dictionary key, or
                             * (if saw_dict stays false) a list item
                             * missing its r= */
} field_acc;

/* RateLimit: "name";r=R;t=T items, or limit=, remaining=, reset= members. */
static int on_ratelimit(void *ctx, const stg__sf_member *m)
{
    field_acc *a = ctx;
    int64_t r, t = STG_UNKNOWN;
    const stg__sf_item *pr = stg__sf_param(m, 'r'), *pt = stg__sf_param(m, 't');
    int rc;
    if (m->is_dict) {
        a->saw_dict = true;
        if (stg__eq_nocase(m->key, m->key_len, "limit")) {
            if ((rc = sf_count(&m->item, &r)) != STG_OK)
                return rc;
            merge_policy(&a->h, r, STG_UNKNOWN);
        } else if (stg__eq_nocase(m->key, m->key_len, "remaining")) {
            return sf_count(&m->item, &a->dict_remaining);
        } else if (stg__eq_nocase(m->key, m->key_len, "reset")) {
            return sf_reset(&m->item, a->wall_now_us, &a->dict_reset_us);
        }
        return STG_OK;
    }
    if (pr->type == STG__SF_NONE) {
        if (m->item.type != STG__SF_TOKEN)
            return STG_EPARSE;
        a->bare_token = true;
        return STG_OK;
    }
    if ((rc = sf_count(pr, &r)) != STG_OK)
        return rc;
    if (pt->type != STG__SF_NONE && (rc = sf_reset(pt, a->wall_now_us, &t)) != STG_OK)
        return rc;
    merge_pair(&a->h, r, t);
    return STG_OK;
}

/* RateLimit-Policy: "name";q=Q;w=W items, or draft-07 Q;w=W items. */
static int on_policy(void *ctx, const stg__sf_member *m)
{
    field_acc *a = ctx;
    int64_t q, w = STG_UNKNOWN;
    int rc;
    if (m->is_dict)
        return STG_EPARSE;
    const stg__sf_item *pq = stg__sf_param(m, 'q'), *pw = stg__sf_param(m, 'w');
    if (pq->type != STG__SF_NONE)
        rc = sf_count(pq, &q);
    else if (m->item.type == STG__SF_INT)
        rc = sf_count(&m->item, &q);
    else
        rc = STG_EPARSE;
    if (rc != STG_OK)
        return rc;
    if (pw->type != STG__SF_NONE && (rc = sf_window(pw, &w)) != STG_OK)
        return rc;
    merge_policy(&a->h, q, w);
    return STG_OK;
}

/* RateLimit-Limit (early drafts): Q or Q;w=W items. */
static int on_old_limit(void *ctx, const stg__sf_member *m)
{
    field_acc *a = ctx;
    int64_t q, w = STG_UNKNOWN;
    int rc;
    if (m->is_dict)
        return STG_EPARSE;
    if ((rc = sf_count(&m->item, &q)) != STG_OK)
        return rc;
    const stg__sf_item *pw = stg__sf_param(m, 'w');
    if (pw->type != STG__SF_NONE && (rc = sf_window(pw, &w)) != STG_OK)
        return rc;
    merge_policy(&a->h, q, w);
    return STG_OK;
}

/* RateLimit-Remaining (early drafts): an integer. */
static int on_old_remaining(void *ctx, const stg__sf_member *m)
{
    field_acc *a = ctx;
    int64_t r;
    int rc;
    if (m->is_dict)
        return STG_EPARSE;
    if ((rc = sf_count(&m->item, &r)) != STG_OK)
        return rc;
    merge_pair(&a->h, r, STG_UNKNOWN);
    return STG_OK;
}

/* ---- Headers ------------------------------------------------------- */

void stg_hints_init(stg_hints *h)
{
    if (!h)
        return;
    h->retry_after_us = STG_UNKNOWN;
    h->limit = STG_UNKNOWN;
    h->remaining = STG_UNKNOWN;
    h->reset_us = STG_UNKNOWN;
    h->window_us = STG_UNKNOWN;
    h->seen = 0;
    h->malformed = 0;
    h->verdict = STG_VERDICT_NONE;
    h->oversized = 0;
    h->dialects = 0;
    h->flags = 0;
}

enum hint_name {
    H_NONE,
    H_RETRY_AFTER,
    H_X_LIMIT,
    H_X_REMAINING,
    H_X_RESET,
    H_RL,
    H_RL_POLICY,
    H_RL_LIMIT,
    H_RL_REMAINING,
    H_RL_RESET
};

static enum hint_name hint_lookup(const char *name, size_t len)
{
    static const struct {
        const char *name;
        enum hint_name id;
    } names[] = {
        {"retry-after", H_RETRY_AFTER},
        {"x-ratelimit-limit", H_X_LIMIT},
        {"x-ratelimit-remaining", H_X_REMAINING},
        {"x-ratelimit-reset", H_X_RESET},
        {"ratelimit", H_RL},
        {"ratelimit-policy", H_RL_POLICY},
        {"ratelimit-limit", H_RL_LIMIT},
        {"ratelimit-remaining", H_RL_REMAINING},
        {"ratelimit-reset", H_RL_RESET},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (stg__eq_nocase(name, len, names[i].name))
            return names[i].id;
    }
    return H_NONE;
}

/* ---- Quota sets ---------------------------------------------------- */

void stg_quota_set_init(stg_quota_set *qs)
{
    static const stg_quota_set empty;
    if (!qs)
        return;
    *qs = empty;
}

static void quota_obs_init(stg_quota_obs *q, int dialect)
{
    static const stg_quota_obs empty;
    *q = empty;
    memcpy(q->unit, "requests", sizeof "requests");
    q->limit = q->remaining = q->reset_us = q->window_us = STG_UNKNOWN;
    q->dialect = dialect;
}

/* Merge one observation (limit/window, remaining/reset) into its quota. */
static void quota_add(stg_quota_set *qs, const char *key, int dialect, int64_t limit,
                      int64_t window_us, int64_t remaining, int64_t reset_us)
{
    stg_quota_obs *q = NULL;
    for (size_t i = 0; i < qs->n && !q; i++) {
        stg_quota_obs *r = &qs->q[i];
        if (strcmp(r->key, key) == 0 &&
            (window_us == STG_UNKNOWN || r->window_us == STG_UNKNOWN || r->window_us == window_us))
            q = r;
    }
    if (!q) {
        if (qs->n == STG_QUOTAS_MAX) {
            qs->truncated = true;
            return;
        }
        q = &qs->q[qs->n++];
        quota_obs_init(q, dialect);
        snprintf(q->key, sizeof q->key, "%s", key);
    }
    if (limit != STG_UNKNOWN) {
        stg_hints t;
        stg_hints_init(&t);
        t.limit = q->limit;
        t.window_us = q->window_us;
        merge_policy(&t, limit, window_us);
        q->limit = t.limit;
        q->window_us = t.window_us;
    }
    if (remaining != STG_UNKNOWN || reset_us != STG_UNKNOWN) {
        stg_hints t;
        stg_hints_init(&t);
        t.remaining = q->remaining;
        t.reset_us = q->reset_us;
        merge_pair(&t, remaining, reset_us);
        q->remaining = t.remaining;
        q->reset_us = t.reset_us;
    }
}

const char *stg_dialect_name(int dialect)
{
    static const char *const names[STG_DIALECT_COUNT] = {
        "none",      "retry-after", "retry-after-ms", "azure",        "aws",
        "x-ratelimit", "github",    "discord",        "openai",       "anthropic",
        "x",         "shopify",     "kong",           "should-retry", "stripe",
        "ietf",      "ietf-07",     "ietf-06",        "x-ratelimit-retry-after"};
    return dialect >= 0 && dialect < STG_DIALECT_COUNT ? names[dialect] : "unknown";
}

int stg_hints_header(stg_hints *h, const char *name, size_t name_len, const char *value,
                     size_t value_len, int64_t wall_now_us)
{
    return stg_hints_feed(h, NULL, name, name_len, value, value_len, wall_now_us);
}

int stg_hints_feed(stg_hints *h, stg_quota_set *qs, const char *name, size_t name_len,
                   const char *value, size_t value_len, int64_t wall_now_us)
{
    field_acc a;
    unsigned bit;
    int64_t v;
    int rc;
    enum hint_name id;

    if (!h)
        return STG_EINVAL;
    if (!name)
        name_len = 0;
    if (!value)
        value_len = 0;
    stg__trim_ows(&name, &name_len);
    id = hint_lookup(name, name_len);
    if (id == H_NONE)
        return STG_OK;

    stg_hints_init(&a.h);
    a.wall_now_us = wall_now_us;
    a.dict_remaining = STG_UNKNOWN;
    a.dict_reset_us = STG_UNKNOWN;
    a.saw_dict = a.bare_token = false;
    switch (id) {
    case H_RETRY_AFTER:
        bit = STG_HINT_RETRY_AFTER;
        rc = stg_retry_after_parse(value, value_len, wall_now_us, &v);
        if (rc == STG_OK && v > h->retry_after_us)
            h->retry_after_us = v;
        break;
    case H_X_LIMIT:
        bit = STG_HINT_X_RATELIMIT;
        stg__trim_ows(&value, &value_len);
        rc = parse_digits(value, value_len, INT64_MAX, &v);
        if (rc == STG_OK) {
            merge_policy(h, v, STG_UNKNOWN);
            if (qs)
                quota_add(qs, "", STG_DIALECT_X_RATELIMIT, v, STG_UNKNOWN, STG_UNKNOWN, STG_UNKNOWN);
        }
        break;
    case H_X_REMAINING:
        bit = STG_HINT_X_RATELIMIT;
        stg__trim_ows(&value, &value_len);
        rc = parse_digits(value, value_len, INT64_MAX, &v);
        if (rc == STG_OK) {
            merge_pair(h, v, STG_UNKNOWN);
            if (qs)
                quota_add(qs, "", STG_DIALECT_X_RATELIMIT, STG_UNKNOWN, STG_UNKNOWN, v, STG_UNKNOWN);
        }
        break;
    case H_X_RESET:
    case H_RL_RESET:
        bit = id == H_X_RESET ? STG_HINT_X_RATELIMIT : STG_HINT_RATELIMIT;
        rc = stg_ratelimit_reset_parse(value, value_len, wall_now_us, &v);
        if (rc == STG_OK) {
            merge_pair(h, STG_UNKNOWN, v);
            if (qs)
                quota_add(qs, "", id == H_X_RESET ? STG_DIALECT_X_RATELIMIT : STG_DIALECT_IETF_06,
                          STG_UNKNOWN, STG_UNKNOWN, STG_UNKNOWN, v);
        }
        break;
    case H_RL:
    case H_RL_LIMIT:
    case H_RL_REMAINING:
    case H_RL_POLICY:
    default:
        bit = id == H_RL_POLICY ? STG_HINT_RATELIMIT_POLICY : STG_HINT_RATELIMIT;
        rc = stg__sf_parse_field(value, value_len,
                            id == H_RL            ? on_ratelimit
                            : id == H_RL_POLICY   ? on_policy
                            : id == H_RL_LIMIT    ? on_old_limit
                                                  : on_old_remaining,
                            &a);
        if (rc == STG_OK && a.bare_token && !a.saw_dict)
            rc = STG_EPARSE;
        if (rc == STG_OK) {
            merge_pair(&a.h, a.dict_remaining, a.dict_reset_us);
            if (a.h.limit != STG_UNKNOWN)
                merge_policy(h, a.h.limit, a.h.window_us);
            merge_pair(h, a.h.remaining, a.h.reset_us);
            if (qs)
                quota_add(qs, "", id == H_RL || id == H_RL_POLICY ? STG_DIALECT_IETF : STG_DIALECT_IETF_06,
                          a.h.limit, a.h.window_us, a.h.remaining, a.h.reset_us);
        }
        break;
    }
    if (rc != STG_OK) {
        h->malformed |= bit;
        return rc;
    }
    h->seen |= bit;
    return STG_OK;
}

int stg_hints_header_line(stg_hints *h, const char *line, size_t len, int64_t wall_now_us)
{
    return stg_hints_feed_line(h, NULL, line, len, wall_now_us);
}

int stg_hints_feed_line(stg_hints *h, stg_quota_set *qs, const char *line, size_t len,
                        int64_t wall_now_us)
{
    size_t colon = 0;
    if (!h)
        return STG_EINVAL;
    if (!line)
        return STG_OK;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    while (colon < len && line[colon] != ':')
        colon++;
    if (colon == len)
        return STG_OK;
    return stg_hints_feed(h, qs, line, colon, line + colon + 1, len - colon - 1, wall_now_us);
}

bool stg_hints_server_wait(const stg_hints *h, int64_t *wait_us)
{
    int64_t w;
    if (!h)
        return false;
    if (h->retry_after_us >= 0)
        w = h->retry_after_us;
    else if (h->remaining == 0 && h->reset_us >= 0)
        w = h->reset_us;
    else
        return false;
    if (wait_us)
        *wait_us = w;
    return true;
}
