/*
 * Server statistics: counters, per-status counts and every arrival time,
 * from which /__stats and the --stats file derive the per-second histogram
 * and the busiest 10 ms and 1 s sliding windows (exact, not sampled).
 *
 * Invariants: counters are relaxed atomics (each is exact; a snapshot taken
 * under load may be mid-request across counters); arrivals are appended
 * under a mutex, 8 bytes each, in roughly but not strictly increasing order
 * (worker threads race), so the window computation sorts a copy.
 * Once every request has finished:
 *   total = admitted + limited + fail_first + resets + hangs + outage_503
 *           + aborted
 */
#ifndef STAGGER_SERVER_STATS_H
#define STAGGER_SERVER_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <jansson.h>

enum srv_counter {
    SRV_C_TOTAL,      /* client requests that arrived */
    SRV_C_ADMITTED,   /* passed every gate and got a route's answer */
    SRV_C_LIMITED,    /* refused by the global limiter */
    SRV_C_FAIL_FIRST, /* refused by --fail-first */
    SRV_C_RESETS,
    SRV_C_HANGS,
    SRV_C_SLOW,       /* admitted answers whose body was trickled */
    SRV_C_OUTAGE,     /* 503s sent during an outage window */
    SRV_C_ABORTED,    /* the client left before its request was complete */
    SRV_C_DUPS,       /* POST/PATCH repeated without an Idempotency-Key */
    SRV_C_REPLAYS,    /* answers replayed for a known Idempotency-Key */
    SRV_C__COUNT
};

typedef struct srv_stats {
    _Atomic uint64_t c[SRV_C__COUNT];
    _Atomic uint64_t status[600]; /* responses sent, by status code */
    pthread_mutex_t mu;           /* guards arr, n, cap */
    int64_t *arr;                 /* arrival times, µs since start */
    size_t n, cap;
} srv_stats;

int srv_stats_init(srv_stats *st);
void srv_stats_destroy(srv_stats *st);

/* One client request arrived at rel_us (µs since start): total + 1. */
void srv_stats_arrival(srv_stats *st, int64_t rel_us);
void srv_stats_count(srv_stats *st, enum srv_counter c);
void srv_stats_status(srv_stats *st, unsigned status);
uint64_t srv_stats_get(srv_stats *st, enum srv_counter c);

/* Snapshot as a new JSON object (caller owns the reference); NULL when out
 * of memory. uptime_us sizes the per-second histogram. */
json_t *srv_stats_json(srv_stats *st, int64_t uptime_us);

/* The same snapshot in Prometheus text format 0.0.4 (GET /metrics), as a
 * malloc'd string (*len its length; the caller frees), NULL when out of
 * memory. Names follow the client's stagger_* family (src/curl/metrics.c)
 * with the server's own prefix, stagger_server_: counters end in _total,
 * times are in seconds. */
char *srv_stats_prometheus(srv_stats *st, int64_t uptime_us, size_t *len);

#endif
