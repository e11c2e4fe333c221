/*
 * Fault injection decisions: outage windows, connection resets, hangs and
 * slow bodies, by probability (libstagger's stg_rng seeded by --seed) or by
 * schedule (every Nth request).
 *
 * Invariants: srv_faults_draw numbers requests 1, 2, 3... in the order it
 * is called and, for each, draws from the generator for every fault whose
 * probability is > 0, in a fixed order (reset, hang, slow, overload,
 * stream error), whatever the outcome: the same seed and request order give
 * the same faults (and a seed's draws without the last two are what they
 * were before those existed). The
 * generator is used only under the mutex.
 */
#ifndef STAGGER_SERVER_FAULTS_H
#define STAGGER_SERVER_FAULTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <stagger/rng.h>

#include "server/server.h"

typedef struct srv_faults {
    pthread_mutex_t mu; /* guards rng and n */
    stg_rng rng;
    uint64_t n; /* requests drawn for so far */
    double reset_p, hang_p, slow_p;
    double overload_p, stream_error_p; /* the AI personas' (ai.h) */
    int64_t reset_every, hang_every, slow_every;
    const stg_srv_outage *outages; /* borrowed from the server's config */
    size_t n_outages;
} srv_faults;

typedef struct srv_fault_draw {
    bool reset, hang, slow; /* reset wins over hang */
    /* The AI personas' (ai.h), used only on their API routes: answer
     * 529 overloaded_error (Anthropic) / 503 (OpenAI); fail an admitted
     * stream at its first event. */
    bool overload, stream_error;
} srv_fault_draw;

void srv_faults_init(srv_faults *f, const stg_srv_config *cfg);
void srv_faults_destroy(srv_faults *f);

/* Decide the faults of the next request. Thread-safe. */
srv_fault_draw srv_faults_draw(srv_faults *f);

/* Is rel_us (µs since start) inside an outage window? If so, *remaining_us
 * is the time until the last overlapping window ends. Thread-safe. */
bool srv_faults_outage(const srv_faults *f, int64_t rel_us, int64_t *remaining_us);

#endif
