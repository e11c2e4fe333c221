/*
 * Token bucket as GCRA (generic cell rate algorithm): rate, burst and
 * weighted takes, with time as a parameter.
 *
 * State is one atomic word, the theoretical arrival time (TAT): the instant
 * at which the bucket would be full again. A take of n tokens at `now`
 * moves it to max(TAT, now) + n * T (T = 1/rate) and is admitted when the
 * result lies no further than burst * T ahead of now. A take is a
 * compare-and-swap loop on that one word, so one bucket may be shared by many
 * threads without a mutex. The bucket never sleeps: it answers "admitted" or
 * "wait this long", and the caller schedules the wait (a timer in the
 * engine).
 *
 * Invariant: over any interval of length t, the weight admitted is at most
 * burst + rate * t. This holds even when threads pass `now` values that are
 * slightly out of order (each read the clock, then raced): every admission
 * pushes the TAT up by its weight * T, and no admission may leave it more
 * than burst * T past the largest `now` used.
 *
 * Precision: internally times are nanoseconds relative to the init instant
 * and T is rounded UP to a whole nanosecond, so the effective rate is never
 * above the configured one and is below it by less than rate / 1e9 relative
 * (exact whenever 1e9 / rate is whole, e.g. 0.5/s or 10/s; 3/s becomes
 * 2.999999994/s; under 0.1% off up to 1e6/s). Waits handed back are rounded
 * up to the next microsecond, so trying again after exactly *wait_us is
 * admitted (barring other takers).
 */
#ifndef STAGGER_BUCKET_H
#define STAGGER_BUCKET_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stg_bucket_config {
    double rate;   /* tokens per second, > 0, fractional allowed */
    int64_t burst; /* capacity in tokens, >= 1; 0 means max(1, ceil(rate)) */
    uint64_t stg__reserved[6]; /* room to grow (docs/ABI.md); leave zero */
} stg_bucket_config;

/* Plain struct owned by the caller; its contents are private. The state is
 * C11 atomics, which C++ cannot name, so the header shows only storage of
 * the right size and alignment; src/core/state.h has the layout, and static
 * asserts there keep it within this storage. 64 bytes (a cache line on
 * common CPUs), with spare words so the state can grow without changing
 * the size. It has no over-alignment, so it may live in malloc'd memory;
 * when many hot buckets sit side by side in an array, align them to a
 * cache line to avoid false sharing. No destroy function: the struct holds
 * no resources. */
typedef struct stg_bucket {
    STG__ALIGNAS(8) int64_t stg__private[8];
} stg_bucket;

/* Largest rate accepted, tokens per second (T = 1 ns). */
#define STG_BUCKET_RATE_MAX 1e9

/* Largest burst * T accepted, in nanoseconds (2^60 ns, about 36 years): it
 * keeps every internal sum far from int64 overflow. At 0.5/s this allows a
 * burst of more than 10^9 tokens; it only rejects absurd combinations such
 * as a rate of one token per century. */
#define STG_BUCKET_SPAN_MAX_NS (INT64_C(1) << 60)

/* Set up a full bucket (burst tokens available) at now_us. cfg is borrowed.
 * Returns STG_OK, or STG_EINVAL: b or cfg NULL; rate NaN, <= 0 or above
 * STG_BUCKET_RATE_MAX; burst < 0; burst * T above STG_BUCKET_SPAN_MAX_NS.
 * On error *b is unchanged. Not thread-safe against concurrent use of the
 * same bucket; once initialised, every other function may be called from
 * any number of threads. */
STG_API int stg_bucket_init(stg_bucket *b, const stg_bucket_config *cfg, int64_t now_us);

/* Take weight tokens now if they are available.
 * STG_OK: admitted (tokens taken); *wait_us (if not NULL) is set to 0.
 * STG_EAGAIN: not admitted, nothing taken; *wait_us (if not NULL) is the
 *   exact time from now until this take would be admitted, rounded up to
 *   the microsecond (assuming nobody else takes meanwhile).
 * STG_ETOOBIG: weight > burst, can never be admitted.
 * STG_EINVAL: b NULL or weight < 1.
 * On ETOOBIG/EINVAL *wait_us is left unchanged.
 * now_us may be slightly older than a value another thread already used
 * (clock read, then preempted): the bound burst + rate * t still holds.
 * Thread-safe, lock-free. */
STG_API int stg_bucket_try(stg_bucket *b, int64_t weight, int64_t now_us, int64_t *wait_us);

/* Reserve weight tokens if they will be available within timeout_us.
 * STG_OK: reserved; *wait_us (may be 0) is how long the caller must wait
 *   before sending. The tokens are spent even if the caller then gives up.
 * STG_ETIMEDOUT: not within the timeout; nothing taken; *wait_us is the
 *   wait that would have been needed.
 * STG_ETOOBIG / STG_EINVAL as for stg_bucket_try.
 * timeout_us <= 0 reserves only what is available now (a try that answers
 * ETIMEDOUT instead of EAGAIN); pass INT64_MAX for "no limit" (clamped to
 * STG_BUCKET_SPAN_MAX_NS). Thread-safe, lock-free. */
STG_API int stg_bucket_acquire(stg_bucket *b, int64_t weight, int64_t now_us,
                               int64_t timeout_us, int64_t *wait_us);

/* Change the rate from now on (e.g. from the adaptive rate); the burst is
 * unchanged. Tokens are kept, not times: what was available stays
 * available, and a debt (tokens reserved ahead of now) stays the same
 * number of tokens, paid off at the new rate. So the bound becomes
 * burst + the integral of the rate over the interval, and a cut never
 * refills the bucket. Waits already handed out are not revised: after a
 * rise, a new reservation may be given an earlier slot than an older one.
 * Returns STG_OK, or STG_EINVAL for the rates init rejects (then nothing
 * changes). Thread-safe, lock-free; a take racing with it is judged at the
 * old state, the new one, or an intermediate one stricter than both.
 * Concurrent set_rate calls on one bucket leave it valid but may scale the
 * debt by either ratio: serialise them if that matters (the adaptive
 * limiter does). */
STG_API int stg_bucket_set_rate(stg_bucket *b, double rate, int64_t now_us);

/* The rate in tokens per second, as last configured (the effective rate is
 * 1e9 / ceil(1e9 / rate)). Thread-safe. */
STG_API double stg_bucket_rate(const stg_bucket *b);

/* Whole tokens available at now_us (0..burst), for display: a try of that
 * weight at now_us would be admitted unless another thread takes first.
 * Thread-safe. */
STG_API int64_t stg_bucket_available(const stg_bucket *b, int64_t now_us);

#ifdef __cplusplus
}
#endif
#endif
