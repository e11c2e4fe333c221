/*
 * Token leases, the pure part: the admission meter and the sizing rule
 * (lease.h says why the rule is what it is). Deterministic: time comes in
 * as a parameter, so tests/unit/test_lease.c checks exact sizes in virtual
 * time.
 *
 * Invariants:
 *  - a plan has 1 <= k <= burst and lead_ns + k * T <= burst * T: the
 *    lease's window (burst - k) * T is at least its lead, so a lease placed
 *    lead ahead is admitted at once when the bucket has room, and it can be
 *    spent at the rate it was sized from (k = 1: the lead is only the
 *    round trip's margin; 0 when leases are off or burst is 1);
 *  - the meter's rate is never negative and decays to 0 when admissions
 *    stop (a process gone quiet goes back to one round trip per acquire).
 */
#include <math.h>

#include "redis/lease.h"
#include "util/assert.h"

void stg__lease_meter_init(stg__lease_meter *m, int64_t now_us)
{
    m->since_us = now_us;
    m->count = 0;
    m->rate = 0.0;
    m->closed = false;
}

/* Close the windows that ended by now_us: the first with its count, the
 * others (empty) halving the rate each. */
static void roll(stg__lease_meter *m, int64_t now_us)
{
    int64_t gone = now_us - m->since_us;
    if (gone < STG__LEASE_WINDOW_US)
        return;
    int64_t windows = gone / STG__LEASE_WINDOW_US;
    double first = (double)m->count * 1e6 / (double)STG__LEASE_WINDOW_US;
    m->rate = m->closed ? 0.5 * first + 0.5 * m->rate : first;
    /* each further (empty) window halves it; after 64 it is gone */
    m->rate = windows - 1 >= 64 ? 0.0 : ldexp(m->rate, -(int)(windows - 1));
    m->closed = true;
    m->count = 0;
    m->since_us += windows * STG__LEASE_WINDOW_US;
    STG_ASSERT(m->rate >= 0.0);
}

void stg__lease_meter_add(stg__lease_meter *m, int64_t now_us, int64_t n)
{
    roll(m, now_us);
    m->count += n;
}

double stg__lease_meter_rate(const stg__lease_meter *m, int64_t now_us)
{
    stg__lease_meter c = *m;
    roll(&c, now_us);
    int64_t span = now_us - c.since_us;
    /* count - 1 intervals: the first admission may be at the window's
     * start (a fresh meter), and n admissions there span n - 1 gaps;
     * this errs low, towards smaller leases. */
    double open = 0.0;
    if (c.count >= 3 && span >= STG__LEASE_MIN_SPAN_US)
        open = (double)(c.count - 1) * 1e6 / (double)span;
    if (!c.closed)
        return open;
    /* A rise shows in the open window before the next one closes. */
    return open > c.rate ? open : c.rate;
}

stg__lease_plan stg__lease_size(double own_rate, int64_t interval_ns, int64_t burst,
                                int64_t lease_us, int64_t rtt_us)
{
    stg__lease_plan none = {1, 0};
    if (lease_us <= 0 || interval_ns <= 0 || burst < 2)
        return none;
    double margin_ns = 2.0 * (double)(rtt_us > 0 ? rtt_us : 0) * 1000.0;
    if (margin_ns < (double)STG__LEASE_MIN_MARGIN_US * 1000.0)
        margin_ns = (double)STG__LEASE_MIN_MARGIN_US * 1000.0;
    double span_ns = (double)(burst - 1) * (double)interval_ns;
    /* One token, placed margin ahead (within the window a single token
     * has, (burst - 1) * T), so that it is still good when the reply is. */
    stg__lease_plan one = {1, (int64_t)(margin_ns < span_ns ? margin_ns : span_ns)};
    if (!(own_rate > 0.0))
        return one;
    double k = floor(own_rate * (double)lease_us / 1e6);
    double per_token_ns = 1e9 / own_rate; /* how long one token lasts here */
    span_ns = (double)burst * (double)interval_ns;
    /* lead + k * T <= burst * T, lead = k * per_token + margin */
    double cap = floor((span_ns - margin_ns) / (per_token_ns + (double)interval_ns));
    if (k > cap)
        k = cap;
    if (k > (double)burst)
        k = (double)burst;
    if (!(k >= 2.0))
        return one;
    stg__lease_plan p;
    p.k = (int64_t)k;
    p.lead_ns = (int64_t)ceil(k * per_token_ns + margin_ns);
    /* ceil may add 1 ns over the cap; take it back from the margin */
    if (p.lead_ns + p.k * interval_ns > burst * interval_ns)
        p.lead_ns = burst * interval_ns - p.k * interval_ns;
    STG_ASSERT(p.k >= 2 && p.k <= burst);
    STG_ASSERT(p.lead_ns >= 0 && p.lead_ns + p.k * interval_ns <= burst * interval_ns);
    return p;
}
