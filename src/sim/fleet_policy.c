/*
 * The shared key's decisions in the fleet scenario (fleet.h): one script
 * call, on Redis's clock, for one caller.
 *
 * FCFS is today's script, src/redis/gcra.c, line for line: the TAT is
 * moved to at least now + lead (the slots skipped are lost), then as many
 * tokens as conform within the timeout are taken, at most k; the window
 * of the lease ends at that tat0. Without a lead it is a plain take of one
 * token, refused when its wait exceeds the timeout.
 *
 * PRIORITY is stg__prio_decide (src/core/prio_gcra.c): the decision the
 * Redis script makes, by class and tenant (PRIO.md, Join 2). Called as the
 * script would be: Redis's clock, the tenant's name and weight, the lease
 * plan as n and lead, the caller's timeout as max_wait, the hold and the
 * floor in thousandths.
 *
 * SFQ is the simulator's OWN model of the rules of PRIO.md, Join 2,
 * written before prio_gcra.c landed and kept beside it (--policies sfq)
 * because it differs in two ways worth comparing: tenants by start-time
 * fair queueing, and a refusal's hint that grows with the callers waiting.
 * Where it departs from the rules as worded it says so (marked MODEL):
 *  1. Every grant has the global GCRA's geometry (tokens from tat0, usable
 *     until tat0), so burst + rate * t holds for any mix of callers.
 *  2. A call marks its class and its tenant as demanding until now + hold.
 *  3. The lowest class (batch), and normal while interactive demand is
 *     fresh, never reserve the future (timeout 0: only tokens that conform
 *     now) and leave a headroom of one token per higher class with fresh
 *     demand (MODEL: per class, so batch leaves two while normal leaves
 *     one, and normal wins the free tokens; with one each they split them
 *     by who asks first). Interactive reserves up to its timeout, as today;
 *     normal while interactive is quiet too, but (MODEL) at most one token
 *     interval ahead: reservations reaching further make the first
 *     interactive request after a quiet spell wait behind all of them (one
 *     interval per backlogged normal process, at most the horizon: the
 *     simulator showed p99 57 ms with 30 such processes and a horizon of
 *     one hold, 80 ms).
 *  4. Floor: while batch demand is fresh, every token granted to another
 *     class owes batch `floor` of a token (credit, at most burst); while
 *     batch is owed one, the others leave one more token free and batch
 *     may take it past the headroom of rule 3. So batch gets about
 *     floor / (1 + floor) of the admissions while it waits, at least.
 *  5. MODEL: tenants of a class share its admissions by weight through
 *     start-time fair queueing instead of a per-tenant GCRA at
 *     rate * w / sum(w): the class's share is what the higher classes
 *     leave, often far below the rate, and a GCRA at a share of the full
 *     rate would not bind there. Each tenant counts vf, the tokens it took
 *     divided by its weight; a tenant may take while vf < min(vf of the
 *     class's active tenants) + 1, so per round a tenant of weight w takes
 *     w tokens (1:1:2 -> 25/25/50%). A tenant with no fresh demand leaves
 *     the minimum at once; one that comes back starts at the minimum of the
 *     others (no credit saved up), so it has its share from its first call.
 *     Only callers that may not reserve are held to this (MODEL): the
 *     others take their slots in the order they ask, as today, and are
 *     never kept waiting for a tenant's turn.
 *  6. Leases: a grant of k > 1 only where 3-5 allow each of the k.
 * So an interactive request waits for its token at most about three
 * emission intervals after its call reaches Redis: PRIO.md's two (a token
 * kept free, or normal's one-interval reservation, then its own slot),
 * plus one while batch is owed its floor; tests/unit/test_sim_fleet.c
 * holds a small fleet's p99 to that plus two round trips (one for the
 * process's call before it).
 * MODEL, the refused callers: a refused call of a class that may not
 * reserve is told to ask again after max(T, the time to its next token)
 * times max(1, waiting / (2 * share)), where `waiting` counts its tenant's
 * callers in that class refused and not yet back (a sorted set with expiry
 * in the script) and share is the tenant's weight over the class's active
 * tenants' weights. With the client's jitter (fleet.c) about two calls per
 * class come per token interval, each tenant's in proportion to its
 * weight, whatever the number of processes: without it every refused
 * process would ask each T, and Redis's load would grow with the fleet.
 * A refusal keeps its class and tenant demanding until the caller is due
 * back (now + 2 * hint + hold): a tenant whose processes ask seldom still
 * counts in its class's round.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

enum { CI = 0, CN = 1, CB = 2 }; /* class indexes: interactive, normal, batch */

int sim_fleet_model_init(sim_fleet_model *m, int policy, double rate, int64_t burst,
                         int64_t hold_ns, double floor, int ntenants, uint32_t nclients)
{
    memset(m, 0, sizeof *m);
    if ((unsigned)policy >= SIM_FLEET_N_POLICIES || !(rate > 0) || burst < 1 || ntenants < 1 ||
        ntenants > SIM_FLEET_MAX_TENANTS || !(floor >= 0 && floor < 1) || hold_ns < 0)
        return STG_EINVAL;
    m->policy = policy;
    m->T = (int64_t)ceil(1e9 / rate);
    m->burst = burst;
    m->hold_ns = hold_ns;
    m->floor = floor;
    m->ntenants = ntenants;
    m->tat = INT64_MIN / 4;
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        m->demand_until[c] = INT64_MIN;
        for (int t = 0; t < SIM_FLEET_MAX_TENANTS; t++)
            m->active_until[c][t] = INT64_MIN;
    }
    if (policy == SIM_FLEET_PRIORITY) {
        m->prio = calloc(1, sizeof *m->prio);
        if (!m->prio)
            return STG_ENOMEM;
    }
    if (policy == SIM_FLEET_SFQ) {
        m->nclients = nclients;
        m->waiting_until = calloc(nclients ? nclients : 1, sizeof *m->waiting_until);
        m->waiting_tenant = calloc(nclients ? nclients : 1, sizeof *m->waiting_tenant);
        if (!m->waiting_until || !m->waiting_tenant)
            return STG_ENOMEM;
        for (int c = 0; c < STG_N_PRIORITIES; c++)
            if (sim_evq_init(&m->expiry[c], 64, 0) != 0)
                return STG_ENOMEM;
    }
    return STG_OK;
}

void sim_fleet_model_free(sim_fleet_model *m)
{
    free(m->prio);
    m->prio = NULL;
    free(m->waiting_until);
    free(m->waiting_tenant);
    m->waiting_until = NULL;
    m->waiting_tenant = NULL;
    for (int c = 0; c < STG_N_PRIORITIES; c++)
        sim_evq_free(&m->expiry[c]);
}

/* The lease geometry shared by both policies: at most k tokens from
 * tat0 = max(tat, now + lead) that conform within timeout, leaving
 * `keep` tokens free after them. Returns the count (may be <= 0). */
static int64_t conforming(const sim_fleet_model *m, int64_t now, int64_t tat0, int64_t timeout,
                          int64_t keep)
{
    int64_t room = now + timeout + m->burst * m->T - tat0;
    return (room >= 0 ? room / m->T : -1) - keep;
}

static void grant(sim_fleet_model *m, int64_t now, int64_t tat0, int64_t k, sim_fleet_grant *g)
{
    int64_t lt = tat0 + k * m->T;
    int64_t lw = lt - m->burst * m->T - now;
    m->tat = lt;
    g->k = k;
    g->wait_ns = lw > 0 ? lw : 0;
    g->end_ns = tat0 - now;
    g->hint_ns = 0;
    g->lease = true;
}

static void fcfs(sim_fleet_model *m, int64_t now, const sim_fleet_call *c, sim_fleet_grant *g)
{
    int64_t tat = m->tat < now ? now : m->tat;
    memset(g, 0, sizeof *g);
    if (c->lead_ns > 0) {
        int64_t tat0 = tat < now + c->lead_ns ? now + c->lead_ns : tat;
        int64_t k = conforming(m, now, tat0, c->timeout_ns, 0);
        if (k > c->k)
            k = c->k;
        if (k >= 1) {
            grant(m, now, tat0, k, g);
            return;
        }
    }
    /* a plain take of one (gcra.c: w = 1 after a lease that did not fit) */
    int64_t wait = tat + m->T - m->burst * m->T - now;
    if (wait > c->timeout_ns) {
        g->hint_ns = wait - c->timeout_ns;
        return;
    }
    m->tat = tat + m->T;
    g->k = 1;
    g->wait_ns = wait > 0 ? wait : 0;
    g->end_ns = 0; /* no window: the client sends after the wait */
    g->lease = false;
}

/* ---- priority: prio_gcra.c ------------------------------------------------ */

static void prio(sim_fleet_model *m, int64_t now, const sim_fleet_call *c, sim_fleet_grant *g)
{
    stg__prio_req rq = {
        .now_ns = now,
        .interval_ns = m->T,
        .burst = m->burst,
        .priority = c->cls + STG_PRIORITY_MIN,
        .tenant = c->tname,
        .weight = c->weight,
        .n = c->k,
        .max_wait_ns = c->timeout_ns,
        .lead_ns = c->lead_ns,
        .hold_ns = m->hold_ns > 0 ? m->hold_ns : 1,
        /* thousandths; prio_gcra.c reads 0 as its default (5%), so
         * --floor 0 runs as the least it takes, 0.1% */
        .floor_pm = m->floor * 1000 >= 1 ? (int)lround(m->floor * 1000) : 1,
    };
    stg__prio_grant out;
    memset(g, 0, sizeof *g);
    if (stg__prio_decide(m->prio, &rq, &out) != 0) {
        g->hint_ns = m->T; /* invalid: cannot happen with checked options */
        return;
    }
    if (out.k < 1) {
        g->hint_ns = out.wait_ns > 0 ? out.wait_ns : 1;
        return;
    }
    g->k = out.k;
    g->wait_ns = out.wait_ns;
    g->lease = out.lease;
    g->end_ns = out.lease ? out.end_ns - now : 0;
}

/* ---- sfq: the simulator's own model -------------------------------------- */

static bool fresh(int64_t until, int64_t now)
{
    return until > now;
}

/* The waiting set of class c at now_ns: expired entries leave it. */
static void waiting_expire(sim_fleet_model *m, int c, int64_t now_ns)
{
    sim_ev e;
    int64_t now_us = now_ns / 1000;
    while (sim_evq_peek(&m->expiry[c], &e) && sim_ev_time(e) <= now_us) {
        uint32_t who = sim_ev_who(e);
        if (who < m->nclients && m->waiting_until[who] == sim_ev_time(e)) {
            m->waiting_until[who] = 0;
            m->nwaiting[c][m->waiting_tenant[who]]--;
        }
        sim_evq_pop(&m->expiry[c]);
    }
}

static void waiting_leave(sim_fleet_model *m, int c, uint32_t who, int64_t now_ns)
{
    if (who < m->nclients && m->waiting_until[who] * 1000 > now_ns) {
        m->waiting_until[who] = 0;
        m->nwaiting[c][m->waiting_tenant[who]]--;
    }
}

/* A process calls with one class and tenant all its life (fleet.c). */
static void waiting_add(sim_fleet_model *m, int c, int t, uint32_t who, int64_t until_ns,
                        int64_t now_ns)
{
    if (who >= m->nclients)
        return;
    int64_t until = until_ns / 1000 + 1;
    if (!(m->waiting_until[who] * 1000 > now_ns))
        m->nwaiting[c][t]++;
    m->waiting_until[who] = until;
    m->waiting_tenant[who] = (uint8_t)t;
    if (sim_evq_push(&m->expiry[c], until, who) != 0) {
        m->waiting_until[who] = 0; /* out of memory: not counted */
        m->nwaiting[c][t]--;
    }
}

/* Least vf among the active tenants of class c other than `except` (-1:
 * none excepted); *any says whether there was one. */
static double min_vf(const sim_fleet_model *m, int c, int except, int64_t now, bool *any)
{
    double v = 0;
    *any = false;
    for (int t = 0; t < m->ntenants; t++) {
        if (t == except || !fresh(m->active_until[c][t], now))
            continue;
        if (!*any || m->vf[c][t] < v)
            v = m->vf[c][t];
        *any = true;
    }
    return v;
}

static void sfq(sim_fleet_model *m, int64_t now, const sim_fleet_call *c, sim_fleet_grant *g)
{
    int cls = c->cls, ten = c->tenant;
    memset(g, 0, sizeof *g);
    waiting_expire(m, cls, now);
    /* rule 2 (and 5: a tenant coming back starts at the others' minimum) */
    bool any;
    if (!fresh(m->active_until[cls][ten], now)) {
        double v = min_vf(m, cls, ten, now, &any);
        if (any && m->vf[cls][ten] < v)
            m->vf[cls][ten] = v;
    }
    if (m->demand_until[cls] < now + m->hold_ns)
        m->demand_until[cls] = now + m->hold_ns;
    if (m->active_until[cls][ten] < now + m->hold_ns)
        m->active_until[cls][ten] = now + m->hold_ns;
    m->wt[cls][ten] = c->weight;

    int nhigher = 0;
    for (int h = 0; h < cls; h++)
        nhigher += fresh(m->demand_until[h], now);
    bool lowest_like = cls == CB || (cls == CN && fresh(m->demand_until[CI], now));
    bool batch_waits = fresh(m->demand_until[CB], now);
    bool owed = batch_waits && m->credit >= 1.0;

    /* rules 3 and 4 */
    int64_t keep = 0, timeout = c->timeout_ns;
    if (lowest_like) {
        timeout = 0;
        if (!(cls == CB && owed))
            keep = nhigher;
    }
    if (cls != CB && owed)
        keep += 1;
    if (cls == CN && !lowest_like && timeout > m->T)
        timeout = m->T; /* MODEL: see rule 3 */
    int64_t tat = m->tat < now ? now : m->tat;
    int64_t tat0 = tat < now + c->lead_ns ? now + c->lead_ns : tat;
    int64_t k = conforming(m, now, tat0, timeout, keep);
    if (k > c->k)
        k = c->k;
    if (cls == CB && owed && nhigher > 0 && k > (int64_t)m->credit)
        k = (int64_t)m->credit;

    /* rule 5: this tenant's allowance in its class's round */
    double wsum = 0;
    double mv = min_vf(m, cls, -1, now, &any);
    for (int t = 0; t < m->ntenants; t++)
        if (fresh(m->active_until[cls][t], now))
            wsum += t == ten ? c->weight : m->wt[cls][t];
    double room = (mv + 1.0 - m->vf[cls][ten]) * c->weight;
    int64_t allow = room > 0 ? (int64_t)ceil(room - 1e-9) : 0;
    if (lowest_like && k > allow)
        k = allow;
    if (k >= 1) {
        grant(m, now, tat0, k, g);
        m->vf[cls][ten] += (double)k / c->weight;
        if (cls == CB)
            m->credit = m->credit > (double)k ? m->credit - (double)k : 0.0;
        else if (batch_waits && m->floor > 0) {
            m->credit += m->floor * (double)k;
            if (m->credit > (double)m->burst)
                m->credit = (double)m->burst;
        }
        waiting_leave(m, cls, c->client, now);
        return;
    }
    /* refused: when the next token would be this caller's */
    int64_t next = tat0 + (1 + keep) * m->T - m->burst * m->T - now - timeout;
    int64_t hint = next > m->T ? next : m->T;
    if (allow < 1)
        hint = m->T; /* the others' turn in this class's round: soon back */
    if (lowest_like || timeout == 0) {
        double share = wsum > 0 ? c->weight / wsum : 1.0;
        double w = (double)(m->nwaiting[cls][ten] + 1) / (2.0 * share);
        if (w > 1)
            hint = (int64_t)((double)hint * w);
        waiting_add(m, cls, ten, c->client, now + hint + m->hold_ns, now);
    }
    g->hint_ns = hint;
    /* the caller is due back within 1.5 hints: its class and tenant
     * still demand until then */
    int64_t until = now + 2 * hint + m->hold_ns;
    if (m->demand_until[cls] < until)
        m->demand_until[cls] = until;
    if (m->active_until[cls][ten] < until)
        m->active_until[cls][ten] = until;
}

void sim_fleet_decide(sim_fleet_model *m, int64_t now_ns, const sim_fleet_call *c,
                      sim_fleet_grant *g)
{
    if (m->policy == SIM_FLEET_PRIORITY)
        prio(m, now_ns, c, g);
    else if (m->policy == SIM_FLEET_SFQ)
        sfq(m, now_ns, c, g);
    else
        fcfs(m, now_ns, c, g);
}
