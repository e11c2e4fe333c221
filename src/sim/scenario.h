/*
 * The scenarios' entry points (one file each) and the request engine that
 * quota, storm and load share. A trial function runs one trial of one row
 * (row->strategy, row->mode, row->clients) with the given seed, adds its
 * figures to the row (sim_row_add), and, when chart is true, stores the
 * arrivals per bin in row->bins. Returns STG_OK, STG_EINVAL or STG_ENOMEM.
 */
#ifndef STAGGER_SIM_SCENARIO_H
#define STAGGER_SIM_SCENARIO_H

#include "evq.h"
#include "metrics.h"

typedef int (*sim_trial_fn)(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);

int sim_herd_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);
int sim_quota_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);
int sim_storm_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);
int sim_load_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);
int sim_contention_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);
int sim_slow_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);
int sim_fleet_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart);

/* Virtual-time horizon: a run still busy after this much simulated time is
 * stopped and its unfinished requests count as failed. */
#define SIM_HORIZON_US STG_SEC(86400)

/* The next event of a run, at the queue's head (not popped): its time and
 * who. false when the queue is empty or the event is past the horizon; then
 * the events left are added to *unfinished (when not NULL). */
static inline bool sim_run_next(sim_evq *q, int64_t *t, uint32_t *who, uint64_t *unfinished)
{
    sim_ev ev;
    if (!sim_evq_peek(q, &ev))
        return false;
    *t = sim_ev_time(ev);
    *who = sim_ev_who(ev);
    if (*t <= SIM_HORIZON_US)
        return true;
    if (unfinished)
        *unfinished += q->n;
    return false;
}

/* The request engine (reqsim.c). Clients start together at t = 0. With
 * per_client > 0 each client makes that many requests one after another;
 * with per_client == 0 they are workers taking jobs from a pool of `jobs`
 * until it is empty. */
typedef struct sim_reqsim_cfg {
    int clients;
    int per_client;
    int jobs;
} sim_reqsim_cfg;

typedef struct sim_reqsim_out {
    sim_log arrivals;     /* arrival instants at the server, sorted */
    sim_log latencies;    /* successful requests: finish - start */
    uint64_t requests;    /* requests started */
    uint64_t calls;       /* attempts that reached the server */
    uint64_t throttled;   /* 429 answers */
    uint64_t errors;      /* 503 answers */
    uint64_t ok;          /* requests that succeeded */
    uint64_t ok_in_deadline; /* ... within the policy's deadline */
    uint64_t failed;      /* requests given up (any reason) */
    uint64_t deferred;    /* ... of which refused by the open breaker */
    uint64_t early;       /* attempts sent before a Retry-After had passed */
    int64_t finish_us;    /* when the last request finished */
    size_t mem_bytes;     /* memory the run held at its end */
} sim_reqsim_out;

/* Run once. On STG_OK, *out owns its logs: free with sim_reqsim_out_free
 * (also safe after an error). */
int sim_reqsim_run(const sim_opts *o, sim_strategy s, int mode, const sim_reqsim_cfg *cfg,
                   uint64_t seed, sim_reqsim_out *out);
void sim_reqsim_out_free(sim_reqsim_out *out);

/* Store chart bins of a sorted arrival log in row (replacing any). */
int sim_row_set_bins(sim_row *row, const sim_log *arrivals, int64_t bin_us);

/* A scenario's figures of one run, added to its row (sim_row_add). */
typedef void (*sim_reqsim_figures)(const sim_opts *o, sim_row *row, const sim_reqsim_out *out);

/* One trial of a request-engine scenario (load, quota, storm): run once
 * with row's strategy, let figures add the scenario's columns, keep what
 * every such trial keeps (the most memory a trial held, and with chart the
 * arrival bins), free the run. STG_OK or the run's error. */
int sim_reqsim_trial(const sim_opts *o, sim_row *row, int mode, const sim_reqsim_cfg *cfg,
                     uint64_t seed, bool chart, sim_reqsim_figures figures);

#endif
