/*
 * The rate-limited server model (see server.h): libstagger's own GCRA
 * bucket does the limiting, so the simulated limit behaves exactly like
 * `stagger serve` and a client-side stg_bucket.
 */
#include "server.h"

int sim_limit_server_init(sim_limit_server *s, const sim_opts *o)
{
    stg_bucket_config bc = {.rate = o->limit_rps, .burst = o->burst};
    if (stg_bucket_init(&s->bucket, &bc, 0) != STG_OK)
        return STG_EINVAL;
    s->retry_after_us = o->retry_after_us > 0 ? o->retry_after_us : -1;
    s->error_rate = o->error_rate;
    return STG_OK;
}

int sim_limit_server_handle(sim_limit_server *s, int64_t now_us, stg_rng *rng, int64_t *ra_us)
{
    *ra_us = -1;
    if (s->error_rate > 0 && stg_rng_double(rng) < s->error_rate)
        return 503;
    if (stg_bucket_try(&s->bucket, 1, now_us, NULL) == STG_OK)
        return 200;
    *ra_us = s->retry_after_us;
    return 429;
}
