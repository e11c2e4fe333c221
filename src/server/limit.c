/*
 * The global rate limit and its header fields (see limit.h).
 *
 * Invariants: the bucket is the only limiter state; rate, burst, window and
 * quota are fixed at init and read-only afterwards. Every header field
 * states the one policy, quota per window (q = R * W), never the burst as
 * a limit: a client that paces by Limit / Reset must get the rate.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "server/limit.h"

int srv_limit_init(srv_limit *l, double rate, int64_t burst, int64_t now_us)
{
    l->on = rate > 0;
    l->rate = rate;
    if (!l->on)
        return 0;
    if (burst == 0) {
        double c = ceil(rate);
        burst = c < 1 ? 1 : (int64_t)c;
    }
    l->burst = burst;
    stg_bucket_config cfg = {.rate = rate, .burst = burst};
    if (stg_bucket_init(&l->bucket, &cfg, now_us) != STG_OK)
        return -1;
    l->window_s = 1;
    l->quota = llround(rate) < 1 ? 1 : llround(rate);
    for (int64_t w = 1; w <= 60; w++) {
        double q = rate * (double)w;
        if (fabs(q - round(q)) <= 1e-9 * (q > 1 ? q : 1) && round(q) >= 1) {
            l->window_s = w;
            l->quota = llround(q);
            break;
        }
    }
    return 0;
}

bool srv_limit_take(srv_limit *l, int64_t now_us, int64_t *wait_us)
{
    if (!l->on)
        return true;
    int64_t wait = 0;
    int rc = stg_bucket_try(&l->bucket, 1, now_us, &wait);
    if (rc == STG_OK)
        return true;
    *wait_us = wait > 0 ? wait : 0;
    return false;
}

void srv_limit_add_headers(srv_limit *l, struct MHD_Response *r, int64_t now_us, bool refused,
                           bool persona)
{
    if (!l->on)
        return;
    int64_t remaining = refused ? 0 : stg_bucket_available(&l->bucket, now_us);
    if (remaining < 0)
        remaining = 0;
    if (remaining > l->burst)
        remaining = l->burst;
    double to_full = (double)(l->burst - remaining) / l->rate;
    int64_t reset = (int64_t)ceil(to_full - 1e-9);
    if (reset < 0)
        reset = 0;
    char v[128];
    if (!persona) {
        snprintf(v, sizeof v, "%" PRId64, l->quota);
        MHD_add_response_header(r, "X-RateLimit-Limit", v);
        snprintf(v, sizeof v, "%" PRId64, remaining);
        MHD_add_response_header(r, "X-RateLimit-Remaining", v);
        snprintf(v, sizeof v, "%" PRId64, reset);
        MHD_add_response_header(r, "X-RateLimit-Reset", v);
    }
    snprintf(v, sizeof v, "\"default\";r=%" PRId64 ";t=%" PRId64, remaining, reset);
    MHD_add_response_header(r, "RateLimit", v);
    snprintf(v, sizeof v, "\"default\";q=%" PRId64 ";w=%" PRId64, l->quota, l->window_s);
    MHD_add_response_header(r, "RateLimit-Policy", v);
}
