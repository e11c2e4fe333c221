/*
 * libstagger-proxy: a local HTTP sidecar that sends every request it gets
 * through the engine (libstagger-curl), so a program in any language gets
 * stagger's pacing, retries and shared limits by pointing its base URL at
 * it. Internal to the project (not installed); `stagger proxy` is its CLI.
 *
 * Shape: one loop thread runs libmicrohttpd (external epoll mode: it
 * reads requests and writes answers) and the stg_engine (which is not
 * thread-safe: every upstream request), so a request never changes
 * thread; a watcher thread notices clients that hang up while their
 * request waits. The threads meet in one mutex (relay.c).
 *
 * Ownership: stg__proxy_new copies nothing it does not say it copies: the
 * route strings and cfg->engine.shared must outlive the proxy.
 * Thread-safety: stg__proxy_drain, stg__proxy_reopen_log and stg__proxy_free
 * are called from one controlling thread (the CLI's main thread).
 */
#ifndef STAGGER_PROXY_H
#define STAGGER_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stagger/curl.h>

typedef struct stg_proxy stg_proxy;

/* A reverse route: a request whose path starts with prefix goes to
 * upstream (an http:// or https:// base URL, with or without a path) with
 * the prefix replaced by the upstream's path. The longest prefix wins;
 * prefix "" or "/" is the default (--upstream). */
typedef struct stg_proxy_route {
    const char *prefix;
    const char *upstream;
} stg_proxy_route;

typedef struct stg_proxy_config {
    const char *listen_addr;  /* numeric IPv4 or IPv6; NULL: 127.0.0.1 */
    unsigned port;            /* 0: a free one (stg__proxy_port) */
    const stg_proxy_route *routes;
    size_t n_routes;
    bool forward;             /* forward-proxy mode: absolute-form http://
                                 targets are sent where they name */
    size_t max_request_body;  /* bodies up to this are buffered and may be
                                 resent; larger ones stream once; 0: 16 MiB */
    size_t max_buffered;      /* request bodies buffered at once, all
                                 requests together; a body that would pass
                                 it streams once instead (never retried);
                                 0: 256 MiB */
    size_t max_body;          /* the largest answer body the proxy holds
                                 whole (one other than 2xx, until stagger
                                 knows it is final): beyond, a 502; 0: 64
                                 MiB. A 2xx body streams, not limited. */
    uint64_t max_spool;       /* ... and all of those held at once, all
                                 requests together; 0: 1 GiB */
    bool idempotency_auto;    /* add an Idempotency-Key to POSTs without one */
    int64_t client_timeout_us; /* an idle client connection is closed after
                                 this (slowloris); 0: 30 s */
    unsigned max_connections; /* 0: from RLIMIT_NOFILE */
    int64_t head_timeout_us;  /* a request head must be whole within this
                                 of the connection's start (slowloris;
                                 conns.c); 0: 10 s */
    const char *log_path;     /* JSON lines (engine events, one "proxy" line
                                 per request), redacted; NULL: none */
    /* The engine: policy, limiter, breaker, budget, shared limiter,
     * setup_easy (TLS options) as fetch and batch build it. on_event and
     * event_data are the proxy's (metrics and log) and are ignored. */
    stg_engine_config engine;
    const char *const *secret_headers; /* extra secret names (not logged) */
} stg_proxy_config;

/* Listen and start the threads. NULL on failure, with a message in err. */
stg_proxy *stg__proxy_new(const stg_proxy_config *cfg, char *err, size_t errsize);

/* The port it listens on. */
unsigned stg__proxy_port(const stg_proxy *p);

/* Reopen the log file (SIGHUP, after logrotate moved it). 0 or -1. */
int stg__proxy_reopen_log(stg_proxy *p);

/* Stop accepting connections, let requests in flight finish for at most
 * drain_us, then cancel what is left (their clients get a closed
 * connection). Returns how many were cancelled. */
int stg__proxy_drain(stg_proxy *p, int64_t drain_us);

/* Stop everything and free; accepts NULL. */
void stg__proxy_free(stg_proxy *p);

#endif
