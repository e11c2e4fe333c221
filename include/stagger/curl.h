/*
 * libstagger-curl: libstagger's policies applied to real HTTP with libcurl.
 *
 * Two ways in:
 *  - stg_curl_perform(): a blocking call that performs one prepared CURL
 *    easy handle under a policy (attempts, waits a cancel token interrupts
 *    at once, per-attempt timeouts, the overall deadline).
 *  - stg_engine: an event-driven engine on curl_multi. One thread drives
 *    thousands of requests; backoff and limiter waits are timers, never
 *    sleeping threads; per-host token bucket or adaptive rate, retry budget
 *    and circuit breaker.
 *
 * Secrets: nothing this library hands to an event callback, a log line or a
 * result's final_url carries URL userinfo, secret-named query values, or the values of
 * Authorization, Proxy-Authorization, Cookie, Set-Cookie or API-key headers
 * (stg_redact_*). Response bodies and headers in results are the caller's
 * own data and are not redacted.
 *
 * Time: the engine reads its clock (stg_env) once per loop pass; all times
 * are int64 microseconds as in the core.
 */
#ifndef STAGGER_CURL_H
#define STAGGER_CURL_H

#include <curl/curl.h>

#include "stagger.h"
#include "bucket.h"
#include "budget.h"
#include "breaker.h"
#include "adaptive.h"
#include "concurrency.h"
#include "redact.h" /* stg_redact_*: the core's, used on every event and log line */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- environment: clock and randomness, injectable for tests -------- */

typedef struct stg_env {
    void *ctx;
    int64_t (*mono_us)(void *ctx); /* monotonic clock; NULL: CLOCK_MONOTONIC */
    int64_t (*wall_us)(void *ctx); /* Unix time in us; NULL: CLOCK_REALTIME */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_env;

/* ---- cancellation ---------------------------------------------------- */

/* A cancel token. Firing it wakes a blocking call's wait at once (it is a
 * self-pipe/eventfd that the wait polls). Opaque; thread-safe. */
typedef struct stg_cancel stg_cancel;

/* Returns NULL when out of memory or file descriptors. */
STG_API stg_cancel *stg_cancel_new(void);
/* Accepts NULL. */
STG_API void stg_cancel_free(stg_cancel *c);
/* Async-signal-safe: may be called from a SIGINT handler. */
STG_API void stg_cancel_fire(stg_cancel *c);
STG_API bool stg_cancel_fired(const stg_cancel *c);
/* The token's file descriptor: it becomes readable (POLLIN) when the token
 * fires and stays readable; never read from or close it. For waiting on a
 * token in your own poll loop. -1 for NULL. */
STG_API int stg_cancel_fd(const stg_cancel *c);

/* ---- events ------------------------------------------------------------ */

typedef enum stg_event_type {
    STG_EVENT_ATTEMPT_START = 1,
    STG_EVENT_ATTEMPT_END = 2,   /* status / error / duration / hints known */
    STG_EVENT_WAIT = 3,          /* a retry wait was scheduled (wait_us, reason) */
    STG_EVENT_GIVE_UP = 4,       /* final: not a success (reason) */
    STG_EVENT_SUCCESS = 5,       /* final: success */
    STG_EVENT_BREAKER = 6,       /* breaker of `host` changed from -> to */
    STG_EVENT_LIMITER_WAIT = 7,  /* the rate limiter delays an attempt by wait_us */
    STG_EVENT_WAITED = 8         /* a wait ended: wait_us is how long the
                                    request waited, measured on the engine's
                                    (or the call's) clock; more->waited_for
                                    says what for */
} stg_event_type;

/* What stg_event.more points at: fields added once the event's reserved
 * words ran short. Borrowed for the callback, like the event's strings;
 * NULL in events that have none of them (stg_curl_perform's but WAITED). */
typedef struct stg_event_more {
    /* WAITED: what the request waited for, one of "slot" (a place under
     * the engine's concurrency), "limiter" (its own rate limit's
     * reservation), "quota" (a server's announced quota), "pace" (a
     * learned rate's turn), "concurrency" (a learned concurrency's slot),
     * "breaker", "backoff" (before a retry), "budget" (a spent retry
     * budget). Static strings. NULL otherwise. The WAITED events of a
     * request and its attempts' time on the wire add up to its life in
     * the engine, from submit to its final event. */
    union { const char *waited_for; uint64_t stg__waited_word; };
    /* Every engine event of a request whose host learns its rate
     * (stg_engine_config.adaptive): that rate when the event was made,
     * in requests per second; 0 otherwise. */
    double learned_rate;
    /* Every event of an engine's request: its class and tenant, with
     * their figures as of this event (stg_class_stats; valid during the
     * callback only); NULL for BREAKER. ATTEMPT_START's wait_us is then
     * this attempt's wait for admission: from the request being ready
     * (submitted, or its retry wait over) to its start, whatever limit it
     * waited for. */
    union { const struct stg_class_stats *cls; uint64_t stg__cls_word; };
    uint64_t stg__reserved[5]; /* room to grow (docs/ABI.md); zero */
} stg_event_more;

/* What an event says. Strings are borrowed for the duration of the
 * callback and are already redacted. Fields not relevant to the type are 0,
 * NULL or STG_UNKNOWN. */
typedef struct stg_event {
    stg_event_type type;
    uint64_t request_id;
    int64_t now_us;
    const char *method;
    const char *url;        /* redacted */
    const char *final_url;  /* redacted, after redirects (ATTEMPT_END and final events) */
    const char *host;       /* the limiter/breaker key */
    int attempt;            /* 1-based */
    int status;             /* HTTP status, 0 when none */
    stg_net_error error;
    int curl_code;          /* CURLcode of the attempt */
    int64_t duration_us;    /* ATTEMPT_END: the attempt; final events: the request */
    int64_t wait_us;        /* WAIT, LIMITER_WAIT */
    int64_t retry_after_us; /* parsed server hint, or STG_UNKNOWN */
    stg_reason reason;      /* WAIT, GIVE_UP, SUCCESS */
    stg_breaker_state breaker_from, breaker_to; /* BREAKER */
    int64_t wall_us;        /* Unix time in us (stg_env's wall clock), read with now_us */
    /* ATTEMPT_END: the connection the attempt used. connects: connections
     * it opened (CURLINFO_NUM_CONNECTS; 0 when it went on a kept one, or
     * got none); conn_reused: it was sent on a connection an earlier
     * transfer opened (one handshake served several requests);
     * tls_handshake_us: > 0 when the attempt made a TLS handshake, its
     * duration (CURLINFO_APPCONNECT_TIME_T - CONNECT_TIME_T, at least 1),
     * else 0 (plain HTTP, or a kept connection). */
    union { int connects; uint64_t stg__connects_word; };
    union { bool conn_reused; uint64_t stg__conn_reused_word; };
    int64_t tls_handshake_us;
    /* Every event of a request whose host learns its concurrency
     * (stg_engine_config.learn): the host's limit when the event was
     * made; 0 when the concurrency is fixed. */
    union { int concurrency_limit; uint64_t stg__conc_word; };
    /* ATTEMPT_END: the server never processed the request (HTTP/2
     * REFUSED_STREAM, or a stream above a GOAWAY's last-stream-id; RFC 9113
     * §8.7). The engine sends it again at once, outside max_attempts and
     * the retry budget, at most 3 times a request. */
    union { bool never_processed; uint64_t stg__never_word; };
    /* ATTEMPT_END: the answer was a 2xx event stream held for its first
     * event (STG_STREAM_SSE_HOLD), and that event was an error of this
     * type ("overloaded_error"; "" when of no known type): status is the
     * one it stands for. NULL otherwise. */
    union { const char *stream_error; uint64_t stg__stream_error_word; };
    /* The engine's events and WAITED: more fields (stg_event_more); NULL
     * otherwise. */
    union { const stg_event_more *more; uint64_t stg__more_word; };
    uint64_t stg__reserved[1]; /* room to grow (docs/ABI.md); leave zero */
} stg_event;

/* An event sink. It runs on the thread doing the work (the engine's, or
 * the caller of stg_curl_perform) and should be quick; from an engine
 * event it must not call stg_engine_* functions other than
 * stg_engine_stats_get and stg_engine_stop (the done callback may). */
typedef void (*stg_event_fn)(const stg_event *ev, void *data);

/* "attempt_start", "attempt_end", "wait", "give_up", "success", "breaker",
 * "limiter_wait", "waited"; "unknown" otherwise. Static string. */
STG_API const char *stg_event_type_name(stg_event_type t);

/* ---- body sink: response bodies streamed to their destination -------- */

/* What a body sink is told. */
typedef enum stg_body_op {
    STG_BODY_DATA = 1,    /* buf, len: the next bytes of a 2xx body, in order */
    STG_BODY_RESTART = 2, /* the bytes delivered so far are not the body (an
                             attempt that delivered some was followed by
                             another): discard them, e.g. truncate the file */
    STG_BODY_END = 3      /* the request ended: no call follows (buf NULL,
                             len 0); the result says whether the bytes since
                             the last RESTART are the whole body (action
                             SUCCESS) or not */
} stg_body_op;

/* Only with STG_STREAM_HEAD (stg_request.stream): buf, len: the raw header
 * block (status line first) of the 2xx response whose first body byte
 * comes next; once per response. Outside the enum, so a switch written
 * for the three ops above still covers every op it can get. */
#define STG_BODY_HEAD ((stg_body_op)4)

/* Only with STG_STREAM_OTHER: buf, len: the next bytes of a body that is
 * not 2xx (a 429 or 503 before a retry, a redirect, a final 404), which
 * the library also keeps in stg_result.body up to its 64 KiB. Such bytes
 * do not make a request final (a retry may follow: RESTART comes first,
 * as for any attempt's bytes); the last attempt's are the result's body,
 * whole. No HEAD before them: the result has their header block. */
#define STG_BODY_OTHER ((stg_body_op)5)

/* What a sink may return from DATA when its request has STG_STREAM_PAUSE:
 * "I did not take these bytes; pause the transfer". The same bytes come
 * again after stg_engine_resume(). Without that flag it is a failure like
 * any other nonzero value. */
#define STG_BODY_PAUSE 0x50415553

/* stg_request.stream flags (zero: none, the behaviour before they were
 * added). */
#define STG_STREAM_HEAD 1u  /* the sink gets STG_BODY_HEAD before a 2xx body */
#define STG_STREAM_FINAL 2u /* once the sink got a HEAD or a byte, the request
                               is never retried: a failure after that gives
                               up (ERROR_NOT_RETRYABLE) */
#define STG_STREAM_PAUSE 4u /* the sink may return STG_BODY_PAUSE */
#define STG_STREAM_OTHER 8u /* the sink gets non-2xx bodies too (STG_BODY_OTHER) */
/* A 2xx text/event-stream body is held until its first event (at most 64
 * KiB, and 10 s from its first byte, checked as bytes arrive): an event
 * that is an error (Anthropic's `event: error`, OpenAI's `data: {"error":
 * ...}`) stops the transfer, and the attempt ends as the status the same
 * error has outside a stream (overloaded_error 529, rate_limit_error 429,
 * api_error 500, ...; 502 for an unknown kind), with the event's data as
 * its body and the head's fields but Content-Type application/json: it is
 * retried, or given back, as that answer would be. Any other first event
 * (or the bound) passes the held bytes on, and the head with them: the sink
 * gets nothing of a held stream until then. */
#define STG_STREAM_SSE_HOLD 16u

/* A request body read as it is sent (stg_request.read_body): copy up to
 * size bytes into buf and return how many; 0 is the end of the body;
 * STG_READ_PAUSE pauses the upload until stg_engine_resume(); STG_READ_ABORT
 * fails the attempt. Runs on the engine's thread, like a body sink. A
 * request with such a body is sent once and never retried (it cannot be
 * rewound). */
typedef size_t (*stg_read_fn)(char *buf, size_t size, void *data);
#define STG_READ_PAUSE ((size_t)0x10000001)
#define STG_READ_ABORT ((size_t)0x10000000)

/* A body sink (stg_call_config.body_sink, stg_request.body_sink): receives
 * response bodies as they arrive, so the library never holds a whole body.
 * Return 0 to go on; nonzero says the destination failed (disk full, ...):
 * the transfer is stopped and the request gives up (action GIVE_UP,
 * reason ERROR_NOT_RETRYABLE, error OTHER, status the server's,
 * body_sink_failed true, error_text saying so), never a success. A
 * nonzero return from END turns a success into that same failure (a
 * failed flush or close is not a complete body) and is otherwise ignored.
 *
 * Only 2xx bodies reach the sink. Any other answer's body (a 429 or 503 a
 * retry follows, a redirect, a final 404) is not the destination's: its
 * first 64 KiB stay in memory, in stg_result.body, for hints and logs (the
 * rest is read and dropped). So after a 2xx the result's body is empty.
 * max_body still counts every body byte of an attempt: the sink never gets
 * more than max_body bytes, and a longer body ends the request exactly as
 * without a sink (body_truncated, ERROR_NOT_RETRYABLE).
 *
 * Contract (libuv's): the sink runs on the thread doing the work (inside
 * stg_engine_run/drain/cancel/free, or stg_curl_perform), from libcurl's
 * write callback; it must be quick and, in an engine, must not call
 * stg_engine_* functions other than stg_engine_stats_get and
 * stg_engine_stop. DATA and RESTART come in attempt order; END is called
 * exactly once per request (per stg_curl_perform that returns STG_OK, or
 * STG_ENOMEM once its attempts began; per engine request whose done
 * callback runs), immediately before the done callback or the return, and
 * the sink is never called after that. A call refused before its first
 * attempt (STG_EINVAL, STG_ENOMEM) and a failed submit never call it. */
typedef int (*stg_body_fn)(stg_body_op op, const void *buf, size_t len, void *data);

/* ---- results ------------------------------------------------------------ */

/* What a finished request produced. In the engine's completion callback it
 * is borrowed (valid during the callback); from stg_curl_perform() it is the
 * caller's, to release with stg_result_free(). body and headers are those
 * of the LAST attempt only (a discarded attempt's body never leaks in); they
 * are NUL-terminated for convenience. With a body sink, a 2xx body went to
 * the sink and body is "" (body_len 0); another status's body is here, its
 * first 64 KiB (stg_body_fn). */
typedef struct stg_result {
    stg_action action;     /* SUCCESS or GIVE_UP */
    stg_reason reason;     /* why it stopped */
    int status;            /* last HTTP status, 0 when none */
    stg_net_error error;   /* last transport error class */
    int curl_code;         /* last CURLcode */
    char error_text[256];  /* libcurl's message for the last error, redacted; "" if none */
    int attempts;
    int64_t elapsed_us;    /* first admission (the engine) or first
                              attempt (stg_perform) to the end */
    int64_t server_wait_us; /* last parsed server hint, or STG_UNKNOWN */
    stg_hints hints;       /* of the last response */
    char *body;
    size_t body_len;
    char *headers;         /* the last response's raw header block */
    size_t headers_len;
    char *final_url;       /* redacted effective URL */
    /* The body was longer than max_body: the transfer was stopped and the
     * request failed (action GIVE_UP, reason ERROR_NOT_RETRYABLE, error
     * OTHER, status the server's, error_text saying so, body the first
     * max_body bytes; with a body sink, the sink got them). A body over
     * the limit is never a success. */
    bool body_truncated;
    /* The body sink returned nonzero: the request gave up (stg_body_fn).
     * (In a union: a bool takes a whole word, docs/ABI.md.) */
    union { bool body_sink_failed; uint64_t stg__body_sink_failed_word; };
    uint64_t stg__reserved[7]; /* room to grow (docs/ABI.md); leave zero */
} stg_result;

/* Free the buffers of a result filled by stg_curl_perform(); accepts NULL
 * and zeroed results. */
STG_API void stg_result_free(stg_result *r);

/* ---- a limiter shared with other processes ----------------------------- */

/* A rate limit (and optionally a circuit breaker) shared with other
 * processes or machines, such as stagger's Redis backend (stagger/redis.h;
 * libstagger-curl itself does not depend on it). When an engine or a
 * blocking call is given one, it replaces the local token bucket or
 * adaptive rate, and, if breaker_allow is set, the local breaker. The
 * functions are called on the caller's thread and may block for a network
 * round trip. The struct and ctx must outlive the engine or call. */
typedef struct stg_shared_limiter {
    void *ctx;
    /* Reserve one send for key within timeout_us. STG_OK: *wait_us is the
     * wait before sending (0: now), and *ticket (never NULL; 0 when
     * untouched) any number the limiter wants back in on_response.
     * STG_ETIMEDOUT: not within the timeout, nothing reserved. Any other
     * code: the limiter cannot answer; the request gives up with
     * STG_REASON_LIMITER_UNAVAILABLE (kept for a later run by stagger
     * batch). Required. */
    int (*acquire)(void *ctx, const char *key, int64_t timeout_us, int64_t *wait_us,
                   int64_t *ticket);
    /* Optional shared breaker. allow: STG_OK to go (in half-open this
     * claims a probe slot), STG_EBREAKER with *retry_in_us while open; any
     * other code lets the attempt go (the limiter already said whether the
     * backend works). record: the verdict of an attempt that allow let go
     * (stg_breaker_classify with the engine's breaker_config). */
    int (*breaker_allow)(void *ctx, const char *key, int64_t *retry_in_us);
    void (*breaker_record)(void *ctx, const char *key, stg_breaker_verdict verdict);
    /* Optional, for a limiter that learns (an adaptive rate): the answer to
     * every send acquire admitted, with its ticket. throttled: the server
     * said "too fast" (a 429, with or without Retry-After; a 529);
     * hold_us > 0: no send for that long, because the server said its
     * quota is spent (X-RateLimit-Remaining: 0 and a reset) or, a 503 with
     * Retry-After, when it is back: that 503 is a hold, not a throttle
     * (as stg_adaptive_on_hold), so it comes with throttled false. Else 0.
     * Transport errors are not reported. */
    void (*on_response)(void *ctx, const char *key, int64_t ticket, bool throttled,
                        int64_t hold_us);
    /* How far ahead acquire may reserve. 0: up to the request's deadline
     * (a fixed rate). > 0 (a learned rate, which a cut must slow at once):
     * the engine asks with at most this timeout, and a request further out
     * keeps its slot and asks again shortly before its turn. The blocking
     * stg_curl_perform ignores it. */
    int64_t horizon_us;
    /* Optional: as acquire, for a request of class cls (never NULL; tenant
     * may be NULL). When set the engine calls it instead of acquire.
     * STG_ETIMEDOUT with *wait_us shorter than the timeout is a refusal by
     * class (no token ahead for this class now): the engine asks again
     * after *wait_us, and paces the key from then on as it does once it
     * sees classes itself. */
    int (*acquire_class)(void *ctx, const char *key, const stg_class *cls, int64_t timeout_us,
                         int64_t *wait_us, int64_t *ticket);
    uint64_t stg__reserved[7]; /* room to grow (docs/ABI.md); leave zero */
} stg_shared_limiter;

/* The servers' quotas held together with other processes (stagger's Redis
 * ledger, stagger/redis/quota.h; libstagger-curl does not depend on it),
 * in front of the engine's own stg_quota (stg_engine_config.quotas): a
 * send the local quotas admitted goes only when acquire admits it too, and
 * its answer settles both. Called on the engine's thread; may block for a
 * round trip. The struct and ctx must outlive the engine. */
typedef struct stg_shared_quota {
    void *ctx;
    /* Reserve costs[0..n) (a unit not listed costs 1) for key and route
     * ("METHOD /path", never the query; the quotas the server named for
     * it are the ones it spends); demand: the key's requests waiting for
     * quota, this one included. STG_OK:
     * *ticket (opaque, may be NULL) is handed back once to settle.
     * STG_EAGAIN: *wait_us before asking again, nothing reserved.
     * STG_ETOOBIG: never admissible. STG_EUNAVAIL: the ledger cannot
     * answer (the request gives up with LIMITER_UNAVAILABLE). */
    int (*acquire)(void *ctx, const char *key, const char *route, const stg_quota_cost *costs,
                   size_t n, int64_t demand, void **ticket, int64_t *wait_us);
    /* How the send ended: 0 answered (qs: its quotas; used[0..n_used):
     * what its body says was used), 1 sent without an answer, 2 never
     * reached the server; demand: the key's requests still wanting quota
     * after this one. Called exactly once per ticket acquire gave. */
    void (*settle)(void *ctx, void *ticket, int how, const stg_quota_set *qs,
                   const stg_quota_cost *used, size_t n_used, int64_t demand);
    /* Optional: called from the engine's passes about once a second
     * (a pass waits at most that long while sends are in flight), so the
     * ledger can renew what long sends hold while nothing else happens. */
    void (*tick)(void *ctx);
    /* Optional: as acquire, for a request of class cls (never NULL; the
     * ledger orders the processes by it: stg_redis_quota_acquire_class).
     * When set the engine calls it instead of acquire. */
    int (*acquire_class)(void *ctx, const char *key, const char *route, const stg_class *cls,
                         const stg_quota_cost *costs, size_t n, int64_t demand, void **ticket,
                         int64_t *wait_us);
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_shared_quota;

/* ---- TLS ---------------------------------------------------------------- */

/* How https:// requests verify the server and present a client
 * certificate (the options of curl --cacert, --capath, -k, --cert, --key).
 * Zeroed: libcurl's defaults (the system CA store, full verification, no
 * client certificate). Strings are borrowed, not copied: they must live as
 * long as the call (stg_call_config.tls) or the engine
 * (stg_engine_config.tls). Set on the easy handle when a blocking call
 * starts, and by the engine before every attempt after setup_easy, so
 * these settings win over the same options set there. A handshake the
 * server resets or closes is a RESET (retried when the method may repeat).
 * A certificate that does not verify ends the request at once:
 * error TLS, never retried (another attempt would get the same
 * certificate), error_text saying so. */
typedef struct stg_tls_config {
    const char *ca_file;  /* PEM file of CA certificates to trust instead of
                             the default store (CURLOPT_CAINFO) */
    const char *ca_path;  /* directory of CA certificates, c_rehash'ed
                             (CURLOPT_CAPATH) */
    const char *cert;     /* client certificate, PEM, for mutual TLS
                             (CURLOPT_SSLCERT) */
    const char *key;      /* its private key, PEM (CURLOPT_SSLKEY); NULL:
                             the key is in cert's file */
    /* Do not verify the server's certificate or its name (curl -k): the
     * connection is encrypted but anyone on the path can pose as the
     * server. For tests only. */
    union { bool insecure; uint64_t stg__insecure_word; };
    /* With ca_file and ca_path NULL and insecure false: read the CA
     * settings from the environment as the curl tool does (libcurl itself
     * does not): CURL_CA_BUNDLE (a file); else SSL_CERT_DIR (a directory)
     * and SSL_CERT_FILE (a file). Empty variables count as unset. Read at
     * each attempt with getenv: do not change them while a call runs. */
    union { bool ca_from_env; uint64_t stg__ca_from_env_word; };
    uint64_t stg__reserved[6]; /* room to grow (docs/ABI.md); leave zero */
} stg_tls_config;

/* ---- blocking call ------------------------------------------------------ */

typedef struct stg_call_config {
    stg_policy policy;          /* zero: the default policy; timeouts from it */
    stg_method method;          /* the easy handle's method (UNKNOWN: GET) */
    bool has_idempotency_key;   /* the request carries one */
    stg_cancel *cancel;         /* may be NULL */
    stg_bucket *bucket;         /* optional client-side limit, shared ok */
    const stg_env *env;         /* NULL: system clocks */
    uint64_t seed;              /* RNG seed; 0: from the clock and address */
    stg_event_fn on_event;      /* may be NULL */
    void *event_data;
    size_t max_body;            /* bytes of a body accepted (kept, or given to
                                   body_sink); 0: 64 MiB */
    /* Added after the first draft: */
    const char *url;            /* the URL set on easy, for events (redacted
                                   before use); NULL: the effective URL */
    uint64_t request_id;        /* request_id of the events; any value */
    /* Called before every retry of a request whose body comes from a read
     * callback, to rewind it (return 0, or nonzero to give up with the
     * last answer). NULL: the body is CURLOPT_POSTFIELDS (resent in full
     * by libcurl itself) or there is none. */
    int (*rewind_body)(void *data);
    void *rewind_data;
    /* A limiter shared with other processes; replaces bucket when set
     * (see stg_shared_limiter). key: the limiter_key below, or the URL's
     * host[:port]. */
    const stg_shared_limiter *shared;
    const char *limiter_key;
    /* Redirects, followed by the call itself: each hop is an attempt that
     * passes the limiter (counted in attempts and events; not a retry, so
     * not counted against max_attempts); a 303, and a 301 or 302 to a POST,
     * continue as GET without a body (as curl does); 307 and 308 keep the
     * method and body. Secret headers (stg_redact_header_is_secret with
     * secret_headers) go only to the origin (scheme, host, port) of url
     * (NULL: the first effective URL), and credentials set on the handle
     * (CURLOPT_USERPWD, USERNAME, PASSWORD, XOAUTH2_BEARER, COOKIE) are
     * cleared once a hop leaves it. More than max_redirects hops (0: 20)
     * give up with STATUS_NOT_RETRYABLE, the 3xx status and error_text
     * "too many redirects ...". The call turns libcurl's own
     * CURLOPT_FOLLOWLOCATION off either way: a hop libcurl made would
     * bypass the limiter. Only http and https targets are followed (any
     * other gives up with STATUS_NOT_RETRYABLE). A followed hop changes
     * the handle's URL and method; they are not restored. */
    bool follow_redirects;
    int max_redirects;
    /* The request headers: the call sets CURLOPT_HTTPHEADER from them,
     * without the secret ones on another origin, and clears it before
     * returning. NULL: the handle's own CURLOPT_HTTPHEADER, all of which a
     * cross-origin hop drops (for the rest of the call, and on the handle
     * afterwards). Not copied: must live until the call returns. */
    const struct curl_slist *headers;
    const char *const *secret_headers; /* extra secret names, NULL-terminated; may be NULL */
    /* Stream 2xx bodies to body_sink(op, buf, len, body_sink_data) instead
     * of keeping them in out->body (see stg_body_fn). NULL: kept in memory,
     * up to max_body. */
    union { stg_body_fn body_sink; uint64_t stg__body_sink_word; };
    union { void *body_sink_data; uint64_t stg__body_sink_data_word; };
    /* TLS verification and client certificate (stg_tls_config); not
     * copied: must live until the call returns. NULL: libcurl's defaults,
     * or what the caller set on easy itself. */
    union { const stg_tls_config *tls; uint64_t stg__tls_word; };
    /* Respect the quotas the servers announce (include/stagger/quota.h),
     * as the engine does with stg_engine_config.quotas: every attempt,
     * retries and redirect hops included, first waits until every quota
     * of its key (limiter_key, or the URL's host[:port]) allows it, and
     * its answer settles what it reserved. A wait longer than the
     * policy's max_server_wait gives the last answer back
     * (SERVER_WAIT_TOO_LONG), as a long Retry-After does; one past the
     * deadline ends the call (DEADLINE). Not copied, may be shared by
     * calls and threads; NULL: no quota limiter. */
    union { stg_quota *quotas; uint64_t stg__quotas_word; };
    /* What the request costs per quota unit (with quotas), n_cost entries,
     * e.g. what stg_ai_cost_estimate says of an AI API request; a unit not
     * listed costs 1. Taken as an estimate: a cost over a quota's
     * announced limit is not held to (the send then costs 1 there and the
     * server decides); a refusal (429, 529) gives its token units back,
     * and an answer that tells no count settles them at the usage its
     * body reports. Not copied: must live until the call returns.
     * NULL/0: one request. */
    union { const stg_quota_cost *cost; uint64_t stg__cost_word; };
    union { size_t n_cost; uint64_t stg__n_cost_word; };
    /* The call's class and tenant (stagger/priority.h; zeros: normal, no
     * tenant), handed to a shared limiter's acquire_class when it has one
     * (one call waits for nothing of its own to order). */
    union { int priority; uint64_t stg__priority_word; };
    union { const char *tenant; uint64_t stg__tenant_word; };
    double weight;
    uint64_t stg__reserved[7]; /* room to grow (docs/ABI.md); leave zero */
} stg_call_config;

/* Perform `easy` (already set up by the caller: URL, method, headers, body
 * via CURLOPT_POSTFIELDS or a read callback plus cfg->rewind_body) under
 * cfg (NULL: all defaults). The call sets its own write/header and
 * pre-request (CURLOPT_PREREQFUNCTION) callbacks, error buffer, CURLOPT_NOSIGNAL and CURLOPT_CONNECTTIMEOUT_MS /
 * CURLOPT_TIMEOUT_MS (per attempt, bounded by what the deadline leaves) on
 * the handle, and the progress callback (CURLOPT_XFERINFOFUNCTION,
 * CURLOPT_NOPROGRESS 0, and CURLOPT_LOW_SPEED_LIMIT/TIME for its 1 s
 * ticks) that keeps the policy's first-byte and idle times, and puts the
 * callbacks and error buffer back to libcurl's defaults before returning
 * (a caller's own progress callback is replaced); cfg->tls's options (CA, -k, client
 * certificate) are set on the handle when the call starts and left
 * there, like its URL. Attempts run on a private curl_multi, so a
 * cancel interrupts an attempt in flight as well as a wait. Every request
 * sent is an attempt stagger decided: libcurl's own resend on a reused
 * connection that died is refused (the attempt is a RESET, retried by the
 * policy through the limiter, never for a POST without a key), and
 * libcurl never follows redirects (see follow_redirects). libcurl's HTTP
 * authentication negotiation (CURLAUTH_DIGEST, NTLM, NEGOTIATE, ANY: a
 * 401 then a second send) is a resend too and fails the request; Basic
 * and bearer credentials are sent with the first request.
 * cfg->method UNKNOWN means: the method libcurl reports after the attempt
 * (CURLINFO_EFFECTIVE_METHOD), so a POST is never taken for a GET.
 * Returns STG_OK when the request ran (successfully or not: see out->action
 * and out->reason), STG_EINVAL for bad arguments, STG_ENOMEM. out is always
 * initialised and must be released with stg_result_free(). Does not take
 * ownership of easy. Thread-safe for distinct easy handles (a stg_bucket may
 * be shared). Calls curl_global_init() once per process (pthread_once). */
STG_API int stg_curl_perform(CURL *easy, const stg_call_config *cfg, stg_result *out);

/* ---- engine ------------------------------------------------------------- */

typedef enum stg_limiter_mode {
    STG_LIMITER_NONE = 0,     /* no client-side limit */
    STG_LIMITER_FIXED = 1,    /* token bucket at rate/burst per host */
    STG_LIMITER_ADAPTIVE = 2  /* adaptive rate per host (learns from 429s) */
} stg_limiter_mode;

typedef struct stg_engine_config {
    stg_policy policy;          /* zero: the default policy */
    int concurrency;            /* attempts in flight (plus limiter
                                   reservations waiting for their slot);
                                   0: 30. Backoff waits hold no slot. */
    stg_limiter_mode limiter;
    double rate;                /* FIXED: requests/s per host */
    int64_t burst;              /* FIXED: 0: max(1, ceil(rate)) */
    stg_adaptive_config adaptive;
    bool breaker;               /* per-host circuit breaker on */
    stg_breaker_config breaker_config; /* its on_change, if set, is called
                                   too (with the breaker's lock held) */
    bool budget;                /* per-host retry budget on: a retryable
                                   failure costs a token, a throttle (a
                                   rate signal, not a fault) half of one
                                   (budget.h), or nothing with the
                                   ADAPTIVE limiter, which slows down on
                                   it; any other answer refills; a retry
                                   it refuses gives up with
                                   BUDGET_EXHAUSTED, or waits with
                                   budget_wait */
    stg_budget_config budget_config;
    bool budget_wait;           /* a retry the spent budget refuses waits
                                   instead of giving up: after its backoff
                                   it goes once the budget has refilled,
                                   or with the host's one pass: a single
                                   request retries past the spent budget
                                   (through its own backoffs) until it
                                   ends, then the oldest waiting one takes
                                   over. A host that failed everything
                                   still progresses, one request per
                                   backoff, without multiplying the load.
                                   Bounded by the policy's deadline. */
    bool defer_when_open;       /* breaker open: give up with BREAKER_OPEN
                                   instead of waiting for half-open */
    const stg_env *env;         /* NULL: system clocks */
    uint64_t seed;              /* 0: from the clock */
    stg_event_fn on_event;      /* may be NULL */
    void *event_data;
    size_t max_body;            /* bytes of a body accepted (kept, or given to
                                   a body_sink); 0: 64 MiB */
    /* Called on an easy handle before each attempt, to add options (TLS,
     * proxies, ...), before the engine sets its own (URL, method, headers,
     * body, callbacks, timeouts). Handles are reset and pooled between
     * attempts; connections are reused through the multi's cache. As in
     * stg_curl_perform, libcurl never sends on its own: its resend on a
     * reused connection that died is refused (a RESET, retried through
     * the limiter unless the method may not repeat), CURLOPT_FOLLOWLOCATION
     * is turned off (stg_request.follow_redirects), and HTTP auth
     * negotiation fails the request. May be NULL. */
    void (*setup_easy)(CURL *easy, void *data);
    void *setup_data;
    /* A limiter (and breaker) shared with other processes: replaces the
     * per-host limiter (and breaker) when set; asked with each request's
     * limit key. See stg_shared_limiter. */
    const stg_shared_limiter *shared;
    /* TLS verification and client certificate of every request
     * (stg_tls_config), applied after setup_easy; not copied: must
     * outlive the engine. NULL: libcurl's defaults (or setup_easy's). */
    union { const stg_tls_config *tls; uint64_t stg__tls_word; };
    /* Respect every quota the servers announce (include/stagger/quota.h):
     * each answer's rate-limit fields, in every dialect stg_hints_feed
     * reads, go to one stg_quota of the engine, keyed by the request's
     * limit key, and a send goes only when every quota of its key allows
     * it (remaining counts spread over the time to their reset, a global
     * pause holding the whole host), before the limiter above. A request's
     * cost is stg_request.cost. false: as before, no quota limiter. */
    bool quotas;
 /* room to grow (docs/ABI.md); leave zero */
    /* A concurrency learned per host (concurrency.h): non-NULL turns it on
     * with this configuration (zeroed: the defaults), copied at
     * stg_engine_new. Each host then keeps at most its learned limit of
     * attempts in flight (the others wait, holding nothing), and
     * `concurrency` stays the hard cap over all hosts (0: the learned
     * max_limit). The limit shows in events (concurrency_limit), stats
     * and metrics. NULL: the fixed `concurrency` alone, as before. */
    union { const stg_concurrency_config *learn; uint64_t stg__learn_word; };
    /* CURLOPT_HTTP_VERSION of every attempt (CURL_HTTP_VERSION_1_1, _2_0,
     * _2TLS, _2_PRIOR_KNOWLEDGE), set after setup_easy; 0: libcurl's
     * default (h2 over TLS when the server offers it by ALPN). With h2 the
     * requests to one origin share a connection (CURLPIPE_MULTIPLEX, and
     * CURLOPT_PIPEWAIT so a second request waits for the first to learn
     * whether the server multiplexes), within the server's
     * SETTINGS_MAX_CONCURRENT_STREAMS. */
    union { long http_version; uint64_t stg__http_version_word; };
    /* Keys (hosts) whose state is kept: limiter, budget, breaker, learned
     * concurrency. Past it, a new key first forgets the least recently
     * used one with no request of it in the engine (a forgotten key starts
     * afresh, as a new one does), so a forward proxy that sees endless
     * hosts stays bounded. 0: 1024. (The quotas have their own caps,
     * stg_quota_config.) */
    union { size_t max_hosts; uint64_t stg__max_hosts_word; };
    /* With quotas: a POST to an AI API (OpenAI chat completions, responses,
     * completions, embeddings; Anthropic messages; Azure OpenAI's
     * deployment paths) costs, per unit the server meters, what its JSON
     * body says (the prompt's characters / 4 and its max_tokens), as the
     * server is learned to count them from its remaining counts (the sum
     * of the two, or the larger); reserved before the send, settled by the
     * answer (its count, else the usage in its body), given back for a
     * refusal (429, 529). A unit the request's cost states wins. true:
     * off, every unit not stated costs 1 as before. */
    union { bool no_cost_estimate; uint64_t stg__no_cost_estimate_word; };
    /* With quotas: the servers' quotas held with other processes too (see
     * stg_shared_quota): every send the engine's quotas admit is also
     * reserved there, and settled with its answer. NULL: this process
     * alone. Not copied: must outlive the engine. */
    union { const stg_shared_quota *shared_quotas; uint64_t stg__shared_quotas_word; };
    uint64_t stg__reserved[9]; /* room to grow (docs/ABI.md); leave zero */
} stg_engine_config;

typedef struct stg_engine stg_engine;

/* A request to submit. Everything is copied at submit: the caller may free
 * its strings afterwards. */
typedef struct stg_request {
    const char *url;
    const char *method;           /* NULL: GET (or POST when body != NULL) */
    /* "Name: value" strings, NULL-terminated; may be NULL. Also libcurl's
     * "Name:" (do not send libcurl's own Name) and "Name;" (send Name
     * empty). Name must be an RFC 9110 token right before the ':' or ';',
     * and the value hold no control character but HTAB. Refused at submit
     * (STG_EINVAL), in any form: the fields the transport owns, because
     * libcurl sets them from the request and a caller's value could end a
     * message early and leave the rest of its body to be read as the next
     * request on a shared connection (someone else's): Content-Length,
     * Transfer-Encoding, Connection, Keep-Alive, Proxy-Connection, TE,
     * Trailer, Upgrade. Host (a virtual host, as curl -H takes it) and
     * Proxy-Authorization (for a proxy set in setup_easy) are the caller's
     * and allowed; `stagger batch` refuses those too in its input. */
    const char *const *headers;
    const void *body;             /* may be NULL */
    size_t body_len;
    const char *idempotency_key;  /* sent as Idempotency-Key; NULL: none */
    const char *limit_key;        /* limiter/breaker/budget key, to share one
                                     limit between hosts; NULL: the URL's
                                     host[:port], lower-cased */
    /* Follow redirects, as stg_call_config.follow_redirects: each hop goes
     * through admission as an attempt, with the request's own limit key
     * (limit_key, or the first URL's host: a redirect elsewhere does not
     * change whose limit it spends); secret headers (with secret_headers,
     * copied at submit) are sent only to url's origin; only http and https
     * targets; more than max_redirects (0: 20) hops give up with
     * STATUS_NOT_RETRYABLE and error_text "too many redirects ...". */
    bool follow_redirects;
    int max_redirects;
    const char *const *secret_headers;
    /* Stream this request's 2xx bodies to body_sink (see stg_body_fn); the
     * sink's END comes right before done. body_sink_data is not copied: it
     * must live until END. NULL: the body is kept in memory, up to
     * max_body, and borrowed by the done callback. */
    union { stg_body_fn body_sink; uint64_t stg__body_sink_word; };
    union { void *body_sink_data; uint64_t stg__body_sink_data_word; };
    /* What the request costs per quota unit (with stg_engine_config.quotas,
     * e.g. {"tokens", 1200}), n_cost entries, copied at submit; a unit not
     * listed costs 1. NULL/0: one request. */
    union { const stg_quota_cost *cost; uint64_t stg__cost_word; };
    size_t n_cost;
    /* Per-request policy overrides (0: the engine's policy): the overall
     * deadline (< 0: none), attempts in all (1: no retry), and priority:
     * its class (stagger/priority.h: STG_PRIORITY_INTERACTIVE, 0 normal,
     * STG_PRIORITY_BATCH; another value: STG_EINVAL). Wherever requests
     * wait for one limit (the concurrency, a rate, an adaptive rate, a
     * server's quota), a lower class number is admitted first, a class
     * below the first keeps a floor (one admission in 20 while it waits),
     * and retries keep their turn in the retry queue (docs/priorities.md). */
    union { int64_t deadline_us; uint64_t stg__deadline_word; };
    union { int max_attempts; uint64_t stg__attempts_word; };
    union { int priority; uint64_t stg__priority_word; };
    /* STG_STREAM_* flags for body_sink (0: none). */
    union { unsigned stream; uint64_t stg__stream_word; };
    /* A body read as it is sent, instead of body (which must then be
     * NULL): read_body(buf, size, body_sink_data); body_len is its length,
     * or (size_t)-1 when unknown (sent chunked). */
    union { stg_read_fn read_body; uint64_t stg__read_body_word; };
    /* This request's own policy instead of the engine's (NULL: the
     * engine's), resolved and copied at submit (an invalid one: EINVAL);
     * deadline_us and max_attempts above still override it. For a caller
     * that sets one request's timeouts (the proxy's Stagger-Timeout). */
    union { const stg_policy *policy; uint64_t stg__policy_word; };
    /* Who the request is for, among the requests of its class that wait
     * for one limit: tenant NULL or "" for none (one default tenant), else
     * a name stg_tenant_check accepts (another: STG_EINVAL), copied at
     * submit; weight its share against the class's other tenants with
     * requests waiting (0: 1; else > 0 and <= 1e6, another: STG_EINVAL).
     * Tenants 1:1:2 get 25/25/50% of what their class is admitted. */
    union { const char *tenant; uint64_t stg__tenant_word; };
    double weight;
    uint64_t stg__reserved[1]; /* room to grow (docs/ABI.md); leave zero */
} stg_request;

typedef void (*stg_done_fn)(stg_engine *e, uint64_t id, const stg_result *r, void *data);

/* Create an engine. Returns NULL on bad config or out of memory (then
 * *err, if not NULL, says which). Calls curl_global_init() once per
 * process (pthread_once). */
STG_API stg_engine *stg_engine_new(const stg_engine_config *cfg, int *err);

/* Cancel what is left (each such request's done callback runs once, with
 * reason CANCELLED), then free. Accepts NULL. Must not be called from a
 * callback of the same engine. */
STG_API void stg_engine_free(stg_engine *e);

/* Queue a request. On STG_OK, done(e, id, result, data) will be called
 * exactly once, from inside stg_engine_run/drain/cancel/free; *id (may be
 * NULL) identifies it. On error (STG_EINVAL: no URL, unknown method, a
 * header stg_request.headers says is refused, a control character in
 * idempotency_key; STG_ENOMEM) done is never called. Not thread-safe: call from the thread
 * that runs the engine. */
STG_API int stg_engine_submit(stg_engine *e, const stg_request *req, stg_done_fn done,
                              void *data, uint64_t *id);

/* Resume a transfer its body sink paused (STG_BODY_PAUSE) or its
 * read_body paused (STG_READ_PAUSE). STG_OK, or STG_ENOTFOUND when the
 * request has finished; a request with no attempt in flight is left
 * alone (STG_OK). Engine thread only, not from inside a sink. */
STG_API int stg_engine_resume(stg_engine *e, uint64_t id);

/* Wake a pass waiting in poll, so stg_engine_run returns soon (for a
 * thread that queued work for the engine's thread). Async-signal-safe and
 * thread-safe; unlike stg_engine_stop it does not end a drain. */
STG_API void stg_engine_wake(stg_engine *e);

/* Cancel one request (its done callback runs with CANCELLED before this
 * returns, unless it already finished: then STG_ENOTFOUND). */
STG_API int stg_engine_cancel(stg_engine *e, uint64_t id);
STG_API void stg_engine_cancel_all(stg_engine *e);

/* One loop pass: waits at most timeout_us for network activity or timers,
 * then does what is due. Returns the number of requests not yet finished.
 * Callbacks may submit new requests, and cancel requests. Calls from inside
 * a callback do nothing and return the count. The clock is read once per
 * pass, after the wait; the wait is computed from the previous pass's
 * clock (at most timeout_us, and 0 when work is ready). */
STG_API int stg_engine_run(stg_engine *e, int64_t timeout_us);

/* stg_engine_run whose wait also ends when fd is readable (-1: none), so
 * one thread can drive another event source with the engine (the proxy
 * runs libmicrohttpd's epoll descriptor this way: no second thread, no
 * hand-off per request). The engine never reads fd. */
STG_API int stg_engine_run_fd(stg_engine *e, int64_t timeout_us, int fd);

/* Run until every request has finished, or until stg_engine_stop() is called
 * (then returns the number left). Returns 0 when all finished. From inside
 * a callback: does nothing, returns the count. */
STG_API int stg_engine_drain(stg_engine *e);

/* Make a running stg_engine_drain() return after the current pass (it wakes
 * a pass waiting in poll). A stop while no drain runs makes the next drain
 * return after its first pass. Async-signal-safe; may be called from
 * another thread or from a callback. */
STG_API void stg_engine_stop(stg_engine *e);

/* Counters since creation. Not thread-safe (engine thread only). */
typedef struct stg_engine_stats {
    uint64_t submitted, finished, succeeded, gave_up;
    uint64_t attempts, retries;
    uint64_t status_429, status_503, status_5xx_other, status_4xx_other;
    uint64_t transport_errors;
    int64_t limiter_wait_us; /* summed */
    int in_flight, waiting;
    /* With a learned concurrency: the sum of the hosts' limits (one host:
     * its limit), and attempts that waited for their host's limit. */
    union { int concurrency_limit; uint64_t stg__conc_word; };
    uint64_t concurrency_waits;
    uint64_t hosts; /* keys whose state is kept now (max_hosts) */
    uint64_t stg__reserved[5]; /* room to grow (docs/ABI.md); leave zero */
} stg_engine_stats;
STG_API void stg_engine_stats_get(const stg_engine *e, stg_engine_stats *out);

/* What an engine admitted of one class and tenant (docs/priorities.md).
 * An engine keeps at most STG_CLASS_TENANTS_MAX tenants per class; the
 * others are counted together under the tenant "~other" (no tenant's
 * name: '~' is not allowed in one). */
#define STG_CLASS_TENANTS_MAX 256
typedef struct stg_class_stats {
    int priority;       /* the class (stagger/priority.h) */
    const char *tenant; /* NULL: none; the engine's copy, valid until its next call */
    uint64_t admitted;  /* attempts started: each passed admission */
    int64_t waiting;    /* requests ready and not started: waiting for
                           admission (a slot, a rate, a quota) now */
    int64_t wait_us;    /* the admitted attempts' waits for admission, summed */
    int64_t wait_max_us; /* the longest of them */
    uint64_t stg__reserved[4]; /* room to grow (docs/ABI.md); leave zero */
} stg_class_stats;

/* The engine's classes and tenants, one row each (the order is the
 * engine's): up to max rows into out (NULL with max 0 only counts).
 * Returns the number of rows there are. Not thread-safe: call from the
 * engine's thread, or from one of its callbacks. */
STG_API size_t stg_engine_class_stats(const stg_engine *e, stg_class_stats *out, size_t max);
/* How many requests wait now, by what for (the names of WAITED events:
 * slot, limiter, quota, pace, concurrency, breaker, backoff, budget): up
 * to max pairs into names[] (static strings) and counts[]; returns how
 * many. Engine thread only, like stg_engine_stats_get. */
STG_API size_t stg_engine_waiting(const stg_engine *e, const char **names, int64_t *counts,
                                  size_t max);

/* The engine's quota limiter (stg_engine_config.quotas), to look at what
 * the servers announced and what the engine reserved (stg_quota_each);
 * NULL without quotas. Made with the engine and freed with it; the
 * limiter is thread-safe, so any thread may look while the engine runs.
 * Do not acquire or settle through it. */
STG_API stg_quota *stg_engine_quotas(const stg_engine *e);

/* ---- classification ------------------------------------------------------ */

/* The transport outcome class of a CURLcode: COULDNT_CONNECT ->
 * CONNECT_REFUSED; OPERATION_TIMEDOUT -> CONNECT_TIMEOUT when no connection
 * was made (connect_time_us, CURLINFO_CONNECT_TIME_T, is 0), else TIMEOUT;
 * RECV_ERROR, SEND_ERROR, GOT_NOTHING, PARTIAL_FILE -> RESET;
 * COULDNT_RESOLVE_HOST/PROXY -> DNS; SSL_* and PEER_FAILED_VERIFICATION ->
 * TLS; CURLE_OK -> NONE; anything else -> OTHER. Pure. (The call and the
 * engine refine this with libcurl's message: a TLS handshake the peer
 * reset or closed is RESET, a transport fault retried when the method may
 * repeat; a certificate that did not verify, or a TLS alert from the
 * server, stays TLS and is never retried.) */
STG_API stg_net_error stg_curl_classify(CURLcode code, int64_t connect_time_us);

/* ---- logging and metrics (built on events) ------------------------------ */

/* A JSON-lines logger: pass stg_log_event as on_event and the logger as
 * data. One line per event with ts, event, id, method, url, final_url,
 * attempt, status, status_class ("quota" for 429, "outage" for 503),
 * error, retry_after_ms, wait_ms, duration_ms, reason, outcome. */
typedef struct stg_logger stg_logger;
STG_API stg_logger *stg_logger_new(FILE *out); /* does not take ownership of out */
STG_API void stg_logger_free(stg_logger *l);   /* accepts NULL */
STG_API void stg_log_event(const stg_event *ev, void *logger);

/* Prometheus text-format metrics collected from events. */
typedef struct stg_metrics stg_metrics;
STG_API stg_metrics *stg_metrics_new(void);
STG_API void stg_metrics_free(stg_metrics *m); /* accepts NULL */
STG_API void stg_metrics_event(const stg_event *ev, void *metrics);
/* Keep per-host series (breaker, concurrency limit) for at most n hosts
 * (0: 1024, the default): past it, a new host replaces the least recently
 * updated one, whose series disappear. Thread-safe. */
STG_API void stg_metrics_set_max_hosts(stg_metrics *m, size_t n);
/* Write atomically (temp file + rename, the node_exporter textfile
 * convention). Returns STG_OK or STG_EIO. */
STG_API int stg_metrics_write(const stg_metrics *m, const char *path);
/* Print the same text to out. Returns STG_OK or STG_EIO. */
STG_API int stg_metrics_print(const stg_metrics *m, FILE *out);
/* A source of more series (a batch's jobs by state, a proxy's own): fn
 * prints them, in the text format, after the metrics' own, each time they
 * are printed or written; it runs on the printing thread (a scrape's),
 * with m's lock held, so it must not call stg_metrics_* and must guard
 * its data itself. At most 4 sources. Returns STG_OK, STG_EINVAL (NULL)
 * or STG_ENOMEM (too many). Thread-safe. */
typedef void (*stg_metrics_source_fn)(FILE *out, void *data);
/* Show the quotas of q (not owned; NULL: none), e.g. an engine's
 * (stg_engine_quotas): stagger_quota_limit, _remaining, _reset_seconds and
 * _reserved {host,key,unit}, and "quotas" in stg_metrics_json; the time to
 * a reset is read on CLOCK_MONOTONIC, the engine's default clock. q must
 * outlive m's printing. Thread-safe. */
STG_API void stg_metrics_set_quotas(stg_metrics *m, stg_quota *q);
STG_API int stg_metrics_add_source(stg_metrics *m, stg_metrics_source_fn fn, void *data);
/* The metrics as one JSON object (what the live pages poll): "quotas"
 * (with stg_metrics_set_quotas: [{"host", "key", "unit", "window_s",
 * "limit", "remaining", "estimate", "reserved", "reset_s", "admitted",
 * "refused"}], -1 where not known; admitted and refused: stg_quota_tally's
 * counts), "attempts",
 * "hosts" (per host: "attempts" by class, "learned_rate",
 * "concurrency_limit"), "waits" (per reason: "count", "seconds"),
 * "retries" and "give_ups" (by reason), "successes", "in_flight",
 * "requests" ("count", "seconds"). A string the caller frees (free()), or
 * NULL when out of memory. Thread-safe. */
STG_API char *stg_metrics_json(const stg_metrics *m);

/* Several event sinks behind one callback. */
typedef struct stg_event_fanout {
    stg_event_fn fn[4];
    void *data[4];
    int n;
    uint64_t stg__reserved[2]; /* room to grow (docs/ABI.md); leave zero */
} stg_event_fanout;
STG_API void stg_event_fanout_cb(const stg_event *ev, void *fanout);

/* What a request to an AI API costs in the units such servers meter,
 * estimated from its JSON body (include/stagger/cost.h): a POST to
 * OpenAI's chat completions, responses, completions or embeddings,
 * Anthropic's messages, or Azure OpenAI's deployment paths (the path's
 * end tells which), its prompt's characters and its max_tokens priced by
 * m as learned (NULL: the defaults, characters / 4 plus max_tokens) into
 * costs[0..3): "tokens", "input-tokens", "output-tokens" (max >= 3).
 * Returns 3, or 0 when the request is none of those or its body is not
 * their JSON. body (len bytes, untrusted) is read, never kept. Thread-safe
 * with a NULL m, or one no other thread changes meanwhile. */
STG_API size_t stg_ai_cost_estimate(const stg_cost_model *m, const char *method, const char *url,
                                    const void *body, size_t len, stg_quota_cost *costs,
                                    size_t max);

#ifdef __cplusplus
}
#endif
#endif
