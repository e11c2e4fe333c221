/*
 * Network delay model: every message leg (client to server, server to
 * client) takes |Normal(mean, sd)| microseconds. sd = 0 gives a constant
 * delay and draws nothing. The absolute value (not a clamp at 0) is the AWS
 * backoff simulator's model; with the defaults (mean >= 5 sd) it never
 * matters.
 *
 * The deviates come from Marsaglia and Tsang's ziggurat method (128
 * layers) on the run's own stg_rng: one 64-bit draw, a table look-up and a
 * multiply for 98.8% of legs, no logarithm. The tables are built by
 * sim_net_init. The same seed replays the same delays.
 */
#ifndef STAGGER_SIM_NET_H
#define STAGGER_SIM_NET_H

#include <stdbool.h>

#include <stagger/rng.h>

typedef struct sim_delay {
    int64_t mean_us;
    int64_t sd_us;
} sim_delay;

#define SIM_ZIG_LAYERS 128

/* The network of one run: its delay model, its random stream and the
 * ziggurat's tables. */
typedef struct sim_net {
    sim_delay d;
    stg_rng rng;
    uint32_t kn[SIM_ZIG_LAYERS];
    double wn[SIM_ZIG_LAYERS];
    double fn[SIM_ZIG_LAYERS];
} sim_net;

void sim_net_init(sim_net *n, const sim_delay *d, uint64_t seed);

/* The slow path of the ziggurat (the base strip and the wedges). */
double sim_net__normal_tail(sim_net *n, int32_t hz, uint32_t iz);

/* A standard normal deviate from the net's stream. */
static inline double sim_net_normal(sim_net *n)
{
    uint64_t r = stg_rng_next(&n->rng);
    uint32_t iz = (uint32_t)r & (SIM_ZIG_LAYERS - 1);
    int32_t hz = (int32_t)(uint32_t)(r >> 32);
    int64_t a = hz < 0 ? -(int64_t)hz : hz;
    if (a < (int64_t)n->kn[iz])
        return hz * n->wn[iz];
    return sim_net__normal_tail(n, hz, iz);
}

/* One leg's delay, >= 0. */
static inline int64_t sim_net_leg(sim_net *n)
{
    if (n->d.sd_us <= 0)
        return n->d.mean_us > 0 ? n->d.mean_us : 0;
    double x = (double)n->d.mean_us + (double)n->d.sd_us * sim_net_normal(n);
    if (x < 0)
        x = -x;
    return (int64_t)(x + 0.5);
}

#endif
