/*
 * Backoff strategies (see backoff.h for the formulas).
 *
 * Invariants: every wait returned is in [0, INT64_MAX]; raw(n) <= cap; no
 * arithmetic here can overflow, whatever n, base, multiplier or cap: growth
 * is computed as a double and compared with the cap before it is turned
 * back into an integer, and every double-to-integer conversion saturates.
 */
#include <math.h>
#include <string.h>

#include <stagger/backoff.h>

#include "util/assert.h"
/* 2^63 as a double: the first value that does not fit in int64_t. */
#define TWO_POW_63 9223372036854775808.0

static int64_t sat_i64(double d)
{
    if (!(d > 0))
        return 0; /* also NaN */
    if (d >= TWO_POW_63)
        return INT64_MAX;
    return (int64_t)d;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

int stg_backoff_resolve(const stg_backoff_config *cfg, stg_backoff_config *out)
{
    stg_backoff_config c;
    if (cfg)
        c = *cfg;
    else
        memset(&c, 0, sizeof c);
    if (c.kind == STG_BACKOFF_DEFAULT)
        c.kind = STG_BACKOFF_FULL;
    if (c.base_us == 0)
        c.base_us = STG_BACKOFF_DEFAULT_BASE_US;
    if (c.multiplier == 0)
        c.multiplier = STG_BACKOFF_DEFAULT_MULTIPLIER;
    if (c.cap_us == 0)
        c.cap_us = c.base_us > STG_BACKOFF_DEFAULT_CAP_US ? c.base_us : STG_BACKOFF_DEFAULT_CAP_US;
    if (c.jitter_lo == 0 && c.jitter_hi == 0) {
        c.jitter_lo = STG_BACKOFF_DEFAULT_JITTER_LO;
        c.jitter_hi = STG_BACKOFF_DEFAULT_JITTER_HI;
    }
    if ((int)c.kind < STG_BACKOFF_FIXED || (int)c.kind > STG_BACKOFF_ADDITIVE)
        return STG_EINVAL;
    if (c.base_us < 0 || c.cap_us < c.base_us)
        return STG_EINVAL;
    if (!(c.multiplier >= 1.0) || !isfinite(c.multiplier)) /* NaN fails >= */
        return STG_EINVAL;
    if (!isfinite(c.jitter_lo) || !isfinite(c.jitter_hi) || c.jitter_lo > c.jitter_hi ||
        c.jitter_lo < -1.0)
        return STG_EINVAL;
    STG_ASSERT(c.base_us >= 0 && c.cap_us >= c.base_us && c.multiplier >= 1.0);
    *out = c;
    return STG_OK;
}

int64_t stg_backoff_raw(const stg_backoff_config *cfg, int n)
{
    if (cfg->kind == STG_BACKOFF_FIXED)
        return cfg->base_us;
    if (n < 0)
        n = 0;
    /* base * mult^n in floating point: pow() of a huge n gives +inf, which
     * the comparison with the cap absorbs. */
    double raw = (double)cfg->base_us * pow(cfg->multiplier, (double)n);
    if (!(raw < (double)cfg->cap_us))
        return cfg->cap_us;
    int64_t r = sat_i64(raw);
    STG_ASSERT(r >= 0);
    return r < cfg->cap_us ? r : cfg->cap_us;
}

void stg_backoff_bounds(const stg_backoff_config *cfg, int n, int64_t prev_us, int64_t *lo,
                        int64_t *hi)
{
    int64_t raw = stg_backoff_raw(cfg, n);
    int64_t l = raw, h = raw;
    switch (cfg->kind) {
    case STG_BACKOFF_FULL:
        l = 0;
        break;
    case STG_BACKOFF_EQUAL:
        l = raw / 2;
        break;
    case STG_BACKOFF_DECORRELATED: {
        int64_t prev = prev_us > 0 ? prev_us : cfg->base_us;
        int64_t up = sat_i64((double)prev * 3.0);
        l = cfg->base_us < cfg->cap_us ? cfg->base_us : cfg->cap_us;
        h = up < cfg->cap_us ? up : cfg->cap_us;
        if (h < l)
            h = l;
        break;
    }
    case STG_BACKOFF_PROPORTIONAL:
        l = sat_i64((double)raw * (1.0 + cfg->jitter_lo));
        h = sat_i64((double)raw * (1.0 + cfg->jitter_hi));
        break;
    case STG_BACKOFF_ADDITIVE:
        l = sat_add(raw, -cfg->base_us);
        if (l < 0)
            l = 0;
        h = sat_add(raw, cfg->base_us);
        break;
    default: /* FIXED, EXPONENTIAL: no jitter */
        break;
    }
    *lo = l;
    *hi = h;
}

int64_t stg_backoff_delay(const stg_backoff_config *cfg, int n, int64_t prev_us, stg_rng *rng)
{
    int64_t lo, hi;
    stg_backoff_bounds(cfg, n, prev_us, &lo, &hi);
    switch (cfg->kind) {
    case STG_BACKOFF_FIXED:
    case STG_BACKOFF_EXPONENTIAL:
        return lo;
    case STG_BACKOFF_DECORRELATED: {
        /* min(cap, uniform(base, prev * 3)) exactly as written: drawing from
         * the clamped range instead would change the distribution. */
        int64_t prev = prev_us > 0 ? prev_us : cfg->base_us;
        int64_t up = sat_i64((double)prev * 3.0);
        if (up < cfg->base_us)
            up = cfg->base_us;
        int64_t w = stg_rng_range(rng, cfg->base_us, up);
        return w < cfg->cap_us ? w : cfg->cap_us;
    }
    case STG_BACKOFF_ADDITIVE: {
        /* raw + uniform(-base, base), then clamped at 0: draw the signed
         * offset so that the clamp does not change the distribution above 0. */
        int64_t raw = stg_backoff_raw(cfg, n);
        int64_t off = stg_rng_range(rng, -cfg->base_us, cfg->base_us);
        int64_t w = sat_add(raw, off);
        return w < 0 ? 0 : w;
    }
    default:
        return stg_rng_range(rng, lo, hi);
    }
}

int stg_backoff_init(stg_backoff *b, const stg_backoff_config *cfg)
{
    int rc = stg_backoff_resolve(cfg, &b->cfg);
    if (rc != STG_OK)
        return rc;
    stg_backoff_reset(b);
    return STG_OK;
}

int64_t stg_backoff_next(stg_backoff *b, stg_rng *rng)
{
    /* b->cfg came from stg_backoff_resolve(): the raw schedule is bounded
     * by the cap and every wait is non-negative. */
    STG_ASSERT(b->cfg.base_us >= 0 && b->cfg.cap_us >= b->cfg.base_us && b->n >= 0);
    int64_t w = stg_backoff_delay(&b->cfg, b->n, b->prev_us, rng);
    STG_ASSERT(w >= 0);
    if (b->n < INT32_MAX)
        b->n++;
    b->prev_us = w;
    return w;
}

void stg_backoff_reset(stg_backoff *b)
{
    b->n = 0;
    b->prev_us = 0;
}

static const char *const kind_names[] = {
    [STG_BACKOFF_DEFAULT] = "full",          [STG_BACKOFF_FIXED] = "fixed",
    [STG_BACKOFF_EXPONENTIAL] = "exponential", [STG_BACKOFF_FULL] = "full",
    [STG_BACKOFF_EQUAL] = "equal",           [STG_BACKOFF_DECORRELATED] = "decorrelated",
    [STG_BACKOFF_PROPORTIONAL] = "pct",      [STG_BACKOFF_ADDITIVE] = "additive",
};

const char *stg_backoff_kind_name(stg_backoff_kind kind)
{
    if ((int)kind < 0 || (size_t)kind >= sizeof kind_names / sizeof kind_names[0])
        return "unknown";
    return kind_names[kind];
}

/* Parse a signed decimal percentage ("-20", "0", "12.5") ending at end. */
static bool parse_percent(const char *s, const char *end, double *out)
{
    bool neg = false, digits = false;
    double v = 0, scale = 0;
    if (s < end && (*s == '-' || *s == '+'))
        neg = *s++ == '-';
    for (; s < end; s++) {
        if (*s >= '0' && *s <= '9') {
            digits = true;
            if (scale > 0) {
                v += (*s - '0') * scale;
                scale /= 10;
            } else {
                v = v * 10 + (*s - '0');
            }
            if (v > 1e6)
                return false;
        } else if (*s == '.' && scale == 0) {
            scale = 0.1;
        } else {
            return false;
        }
    }
    if (!digits)
        return false;
    *out = (neg ? -v : v) / 100.0;
    return true;
}

int stg_backoff_parse(const char *text, stg_backoff_config *cfg)
{
    static const struct {
        const char *name;
        stg_backoff_kind kind;
    } names[] = {
        {"fixed", STG_BACKOFF_FIXED},   {"exponential", STG_BACKOFF_EXPONENTIAL},
        {"exp", STG_BACKOFF_EXPONENTIAL}, {"full", STG_BACKOFF_FULL},
        {"equal", STG_BACKOFF_EQUAL},   {"decorrelated", STG_BACKOFF_DECORRELATED},
        {"additive", STG_BACKOFF_ADDITIVE}, {"add", STG_BACKOFF_ADDITIVE},
        {"pct", STG_BACKOFF_PROPORTIONAL},
    };
    if (!text)
        return STG_EPARSE;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcmp(text, names[i].name)) {
            cfg->kind = names[i].kind;
            return STG_OK;
        }
    }
    if (strncmp(text, "pct:", 4) == 0) {
        const char *lo = text + 4;
        const char *colon = strchr(lo, ':');
        double l, h;
        if (!colon || !parse_percent(lo, colon, &l) ||
            !parse_percent(colon + 1, colon + 1 + strlen(colon + 1), &h) || l > h || l < -1.0)
            return STG_EPARSE;
        cfg->kind = STG_BACKOFF_PROPORTIONAL;
        cfg->jitter_lo = l;
        cfg->jitter_hi = h;
        /* "pct:0:0" would read as "unset" (both zero): that range is no jitter
         * at all, which EXPONENTIAL already expresses. */
        if (l == 0 && h == 0)
            cfg->kind = STG_BACKOFF_EXPONENTIAL;
        return STG_OK;
    }
    return STG_EPARSE;
}
