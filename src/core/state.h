/*
 * The private layouts of the caller-allocated lock-free objects: stg_bucket,
 * stg_budget and stg_adaptive.
 *
 * Why they are not in the public headers: their state is C11 atomics, and
 * C++ has no _Atomic, so a public header that showed them could not be
 * included from C++. The public structs are storage of a fixed size and
 * alignment (with spare words, docs/ABI.md); each .c views that storage
 * through the layout below. The view is a pointer cast, free at run time:
 * the lock-free bucket's take is the same compare-and-swap loop as before.
 *
 * Invariants, checked at compile time below:
 *  - every layout fits in its public storage and needs no stricter
 *    alignment, so a struct the caller declared or malloc'd holds it;
 *  - stg_adaptive's mutex and bucket sit where the public struct shows
 *    them (they are declared there with their real types, whose sizes vary
 *    between platforms).
 * The storage is only ever accessed through these layouts (by the core's
 * functions) or copied whole; callers never read its words.
 *
 * Unit tests may include this header to look at the state (test_adaptive.c
 * checks counters); nothing outside src/core and tests/unit does.
 */
#ifndef STG_CORE_STATE_H
#define STG_CORE_STATE_H

#include <stdalign.h>
#include <stdatomic.h>

#include <stagger/adaptive.h>
#include <stagger/bucket.h>
#include <stagger/budget.h>

struct stg__bucket_state {
    _Atomic int64_t tat_ns;      /* theoretical arrival time, ns from origin */
    _Atomic int64_t interval_ns; /* ns per token: ceil(1e9 / rate) */
    _Atomic double rate;         /* the rate as configured, for stg_bucket_rate */
    int64_t burst;               /* capacity in tokens, >= 1 */
    int64_t origin_us;           /* now_us at init; times are kept relative to it */
};

struct stg__budget_state {
    _Atomic int64_t milli; /* current tokens * 1000 */
    int64_t max_milli;     /* max_tokens * 1000 */
    int64_t ratio_milli;   /* token_ratio * 1000 */
    int64_t throttle_milli; /* throttle_cost * 1000, 0..max_milli */
};

struct stg__adaptive_state {
    pthread_mutex_t lock;           /* guards everything below the atomics */
    stg_bucket bucket;              /* paces at fill_rate once enabled */
    _Atomic bool enabled;           /* limiter on (after the first throttle
                                       or a pacing hint) */
    _Atomic int64_t hold_until_us;  /* no admission before this instant */
    _Atomic int64_t admitted;       /* sends admitted by acquire, ever */
    stg_adaptive_config cfg;        /* with defaults resolved */
    double fill_rate;               /* req/s, what the bucket paces at */
    double measured_rate;           /* smoothed, req/s */
    double w_max;                   /* rate at the last throttle */
    double k;                       /* seconds from a throttle back to w_max */
    double hint_rate;               /* ceiling from limit/window hints; 0: none */
    int64_t last_throttle_us;       /* origin of the cubic curve */
    int64_t last_cut_us;            /* last cut, INT64_MIN: none yet */
    int64_t recover_seq;            /* `admitted` at the last cut */
    int64_t responses;              /* responses reported, ever */
    int64_t origin_us;              /* init instant; buckets align on it */
    int64_t measure_slot;           /* index of the current 0.5 s bucket */
    int64_t measure_count;          /* responses counted in it */
    bool measured_any;              /* a bucket has closed */
    bool probing;                   /* slow start after an unmeasured cut */
    double probe_base;              /* the rate that cut left, req/s */
};

#define STG__FITS(state, pub)                                                        \
    _Static_assert(sizeof(struct state) <= sizeof(pub), #state " outgrew " #pub);    \
    _Static_assert(alignof(struct state) <= alignof(pub), #state " needs alignment")

STG__FITS(stg__bucket_state, stg_bucket);
STG__FITS(stg__budget_state, stg_budget);
STG__FITS(stg__adaptive_state, stg_adaptive);
_Static_assert(offsetof(struct stg__adaptive_state, lock) == offsetof(stg_adaptive, stg__lock),
              "stg_adaptive: the mutex moved");
_Static_assert(offsetof(struct stg__adaptive_state, bucket) == offsetof(stg_adaptive, stg__bucket),
              "stg_adaptive: the bucket moved");

/* The views. NULL stays NULL, so callers may check after converting. */
static inline struct stg__bucket_state *stg__bucket_state(stg_bucket *b)
{
    return (struct stg__bucket_state *)(void *)b;
}
static inline const struct stg__bucket_state *stg__bucket_cstate(const stg_bucket *b)
{
    return (const struct stg__bucket_state *)(const void *)b;
}
static inline struct stg__budget_state *stg__budget_state(stg_budget *b)
{
    return (struct stg__budget_state *)(void *)b;
}
static inline const struct stg__budget_state *stg__budget_cstate(const stg_budget *b)
{
    return (const struct stg__budget_state *)(const void *)b;
}
static inline struct stg__adaptive_state *stg__adaptive_state(stg_adaptive *a)
{
    return (struct stg__adaptive_state *)(void *)a;
}

#endif
