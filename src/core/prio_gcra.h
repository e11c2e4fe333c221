/*
 * The cross-process admission decision by class and tenant (issue #32,
 * /work/PRIO.md "Join 2"): a pure model of what the Redis script of
 * src/redis/prio.c decides for one shared key, so that unit tests run it in
 * virtual time, the simulator (`stagger sim fleet`) runs fleets on it, and a
 * differential test (tests/integration/test_redis_prio.c) checks that the
 * script decides exactly the same. Internal (not installed); no I/O, no
 * clock, no allocation: every call takes `now`.
 *
 * The decision, per token, in order (docs/priorities.md "Across
 * processes" says why):
 *  1. The key's GCRA (interval T, burst B) is applied to every token
 *     granted, whoever asks: the server's bound B + t/T always holds.
 *  2. A caller marks its class, and its tenant, as demanding until
 *     now + hold (even when it is refused: it is waiting demand).
 *  3. A caller "acts low" when it is batch, or normal while interactive
 *     demand is fresh. A low caller is granted only tokens that conform now
 *     (it never reserves the future) and leaves h tokens that conform now
 *     behind it, h = the number of higher classes with fresh demand. So a
 *     higher-class request finds a token now, or within one interval T of
 *     its first call (before its mark was fresh). Other callers may reserve
 *     ahead, as the plain GCRA does: interactive up to max_wait, normal at
 *     most one interval T while the key has seen an interactive caller in
 *     the last STG__PRIO_SEEN_NS (so an interactive request after a pause
 *     finds at most one normal reservation ahead of it, not one per
 *     process), else up to max_wait (a key used by normal callers alone
 *     reserves ahead as the plain GCRA does, one round trip or one lease
 *     for many sends).
 *  4. Floor: a low caller whose class's floor GCRA (interval T / floor,
 *     burst 1) conforms may take one token as a higher class would (with a
 *     wait up to max_wait, no headroom), so each class below interactive
 *     gets at least floor * rate while it asks, whatever the others do.
 *  5. Tenants of one class: a per-tenant GCRA of interval T * S / w (S: the
 *     weights of the class's tenants with fresh demand, this one included;
 *     burst B). A token is "within the share" when that GCRA conforms now;
 *     only such a token may be granted as rules 3-4 allow (reserved ahead
 *     included: so tenants reserve the key's future at their shares' pace,
 *     not at the pace they ask). A token beyond the share is granted only
 *     as a call's first (a lease borrows one token at a time: callers told
 *     retry slots ask seldom, and a lease sized by a process's own past
 *     admissions would otherwise take a tenant's tokens in bulk) and only
 *     if it conforms now and leaves `keep` more tokens (over h) behind:
 *     1 + ceil(Tt_t / 2 / T) for the other tenant t of the class with the
 *     longest share interval Tt_t among those with fresh demand and
 *     within their shares (what accrues between two of t's retry slots,
 *     rule 7: t comes back for it), at most B - 1 - h, at least 1; it
 *     is not charged to the tenant. So under contention each tenant gets
 *     its weight's share, a share nobody asks for is free to the others at
 *     once, and a tenant that comes back is within its share from its first
 *     call on (its bucket refilled while it was away): it gets its share
 *     again as soon as the tokens others already hold (reserved, or leased:
 *     at most one lease window) are spent. A tenant alone in its class is
 *     always within its share.
 *  6. A lease (n > 1) gets as many consecutive tokens as the rules grant
 *     without a wait (only a single token may come with a wait); with
 *     lead > 0 the first is placed at least lead ahead (slots skipped are
 *     lost, erring on the side of sending less), as gcra.c's leases. If
 *     no token of a lead-placed request is granted, one token is tried
 *     without lead (a plain take: used at once, it needs no window).
 *  7. Retry slots: a refusal's hint is the later of the rules' own hint
 *     and the tenant's next retry slot, and the slot after it is half a
 *     share interval (Tt, or T for a tenant alone; rounded up) later. So
 *     callers refused together are told successive instants, two per token
 *     the tenant may get, and come back a few at a time: the hint grows
 *     with the callers waiting in the tenant, and the key sees about two
 *     refused calls per token per class, not one per waiting caller per
 *     interval. Two, not one: a tenant's callers must be back often enough
 *     to take its share's tokens before the others borrow them. Nothing
 *     but the hint depends on the slot (a caller back early is decided as
 *     any other, and told the next free slot).
 *
 * Numbers: times are int64 ns; the script keeps the same values relative
 * to a base second and computes in Lua doubles, so every value stays an
 * integer below 2^53 (T * B <= 2^50, as STG_REDIS_SPAN_MAX_NS) and both
 * sides compute bit for bit the same. Weights are kept in thousandths
 * (weight_m = round(1000 * weight), at least 1) so that sums are exact.
 * The tenant interval T * S / w_m and the floor interval T * 1000 / floor_pm
 * are the one floating division each, rounded up the same way on both sides.
 */
#ifndef STG_CORE_PRIO_GCRA_H
#define STG_CORE_PRIO_GCRA_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <stagger/priority.h>

/* Tenants remembered per key (all classes together). A tenant whose mark
 * went stale, whose bucket is full again and whose retry slots are past is
 * forgotten; when the table is
 * full of live tenants a new one is not tracked (treated as alone: within
 * its share), the side of admitting by class only. */
#define STG__PRIO_TENANTS_MAX 64

/* Default floor in thousandths of the rate (5%). */
#define STG__PRIO_FLOOR_PM_DEFAULT 50
/* How long an interactive caller keeps the key's normal callers from
 * reserving more than one interval ahead (rule 3), in ns: 30 s. */
#define STG__PRIO_SEEN_NS INT64_C(30000000000)

typedef struct stg__prio_tenant {
    bool used;
    int cls;            /* class index 0..STG_N_PRIORITIES-1 */
    int64_t tat_ns;     /* the tenant's share GCRA: full again at this instant */
    int64_t until_ns;   /* demand mark: active until */
    int64_t weight_m;   /* weight in thousandths, >= 1 */
    int64_t q_ns;       /* rule 7: the tenant's next free retry slot */
    char name[STG_TENANT_MAX + 1]; /* "" for the class's default tenant */
} stg__prio_tenant;

/* The state of one shared key. Zero it to start (a full bucket, no
 * demand); the script's hash holds the same fields. */
typedef struct stg__prio_state {
    bool has_tat;                          /* false: the key is full */
    int64_t tat_ns;                        /* the key's GCRA TAT */
    int64_t demand_ns[STG_N_PRIORITIES];   /* per class: demanding until */
    int64_t seen_ns;                       /* an interactive caller seen:
                                              rule 3's normal cap until */
    int64_t floor_tat_ns[STG_N_PRIORITIES]; /* per class: its floor GCRA */
    int64_t last_interval_ns;              /* T last used (0: none): a longer
                                              T stretches the debt, as the
                                              plain script's rate cut */
    stg__prio_tenant tenants[STG__PRIO_TENANTS_MAX];
} stg__prio_state;

/* One call (one process asking for tokens of the key). */
typedef struct stg__prio_req {
    int64_t now_ns;      /* the instant of the decision (Redis's TIME) */
    int64_t interval_ns; /* T = 1e9 / rate, rounded up; >= 1 */
    int64_t burst;       /* B >= 1; B * T <= 2^50 */
    int priority;        /* STG_PRIORITY_INTERACTIVE .. BATCH */
    const char *tenant;  /* NULL or "": the class's default tenant */
    double weight;       /* tenant weight (0: 1); > 0, <= 1e6 */
    int64_t n;           /* tokens wanted, >= 1 (a lease when > 1) */
    int64_t max_wait_ns; /* how far ahead a token may be reserved (the
                            caller's timeout); low callers: floor only */
    int64_t lead_ns;     /* >= 0: place a lease at least this far ahead */
    int64_t hold_ns;     /* > 0: how long this call's demand mark lasts
                            (about two lease windows) */
    int floor_pm;        /* floor, thousandths of the rate (0: default
                            STG__PRIO_FLOOR_PM_DEFAULT; 1..1000) */
} stg__prio_req;

/* The answer. */
typedef struct stg__prio_grant {
    int64_t k;        /* tokens granted, 0..n */
    int64_t wait_ns;  /* k > 0: wait before the first may be sent (0 for
                         k > 1); k == 0: how long until asking again could
                         be granted, if nothing else changes (>= 1 ns) */
    int64_t end_ns;   /* k > 0 and lease: the granted tokens may be sent
                         up to this instant (absolute), after which they
                         lapse; a plain take (lease false) has no end */
    bool lease;       /* the tokens were placed with lead (a lease window) */
    bool floor;       /* the first token came from the class's floor */
    bool tracked;     /* the tenant is in the table (false: table full) */
} stg__prio_grant;

/* Decide one call on st and update st (the tokens granted are spent, the
 * marks set). Returns 0, or -1 when rq is invalid (nothing changed): T < 1,
 * B < 1, B * T > 2^50, priority out of range, n < 1, negative lead,
 * max_wait or hold, floor_pm out of 0..1000, weight out of (0, 1e6] (0
 * means 1), tenant longer than STG_TENANT_MAX. Pure, no allocation;
 * thread-compatible (st is the caller's). */
int stg__prio_decide(stg__prio_state *st, const stg__prio_req *rq, stg__prio_grant *out);

/* Weight in thousandths as the decision uses it: round(1000 * w), >= 1
 * (0 or less: 1000). Inline, so that libstagger-redis (which does not see
 * libstagger's internal symbols in a shared build) quantizes as the model. */
static inline int64_t stg__prio_weight_m(double weight)
{
    if (!(weight > 0.0))
        weight = 1.0;
    double m = floor(weight * 1000.0 + 0.5);
    return m < 1.0 ? 1 : (int64_t)m;
}

#endif
