/*
 * stagger serve: a rate-limited HTTP/1.1 test server (libmicrohttpd) for
 * exercising retry clients on loopback. This header is the part's API for
 * the CLI (src/cli/serve.c): a configuration struct and start/stop.
 *
 * Invariants:
 * - The server never stalls a reply on purpose unless a fault says so:
 *   TCP_NODELAY on every accepted socket, epoll worker threads, keep-alive.
 * - Over any interval t, requests admitted by the global limiter number at
 *   most burst + rate * t (libstagger's GCRA bucket, fed each request's
 *   time: CLOCK_MONOTONIC read once, when the request has been read).
 * - Every client request (anything but /__stats) is counted once in the
 *   stats and logged once, with its outcome: a status, "reset", "hang" or
 *   "aborted" (the client left before the request was complete).
 * - Faults are deterministic for a given --seed and request order.
 */
#ifndef STAGGER_SERVER_H
#define STAGGER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How Retry-After is written. */
typedef enum stg_srv_retry_after {
    STG_SRV_RA_SECONDS = 0, /* delta-seconds, ceil of the wait, at least 1 */
    STG_SRV_RA_DATE = 1,    /* IMF-fixdate of now + wait, rounded up */
    STG_SRV_RA_NONE = 2     /* no Retry-After at all */
} stg_srv_retry_after;

typedef enum stg_srv_log_format {
    STG_SRV_LOG_JSONL = 0,
    STG_SRV_LOG_CSV = 1
} stg_srv_log_format;

/* An outage window, measured from server start. */
typedef struct stg_srv_outage {
    int64_t start_us;
    int64_t duration_us;
} stg_srv_outage;

#define STG_SRV_MAX_OUTAGES 32

/* A --dialect persona's quota, resized by --quota NAME=LIMIT/WINDOW. */
typedef struct stg_srv_quota {
    char name[24];
    int64_t limit; /* units per window (bucket: capacity); 0 turns it off */
    int64_t window_us;
} stg_srv_quota;

#define STG_SRV_MAX_QUOTAS 8

typedef struct stg_srv_config {
    const char *bind;     /* numeric IPv4 or IPv6 address */
    unsigned port;        /* 0: any free port */
    unsigned threads;     /* epoll worker threads, >= 1 */
    double rate;          /* global limit in requests/s; 0: no limit */
    int64_t burst;        /* bucket capacity; 0: max(1, ceil(rate)) */
    unsigned limit_status; /* 429 or 503 */
    stg_srv_retry_after retry_after;
    bool ratelimit_headers; /* X-RateLimit-*, RateLimit, RateLimit-Policy */
    int64_t fail_first;     /* 429 for the first K requests of each client */
    int64_t fail_retry_after_s; /* Retry-After of those 429s */
    stg_srv_outage outages[STG_SRV_MAX_OUTAGES];
    size_t n_outages;
    const char *dialect;    /* persona (src/server/dialect.h); NULL: none */
    stg_srv_quota quotas[STG_SRV_MAX_QUOTAS];
    size_t n_quotas;
    int64_t token_cost; /* tokens per request unless X-Token-Cost says */
    bool client_by_addr; /* persona/early-retry client: the peer address only */
    double reset_prob, hang_prob, slow_prob; /* probabilities in [0, 1] */
    int64_t reset_every, hang_every, slow_every; /* every Nth request; 0: off */
    int64_t slow_body_us; /* how long a slow body takes to trickle out */
    uint64_t seed;
    const char *log_path; /* NULL: no request log */
    stg_srv_log_format log_format;
    const char *stats_path; /* NULL: no stats file at exit */
    size_t max_body;        /* request bodies above this get 413 */
    /* HTTPS (tls.h): PEM certificate and key files, both or neither;
     * tls_client_ca: mutual TLS, a request whose connection presents no
     * client certificate chaining to this CA gets 403. NULL: plain HTTP. */
    const char *tls_cert, *tls_key, *tls_client_ca;
    int64_t latency_us;     /* every answer waits this long (latency.c); 0: none */
    /* capacity.h: N admitted requests at once, each service_time_us, the
     * rest queued; 0: off. */
    int capacity;
    int64_t service_time_us;
    /* The AI personas (--dialect openai|anthropic, ai.h): how a request's
     * tokens are counted at arrival, what an answer produces, and the
     * faults these APIs show. */
    bool ai_count_max;         /* OpenAI: max(prompt, max_tokens), not the sum */
    int64_t ai_default_max_tokens; /* a request without max_tokens (OpenAI) */
    int64_t ai_output_tokens;  /* output tokens of an answer, at most max_tokens */
    double overload_prob;      /* 529 overloaded_error / 503 overloaded */
    double stream_error_prob;  /* an admitted stream fails at its first event */
    int64_t insufficient_quota_after; /* billing stop after N answered; 0: off */
} stg_srv_config;

typedef struct stg_srv stg_srv;

/* Fill cfg with the defaults: 127.0.0.1, port 0, threads = CPUs (max 16),
 * no limit, 429, Retry-After in seconds, fail-first off with Retry-After 1,
 * no faults, slow bodies over 1 s, seed 1, JSONL log off, 1 MiB bodies;
 * AI personas: the sum rule, 1024 tokens without max_tokens, 16 output
 * tokens, no overloads, stream errors or billing stop. */
void stg__srv_config_init(stg_srv_config *cfg);

/* Start the server: binds, starts the worker threads and returns. The
 * config is copied (strings too; the TLS files are read here). Returns NULL
 * with a message in err on failure (bad address, port in use, unwritable
 * log file, unreadable TLS file, no TLS in libmicrohttpd). */
stg_srv *stg__srv_start(const stg_srv_config *cfg, char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
unsigned stg__srv_port(const stg_srv *s);

/* Stop: resume every parked (hung or trickling) connection, stop the
 * daemon, flush and close the request log, write the stats file. Returns 0,
 * or -1 when the stats file could not be written. Frees s; NULL is a no-op. */
int stg__srv_stop(stg_srv *s);

#endif
