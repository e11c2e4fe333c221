/*
 * Backoff strategies: how long to wait before retry number n.
 *
 * n counts retries from 0: the wait before the first retry uses n = 0, so
 * the raw (un-jittered) delay is raw(n) = min(cap, base * multiplier^n).
 *
 *   FIXED          base, every time
 *   EXPONENTIAL    raw(n), no jitter: clients told to fail together stay
 *                  in lockstep (shown by `stagger sim herd`)
 *   FULL           uniform(0, raw(n))
 *   EQUAL          raw(n)/2 + uniform(0, raw(n)/2)
 *   DECORRELATED   min(cap, uniform(base, prev * 3)), prev starts at base
 *   PROPORTIONAL   raw(n) * (1 + uniform(jitter_lo, jitter_hi))
 *   ADDITIVE       raw(n) + uniform(-base, +base)
 *
 * The cap bounds raw(n). PROPORTIONAL and ADDITIVE apply their jitter after
 * the cap, so once raw(n) reaches the cap the waits still spread around it
 * (cap * (1 + hi) at most) instead of piling up on exactly cap. Every wait is
 * clamped to >= 0 and saturates at INT64_MAX; growth is computed in floating
 * point, so n = 10000 or a cap near INT64_MAX cannot overflow.
 *
 * All functions are pure apart from the draws from the caller's stg_rng.
 */
#ifndef STAGGER_BACKOFF_H
#define STAGGER_BACKOFF_H

#include "common.h"
#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stg_backoff_kind {
    STG_BACKOFF_DEFAULT = 0, /* resolves to STG_BACKOFF_FULL */
    STG_BACKOFF_FIXED = 1,
    STG_BACKOFF_EXPONENTIAL = 2,
    STG_BACKOFF_FULL = 3,
    STG_BACKOFF_EQUAL = 4,
    STG_BACKOFF_DECORRELATED = 5,
    STG_BACKOFF_PROPORTIONAL = 6,
    STG_BACKOFF_ADDITIVE = 7
} stg_backoff_kind;

/* Defaults applied to zero fields. */
#define STG_BACKOFF_DEFAULT_BASE_US STG_MS(500)
#define STG_BACKOFF_DEFAULT_CAP_US STG_SEC(30)
#define STG_BACKOFF_DEFAULT_MULTIPLIER 2.0
#define STG_BACKOFF_DEFAULT_JITTER_LO (-0.2)
#define STG_BACKOFF_DEFAULT_JITTER_HI 0.2

/* Configuration. A zeroed struct means: full jitter, base 500 ms,
 * multiplier 2, cap 30 s, proportional range -20%..+20%. */
typedef struct stg_backoff_config {
    stg_backoff_kind kind;
    int64_t base_us;   /* > 0; 0 means 500 ms */
    double multiplier; /* >= 1; 0 means 2 */
    int64_t cap_us;    /* >= base; 0 means 30 s */
    /* PROPORTIONAL range, fractions of raw(n), lo <= hi, lo >= -1.
     * Both 0 means -0.2..+0.2. For "0..+20%" set lo = 0, hi = 0.2. */
    double jitter_lo, jitter_hi;
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_backoff_config;

/* Copy cfg into *out with every zero field replaced by its default.
 * Returns STG_OK, or STG_EINVAL for a kind out of range, a negative base or
 * cap, a cap below base, a multiplier below 1 (or NaN), or a jitter range
 * with lo > hi, lo < -1 or a non-finite bound. */
STG_API int stg_backoff_resolve(const stg_backoff_config *cfg, stg_backoff_config *out);

/* raw(n) = min(cap, base * multiplier^n) for a resolved config (for FIXED:
 * base). n < 0 is treated as 0. */
STG_API int64_t stg_backoff_raw(const stg_backoff_config *cfg, int n);

/* The range [*lo, *hi] that the wait for retry n is drawn from, for a
 * resolved config. prev_us is the previous wait (DECORRELATED only; <= 0
 * means "none yet", i.e. base). */
STG_API void stg_backoff_bounds(const stg_backoff_config *cfg, int n, int64_t prev_us,
                                int64_t *lo, int64_t *hi);

/* Draw the wait for retry n from a resolved config. Uses exactly one draw of
 * rng for jittered kinds and none for FIXED and EXPONENTIAL. */
STG_API int64_t stg_backoff_delay(const stg_backoff_config *cfg, int n, int64_t prev_us,
                                  stg_rng *rng);

/* Stateful convenience: tracks n and the previous wait. */
typedef struct stg_backoff {
    stg_backoff_config cfg; /* resolved */
    int n;
    int64_t prev_us;
    uint64_t stg__reserved[2]; /* room to grow (docs/ABI.md); leave zero */
} stg_backoff;

/* Returns STG_OK or STG_EINVAL (see stg_backoff_resolve). */
STG_API int stg_backoff_init(stg_backoff *b, const stg_backoff_config *cfg);
STG_API int64_t stg_backoff_next(stg_backoff *b, stg_rng *rng);
STG_API void stg_backoff_reset(stg_backoff *b);

/* "fixed", "exponential", "full", "equal", "decorrelated", "pct", "additive". */
STG_API const char *stg_backoff_kind_name(stg_backoff_kind kind);

/* Parse a strategy name as accepted by the CLI: the names above plus
 * "pct:LO:HI" (percent, e.g. "pct:-20:20" or "pct:0:20"), which also sets
 * jitter_lo/jitter_hi in *cfg. Returns STG_OK or STG_EPARSE. */
STG_API int stg_backoff_parse(const char *text, stg_backoff_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
