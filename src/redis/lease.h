/*
 * Token leases, the pure part (lease_size.c): a meter of this process's
 * recent admission rate per key and the rule that sizes a lease from it.
 * No I/O, no clock of its own (every call takes now_us), no hiredis: the
 * unit test (tests/unit/test_lease.c) runs it in virtual time.
 *
 * The rule, and why (see also "Token leases" in stagger/redis.h): a lease
 * of k tokens may be spent inside a window of (burst - k) * T once the
 * script has placed it at least `lead` ahead of now. To be spent in time at
 * the process's own rate r, a lease needs k / r (plus a margin for the
 * round trip) of that window; hence lead = k / r + margin and the cap
 * lead + k * T <= burst * T. Below two tokens per lease_us a lease saves
 * nothing and k = 1: one round trip per acquire, as without leases.
 * The margin is there because a token is only good inside its window: a
 * single token taken when the bucket has room would be due at the very
 * instant the script ran, which its reply has already missed.
 */
#ifndef STG_REDIS_LEASE_H
#define STG_REDIS_LEASE_H

#include <stdbool.h>
#include <stdint.h>

/* The admission meter: counts in windows of STG__LEASE_WINDOW_US, the last
 * closed ones smoothed (half weight each), the open one read as (count - 1)
 * / elapsed once it has run STG__LEASE_MIN_SPAN_US with 3 admissions or
 * more (so a process that starts fast leases within milliseconds, not after
 * a whole window); the higher of the two. Start it with
 * stg__lease_meter_init. */
#define STG__LEASE_WINDOW_US INT64_C(100000)
#define STG__LEASE_MIN_SPAN_US INT64_C(5000)

typedef struct stg__lease_meter {
    int64_t since_us; /* start of the open window */
    int64_t count;    /* admissions in it */
    double rate;      /* smoothed rate of the closed windows, per second */
    bool closed;      /* a window has closed: rate means something */
} stg__lease_meter;

void stg__lease_meter_init(stg__lease_meter *m, int64_t now_us);
/* n admissions at now_us (now_us never goes back). */
void stg__lease_meter_add(stg__lease_meter *m, int64_t now_us, int64_t n);
/* The recent admission rate at now_us, per second (0: not known yet). */
double stg__lease_meter_rate(const stg__lease_meter *m, int64_t now_us);

/* A lease's size. */
typedef struct stg__lease_plan {
    int64_t k;       /* tokens to ask for; 1: no lease (a plain take) */
    int64_t lead_ns; /* how far ahead of now the lease's window must reach */
} stg__lease_plan;

/* Margin for the round trip (the window's end is measured from before the
 * call, its start from after it): twice the last round trip, at least 1 ms. */
#define STG__LEASE_MIN_MARGIN_US INT64_C(1000)

/* Size a lease for a process admitting own_rate/s (from the meter) on a key
 * of interval_ns (T) and burst, aiming to last lease_us, with rtt_us the
 * last round trip. lease_us <= 0 or burst < 2: {1, 0} (a plain take, as
 * without leases). Otherwise k = floor(own_rate * lease_us), capped by
 * lead + k * T <= burst * T with lead = k / own_rate + margin; when that
 * leaves fewer than 2 (a low rate), k = 1 with lead = the margin (at most
 * (burst - 1) * T): still one round trip per acquire, but its token comes
 * with a window that the reply cannot miss. Pure; thread-safe. */
stg__lease_plan stg__lease_size(double own_rate, int64_t interval_ns, int64_t burst,
                                int64_t lease_us, int64_t rtt_us);

#endif
