/*
 * Scenario "fleet": N processes ("clients") share one server quota
 * (--limit, --burst) through one Redis key, by priority class and tenant
 * (issue #32). Each process is one `stagger` with the shared limiter and
 * token leases (--lease, 40 ms: lease_size.c sizes every lease from the
 * process's own admission meter, as src/redis/gcra.c's lease_decide does);
 * Redis is one server that runs one script call at a time (--redis-op
 * each, queued first come first served) behind a round trip of two legs
 * |Normal(--redis-rtt)|. The key decides by a policy (fleet.h): fcfs
 * (today) or priority (fleet_policy.c). Rows: one per point of --clients
 * and policy.
 *
 * Processes: --mix shares per class (interactive, normal, batch), each
 * class's processes split among --tenants by their shares. A class's
 * demand (--offered) is Poisson at a share of the limit, split among its
 * tenants by weight and handed to one of the tenant's processes at random;
 * or backlogged ("max"): each process sends one request at a time and
 * wants the next --server-time after each send. A process serves its own
 * requests in order: a token of its lease if one is usable in time, else
 * one script call (one at a time: the limiter's mutex is held across the
 * round trip); a request told to wait for its slot waits on its own while
 * the process asks for the next. A grant
 * whose window closed before the reply came lapses and the process asks
 * again (three times, then it waits a round trip), as lease_decide. A
 * refused call asks again after the hint: fcfs at the instant its slot
 * would fit, priority and sfq after hint * U[0.5, 1.5) (the jitter is
 * this simulator's choice: refused processes told the same instant would
 * otherwise all come back at once).
 *
 * Figures over --duration of virtual time: admissions per second in all
 * and per class (and per tenant, sim_fleet_row), the sends over the bound
 * burst + rate * t (sim_bound, on the instants sends were made: the
 * limiter's promise; the network to the server is not modelled), Jain's
 * index per class over the tenants' admissions / weight, the interactive
 * class's admission wait (from wanting the request to sending it; one
 * still waiting at the end counts with its wait so far) p50 and p99, Redis
 * script calls per second and the share of time Redis was busy, leased
 * tokens that lapsed, refused calls.
 *
 * Events (evq.h): who = id << 3 | kind; ids 0..N-1 are processes, N + s
 * the Poisson stream s = class * SIM_FLEET_MAX_TENANTS + tenant. So N is
 * at most SIM_FLEET_MAX_CLIENTS. Invariants: a process has at most one
 * script call in flight; granted <= qn (a K_SEND is pending for each
 * granted request; a send goes to the oldest wanted one, so each process
 * sends in the order it wanted); Redis's decision instants never go back
 * (FIFO, one at a time).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "redis/lease.h"
#include "scenario.h"

enum { K_WANT = 0, K_REDIS = 1, K_REPLY = 2, K_SEND = 3, K_RETRY = 4, K_ARRIVE = 5 };
enum { S_IDLE = 0, S_CALLING = 1, S_SLEEPING = 2 };

typedef struct fl_client {
    uint8_t cls, tenant, state, lapses;
    bool backlogged;
    int64_t t0, rtt_us;           /* the call in flight: sent at t0 */
    stg__lease_plan plan;         /* ... asking for this */
    sim_fleet_grant g;            /* ... answered this */
    int64_t left, start_us, end_us; /* the lease */
    stg__lease_meter meter;
    int64_t *q;                   /* wanted instants, a ring */
    uint32_t qh, qn, qcap;
    uint32_t granted;             /* the first `granted` of them have their
                                     send scheduled (K_SEND) */
} fl_client;

typedef struct fl_run {
    const sim_opts *o;
    const sim_fleet_opts *fo;
    int policy;
    uint32_t n;
    fl_client *cl;
    uint32_t first[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS]; /* clients of (c, t) */
    uint32_t count[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS];
    double lambda[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS]; /* Poisson /s */
    sim_fleet_model model;
    sim_net redis_net;
    stg_rng rng;
    sim_evq q;
    int64_t T_ns, redis_free, redis_busy;
    sim_bound bound;
    uint64_t sent[STG_N_PRIORITIES][SIM_FLEET_MAX_TENANTS];
    uint64_t calls, lapsed, refused;
    sim_log iwait; /* interactive admission waits, us */
} fl_run;

static int push(fl_run *r, int64_t t, uint32_t id, int kind)
{
    return sim_evq_push(&r->q, t, id << 3 | (uint32_t)kind);
}

static double uniform(stg_rng *g)
{
    return (double)(stg_rng_next(g) >> 11) * 0x1.0p-53;
}

static int want(fl_client *c, int64_t t)
{
    if (c->qn == c->qcap) {
        uint32_t cap = c->qcap ? c->qcap * 2 : 2;
        int64_t *q = malloc(cap * sizeof *q);
        if (!q)
            return STG_ENOMEM;
        for (uint32_t i = 0; i < c->qn; i++)
            q[i] = c->q[(c->qh + i) % c->qcap];
        free(c->q);
        c->q = q;
        c->qh = 0;
        c->qcap = cap;
    }
    c->q[(c->qh + c->qn) % c->qcap] = t;
    c->qn++;
    return STG_OK;
}

/* The process's oldest wanted request goes out at t. */
static int send(fl_run *r, fl_client *c, uint32_t id, int64_t t)
{
    int64_t w = c->q[c->qh];
    c->qh = (c->qh + 1) % c->qcap;
    c->qn--;
    sim_bound_send(&r->bound, t * 1000);
    if (t < r->fo->duration_us) {
        r->sent[c->cls][c->tenant]++;
        if (c->cls == 0 && sim_log_add(&r->iwait, t - w) != 0)
            return STG_ENOMEM;
    }
    if (c->backlogged && push(r, t + r->o->server_us, id, K_WANT) != 0)
        return STG_ENOMEM;
    return STG_OK;
}

/* A token for the process's next request without one: it is sent at t. */
static int schedule(fl_run *r, fl_client *c, uint32_t id, int64_t t)
{
    c->granted++;
    return push(r, t, id, K_SEND) ? STG_ENOMEM : STG_OK;
}

/* Serve the process's wanted requests while it can: from its lease, else
 * by a script call. */
static int pump(fl_run *r, uint32_t id, int64_t now)
{
    fl_client *c = &r->cl[id];
    while (c->state == S_IDLE && c->qn > c->granted) {
        if (c->left > 0) {
            int64_t wait = c->start_us > now ? c->start_us - now : 0;
            if (now + wait > c->end_us) {
                r->lapsed += (uint64_t)c->left;
                c->left = 0;
                continue;
            }
            c->left--;
            stg__lease_meter_add(&c->meter, now, 1);
            if (schedule(r, c, id, now + wait) != STG_OK)
                return STG_ENOMEM;
            continue;
        }
        c->state = S_CALLING;
        c->t0 = now;
        c->plan = stg__lease_size(stg__lease_meter_rate(&c->meter, now), r->T_ns, r->o->burst,
                                  r->fo->lease_us, c->rtt_us);
        return push(r, now + sim_net_leg(&r->redis_net), id, K_REDIS) ? STG_ENOMEM : STG_OK;
    }
    return STG_OK;
}

/* The call reaches Redis at t: it runs when Redis is free. */
static int at_redis(fl_run *r, uint32_t id, int64_t t)
{
    fl_client *c = &r->cl[id];
    int64_t start = r->redis_free > t ? r->redis_free : t;
    r->redis_free = start + r->fo->redis_op_us;
    if (start < r->fo->duration_us) {
        r->calls++;
        r->redis_busy += r->fo->redis_op_us;
    }
    sim_fleet_call call = {
        .cls = c->cls,
        .tenant = c->tenant,
        .tname = r->fo->tenants[c->tenant].name,
        .weight = r->fo->tenants[c->tenant].weight,
        .client = id,
        .k = c->plan.k,
        .lead_ns = c->plan.lead_ns,
        .timeout_ns = r->fo->max_wait_us * 1000,
    };
    sim_fleet_decide(&r->model, start * 1000, &call, &c->g);
    return push(r, r->redis_free + sim_net_leg(&r->redis_net), id, K_REPLY) ? STG_ENOMEM
                                                                           : STG_OK;
}

static int64_t ceil_us(int64_t ns)
{
    return ns <= 0 ? 0 : (ns + 999) / 1000;
}

/* The answer is back at the process at t1 (lease_decide's rules). */
static int reply(fl_run *r, uint32_t id, int64_t t1)
{
    fl_client *c = &r->cl[id];
    const sim_fleet_grant *g = &c->g;
    c->rtt_us = t1 - c->t0;
    c->state = S_IDLE;
    if (g->k < 1) {
        r->refused++;
        c->lapses = 0;
        int64_t h = ceil_us(g->hint_ns);
        if (r->policy != SIM_FLEET_FCFS)
            h = (int64_t)((double)h * (0.5 + uniform(&r->rng)));
        c->state = S_SLEEPING;
        return push(r, t1 + (h > 0 ? h : 1), id, K_RETRY) ? STG_ENOMEM : STG_OK;
    }
    int64_t at = t1 + ceil_us(g->wait_ns);
    if (g->lease) {
        int64_t end = c->t0 + g->end_ns / 1000;
        if (at > end) { /* its window closed before the reply came */
            r->lapsed += (uint64_t)g->k;
            if (++c->lapses < 3)
                return pump(r, id, t1);
            c->lapses = 0;
            c->state = S_SLEEPING;
            return push(r, t1 + c->rtt_us, id, K_RETRY) ? STG_ENOMEM : STG_OK;
        }
        c->left = g->k - 1;
        c->start_us = at;
        c->end_us = end;
    }
    c->lapses = 0;
    stg__lease_meter_add(&c->meter, t1, 1);
    if (schedule(r, c, id, at) != STG_OK)
        return STG_ENOMEM;
    return pump(r, id, t1);
}

static int arrive(fl_run *r, uint32_t s, int64_t t)
{
    int cls = (int)(s / SIM_FLEET_MAX_TENANTS), ten = (int)(s % SIM_FLEET_MAX_TENANTS);
    uint32_t id = r->first[cls][ten] + (uint32_t)(stg_rng_next(&r->rng) % r->count[cls][ten]);
    double gap = -log(1.0 - uniform(&r->rng)) / r->lambda[cls][ten];
    int64_t next = t + (int64_t)ceil(gap * 1e6);
    if (next < r->fo->duration_us && push(r, next, r->n + s, K_ARRIVE) != 0)
        return STG_ENOMEM;
    if (want(&r->cl[id], t) != STG_OK)
        return STG_ENOMEM;
    return pump(r, id, t);
}

static int step(fl_run *r, sim_ev e)
{
    int64_t t = sim_ev_time(e);
    uint32_t id = sim_ev_who(e) >> 3;
    int kind = (int)(sim_ev_who(e) & 7);
    if (kind == K_ARRIVE)
        return arrive(r, id - r->n, t);
    fl_client *c = &r->cl[id];
    switch (kind) {
    case K_WANT:
        if (want(c, t) != STG_OK)
            return STG_ENOMEM;
        return pump(r, id, t);
    case K_REDIS: return at_redis(r, id, t);
    case K_REPLY: return reply(r, id, t);
    case K_SEND:
        c->granted--;
        if (send(r, c, id, t) != STG_OK)
            return STG_ENOMEM;
        return pump(r, id, t);
    default: /* K_RETRY */
        c->state = S_IDLE;
        return pump(r, id, t);
    }
}

/* Processes per class and tenant, laid out in that order. */
static void layout(fl_run *r)
{
    const sim_fleet_opts *fo = r->fo;
    uint32_t n = r->n, at = 0, ncls[STG_N_PRIORITIES];
    double msum = 0;
    for (int c = 0; c < STG_N_PRIORITIES; c++)
        msum += fo->mix[c];
    uint32_t left = n;
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        uint32_t k = c == STG_N_PRIORITIES - 1 ? left
                                                : (uint32_t)floor(fo->mix[c] / msum * n + 0.5);
        if (k > left)
            k = left;
        ncls[c] = k;
        left -= k;
    }
    double tsum = 0;
    for (int t = 0; t < fo->ntenants; t++)
        tsum += fo->tenants[t].share;
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        double cum = 0;
        uint32_t prev = 0;
        double wsum = 0;
        for (int t = 0; t < fo->ntenants; t++) {
            cum += fo->tenants[t].share / tsum;
            uint32_t upto = t == fo->ntenants - 1 ? ncls[c] : (uint32_t)floor(cum * ncls[c] + 0.5);
            r->first[c][t] = at + prev;
            r->count[c][t] = upto - prev;
            prev = upto;
            if (r->count[c][t] > 0)
                wsum += fo->tenants[t].weight;
        }
        for (int t = 0; t < fo->ntenants; t++) {
            for (uint32_t i = 0; i < r->count[c][t]; i++) {
                fl_client *cl = &r->cl[r->first[c][t] + i];
                cl->cls = (uint8_t)c;
                cl->tenant = (uint8_t)t;
                cl->backlogged = fo->offered[c] < 0;
            }
            if (fo->offered[c] > 0 && r->count[c][t] > 0)
                r->lambda[c][t] = fo->offered[c] * r->o->limit_rps * fo->tenants[t].weight / wsum;
        }
        at += ncls[c];
    }
}

static int start(fl_run *r)
{
    int64_t spread = r->o->server_us > STG_MS(1) ? r->o->server_us : STG_MS(1);
    for (uint32_t i = 0; i < r->n; i++) {
        stg__lease_meter_init(&r->cl[i].meter, 0);
        if (r->cl[i].backlogged &&
            push(r, (int64_t)(stg_rng_next(&r->rng) % (uint64_t)spread), i, K_WANT) != 0)
            return STG_ENOMEM;
    }
    for (int c = 0; c < STG_N_PRIORITIES; c++)
        for (int t = 0; t < r->fo->ntenants; t++)
            if (r->lambda[c][t] > 0) {
                double gap = -log(1.0 - uniform(&r->rng)) / r->lambda[c][t];
                uint32_t s = (uint32_t)(c * SIM_FLEET_MAX_TENANTS + t);
                if (push(r, (int64_t)ceil(gap * 1e6), r->n + s, K_ARRIVE) != 0)
                    return STG_ENOMEM;
            }
    return STG_OK;
}

static int run(fl_run *r)
{
    int rc = start(r);
    sim_ev e;
    while (rc == STG_OK && sim_evq_peek(&r->q, &e)) {
        if (sim_ev_time(e) >= r->fo->duration_us)
            break;
        sim_evq_pop(&r->q);
        rc = step(r, e);
    }
    if (rc == STG_OK && r->q.oom)
        rc = STG_ENOMEM;
    /* interactive requests still waiting count with their wait so far */
    for (uint32_t i = 0; rc == STG_OK && i < r->n; i++) {
        fl_client *c = &r->cl[i];
        for (uint32_t k = 0; c->cls == 0 && k < c->qn; k++)
            if (sim_log_add(&r->iwait, r->fo->duration_us - c->q[(c->qh + k) % c->qcap]) != 0)
                rc = STG_ENOMEM;
    }
    return rc;
}

static void figures(fl_run *r, sim_row *row)
{
    static const char *const rps_key[STG_N_PRIORITIES] = {"interactive_rps", "normal_rps",
                                                          "batch_rps"};
    static const char *const jain_key[STG_N_PRIORITIES] = {"jain_interactive", "jain_normal",
                                                           "jain_batch"};
    const sim_fleet_opts *fo = r->fo;
    double secs = (double)fo->duration_us / 1e6;
    uint64_t all = 0;
    for (int c = 0; c < STG_N_PRIORITIES; c++)
        for (int t = 0; t < fo->ntenants; t++)
            all += r->sent[c][t];
    sim_row_add(row, "admitted_rps", (double)all / secs);
    sim_row_add(row, "bound_excess", (double)r->bound.excess);
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        uint64_t n = 0;
        for (int t = 0; t < fo->ntenants; t++)
            n += r->sent[c][t];
        sim_row_add(row, rps_key[c], (double)n / secs);
    }
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        double x[SIM_FLEET_MAX_TENANTS];
        int k = 0;
        for (int t = 0; t < fo->ntenants; t++) {
            sim_stat_add(&row->fleet->rps[c][t], (double)r->sent[c][t] / secs);
            row->fleet->clients[c][t] = (int)r->count[c][t];
            if (r->count[c][t] > 0)
                x[k++] = (double)r->sent[c][t] / secs / fo->tenants[t].weight;
        }
        sim_row_add(row, jain_key[c], sim_jain(x, k));
    }
    sim_row_add(row, "interactive_p50_ms",
                (double)sim_percentile(r->iwait.v, r->iwait.n, 50.0) / 1e3);
    sim_row_add(row, "interactive_p99_ms",
                (double)sim_percentile(r->iwait.v, r->iwait.n, 99.0) / 1e3);
    sim_row_add(row, "redis_ops_s", (double)r->calls / secs);
    sim_row_add(row, "redis_busy", (double)r->redis_busy / (double)fo->duration_us);
    sim_row_add(row, "lapsed", (double)r->lapsed);
    sim_row_add(row, "refused", (double)r->refused);
}

int sim_fleet_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    (void)chart; /* the chart is against the number of clients (svg.c) */
    const sim_fleet_opts *fo = &o->fleet;
    if (row->clients < 1 || row->clients > SIM_FLEET_MAX_CLIENTS)
        return STG_EINVAL;
    if (!row->fleet) {
        row->fleet = calloc(1, sizeof *row->fleet);
        if (!row->fleet)
            return STG_ENOMEM;
    }
    fl_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.fo = fo;
    r.policy = row->mode;
    r.n = (uint32_t)row->clients;
    r.T_ns = (int64_t)ceil(1e9 / o->limit_rps);
    /* the limiter's own hold (src/redis/prio.c): two lease windows or 8
     * intervals, whichever is longer, within 20 ms .. 1 s */
    int64_t hold = fo->hold_us;
    if (hold <= 0) {
        hold = 2 * fo->lease_us > 8 * r.T_ns / 1000 ? 2 * fo->lease_us : 8 * r.T_ns / 1000;
        hold = hold < STG_MS(20) ? STG_MS(20) : hold > STG_SEC(1) ? STG_SEC(1) : hold;
    }
    sim_net_init(&r.redis_net, &fo->redis_leg, sim_seed_mix(seed, 1));
    stg_rng_seed(&r.rng, sim_seed_mix(seed, 2));
    sim_bound_init(&r.bound, o->limit_rps, o->burst);
    int rc = sim_fleet_model_init(&r.model, r.policy, o->limit_rps, o->burst, hold * 1000,
                                  fo->floor, fo->ntenants, r.n);
    r.cl = calloc(r.n, sizeof *r.cl);
    if (rc == STG_OK && (!r.cl || sim_evq_init(&r.q, (size_t)r.n * 2 + 64, 0) != 0 ||
                         sim_log_init(&r.iwait, 1024) != 0))
        rc = STG_ENOMEM;
    if (rc == STG_OK) {
        layout(&r);
        rc = run(&r);
    }
    if (rc == STG_OK) {
        figures(&r, row);
        size_t mem = (size_t)r.n * sizeof *r.cl + sim_evq_bytes(&r.q) +
                     r.iwait.cap * sizeof *r.iwait.v;
        if (mem > row->mem_bytes)
            row->mem_bytes = mem;
    }
    for (uint32_t i = 0; r.cl && i < r.n; i++)
        free(r.cl[i].q);
    free(r.cl);
    sim_evq_free(&r.q);
    sim_log_free(&r.iwait);
    sim_fleet_model_free(&r.model);
    return rc;
}
