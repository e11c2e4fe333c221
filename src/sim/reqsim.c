/*
 * The request engine shared by quota, storm and load.
 *
 * Each client runs one request at a time through three events:
 *   SEND     the client wants to send an attempt now: the shared breaker
 *            may refuse it (the request is deferred: counted as failed),
 *            pacing (client bucket / adaptive rate) may delay it; it then
 *            travels one network leg.
 *   ARRIVE   the server judges it (sim_limit_server_handle) and replies
 *            server_us later; the reply travels one leg.
 *   RESP     the client feeds the reply to the breaker, budget and adaptive
 *            rate and asks stg_decide what follows: success, retry after a
 *            wait (a new SEND then), or give up.
 * A client therefore has exactly one pending event, and the queue holds at
 * most `clients` events: it is sized once and never grows.
 *
 * Event order: (time, client * 3 + kind), see evq.h; hence at most
 * SIM_EVQ_WHO_MAX / 3 clients.
 */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "evq.h"
#include "scenario.h"
#include "server.h"

enum { EV_SEND = 0, EV_ARRIVE = 1, EV_RESP = 2, EV_KINDS = 3 };

typedef struct rq_client {
    stg_retry_state st;
    int64_t req_start_us;
    int64_t not_before_us; /* Retry-After of the last reply ends here */
    int64_t ra_us;         /* Retry-After of the last reply, or -1 */
    int32_t status;        /* status of the last reply */
    int32_t left;          /* requests still to start (per_client mode) */
} rq_client;

typedef struct rq_run {
    const sim_opts *o;
    const sim_reqsim_cfg *cfg;
    sim_client_env env;
    sim_limit_server server;
    sim_net net;
    sim_evq q;
    rq_client *cl;
    int next_job;
    int64_t deadline_us;
    sim_reqsim_out *out;
} rq_run;

static void start_request(rq_client *c, int64_t now)
{
    memset(&c->st, 0, sizeof c->st);
    c->st.start_us = now;
    c->req_start_us = now;
    c->not_before_us = INT64_MIN;
    c->ra_us = -1;
}

/* Give client i its next request, if any, and schedule its SEND at now.
 * Returns 0, or -1 when out of memory. */
static int next_request(rq_run *r, uint32_t i, int64_t now)
{
    rq_client *c = &r->cl[i];
    bool more = false;
    if (r->cfg->per_client > 0) {
        if (c->left > 0) {
            c->left--;
            more = true;
        }
    } else if (r->next_job < r->cfg->jobs) {
        r->next_job++;
        more = true;
    }
    if (!more)
        return 0;
    r->out->requests++;
    start_request(c, now);
    return sim_evq_push(&r->q, now, i * EV_KINDS + EV_SEND);
}

static void finish_request(rq_run *r, int64_t now)
{
    if (now > r->out->finish_us)
        r->out->finish_us = now;
}

static int on_send(rq_run *r, uint32_t i, int64_t now)
{
    rq_client *c = &r->cl[i];
    int64_t wait;
    if (!sim_client_before(&r->env, now, &wait)) {
        r->out->failed++;
        r->out->deferred++;
        finish_request(r, now);
        return next_request(r, i, now);
    }
    int64_t send = now + wait;
    if (send < c->not_before_us)
        r->out->early++;
    c->st.attempts++;
    int64_t arrive = send + sim_net_leg(&r->net);
    return sim_evq_push(&r->q, arrive, i * EV_KINDS + EV_ARRIVE);
}

static int on_arrive(rq_run *r, uint32_t i, int64_t now)
{
    rq_client *c = &r->cl[i];
    if (sim_log_add(&r->out->arrivals, now) != 0)
        return -1;
    r->out->calls++;
    c->status = sim_limit_server_handle(&r->server, now, &r->net.rng, &c->ra_us);
    if (c->status == 429)
        r->out->throttled++;
    else if (c->status == 503)
        r->out->errors++;
    int64_t back = now + r->o->server_us + sim_net_leg(&r->net);
    return sim_evq_push(&r->q, back, i * EV_KINDS + EV_RESP);
}

static int on_resp(rq_run *r, uint32_t i, int64_t now)
{
    rq_client *c = &r->cl[i];
    stg_decision d;
    sim_client_after(&r->env, &c->st, c->status, c->ra_us, now, &d);
    if (d.action == STG_ACTION_RETRY) {
        c->not_before_us = c->ra_us >= 0 ? now + c->ra_us : INT64_MIN;
        return sim_evq_push(&r->q, now + d.wait_us, i * EV_KINDS + EV_SEND);
    }
    if (d.action == STG_ACTION_SUCCESS) {
        int64_t lat = now - c->req_start_us;
        r->out->ok++;
        if (r->deadline_us < 0 || lat <= r->deadline_us)
            r->out->ok_in_deadline++;
        if (sim_log_add(&r->out->latencies, lat) != 0)
            return -1;
    } else {
        r->out->failed++;
    }
    finish_request(r, now);
    return next_request(r, i, now);
}

void sim_reqsim_out_free(sim_reqsim_out *out)
{
    sim_log_free(&out->arrivals);
    sim_log_free(&out->latencies);
}

int sim_reqsim_run(const sim_opts *o, sim_strategy s, int mode, const sim_reqsim_cfg *cfg,
                   uint64_t seed, sim_reqsim_out *out)
{
    memset(out, 0, sizeof *out);
    if (cfg->clients < 1 || (uint64_t)cfg->clients * EV_KINDS > SIM_EVQ_WHO_MAX)
        return STG_EINVAL;
    rq_run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.cfg = cfg;
    r.out = out;
    int rc = sim_client_env_init(&r.env, o, s, mode, sim_seed_mix(seed, 2));
    if (rc != STG_OK)
        return rc;
    r.deadline_us = r.env.policy.deadline_us;
    if (sim_limit_server_init(&r.server, o) != STG_OK) {
        sim_client_env_destroy(&r.env);
        return STG_EINVAL;
    }
    sim_net_init(&r.net, &o->delay, sim_seed_mix(seed, 1));

    size_t n = (size_t)cfg->clients;
    size_t expect = cfg->per_client > 0 ? n * (size_t)cfg->per_client : (size_t)cfg->jobs;
    rc = STG_ENOMEM;
    r.cl = calloc(n, sizeof *r.cl);
    if (!r.cl || sim_evq_init(&r.q, n, 0) != 0 || sim_log_init(&out->arrivals, expect * 2 + 16) != 0 ||
        sim_log_init(&out->latencies, expect + 16) != 0)
        goto done;

    for (uint32_t i = 0; i < n; i++) {
        r.cl[i].left = cfg->per_client;
        if (next_request(&r, i, 0) != 0)
            goto done;
    }
    int64_t t;
    uint32_t who;
    while (sim_run_next(&r.q, &t, &who, NULL)) {
        sim_evq_pop(&r.q);
        uint32_t i = who / EV_KINDS;
        int err;
        switch (who % EV_KINDS) {
        case EV_SEND: err = on_send(&r, i, t); break;
        case EV_ARRIVE: err = on_arrive(&r, i, t); break;
        default: err = on_resp(&r, i, t); break;
        }
        if (err != 0)
            goto done;
    }
    if (r.q.oom)
        goto done;
    /* Past the horizon: whatever is still running or waiting failed. */
    out->failed += r.q.n;
    if (cfg->per_client > 0)
        for (size_t i = 0; i < n; i++)
            out->failed += (uint64_t)r.cl[i].left;
    else
        out->failed += (uint64_t)(cfg->jobs - r.next_job);
    out->mem_bytes = n * sizeof *r.cl + sim_evq_bytes(&r.q) +
                     (out->arrivals.cap + out->latencies.cap) * sizeof(int64_t);
    rc = STG_OK;
done:
    free(r.cl);
    sim_evq_free(&r.q);
    sim_client_env_destroy(&r.env);
    return rc;
}

int sim_row_set_bins(sim_row *row, const sim_log *arrivals, int64_t bin_us)
{
    free(row->bins);
    row->bins = sim_bin(arrivals->v, arrivals->n, bin_us, &row->nbins);
    row->bin_us = bin_us;
    if (!row->bins && arrivals->n > 0)
        return STG_ENOMEM;
    return STG_OK;
}

int sim_reqsim_trial(const sim_opts *o, sim_row *row, int mode, const sim_reqsim_cfg *cfg,
                     uint64_t seed, bool chart, sim_reqsim_figures figures)
{
    sim_reqsim_out out;
    int rc = sim_reqsim_run(o, row->strategy, mode, cfg, seed, &out);
    if (rc == STG_OK) {
        figures(o, row, &out);
        if (out.mem_bytes > row->mem_bytes)
            row->mem_bytes = out.mem_bytes;
        if (chart)
            rc = sim_row_set_bins(row, &out.arrivals, o->bin_us);
    }
    sim_reqsim_out_free(&out);
    return rc;
}
