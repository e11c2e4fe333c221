/*
 * The global rate limit (--rate R --burst B): libstagger's lock-free GCRA
 * bucket, plus the rate-limit header fields describing it
 * (--ratelimit-headers).
 *
 * Header semantics (window W: the smallest whole number of seconds, 1..60,
 * for which R * W is whole, so W = 1 s for any whole rate; 1 s otherwise):
 *   X-RateLimit-Limit: B (the bucket's capacity)
 *   X-RateLimit-Remaining: tokens left after this request (0 when refused)
 *   X-RateLimit-Reset: seconds until the bucket is full again, rounded up
 *   RateLimit: "default";r=<Remaining>;t=<Reset>
 *   RateLimit-Policy: "default";q=<R * W>;w=<W>
 *
 * Invariants: over any interval t the limiter admits at most B + R * t
 * requests (the bucket's guarantee, with now = each request's arrival
 * time); the limiter never blocks or sleeps.
 */
#ifndef STAGGER_SERVER_LIMIT_H
#define STAGGER_SERVER_LIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>
#include <stagger/bucket.h>

typedef struct srv_limit {
    bool on; /* false: no --rate, everything admitted */
    stg_bucket bucket;
    double rate;
    int64_t burst;
    int64_t window_s, quota; /* RateLimit-Policy w and q */
} srv_limit;

/* rate 0 turns the limit off. Returns 0, or -1 for a bad rate/burst. */
int srv_limit_init(srv_limit *l, double rate, int64_t burst, int64_t now_us);

/* Take one token at now_us. Returns true when admitted; otherwise false
 * with *wait_us the time until a token is free. Thread-safe. */
bool srv_limit_take(srv_limit *l, int64_t now_us, int64_t *wait_us);

/* Add the header fields above (no-op when the limit is off): every field
 * describes the one policy, quota q per window w (X-RateLimit-Limit is q,
 * as RateLimit-Policy says: a client that reads Limit per Reset must find
 * the rate, not the burst: issue #37). persona: a --dialect persona
 * speaks its own fields (some named X-RateLimit-* too, for its own
 * quotas), so only the IETF pair, named "default", describes this limit. */
void srv_limit_add_headers(srv_limit *l, struct MHD_Response *r, int64_t now_us, bool refused,
                           bool persona);

#endif
