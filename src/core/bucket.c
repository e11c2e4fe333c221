/*
 * Lock-free token bucket (GCRA). See include/stagger/bucket.h for the model.
 *
 * Why GCRA rather than a (tokens, last_refill) pair: the whole state is one
 * word, the theoretical arrival time, so a take is a single compare-and-swap
 * and needs no lock; and the answer "wait exactly this long" falls out of the
 * same arithmetic.
 *
 * Invariants:
 *  - Admissions are totally ordered by the modification order of the one
 *    word tat_ns (each is a successful CAS on it), so relaxed atomics
 *    suffice: no other memory is published through it. Between rate
 *    changes tat_ns only increases (each take stores
 *    max(tat, now) + weight * T > tat); a rate change rescales the part
 *    of it ahead of now (see stg_bucket_set_rate).
 *  - After an admission labelled now, tat <= now + burst * T. Together with
 *    the first point this gives "at most burst + rate * t over any interval
 *    of labels of length t", whatever order the labels arrive in.
 *  - All internal values stay within +-2^62 ns: instants are clamped to
 *    +-2^61 ns (73 years) around the init instant, burst * T and any timeout
 *    to 2^60 ns. No arithmetic here can overflow.
 *
 * Times are nanoseconds relative to origin_us so that T can be an integer
 * without losing much precision at high rates (at 1e6/s, T = 1000 ns is
 * exact; in microseconds it could not express 3e5/s at all).
 */
#include <math.h>
#include <stdatomic.h>

#include <stagger/bucket.h>

#include "util/assert.h"
#include "core/state.h"

typedef struct stg__bucket_state state;

#define NS_PER_US INT64_C(1000)
#define NS_PER_S 1e9
/* Instants are kept within +-REL_MAX_NS of the origin. */
#define REL_MAX_NS (INT64_C(1) << 61)
#define REL_MAX_US (REL_MAX_NS / NS_PER_US)

/* now_us as nanoseconds since the origin, clamped to +-REL_MAX_NS. The
 * difference is taken in unsigned arithmetic, which is exact for the
 * magnitude when its sign is known, so no int64 subtraction can overflow. */
static int64_t rel_ns(const state *b, int64_t now_us)
{
    if (now_us >= b->origin_us) {
        uint64_t d = (uint64_t)now_us - (uint64_t)b->origin_us;
        return d > (uint64_t)REL_MAX_US ? REL_MAX_NS : (int64_t)d * NS_PER_US;
    }
    uint64_t d = (uint64_t)b->origin_us - (uint64_t)now_us;
    return d > (uint64_t)REL_MAX_US ? -REL_MAX_NS : -((int64_t)d * NS_PER_US);
}

/* A non-negative nanosecond wait as microseconds, rounded up, so that a
 * caller who waits exactly that long is not a nanosecond early. */
static int64_t ns_to_us_ceil(int64_t ns)
{
    return ns <= 0 ? 0 : (ns + NS_PER_US - 1) / NS_PER_US;
}

/* ns per token for a rate, rounded up (never faster than asked), or -1 if
 * the rate is not acceptable. */
static int64_t interval_for(double rate)
{
    if (!(rate > 0.0) || !(rate <= STG_BUCKET_RATE_MAX)) /* also rejects NaN */
        return -1;
    double t = ceil(NS_PER_S / rate);
    if (!(t <= (double)STG_BUCKET_SPAN_MAX_NS))
        return -1;
    return (int64_t)t;
}

static bool span_ok(int64_t burst, int64_t interval)
{
    return burst >= 1 && interval >= 1 && burst <= STG_BUCKET_SPAN_MAX_NS / interval;
}

int stg_bucket_init(stg_bucket *pub, const stg_bucket_config *cfg, int64_t now_us)
{
    state *b = stg__bucket_state(pub);
    if (!b || !cfg)
        return STG_EINVAL;
    int64_t interval = interval_for(cfg->rate);
    if (interval < 0 || cfg->burst < 0)
        return STG_EINVAL;
    int64_t burst = cfg->burst;
    STG_ASSERT(interval >= 1 && interval <= STG_BUCKET_SPAN_MAX_NS);
    if (burst == 0) {
        double c = ceil(cfg->rate);
        if (c > (double)STG_BUCKET_SPAN_MAX_NS)
            return STG_EINVAL;
        burst = c < 1.0 ? 1 : (int64_t)c;
    }
    if (!span_ok(burst, interval))
        return STG_EINVAL;
    b->origin_us = now_us;
    b->burst = burst;
    /* A TAT at the far past: the bucket is full at every instant until the
     * first take, including instants slightly before init that another
     * thread may still pass in. */
    atomic_init(&b->tat_ns, -REL_MAX_NS);
    atomic_init(&b->interval_ns, interval);
    atomic_init(&b->rate, cfg->rate);
    return STG_OK;
}

/* The common take: admit if the take would be allowed within timeout_ns
 * (0 for a plain try). Returns STG_OK or STG_EAGAIN and the wait in ns. */
static int take(state *b, int64_t weight, int64_t now_us, int64_t timeout_ns,
                int64_t *wait_ns)
{
    int64_t now = rel_ns(b, now_us);
    int64_t tat = atomic_load_explicit(&b->tat_ns, memory_order_relaxed);
    for (;;) {
        /* Reloaded on every pass so a retry after a lost CAS sees a rate
         * change; the value read is the rate this take is judged at. */
        int64_t interval = atomic_load_explicit(&b->interval_ns, memory_order_relaxed);
        int64_t base = tat > now ? tat : now;
        int64_t new_tat = base + weight * interval;
        /* Admitted once new_tat - now <= burst * T. */
        int64_t wait = new_tat - b->burst * interval - now;
        if (wait > timeout_ns) {
            *wait_ns = wait;
            return STG_EAGAIN;
        }
        /* On failure tat is refreshed with the current value: loop. */
        if (atomic_compare_exchange_weak_explicit(&b->tat_ns, &tat, new_tat,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
            /* The invariants of the file header: the TAT moved forward, by
             * no more than burst * T past the instant of admission, and stays
             * within 2^62. */
            STG_ASSERT(new_tat > tat);
            STG_ASSERT(new_tat - (now + (wait > 0 ? wait : 0)) <= b->burst * interval);
            STG_ASSERT(new_tat <= (INT64_C(1) << 62));
            *wait_ns = wait > 0 ? wait : 0;
            return STG_OK;
        }
    }
}

/* The state of pub for a take of weight: STG_OK, STG_EINVAL (no bucket,
 * weight < 1) or STG_ETOOBIG (more than the burst: it would never fit). */
static int weigh(stg_bucket *pub, int64_t weight, state **out)
{
    state *b = stg__bucket_state(pub);
    if (!b || weight < 1)
        return STG_EINVAL;
    if (weight > b->burst)
        return STG_ETOOBIG;
    *out = b;
    return STG_OK;
}

int stg_bucket_try(stg_bucket *pub, int64_t weight, int64_t now_us, int64_t *wait_us)
{
    state *b;
    int rc = weigh(pub, weight, &b);
    if (rc != STG_OK)
        return rc;
    int64_t wait_ns;
    rc = take(b, weight, now_us, 0, &wait_ns);
    if (wait_us)
        *wait_us = rc == STG_OK ? 0 : ns_to_us_ceil(wait_ns);
    return rc;
}

int stg_bucket_acquire(stg_bucket *pub, int64_t weight, int64_t now_us, int64_t timeout_us,
                       int64_t *wait_us)
{
    state *b;
    int rc = weigh(pub, weight, &b);
    if (rc != STG_OK)
        return rc;
    int64_t timeout_ns;
    if (timeout_us <= 0)
        timeout_ns = 0;
    else if (timeout_us >= STG_BUCKET_SPAN_MAX_NS / NS_PER_US)
        timeout_ns = STG_BUCKET_SPAN_MAX_NS;
    else
        timeout_ns = timeout_us * NS_PER_US;
    int64_t wait_ns;
    rc = take(b, weight, now_us, timeout_ns, &wait_ns);
    if (wait_us)
        *wait_us = ns_to_us_ceil(wait_ns);
    return rc == STG_OK ? STG_OK : STG_ETIMEDOUT;
}

/* A rate change keeps the number of tokens owed or available, not the TAT
 * in time: the part of the TAT ahead of now is scaled by new_T / old_T.
 * Why: the bucket then behaves as a token bucket whose fill rate changed at
 * now, so "at most burst + integral of the rate" holds across changes. Two
 * alternatives were rejected: keeping the TAT in time lets a cut refill the
 * bucket (a debt of d ns is d/T_old tokens before, fewer after); scaling
 * only on cuts ratchets, since an adaptive rate that wobbles up and down
 * stretches the debt on every cut and never shrinks it.
 * Ordering against concurrent takes: on a rise the interval is stored
 * before the TAT is compressed, on a cut the TAT is stretched before the
 * interval is stored; a take that runs in between sees an intermediate
 * state that is stricter than both the old and the new one. */
int stg_bucket_set_rate(stg_bucket *pub, double rate, int64_t now_us)
{
    state *b = stg__bucket_state(pub);
    if (!b)
        return STG_EINVAL;
    int64_t interval = interval_for(rate);
    if (interval < 0 || !span_ok(b->burst, interval))
        return STG_EINVAL;
    int64_t old = atomic_load_explicit(&b->interval_ns, memory_order_relaxed);
    if (interval < old) /* a rise */
        atomic_store_explicit(&b->interval_ns, interval, memory_order_relaxed);
    if (interval != old) {
        int64_t now = rel_ns(b, now_us);
        double ratio = (double)interval / (double)old;
        int64_t tat = atomic_load_explicit(&b->tat_ns, memory_order_relaxed);
        while (tat > now) {
            /* Rounded up: never owe less than exactly scaled. */
            double debt = ceil((double)(tat - now) * ratio);
            /* Keeps tat <= 2^62 (see the invariants); a debt that large is
             * years away anyway. */
            int64_t d = debt < (double)REL_MAX_NS ? (int64_t)debt : REL_MAX_NS;
            if (atomic_compare_exchange_weak_explicit(&b->tat_ns, &tat, now + d,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        }
    }
    if (interval > old) /* a cut */
        atomic_store_explicit(&b->interval_ns, interval, memory_order_relaxed);
    atomic_store_explicit(&b->rate, rate, memory_order_relaxed);
    return STG_OK;
}

double stg_bucket_rate(const stg_bucket *pub)
{
    const state *b = stg__bucket_cstate(pub);
    return atomic_load_explicit(&b->rate, memory_order_relaxed);
}

int64_t stg_bucket_available(const stg_bucket *pub, int64_t now_us)
{
    const state *b = stg__bucket_cstate(pub);
    int64_t now = rel_ns(b, now_us);
    int64_t tat = atomic_load_explicit(&b->tat_ns, memory_order_relaxed);
    int64_t interval = atomic_load_explicit(&b->interval_ns, memory_order_relaxed);
    int64_t debt = tat > now ? tat - now : 0; /* time until full again */
    int64_t room = b->burst * interval - debt;
    if (room <= 0)
        return 0;
    int64_t n = room / interval;
    STG_ASSERT(n >= 0);
    return n > b->burst ? b->burst : n;
}
