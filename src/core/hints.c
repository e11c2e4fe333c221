/*
 * Server hints: what a response says about when to come back, in every
 * dialect of the table in dialect.c (Retry-After and its millisecond forms,
 * X-RateLimit-*, the vendors' quota fields, the IETF RateLimit fields,
 * server verdicts). This file is the meaning of each field and the merging;
 * the names are in dialect.c, the syntaxes in httpdate.c (dates), sfv.c
 * (structured fields) and dialect_values.c (vendor values).
 *
 * Invariants (besides those of every parser, see core/internal.h):
 *   - Integer maths never overflows: digit strings saturate and report
 *     STG_ERANGE, and every seconds-to-microseconds conversion is bounded
 *     first. A wait is never negative (a moment in the past means 0) and
 *     never longer than STG_WAIT_MAX_US.
 *   - A wait or reset too large to represent is the largest value (RFC 9111
 *     section 1.2.2), not garbage: it is held as STG_WAIT_MAX_US, flagged in
 *     h->oversized, and the feed returns STG_ERANGE. Reading it as "no hint"
 *     would retry after the plain backoff, long before the server's time.
 *   - Every rounding of a wait goes up (decimal Retry-After, milliseconds,
 *     Go durations), so obeying a hint is never early by a rounding.
 *   - A header either parses completely and is then merged, or it changes
 *     nothing but its bit in h->malformed.
 *   - With a quota set, h's limit/remaining/reset/window are recomputed from
 *     the set after every field, so they are always its most restrictive
 *     quota, each remaining count with its own reset.
 *
 * Choices the RFCs leave open, made here:
 *   - Reset values of X-RateLimit-Reset, X-Rate-Limit-Reset, RateLimit-Reset
 *     use STG_RESET_EPOCH_THRESHOLD to tell delta-seconds from a Unix
 *     timestamp; the t= and reset= of the RateLimit field are delta-seconds
 *     only, as the drafts say. All may be decimals.
 *   - Several values for the same thing in one response are combined, not
 *     overwritten: the waits keep the longest. Remaining/reset go together
 *     as a pair: the least remaining wins, and on a tie the longer reset.
 *     Limits go with their window: a limit with a window beats one without,
 *     two windows compare by rate (limit/window, lower wins, then the
 *     smaller limit), two bare limits by size.
 *   - A RateLimit item without r= but with t= (draft-10's own "missing
 *     remaining" example) is reset information only; without either, or a
 *     RateLimit-Policy item without q=, or a negative or mistyped parameter,
 *     makes the whole field malformed.
 *   - Negative millisecond waits and counts ("-1", Azure) mean "unknown":
 *     present, no value. Two verdicts that disagree: "false" wins.
 */
#include <string.h>

#include <stagger/hints.h>

#include "core/internal.h"

/* ---- Numbers ------------------------------------------------------- */

/* All of s[0..len) must be digits (at least one). STG_ERANGE if the value
 * exceeds max; the digits are still all checked first, so garbage is
 * STG_EPARSE however long it is. */
int stg__parse_digits(const char *s, size_t len, int64_t max, int64_t *out)
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
 * at most max (else STG_ERANGE); the fraction is truncated to microseconds,
 * and *rest says whether a non-zero digit was cut off (may be NULL). */
static int parse_udecimal(const char *s, size_t len, int64_t max, int64_t *ipart,
                          int64_t *frac_us, bool *rest)
{
    size_t dot = 0;
    bool cut = false;
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
            } else if (s[i] != '0') {
                cut = true;
            }
        }
        *frac_us = f;
    } else {
        *frac_us = 0;
    }
    if (rest)
        *rest = cut;
    return stg__parse_digits(s, dot, max, ipart);
}

/* a - b for a wait: negative results become 0; STG_ERANGE when the result
 * is above STG_WAIT_MAX_US (or would overflow). */
static int wait_until(int64_t target_us, int64_t now_us, int64_t *wait_us)
{
    const int64_t max_us = STG_WAIT_MAX_US;
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

/* Seconds (whole part ipart, fraction frac_us) into microseconds, at most
 * STG_WAIT_MAX_US. */
static int secs_to_us(int64_t ipart, int64_t frac_us, int64_t *out)
{
    if (ipart > STG_DELTA_SECONDS_MAX || (ipart == STG_DELTA_SECONDS_MAX && frac_us > 0))
        return STG_ERANGE;
    *out = ipart * STG__US_PER_SEC + frac_us;
    return STG_OK;
}

/* Seconds (whole part ipart, fraction frac_us) of a reset value into the
 * time until the reset, using STG_RESET_EPOCH_THRESHOLD. */
static int reset_to_us(int64_t ipart, int64_t frac_us, int64_t wall_now_us, int64_t *out)
{
    if (ipart > STG__MAX_SECS_TO_US)
        return STG_ERANGE;
    if (ipart < STG_RESET_EPOCH_THRESHOLD)
        return secs_to_us(ipart, frac_us, out);
    return wait_until(ipart * STG__US_PER_SEC + frac_us, wall_now_us, out);
}

/* ---- Retry-After and reset values ---------------------------------- */

int stg_retry_after_parse(const char *value, size_t len, int64_t wall_now_us, int64_t *wait_us)
{
    int64_t v, frac;
    int rc;

    if (!wait_us)
        return STG_EINVAL;
    stg__trim_ows(&value, &len);
    if (len == 0)
        return STG_EPARSE;
    size_t num = 0;
    while (num < len && (stg__is_digit(value[num]) || value[num] == '.'))
        num++;
    if (num == len) {
        /* Delta-seconds; a decimal ("2.0", Shopify) is rounded up. Any
         * other value is a date ("6 Nov 1994 ..." may start with a digit). */
        bool rest = false;
        rc = parse_udecimal(value, len, STG_DELTA_SECONDS_MAX, &v, &frac, &rest);
        if (rc == STG_OK && (frac > 0 || rest))
            v++;
        if (rc == STG_OK && v > STG_DELTA_SECONDS_MAX)
            rc = STG_ERANGE;
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
    stg__trim_ows(&value, &len);
    rc = parse_udecimal(value, len, INT64_MAX, &ipart, &frac_us, NULL);
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
static void merge_pair(int64_t *h_remaining, int64_t *h_reset_us, int64_t remaining,
                       int64_t reset_us)
{
    STG_ASSERT(remaining >= STG_UNKNOWN && reset_us >= STG_UNKNOWN);
    if (remaining == STG_UNKNOWN) {
        if (reset_us > *h_reset_us)
            *h_reset_us = reset_us;
    } else if (*h_remaining == STG_UNKNOWN || remaining < *h_remaining) {
        *h_remaining = remaining;
        if (reset_us != STG_UNKNOWN)
            *h_reset_us = reset_us;
    } else if (remaining == *h_remaining && reset_us > *h_reset_us) {
        *h_reset_us = reset_us;
    }
}

/* ---- Observations: what one field says about one quota -------------- */

typedef struct obs {
    char key[64];      /* for STG__K_NAMED rows */
    const char *unit;  /* NULL: not stated */
    char unit_buf[24];
    int64_t limit, window_us, remaining, reset_us;
    int dialect;
} obs;

static void obs_init(obs *o, const stg__dialect_match *m)
{
    o->key[0] = '\0';
    o->unit = m->unit;
    o->limit = o->remaining = o->reset_us = STG_UNKNOWN;
    o->window_us = m->window_us;
    o->dialect = m->row->dialect;
}

/* A limit q with its window w (STG_UNKNOWN: not stated) of a structured
 * field's member: the smallest limit stated for the quota wins, the first
 * window stated stays. */
static void merge_limit(obs *o, int64_t q, int64_t w)
{
    if (o->limit == STG_UNKNOWN || q < o->limit)
        o->limit = q;
    if (o->window_us == STG_UNKNOWN)
        o->window_us = w;
}

/* Copy text[0..len) into dst (size bytes, NUL-terminated), cut to fit;
 * "\x" escapes of an SF String are undone when unescape is set. */
static void copy_text(char *dst, size_t size, size_t at, const char *text, size_t len,
                      bool unescape)
{
    for (size_t i = 0; i < len && at + 1 < size; i++) {
        if (unescape && text[i] == '\\' && i + 1 < len)
            i++;
        dst[at++] = text[i];
    }
    dst[at < size ? at : size - 1] = '\0';
}

/* ---- Quota sets ------------------------------------------------------ */

void stg_quota_set_init(stg_quota_set *qs)
{
    static const stg_quota_set empty;
    if (!qs)
        return;
    *qs = empty;
}

static void quota_init(stg_quota_obs *q, int dialect)
{
    static const stg_quota_obs empty;
    *q = empty;
    memcpy(q->unit, "requests", sizeof "requests");
    q->limit = q->remaining = q->reset_us = q->window_us = STG_UNKNOWN;
    q->dialect = dialect;
}

/* Quotas whose key is the response's key field (x-ratelimit-resource,
 * X-RateLimit-Bucket). */
static bool keyed_by_scope(int dialect)
{
    return dialect == STG_DIALECT_X_RATELIMIT || dialect == STG_DIALECT_GITHUB ||
           dialect == STG_DIALECT_DISCORD;
}

/* Same quota: same key; the same unit and window where both say one.
 * Without a key, a unit not said is the default one, "requests" (the
 * IETF qu default): a host's unkeyed count (RateLimit: remaining=0) is not
 * another row's unkeyed tokens quota, whose reset it would take
 * (fuzz_feed: a 6 min tokens reset became the wait of a request count
 * that said none). A named quota's unit may be said by one field only
 * (an IETF policy's qu), so there an unsaid unit still matches. */
static bool quota_same(const stg_quota_obs *q, const char *key, const char *unit,
                       int64_t window_us)
{
    if (strcmp(q->key, key) != 0)
        return false;
    if (unit && q->stg__unit_stated && strcmp(q->unit, unit) != 0)
        return false;
    if (!key[0] && (unit != NULL) != q->stg__unit_stated &&
        strcmp(unit ? unit : q->unit, "requests") != 0)
        return false;
    return window_us == STG_UNKNOWN || q->window_us == STG_UNKNOWN || q->window_us == window_us;
}

/* Merge what src says into q (the same quota). */
static void quota_fold(stg_quota_obs *q, const char *unit, int64_t limit, int64_t window_us,
                       int64_t remaining, int64_t reset_us, bool global)
{
    if (unit && !q->stg__unit_stated) {
        copy_text(q->unit, sizeof q->unit, 0, unit, strlen(unit), false);
        q->stg__unit_stated = true;
    }
    if (q->window_us == STG_UNKNOWN)
        q->window_us = window_us;
    if (limit != STG_UNKNOWN && (q->limit == STG_UNKNOWN || limit < q->limit))
        q->limit = limit;
    merge_pair(&q->remaining, &q->reset_us, remaining, reset_us);
    q->global = q->global || global;
}

static void quota_add(stg_quota_set *qs, const char *key, const obs *o)
{
    stg_quota_obs *q = NULL;
    bool global = qs->stg__global && keyed_by_scope(o->dialect);
    for (size_t i = 0; i < qs->n && !q; i++)
        if (quota_same(&qs->q[i], key, o->unit, o->window_us))
            q = &qs->q[i];
    if (!q && qs->n == STG_QUOTAS_MAX) {
        /* No room: what does not fit still counts in the summary. */
        q = &qs->stg__rest;
        if (!qs->truncated)
            quota_init(q, o->dialect);
        qs->truncated = true;
    }
    if (!q) {
        q = &qs->q[qs->n++];
        quota_init(q, o->dialect);
        copy_text(q->key, sizeof q->key, 0, key, strlen(key), false);
    }
    quota_fold(q, o->unit, o->limit, o->window_us, o->remaining, o->reset_us, global);
}

/* The response named its key: the quotas that take it get it, and two
 * that are now the same are merged. */
static void quota_rekey(stg_quota_set *qs, int dialect)
{
    for (size_t i = 0; i < qs->n; i++) {
        stg_quota_obs *q = &qs->q[i];
        if (!keyed_by_scope(q->dialect) || q->key[0])
            continue;
        copy_text(q->key, sizeof q->key, 0, qs->stg__scope, strlen(qs->stg__scope), false);
        if (q->dialect == STG_DIALECT_X_RATELIMIT)
            q->dialect = dialect;
    }
    for (size_t i = 0; i < qs->n; i++) {
        for (size_t j = i + 1; j < qs->n;) {
            stg_quota_obs *a = &qs->q[i], *b = &qs->q[j];
            if (!quota_same(a, b->key, b->stg__unit_stated ? b->unit : NULL, b->window_us)) {
                j++;
                continue;
            }
            quota_fold(a, b->stg__unit_stated ? b->unit : NULL, b->limit, b->window_us,
                       b->remaining, b->reset_us, b->global);
            memmove(b, b + 1, (qs->n - j - 1) * sizeof *b);
            qs->n--;
        }
    }
}

/* h's quota fields: the most restrictive of the set's quotas. Each
 * remaining count goes with its own reset; a reset whose quota has no
 * remaining count only counts when no quota has one. */
static void summarize(stg_hints *h, const stg_quota_set *qs)
{
    int64_t lone_reset = STG_UNKNOWN;
    size_t n = qs->n + (qs->truncated ? 1 : 0);
    h->limit = h->remaining = h->reset_us = h->window_us = STG_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        const stg_quota_obs *q = i < qs->n ? &qs->q[i] : &qs->stg__rest;
        if (q->limit != STG_UNKNOWN)
            merge_policy(h, q->limit, q->window_us != STG_UNKNOWN ? q->window_us : STG_UNKNOWN);
        if (q->remaining != STG_UNKNOWN) {
            /* Its own reset, even an unknown one: merge_pair would keep
             * another quota's reset for a lower count without one (right
             * for two fields of one quota, not for two quotas), and the
             * wait then depended on the order of the quotas (fuzz_feed). */
            if (h->remaining == STG_UNKNOWN || q->remaining < h->remaining) {
                h->remaining = q->remaining;
                h->reset_us = q->reset_us;
            } else if (q->remaining == h->remaining && q->reset_us > h->reset_us) {
                h->reset_us = q->reset_us;
            }
        } else if (q->reset_us > lone_reset)
            lone_reset = q->reset_us;
    }
    if (h->remaining == STG_UNKNOWN)
        h->reset_us = lone_reset;
}

/* One observation into h (without a set) or into the set. */
static void apply(stg_hints *h, stg_quota_set *qs, const stg__dialect_match *m, const obs *o)
{
    if (qs) {
        const char *key = m->row->key == STG__K_NAMED   ? o->key
                          : m->row->key == STG__K_SCOPE ? qs->stg__scope
                                                        : "";
        obs named = *o;
        /* Keyed by GitHub's resource or Discord's bucket: that dialect. */
        if (m->row->key == STG__K_SCOPE && o->dialect == STG_DIALECT_X_RATELIMIT &&
            qs->stg__scope_dialect)
            named.dialect = qs->stg__scope_dialect;
        quota_add(qs, key, &named);
        return;
    }
    if (o->limit != STG_UNKNOWN)
        merge_policy(h, o->limit, o->window_us);
    /* Without a set, a reset held with no count yet (a reset field
     * first) pairs with the count that comes as the longer of the two
     * resets: a shorter one of the count's own item must not drop it
     * (fuzz_feed: a 62-day x-rate-limit-reset gave way to a policy's t=1,
     * and a later remaining=0 then waited 1 s; "least remaining, longest
     * reset" never errs early). Not in a set's quota, whose own fields
     * pair as they come (a lone reset there is another item's). */
    int64_t lone = h->remaining == STG_UNKNOWN ? h->reset_us : STG_UNKNOWN;
    if (o->remaining != STG_UNKNOWN || o->reset_us != STG_UNKNOWN)
        merge_pair(&h->remaining, &h->reset_us, o->remaining, o->reset_us);
    if (lone > h->reset_us && o->remaining != STG_UNKNOWN)
        h->reset_us = lone;
}

/* ---- Structured fields (IETF) ---------------------------------------- */

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

/* A delta (t=, reset=): non-negative integer or decimal seconds; too
 * large is the largest wait (*over). */
static int sf_delta(const stg__sf_item *it, int64_t *out, bool *over)
{
    if ((it->type != STG__SF_INT && it->type != STG__SF_DEC) || it->neg)
        return STG_EPARSE;
    if (it->big || secs_to_us(it->ipart, it->frac_us, out) != STG_OK) {
        *out = STG_WAIT_MAX_US;
        *over = true;
    }
    return STG_OK;
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

#define FIELD_OBS_MAX STG_QUOTAS_MAX

/* What one structured field says, held until the whole field has parsed. */
typedef struct field_acc {
    const stg__dialect_match *m;
    obs o[FIELD_OBS_MAX];
    size_t n;
    bool over;       /* a t= too large to represent */
    bool saw_dict;   /* a key=value member */
    bool bare_token; /* a list item without r= or t=: fine only as a bare
                      * dictionary key (if saw_dict turns true) */
    unsigned dialects;
    obs dict;        /* the draft-07 dictionary's one quota */
    bool has_dict;
} field_acc;

/* The next observation of the field; past FIELD_OBS_MAX they share the
 * last one, which then merges them (most restrictive). */
static obs *acc_next(field_acc *a, int dialect)
{
    obs *o;
    a->dialects |= 1u << dialect;
    if (a->n == FIELD_OBS_MAX)
        return &a->o[FIELD_OBS_MAX - 1];
    o = &a->o[a->n++];
    obs_init(o, a->m);
    o->dialect = dialect;
    return o;
}

/* The quota's key of a draft-10 item: its name (a String or Token; an item
 * of another type names no policy: ""), then ";pk=:...:" when a partition
 * key is given. */
static int item_key(const stg__sf_member *m, char *key, size_t size)
{
    const stg__sf_item *pk = stg__sf_param_named(m, "pk");
    size_t n;
    key[0] = '\0';
    if (m->item.type == STG__SF_STR || m->item.type == STG__SF_TOKEN)
        copy_text(key, size, 0, m->item.text, m->item.text_len, m->item.type == STG__SF_STR);
    if (pk) {
        if (pk->type != STG__SF_BYTES)
            return STG_EPARSE;
        n = strlen(key);
        copy_text(key, size, n, ";pk=:", 5, false);
        n = strlen(key);
        copy_text(key, size, n, pk->text, pk->text_len, false);
        n = strlen(key);
        copy_text(key, size, n, ":", 1, false);
    }
    return STG_OK;
}

/* RateLimit: "name";r=R;t=T items (draft-10), or limit=, remaining=,
 * reset= members (draft-07). */
static int on_ratelimit(void *ctx, const stg__sf_member *m)
{
    field_acc *a = ctx;
    int64_t v;
    int rc;
    if (m->is_dict) {
        a->saw_dict = true;
        if (!a->has_dict) {
            obs_init(&a->dict, a->m);
            a->dict.dialect = STG_DIALECT_IETF_07;
            a->has_dict = true;
            a->dialects |= 1u << STG_DIALECT_IETF_07;
        }
        if (stg__eq_nocase(m->key, m->key_len, "limit")) {
            if ((rc = sf_count(&m->item, &v)) != STG_OK)
                return rc;
            if (a->dict.limit == STG_UNKNOWN || v < a->dict.limit)
                a->dict.limit = v;
        } else if (stg__eq_nocase(m->key, m->key_len, "remaining")) {
            if ((rc = sf_count(&m->item, &v)) != STG_OK)
                return rc;
            merge_pair(&a->dict.remaining, &a->dict.reset_us, v, STG_UNKNOWN);
        } else if (stg__eq_nocase(m->key, m->key_len, "reset")) {
            if ((rc = sf_delta(&m->item, &v, &a->over)) != STG_OK)
                return rc;
            merge_pair(&a->dict.remaining, &a->dict.reset_us, STG_UNKNOWN, v);
        }
        return STG_OK;
    }
    const stg__sf_item *pr = stg__sf_param(m, 'r'), *pt = stg__sf_param(m, 't');
    int64_t r = STG_UNKNOWN, t = STG_UNKNOWN;
    char key[64];
    if (pr->type == STG__SF_NONE && pt->type == STG__SF_NONE) {
        if (m->item.type != STG__SF_TOKEN)
            return STG_EPARSE;
        a->bare_token = true;
        return STG_OK;
    }
    if ((rc = item_key(m, key, sizeof key)) != STG_OK)
        return rc;
    if (pr->type != STG__SF_NONE && (rc = sf_count(pr, &r)) != STG_OK)
        return rc;
    if (pt->type != STG__SF_NONE && (rc = sf_delta(pt, &t, &a->over)) != STG_OK)
        return rc;
    obs *o = acc_next(a, STG_DIALECT_IETF);
    memcpy(o->key, key, sizeof key);
    merge_pair(&o->remaining, &o->reset_us, r, t);
    return STG_OK;
}

/* RateLimit-Policy: "name";q=Q;w=W;qu="unit";pk=:..: items (draft-10), or
 * draft-07 Q;w=W items. */
static int on_policy(void *ctx, const stg__sf_member *m)
{
    field_acc *a = ctx;
    int64_t q, w = STG_UNKNOWN;
    char key[64] = "";
    int rc, dialect = STG_DIALECT_IETF;
    if (m->is_dict)
        return STG_EPARSE;
    const stg__sf_item *pq = stg__sf_param(m, 'q'), *pw = stg__sf_param(m, 'w');
    const stg__sf_item *qu = stg__sf_param_named(m, "qu");
    if (pq->type != STG__SF_NONE) {
        rc = sf_count(pq, &q);
        if (rc == STG_OK)
            rc = item_key(m, key, sizeof key);
    } else if (m->item.type == STG__SF_INT) {
        rc = sf_count(&m->item, &q);
        dialect = STG_DIALECT_IETF_07;
    } else {
        rc = STG_EPARSE;
    }
    if (rc != STG_OK)
        return rc;
    if (pw->type != STG__SF_NONE && (rc = sf_window(pw, &w)) != STG_OK)
        return rc;
    if (qu && (qu->type != STG__SF_STR && qu->type != STG__SF_TOKEN))
        return STG_EPARSE;
    obs *o = acc_next(a, dialect);
    memcpy(o->key, key, sizeof key);
    if (qu) {
        /* qu="" names no unit: the default's (a quota's unit is never empty). */
        copy_text(o->unit_buf, sizeof o->unit_buf, 0, qu->text, qu->text_len,
                  qu->type == STG__SF_STR);
        if (o->unit_buf[0])
            o->unit = o->unit_buf;
    }
    merge_limit(o, q, w);
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
    obs *o = acc_next(a, STG_DIALECT_IETF_06);
    merge_limit(o, q, w);
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
    obs *o = acc_next(a, STG_DIALECT_IETF_06);
    merge_pair(&o->remaining, &o->reset_us, r, STG_UNKNOWN);
    return STG_OK;
}

/* A structured field, whole or not at all. */
static int feed_sfv(stg_hints *h, stg_quota_set *qs, const stg__dialect_match *m,
                    const char *value, size_t value_len, bool *over)
{
    field_acc a;
    stg__sf_member_fn fn;
    int rc;
    memset(&a, 0, sizeof a);
    a.m = m;
    switch (m->row->meaning) {
    case STG__M_IETF_RATELIMIT: fn = on_ratelimit; break;
    case STG__M_IETF_POLICY: fn = on_policy; break;
    case STG__M_IETF_LIMIT: fn = on_old_limit; break;
    default: fn = on_old_remaining; break;
    }
    rc = stg__sf_parse_field(value, value_len, fn, &a);
    if (rc == STG_OK && a.bare_token && !a.saw_dict)
        rc = STG_EPARSE;
    if (rc != STG_OK)
        return rc;
    for (size_t i = 0; i < a.n; i++)
        apply(h, qs, m, &a.o[i]);
    if (a.has_dict) {
        stg__dialect_match host = *m;
        stg__dialect_row row = *m->row;
        row.key = STG__K_HOST;
        host.row = &row;
        apply(h, qs, &host, &a.dict);
    }
    h->dialects |= a.dialects;
    *over = a.over;
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

/* A wait or reset value in the row's syntax, into microseconds from now.
 * STG_ERANGE leaves *us at the largest wait. STG_ENOTFOUND: "unknown". */
static int read_wait(stg__syntax syn, const char *v, size_t n, int64_t now_us, int64_t *us)
{
    int64_t ip, frac, t;
    bool rest = false;
    int rc;
    switch (syn) {
    case STG__S_RETRY_AFTER: rc = stg_retry_after_parse(v, n, now_us, us); break;
    case STG__S_MS: rc = stg__ms_parse(v, n, us); break;
    case STG__S_RESET: rc = stg_ratelimit_reset_parse(v, n, now_us, us); break;
    case STG__S_GO_DURATION: rc = stg__go_duration_parse(v, n, us); break;
    case STG__S_RFC3339:
        rc = stg__rfc3339_parse(v, n, &t);
        if (rc == STG_OK)
            rc = wait_until(t, now_us, us);
        break;
    case STG__S_SECONDS:
        stg__trim_ows(&v, &n);
        rc = parse_udecimal(v, n, INT64_MAX, &ip, &frac, &rest);
        if (rc == STG_OK)
            rc = secs_to_us(ip, frac + (rest ? 1 : 0), us);
        break;
    default: rc = STG_EPARSE; break;
    }
    if (rc == STG_ERANGE)
        *us = STG_WAIT_MAX_US;
    return rc;
}

static int read_bool(const char *v, size_t n, bool *out)
{
    stg__trim_ows(&v, &n);
    if (stg__eq_nocase(v, n, "true"))
        *out = true;
    else if (stg__eq_nocase(v, n, "false"))
        *out = false;
    else
        return STG_EPARSE;
    return STG_OK;
}

/* Visible ASCII, at least one character. */
static int read_text(const char *v, size_t n, char *out, size_t size)
{
    stg__trim_ows(&v, &n);
    if (n == 0)
        return STG_EPARSE;
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0x21 || v[i] > 0x7e)
            return STG_EPARSE;
    copy_text(out, size, 0, v, n, false);
    return STG_OK;
}

static void set_global(stg_hints *h, stg_quota_set *qs)
{
    h->flags |= STG_HINTS_GLOBAL;
    if (!qs)
        return;
    qs->stg__global = true;
    for (size_t i = 0; i < qs->n; i++)
        if (keyed_by_scope(qs->q[i].dialect))
            qs->q[i].global = true;
}

/* One field whose row is m: parse, then merge. */
static int feed_row(stg_hints *h, stg_quota_set *qs, const stg__dialect_match *m,
                    const char *value, size_t value_len, int64_t now_us, bool *overp)
{
    const stg__dialect_row *row = m->row;
    int64_t v = STG_UNKNOWN, left;
    bool over = false, b;
    char text[64];
    obs o;
    int rc = STG_OK;

    obs_init(&o, m);
    switch (row->meaning) {
    case STG__M_WAIT:
        rc = read_wait(row->syntax, value, value_len, now_us, &v);
        if (rc == STG_ENOTFOUND)
            return STG_OK; /* "-1": present, unknown */
        if (rc == STG_ERANGE)
            over = true, rc = STG_OK;
        if (rc == STG_OK && v > h->retry_after_us)
            h->retry_after_us = v;
        *overp = over;
        return rc;
    case STG__M_LIMIT:
    case STG__M_REMAINING:
    case STG__M_NOTE:
        stg__trim_ows(&value, &value_len);
        if (value_len > 1 && value[0] == '-' &&
            stg__parse_digits(value + 1, value_len - 1, INT64_MAX, &v) != STG_EPARSE)
            return STG_OK; /* "-1" (Azure OpenAI): present, unknown */
        rc = stg__parse_digits(value, value_len, INT64_MAX, &v);
        if (rc != STG_OK || row->meaning == STG__M_NOTE)
            return rc;
        if (row->meaning == STG__M_LIMIT)
            o.limit = v;
        else
            o.remaining = v;
        break;
    case STG__M_RESET:
        rc = read_wait(row->syntax, value, value_len, now_us, &v);
        if (rc == STG_ERANGE)
            over = true, rc = STG_OK;
        if (rc != STG_OK)
            return rc;
        o.reset_us = v;
        break;
    case STG__M_PAIR:
        if ((rc = stg__pair_parse(value, value_len, &v, &left)) != STG_OK)
            return rc;
        o.limit = v;
        o.remaining = left;
        break;
    case STG__M_KEY:
        if ((rc = read_text(value, value_len, text, sizeof text)) != STG_OK)
            return rc;
        if (qs && !qs->stg__scope[0]) {
            memcpy(qs->stg__scope, text, sizeof text);
            qs->stg__scope_dialect = row->dialect;
            quota_rekey(qs, row->dialect);
        }
        return STG_OK;
    case STG__M_GLOBAL:
        if ((rc = read_bool(value, value_len, &b)) != STG_OK)
            return rc;
        if (b)
            set_global(h, qs);
        return STG_OK;
    case STG__M_SCOPE:
        if ((rc = read_text(value, value_len, text, sizeof text)) != STG_OK)
            return rc;
        if (stg__eq_nocase(text, strlen(text), "global"))
            set_global(h, qs);
        else if (stg__eq_nocase(text, strlen(text), "shared"))
            h->flags |= STG_HINTS_SHARED;
        return STG_OK; /* "user", or a scope not yet defined */
    case STG__M_VERDICT:
        if ((rc = read_bool(value, value_len, &b)) != STG_OK)
            return rc;
        if (!b)
            h->verdict = STG_VERDICT_STOP;
        else if (h->verdict == STG_VERDICT_NONE)
            h->verdict = STG_VERDICT_RETRY;
        return STG_OK;
    default:
        return feed_sfv(h, qs, m, value, value_len, overp);
    }
    apply(h, qs, m, &o);
    *overp = over;
    return STG_OK;
}

int stg_hints_header(stg_hints *h, const char *name, size_t name_len, const char *value,
                     size_t value_len, int64_t wall_now_us)
{
    return stg_hints_feed(h, NULL, name, name_len, value, value_len, wall_now_us);
}

int stg_hints_feed(stg_hints *h, stg_quota_set *qs, const char *name, size_t name_len,
                   const char *value, size_t value_len, int64_t wall_now_us)
{
    stg__dialect_match m;
    bool over = false;
    int rc;

    if (!h)
        return STG_EINVAL;
    if (!value)
        value_len = 0;
    stg__trim_ows(&name, &name_len);
    if (!stg__dialect_lookup(name, name_len, &m))
        return STG_OK;
    rc = feed_row(h, qs, &m, value, value_len, wall_now_us, &over);
    if (rc != STG_OK) {
        h->malformed |= m.row->bit;
        return rc;
    }
    if (over) {
        h->oversized |= m.row->bit;
        rc = STG_ERANGE;
    }
    h->seen |= m.row->bit;
    if (m.row->syntax != STG__S_SFV)
        h->dialects |= 1u << m.row->dialect;
    if (m.row->meaning == STG__M_KEY && qs && qs->stg__scope_dialect)
        h->dialects |= 1u << qs->stg__scope_dialect;
    else if (m.row->meaning == STG__M_KEY)
        h->dialects |= 1u << m.row->dialect;
    if (qs)
        summarize(h, qs);
    return rc;
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
    STG_ASSERT(w >= 0 && w <= STG_WAIT_MAX_US);
    if (wait_us)
        *wait_us = w;
    return true;
}

/* ---- What a body said: GitHub's secondary rate limit ------------------ */

/* Does msg[0..len) contain lit (lowercase ASCII), without regard to case? */
static bool contains_nocase(const char *msg, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    for (size_t i = 0; n <= len && i <= len - n; i++)
        if (stg__eq_nocase(msg + i, n, lit))
            return true;
    return false;
}

bool stg_hints_message(stg_hints *h, int status, const char *msg, size_t len)
{
    if (!h || (!msg && len) || (status != 403 && status != 429))
        return false;
    /* GitHub's words (docs.github.com, "Rate limits for the REST API");
     * the older one is what its secondary limits said before 2022. */
    if (!contains_nocase(msg, len, "secondary rate limit") &&
        !contains_nocase(msg, len, "abuse detection mechanism"))
        return false;
    h->flags |= STG_HINTS_SECONDARY;
    h->dialects |= 1u << STG_DIALECT_GITHUB;
    return true;
}
