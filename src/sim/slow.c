/*
 * Scenario "slow-server": a batch of `requests` jobs (default 5000)
 * against a server that does not refuse when overloaded, it queues: it
 * handles `capacity` requests at once (default 20), each for server_us
 * (default 50 ms), first come first served, so latency grows with what is
 * queued while throughput stays at capacity / server_us (400/s). This is
 * `stagger serve --capacity` (src/server/capacity.h), in virtual time.
 * Rows:
 *   fixed     keeps `clients` requests in flight (default 200, the issue's
 *             baseline): every one over the capacity only waits
 *   adaptive  the learned concurrency (stg_concurrency, concurrency.h,
 *             its defaults; `clients` is its ceiling), fed every answer's
 *             latency and the in-flight count, as the engine does
 *             (engine_conc.c)
 * Figures: p50_ms and p99_ms of the latency (send to answer, network
 * included), throughput_rps (jobs per virtual second), limit (where the
 * concurrency ended), limit_mean (its mean over the answers of the second
 * half of the batch: where it settled), max_at_server (most requests the
 * server held at once, in service or queued), total_ms.
 *
 * The model's answer (concurrency.h): at a limit L > C the latency is
 * about L / C * server_us, and the learned limit settles where
 * L = C + sqrt(L) (25 for C = 20): a latency 1.25x the unloaded one, at
 * full throughput. tests/unit/test_sim.c holds the simulator to it.
 *
 * Events (evq.h): who = job << 2 | kind, kinds ARRIVE (at the server),
 * LEAVE (the server is done with it) and REPLY (back at the client): so at
 * most 2^24 - 1 jobs (sim_opts_check). Invariants: in_flight <= the limit
 * in force when each request was sent; the server's worker free times only
 * grow, so its queue is FIFO.
 */
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "scenario.h"
#include "util/assert.h"

enum { EV_ARRIVE = 0, EV_LEAVE = 1, EV_REPLY = 2 };

typedef struct slow_run {
    const sim_opts *o;
    bool learn;
    stg_concurrency conc;
    int fixed;
    sim_net net;
    sim_evq q;
    int64_t *sent;    /* per job: when the client sent it */
    int64_t *free_at; /* per worker: when it is next free */
    int next_job, in_flight, at_server, max_at_server;
    sim_log lat;
    double limit_sum;
    int limit_n;
    int64_t finish_us;
} slow_run;

static int limit_of(const slow_run *r)
{
    return r->learn ? stg_concurrency_limit(&r->conc) : r->fixed;
}

static int push(slow_run *r, int64_t t, int job, int kind)
{
    return sim_evq_push(&r->q, t, (uint32_t)job << 2 | (uint32_t)kind);
}

/* Send jobs while the limit allows. */
static int fill(slow_run *r, int64_t now)
{
    while (r->next_job < r->o->requests && r->in_flight < limit_of(r)) {
        int j = r->next_job++;
        r->sent[j] = now;
        r->in_flight++;
        if (push(r, now + sim_net_leg(&r->net), j, EV_ARRIVE) != 0)
            return STG_ENOMEM;
    }
    return STG_OK;
}

/* The earliest free worker takes it: FIFO by arrival. */
static int arrive(slow_run *r, int64_t now, int j)
{
    int k = 0;
    for (int i = 1; i < r->o->capacity; i++)
        if (r->free_at[i] < r->free_at[k])
            k = i;
    int64_t start = r->free_at[k] > now ? r->free_at[k] : now;
    int64_t done = start + r->o->server_us;
    STG_ASSERT(done >= r->free_at[k]);
    r->free_at[k] = done;
    if (++r->at_server > r->max_at_server)
        r->max_at_server = r->at_server;
    if (push(r, done, j, EV_LEAVE) != 0 ||
        push(r, done + sim_net_leg(&r->net), j, EV_REPLY) != 0)
        return STG_ENOMEM;
    return STG_OK;
}

static int reply(slow_run *r, int64_t now, int j)
{
    int64_t rtt = now - r->sent[j];
    if (sim_log_add(&r->lat, rtt) != 0)
        return STG_ENOMEM;
    if (r->learn)
        stg_concurrency_on_sample(&r->conc, rtt, STG_CONCURRENCY_OK, r->in_flight, now);
    r->in_flight--;
    if ((size_t)r->lat.n * 2 > (size_t)r->o->requests) { /* the second half: settled */
        r->limit_sum += limit_of(r);
        r->limit_n++;
    }
    r->finish_us = now;
    return fill(r, now);
}

static int run(slow_run *r)
{
    int rc = fill(r, 0);
    sim_ev e;
    while (rc == STG_OK && sim_evq_peek(&r->q, &e)) {
        sim_evq_pop(&r->q);
        int64_t t = sim_ev_time(e);
        int j = (int)(sim_ev_who(e) >> 2);
        switch (sim_ev_who(e) & 3) {
        case EV_ARRIVE: rc = arrive(r, t, j); break;
        case EV_LEAVE: r->at_server--; break;
        default: rc = reply(r, t, j); break;
        }
    }
    return rc == STG_OK && r->q.oom ? STG_ENOMEM : rc;
}

int sim_slow_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    (void)chart; /* no arrival chart: the figures are latency and limit */
    slow_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.learn = row->strategy == SIM_ADAPTIVE;
    r.fixed = row->clients;
    stg_concurrency_config cc = {.max_limit = row->clients};
    if (r.learn && stg_concurrency_init(&r.conc, &cc, 0) != STG_OK)
        return STG_EINVAL;
    sim_net_init(&r.net, &o->delay, sim_seed_mix(seed, 1));
    int rc = STG_ENOMEM;
    r.sent = malloc((size_t)o->requests * sizeof *r.sent);
    r.free_at = calloc((size_t)o->capacity, sizeof *r.free_at);
    if (r.sent && r.free_at && sim_evq_init(&r.q, 1024, 0) == 0 &&
        sim_log_init(&r.lat, (size_t)o->requests) == 0)
        rc = run(&r);
    if (rc == STG_OK) {
        double total_s = (double)r.finish_us / 1e6;
        sim_row_add(row, "p50_ms", (double)sim_percentile(r.lat.v, r.lat.n, 50.0) / 1e3);
        sim_row_add(row, "p99_ms", (double)sim_percentile(r.lat.v, r.lat.n, 99.0) / 1e3);
        sim_row_add(row, "throughput_rps", total_s > 0 ? (double)r.lat.n / total_s : 0);
        sim_row_add(row, "limit", limit_of(&r));
        sim_row_add(row, "limit_mean", r.limit_n ? r.limit_sum / r.limit_n : limit_of(&r));
        sim_row_add(row, "max_at_server", r.max_at_server);
        sim_row_add(row, "total_ms", (double)r.finish_us / 1e3);
        size_t mem = (size_t)o->requests * sizeof *r.sent + sim_evq_bytes(&r.q) +
                     r.lat.cap * sizeof *r.lat.v;
        if (mem > row->mem_bytes)
            row->mem_bytes = mem;
    }
    sim_log_free(&r.lat);
    sim_evq_free(&r.q);
    free(r.sent);
    free(r.free_at);
    return rc;
}
