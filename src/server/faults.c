/*
 * Fault injection decisions (see faults.h).
 *
 * Invariants: a fault with probability 0 never draws and a schedule (every
 * N) never draws, so the draw sequence depends only on which probabilities
 * are set and on the seed. Outage windows are read-only after start.
 */
#include "server/faults.h"

void srv_faults_init(srv_faults *f, const stg_srv_config *cfg)
{
    pthread_mutex_init(&f->mu, NULL);
    stg_rng_seed(&f->rng, cfg->seed);
    f->n = 0;
    f->reset_p = cfg->reset_prob;
    f->hang_p = cfg->hang_prob;
    f->slow_p = cfg->slow_prob;
    f->reset_every = cfg->reset_every;
    f->hang_every = cfg->hang_every;
    f->slow_every = cfg->slow_every;
    f->overload_p = cfg->overload_prob;
    f->stream_error_p = cfg->stream_error_prob;
    f->outages = cfg->outages;
    f->n_outages = cfg->n_outages;
}

void srv_faults_destroy(srv_faults *f)
{
    pthread_mutex_destroy(&f->mu);
}

static bool pick(stg_rng *rng, uint64_t n, double p, int64_t every)
{
    bool hit = every > 0 && n % (uint64_t)every == 0;
    if (p > 0 && stg_rng_double(rng) < p)
        hit = true;
    return hit;
}

srv_fault_draw srv_faults_draw(srv_faults *f)
{
    srv_fault_draw d = {false, false, false, false, false};
    if (f->reset_p <= 0 && f->hang_p <= 0 && f->slow_p <= 0 && f->reset_every <= 0 &&
        f->hang_every <= 0 && f->slow_every <= 0 && f->overload_p <= 0 && f->stream_error_p <= 0)
        return d;
    pthread_mutex_lock(&f->mu);
    uint64_t n = ++f->n;
    d.reset = pick(&f->rng, n, f->reset_p, f->reset_every);
    d.hang = pick(&f->rng, n, f->hang_p, f->hang_every);
    d.slow = pick(&f->rng, n, f->slow_p, f->slow_every);
    d.overload = pick(&f->rng, n, f->overload_p, 0);
    d.stream_error = pick(&f->rng, n, f->stream_error_p, 0);
    pthread_mutex_unlock(&f->mu);
    if (d.reset)
        d.hang = d.slow = false;
    else if (d.hang)
        d.slow = false;
    return d;
}

bool srv_faults_outage(const srv_faults *f, int64_t rel_us, int64_t *remaining_us)
{
    bool in = false;
    int64_t end = 0;
    for (size_t i = 0; i < f->n_outages; i++) {
        const stg_srv_outage *o = &f->outages[i];
        if (rel_us >= o->start_us && rel_us - o->start_us < o->duration_us) {
            in = true;
            if (o->start_us + o->duration_us > end)
                end = o->start_us + o->duration_us;
        }
    }
    /* Back-to-back or overlapping windows extend the outage. */
    for (bool grew = in; grew;) {
        grew = false;
        for (size_t i = 0; i < f->n_outages; i++) {
            const stg_srv_outage *o = &f->outages[i];
            if (o->start_us <= end && o->start_us + o->duration_us > end) {
                end = o->start_us + o->duration_us;
                grew = true;
            }
        }
    }
    if (in)
        *remaining_us = end - rel_us;
    return in;
}
