/*
 * Server models.
 *
 *  limit   A rate-limited API (quota, storm, load): admission by a
 *          stg_bucket (GCRA) of rate limit_rps and burst `burst`, judged at
 *          the instant a request arrives; admitted -> 200, refused -> 429
 *          with Retry-After retry_after_us (none when 0). With error_rate
 *          p > 0 a share p of arrivals gets 503 without a hint (a fault,
 *          before the limiter: it takes no token). Infinite concurrency:
 *          every reply leaves server_us after its request arrived.
 *  herd    Stateless: a client's first K attempts get 429, then 200.
 *  occ     One row with a version number (contention): a read returns the
 *          version; a write carrying version v succeeds only if the row is
 *          still at v, and then bumps it.
 */
#ifndef STAGGER_SIM_SERVER_H
#define STAGGER_SIM_SERVER_H

#include "sim.h"

typedef struct sim_limit_server {
    stg_bucket bucket;
    int64_t retry_after_us; /* < 0: none */
    double error_rate;
} sim_limit_server;

/* Returns STG_OK or STG_EINVAL (bad rate or burst). */
int sim_limit_server_init(sim_limit_server *s, const sim_opts *o);

/* The status for a request arriving at now_us; *ra_us is the Retry-After
 * sent with it, or -1. rng is drawn from only when error_rate > 0. */
int sim_limit_server_handle(sim_limit_server *s, int64_t now_us, stg_rng *rng, int64_t *ra_us);

static inline int sim_herd_server_status(int attempt_index, int fail_first)
{
    return attempt_index < fail_first ? 429 : 200;
}

typedef struct sim_occ_row {
    uint64_t version;
} sim_occ_row;

static inline uint64_t sim_occ_read(const sim_occ_row *r)
{
    return r->version;
}

/* true (and the version moves on) when the write's version is current. */
static inline bool sim_occ_write(sim_occ_row *r, uint64_t read_version)
{
    if (r->version != read_version)
        return false;
    r->version++;
    return true;
}

#endif
