/*
 * libstagger-curl internals shared between its files (stg__ prefix; never
 * installed). One header, because the pieces are small: clocks and the one
 * process-wide curl_global_init, URL splitting, the per-attempt response
 * capture used by both the blocking call and the engine, the engine's timer
 * heap, and event helpers.
 *
 * Invariants: nothing here keeps global state except the pthread_once that
 * guards curl_global_init (libcurl demands it be called once per process
 * before any other thread uses libcurl; we call it lazily from
 * stg_curl_perform() and stg_engine_new()).
 */
#ifndef STAGGER_CURL_INTERNAL_H
#define STAGGER_CURL_INTERNAL_H

#include <stdio.h>

#include <stagger/cost.h>
#include <stagger/curl.h>

/* ---- env.c ------------------------------------------------------------- */

/* curl_global_init(CURL_GLOBAL_DEFAULT) exactly once per process, via
 * pthread_once. Returns its CURLcode (the first call's, cached). */
CURLcode stg__curl_global_init(void);

/* Clocks from env (NULL or NULL members: the system clocks). */
int64_t stg__mono_us(const stg_env *env);
int64_t stg__wall_us(const stg_env *env);

/* A seed for a per-call/per-engine RNG when the caller gave none. */
uint64_t stg__seed(const void *addr, int64_t now_us);

/* ---- redact.c ---------------------------------------------------------- */

/* stg__url_parts and stg__url_split() are the core's (src/core/url.c). */
#include "core/fairq.h"
#include "core/url.h"
#include "util/list.h"

/* The limiter/breaker key of a URL: host, or host:port when a port is
 * given, lower-cased. Writes "" when there is no host. */
void stg__url_host_key(const char *url, char *buf, size_t size);

/* stg_redact_text() (the core's), kept for the callers here. */
void stg__redact_text(const char *in, char *buf, size_t size);

/* ---- xfer.c: what one attempt received --------------------------------- */

typedef struct stg__buf {
    char *p;
    size_t len, cap;
} stg__buf;

/* Append; keeps p NUL-terminated. Returns false when out of memory. */
bool stg__buf_put(stg__buf *b, const void *data, size_t n);
void stg__buf_free(stg__buf *b);

typedef struct stg__xfer {
    stg__buf body;
    stg__buf headers;   /* raw header block of the latest response only */
    stg_hints hints;    /* parsed from that block */
    size_t max_body;    /* bytes of body kept */
    bool truncated;     /* the body passed max_body: the transfer was stopped */
    bool oom;           /* an append failed: the transfer was aborted */
    int sends;          /* requests libcurl was about to send this attempt */
    bool resend_blocked; /* libcurl tried to resend on its own: refused */
    bool sent_h2;        /* the request went out as HTTP/2 (its header block) */
    /* The resend refused was for an HTTP/2 stream the server never
     * processed (RST_STREAM REFUSED_STREAM, or above a GOAWAY's
     * last-stream-id): stagger resends it itself (xfer.c, engine_done.c). */
    bool refused_stream;
    int64_t wall_now_us; /* set by the loop once per pass */
    /* libcurl's error text: CURL_ERROR_SIZE bytes allocated at the first
     * attach (a request that never went out carries none), until then,
     * or without memory, errnone (always ""). Never NULL after init; x
     * must not move (it points into itself). */
    char *errbuf;
    char errnone[1];
    /* A body sink (NULL: none, or END already called). 2xx bodies go to it,
     * any other body to `body`, at most STG__SINK_OTHER_BODY_MAX bytes. */
    stg_body_fn sink;
    void *sink_data;
    CURL *easy;          /* the handle attached, for the status in on_body */
    size_t received;     /* body bytes of this attempt (against max_body) */
    int to_sink;         /* this response's body: -1 not known yet, 0 memory, 1 sink */
    bool sink_dirty;     /* the sink holds bytes no RESTART has discarded */
    bool sink_restart;   /* an attempt started since: RESTART before the next
                            delivery, or before END */
    bool sink_failed;    /* the sink returned nonzero: the transfer was stopped */
    const stg_tls_config *tls; /* applied by stg__xfer_attach; NULL: none */
    /* The attempt cannot go out as HTTP/2 (stg__xfer_h2_impossible): its
     * transfer is not VERBOSE, since the debug callback only looks for an
     * HTTP/2 request line (xfer.c). Set by the caller before each attach. */
    bool h1_only;
    unsigned stream;     /* STG_STREAM_* of the request */
    bool head_sent;      /* this response's HEAD went to the sink */
    bool streamed;       /* the sink got a HEAD or a byte (any attempt) */
    /* STG_STREAM_SSE_HOLD (sse.c): this response's body, -1 not decided,
     * 0 not held, 1 held until its first event, 2 passed on. */
    int sse;
    stg__buf held;         /* the bytes held (sse == 1) */
    int64_t held_since_us; /* wall_now_us at the first byte held */
    /* The held first event was an error: the status it stands for (the
     * transfer was stopped, headers and body replaced by the error's), and
     * its type ("overloaded_error"). 0: none. */
    int stream_error;
    char stream_error_type[48];
    /* keep_tail: the last STG__XFER_TAIL bytes of a 2xx body that went to
     * the sink are kept in tail (allocated at the first), where an AI
     * answer's usage is (its JSON's end, its stream's last events). */
    bool keep_tail;
    size_t tail_len;
    char *tail;
    /* keep_tail: the first STG__XFER_LEAD bytes of that body are read as
     * they pass for what only a stream's start tells (Anthropic's
     * message_start: the input tokens), into lead_in (-1: none); lead
     * holds the line in progress, and is freed once read. */
    stg__buf lead;
    size_t lead_seen;
    int64_t lead_in;
    /* The answer's head is complete (the blank line after a final, non-1xx
     * status line and its fields; none of its body yet): on_head(head_arg,
     * status) once per attempt (NULL: none), where the quota limiter
     * learns it (stg_quota_head: a long body does not hold the host's
     * cold start). head_told: it ran this attempt. */
    void (*on_head)(void *arg, int status);
    void *head_arg;
    bool head_told;
    /* The first-byte and idle times of this attempt (stg__xfer_timeouts;
     * 0: none), and what the progress callback tracks for them, in
     * libcurl's time since the transfer began (xfer.c). */
    int64_t first_byte_us, idle_us;
    bool ticking; /* the progress callback is installed: a first-byte or
                     idle time could end the attempt before its total */
    int64_t last_activity_us; /* the last byte either way, or the send */
    int64_t dl_seen, ul_seen; /* byte counts at the last progress call */
    bool request_sent;   /* the pre-request callback ran this attempt */
    bool answer_begun;   /* a header line of the answer arrived */
    bool touched;        /* a byte moved since the last progress call */
    bool paused;         /* the sink paused the transfer (slow reader) */
    int timed_out;       /* STG__XFER_FIRST_BYTE or STG__XFER_IDLE: the
                            progress callback ended the transfer */
} stg__xfer;

#define STG__XFER_FIRST_BYTE 1
#define STG__XFER_IDLE 2

#define STG__XFER_TAIL ((size_t)8192)
#define STG__XFER_LEAD ((size_t)8192)

/* The hold of STG_STREAM_SSE_HOLD: at most this many bytes, and (checked
 * as bytes arrive) this long after the first, before the body is passed on
 * without a first event. */
#define STG__SSE_HOLD_MAX ((size_t)64 << 10)
#define STG__SSE_HOLD_US INT64_C(10000000)

/* ---- sse.c: the first event of an event stream ---------------------------- */

/* Read buf[0..len) (untrusted, not NUL-terminated) up to its first
 * dispatched event: 1 and the event's type in name (truncated to
 * name_size - 1; "" when none) and its data in data (NUL-terminated);
 * 0 when no event is complete yet; -1 out of memory. */
int stg__sse_first_event(const char *buf, size_t len, char *name, size_t name_size,
                         stg__buf *data);
/* The status an event of type name with data[0..len) stands for when it is
 * an error (type "error", or a JSON object with an "error" member): 529
 * overloaded, 429 rate limit, 500, 400... as the vendors answer the same
 * error outside a stream, 502 for an error of an unknown kind; 0 when it
 * is not an error. type gets the error's type or code when it is a word. */
int stg__sse_error_status(const char *name, const char *data, size_t len, char *type,
                          size_t type_size);

/* With a sink, what is kept of a body that is not 2xx (for hints, logs). */
#define STG__SINK_OTHER_BODY_MAX ((size_t)64 << 10)

void stg__xfer_init(stg__xfer *x, size_t max_body);
/* Give 2xx bodies to sink(op, buf, len, data) from now on (NULL: none). */
void stg__xfer_set_sink(stg__xfer *x, stg_body_fn sink, void *data);
/* The request is over: RESTART if the sink still holds an earlier
 * attempt's bytes, then END, once; the sink is never called afterwards.
 * Returns false when either call failed (a success must then become a
 * failure). True without a sink. */
bool stg__xfer_sink_end(stg__xfer *x);
/* Free the kept tail (keep_tail), once read: a waiting request holds none. */
void stg__xfer_tail_free(stg__xfer *x);
/* Forget the previous attempt's data (a discarded body never leaks). */
void stg__xfer_reset(stg__xfer *x);
void stg__xfer_free(stg__xfer *x);
/* Point easy's write/header callbacks and error buffer at x, and apply
 * x->tls (stg__tls_apply). */
void stg__xfer_attach(CURL *easy, stg__xfer *x);
/* Whether a request to url with CURLOPT_HTTP_VERSION http_version (0: not
 * set) is certain to go out as HTTP/1.x: plain http:// (libcurl speaks
 * HTTP/2 there only with an h2c upgrade or prior knowledge, both asked by
 * a version of 2 or more). https:// may negotiate h2 by ALPN. */
bool stg__xfer_h2_impossible(const char *url, long http_version);
/* libcurl's download buffer (CURLOPT_BUFFERSIZE) for a transfer that
 * goes on the wire as the on_wire-th at once: libcurl's 16 KiB default up
 * to STG__XFER_BUF_MANY on the wire, libcurl's minimum, 1 KiB, beyond.
 * See xfer.c. */
#define STG__XFER_BUF_MANY 256
#define STG__XFER_BUF_MAX 16384L /* CURL_MAX_WRITE_SIZE, libcurl's default */
#define STG__XFER_BUF_MIN 1024L  /* libcurl's READBUFFER_MIN */
long stg__xfer_buffer_size(int on_wire);
/* Set t's TLS options on easy (NULL: nothing), CA settings from the
 * environment as the curl tool reads them when t->ca_from_env asks. */
void stg__tls_apply(CURL *easy, const stg_tls_config *t);

/* The connection an attempt used, from easy's info after the transfer
 * (stg_event's connects, conn_reused, tls_handshake_us). */
typedef struct stg__conn {
    int connects;
    bool reused;
    int64_t tls_handshake_us;
} stg__conn;
void stg__xfer_conn(CURL *easy, stg__conn *out);
/* Undo stg__xfer_attach (libcurl defaults), so the caller's handle holds no
 * pointer into freed memory. */
void stg__xfer_detach(CURL *easy);
/* Move x's buffers into r (body, headers, hints); x is left empty. Returns
 * false when out of memory for the empty-buffer fallback. */
void stg__xfer_move_to(stg__xfer *x, stg_result *r);

/* Per-attempt timeouts (ms) from the policy bounded by what the deadline
 * leaves (remaining_us, INT64_MAX for none): connect >= 1; total >= 1, or
 * 0 (libcurl's "none") when there is neither a total time nor a deadline. */
void stg__attempt_timeouts(const stg_policy *p, int64_t remaining_us, long *connect_ms,
                           long *total_ms);
/* Set every per-attempt time on easy for one attempt (after
 * stg__xfer_reset and stg__xfer_attach): connect and total
 * (stg__attempt_timeouts), and the first-byte and idle times, kept by
 * x's progress callback (xfer.c). */
void stg__xfer_timeouts(CURL *easy, stg__xfer *x, const stg_policy *p, int64_t remaining_us);

/* ---- attempt.c: the end of one attempt, one step for both callers ------ */

/* What an attempt came to, in stagger's terms. */
typedef struct stg__attempt {
    int status;             /* HTTP status, 0 when none */
    stg_net_error err;
    int curl_code;
    char errtext[256];      /* redacted, "" when none */
    int64_t hint;           /* the server's wait hint, or STG_UNKNOWN */
    char final_url[2048];   /* redacted URL of this attempt */
    stg__conn conn;         /* the connection it used */
    /* A failure that another attempt would only repeat (the body over
     * max_body, response headers libcurl refuses, out of memory): the
     * request gives up with ERROR_NOT_RETRYABLE whatever the policy says. */
    bool deterministic;
    /* Redirect hop to take (stg__attempt_step with follow): the absolute
     * target (not redacted: it is sent), the method to use, and whether it
     * leaves the origin of the request's first URL. */
    bool redirect;
    char redirect_url[2048];
    stg_method redirect_method;
    bool redirect_cross_origin;
    /* The server never processed it (RFC 9113 §8.7: REFUSED_STREAM or a
     * GOAWAY above its stream); resend: the step resends it at once,
     * outside the policy, the budget and the breaker (stg__step.refused). */
    bool never_processed;
    /* The status came from a held stream's first event (xfer.c): with
     * stream_error_type its type, "" when of no known type. */
    bool stream_error;
    char stream_error_type[48];
    bool resend;
} stg__attempt;

/* Never-processed resends of one request, at most (a server that refuses
 * every stream must not loop it); past it the attempt is a RESET. */
#define STG__NEVER_PROCESSED_MAX 3

/* What the step needs from its caller. */
typedef struct stg__step {
    const stg_policy *pol;
    stg_retry_state *rs;     /* rs->attempts counts every send */
    int hops;                /* redirects followed so far (sends that are
                                not retries: not counted by the policy) */
    /* Never-processed resends so far (not counted by the policy either),
     * bumped by the step when it resends one; NULL: the caller does not
     * resend them, and such an attempt is the RESET it looks like. */
    int *refused;
    stg_rng *rng;
    int64_t now_us;
    stg_method method;       /* of this attempt */
    bool has_key;
    const char *origin_url;  /* the request's first URL (for cross-origin) */
    bool follow;             /* follow redirects */
    int max_redirects;       /* > 0 */
    /* Report the answer to the limiter, breaker and budget (the caller's:
     * the engine has per-host state, the blocking call a shared limiter). */
    void (*report)(void *ctx, const stg__attempt *a, const stg_hints *h);
    void *report_ctx;
    /* ATTEMPT_END: ev (type, id, times, method, url, host, attempt set by
     * the caller) is completed here and sent to on_event. */
    stg_event *ev;
    int64_t duration_us;
    stg_event_fn on_event;
    void *event_data;
} stg__step;

/* ---- body_hints.c: what a refusal's body says -------------------------- */

/* Largest body read for a hint (a GitHub, Google, OpenAI or Anthropic
 * error's JSON). */
#define STG__BODY_HINTS_MAX 8192
/* A 403, 429 or 5xx body (JSON, at most STG__BODY_HINTS_MAX bytes): a
 * GitHub secondary limit's "message" (stg_hints_message), the vendors'
 * error objects (stg_hints_body), added to h. Returns true when h changed. */
bool stg__body_hints_read(int status, const char *body, size_t len, stg_hints *h);
/* The same for an attempt's kept body, into x->hints, for an attempt that
 * got an HTTP answer; a wait the body gave becomes a->hint. */
void stg__body_hints(stg__xfer *x, stg__attempt *a);

/* ---- quota_answer.c: the servers' quotas, transport side ---------------- */

/* The route of a request to url for the quota limiter: "METHOD /path",
 * never the query. */
void stg__quota_route(stg_method method, const char *url, char *buf, size_t size);
/* The quotas the answer in x (its header block, status) announced, into
 * qs, with a global pause for a Discord global or GitHub secondary limit. */
void stg__quota_answer(const stg__xfer *x, int status, int64_t wall_us, stg_quota_set *qs);

/* ---- ai_cost.c: what an AI API request costs, read from its body ---------- */

/* Largest body read for a cost or a usage (the proxy's request bodies are
 * at most 16 MiB by default). */
#define STG__AI_BODY_MAX ((size_t)16 << 20)
/* The parts of a POST to one of the AI APIs' shapes (chat completions,
 * responses, completions, embeddings, Anthropic messages; the path's end
 * tells which), read from its JSON body into *p. Returns false (p zeroed)
 * for any other request or a body that is not the shape's. Untrusted bytes
 * (body, len), nothing kept. Thread-safe. */
bool stg__ai_cost_parts(const char *method, const char *url, const void *body, size_t len,
                        stg_cost_parts *p);
/* The usage an answer's body (JSON, or an SSE stream's events) reports,
 * into used[] as "tokens" (total), "input-tokens", "output-tokens" (those
 * it says; max >= 3). Returns how many. Thread-safe. */
size_t stg__ai_cost_usage(const char *body, size_t len, stg_quota_cost *used, size_t max);
/* The start of an event stream, read as it passes: buf[0..len) holds its
 * next bytes from a line's start (untrusted, not NUL-terminated). Its
 * complete lines are read, and the largest input count a "data:" event's
 * usage tells (Anthropic's message_start) raises *in (-1: none yet);
 * returns their length (the caller keeps the rest: a line in progress).
 * Thread-safe. */
size_t stg__ai_cost_lead(const char *buf, size_t len, int64_t *in);
/* stg__ai_cost_usage of the tail of a body that streamed on, with the
 * input count its start told (lead_in, from stg__ai_cost_lead; -1: none):
 * the larger input. Thread-safe. */
size_t stg__ai_cost_usage_streamed(const char *tail, size_t tail_len, int64_t lead_in,
                                   stg_quota_cost *used, size_t max);

/* Classify and redact what easy's attempt produced (code, x); url is the
 * attempt's URL, for when libcurl has no effective URL. Pure apart from
 * reading easy's info. */
void stg__attempt_end(CURL *easy, CURLcode code, const stg__xfer *x, const char *url,
                      stg__attempt *a);

/* The attempt lifecycle after classify and redact: report, decide (a
 * deterministic failure gives up, a redirect to follow becomes a->redirect
 * with d->action RETRY and wait 0, else stg_decide), ATTEMPT_END event.
 * d is the decision; the caller executes it (and emits WAIT). */
void stg__attempt_step(const stg__step *s, stg__attempt *a, const stg_hints *h,
                       stg_decision *d);


/* ---- redirect.c: stagger's own redirect hops -------------------------- */

/* The method after a redirect with status, as curl does it: 303 turns
 * anything but HEAD into GET; 301 and 302 turn POST into GET; 307, 308
 * keep it. */
stg_method stg__redirect_method(int status, stg_method m);
/* True when url is an http or https URL (a hop anywhere else, file:// or
 * ftp://, is never taken). */
bool stg__http_url(const char *url);
/* True when a and b differ in scheme, host or port (default ports made
 * explicit). A URL that does not parse is another origin. */
bool stg__cross_origin(const char *a, const char *b);
/* A copy of headers without those whose name is secret
 * (stg_redact_header_is_secret with extra). *ok false when out of memory.
 * The caller frees the list with curl_slist_free_all. */
struct curl_slist *stg__headers_without_secrets(const struct curl_slist *headers,
                                                const char *const *extra, bool *ok);

/* ---- classify.c: transport faults, and answers as a limiter sees them --- */

/* The transport class of code with what libcurl wrote in errbuf: like
 * stg_curl_classify, but *deterministic is set for failures a new attempt
 * would repeat: response headers over libcurl's limits ("Too large
 * response headers", CURLE_TOO_LARGE: OTHER), a certificate that did not
 * verify, a bad CA or client certificate file, a TLS alert the server
 * sent (TLS). A TLS handshake the peer reset or closed is RESET (a
 * transport fault). *note (never NULL) is "" or what the message should
 * say first, for people: "TLS: the server's certificate did not verify
 * (not retried)". */
/* CURLOPT_HTTP_VERSION (0: libcurl's), with PIPEWAIT for HTTP/2 so that
 * requests multiplex rather than connect; h2c prior knowledge on a libcurl
 * that breaks it on reuse gets a connection per request (xfer.c). */
void stg__http_version_apply(CURL *easy, long version);

/* The server never processed the request (an HTTP/2 stream refused, or
 * above a GOAWAY's last-stream-id): classify.c says how libcurl shows it. */
bool stg__never_processed(CURLcode code, long http, bool sent_h2, bool refused_stream,
                          const char *errbuf);
stg_net_error stg__classify_text(CURLcode code, int64_t connect_time_us, const char *errbuf,
                                 bool *deterministic, const char **note);

/* 429, or 503 with Retry-After: the server said "too fast". */
bool stg__throttled(int status, const stg_hints *h);
/* Tell sh (if it learns: on_response) the answer to a send it admitted
 * with ticket. Transport errors (status <= 0) are not reported. */
void stg__shared_report(const stg_shared_limiter *sh, const char *key, int64_t ticket, int status,
                        const stg_hints *h);

/* ---- heap.c: the engine's timers ---------------------------------------- */

/* A binary min-heap of (due, seq) with a back-pointer so an entry can be
 * removed in O(log n) when its request is cancelled. seq breaks ties in
 * insertion order. */
typedef struct stg__timer {
    int64_t due_us;
    uint64_t seq;
    void *item;
    size_t *index; /* where the item keeps its heap position; SIZE_MAX: not in */
} stg__timer;

typedef struct stg__heap {
    stg__timer *v;
    size_t n, cap;
    uint64_t next_seq;
} stg__heap;

#define STG__NOT_IN_HEAP SIZE_MAX

void stg__heap_init(stg__heap *h);
void stg__heap_free(stg__heap *h);
/* Insert; *index is kept up to date while the entry is in. Returns false
 * when out of memory (nothing inserted). */
bool stg__heap_push(stg__heap *h, int64_t due_us, void *item, size_t *index);
/* The earliest entry, or NULL when empty. */
const stg__timer *stg__heap_top(const stg__heap *h);
/* Remove the entry at position i (from its *index); sets *index to
 * STG__NOT_IN_HEAP. */
void stg__heap_remove(stg__heap *h, size_t i);
/* Make the entry at position i due at due_us when that is earlier (a
 * later one is ignored): it moves up, nothing is allocated. */
void stg__heap_advance(stg__heap *h, size_t i, int64_t due_us);

/* ---- hosts.c: per-key limiter, budget and breaker of the engine ---------- */

typedef struct stg__host_change {
    stg_breaker_state from, to;
    int64_t now_us;
} stg__host_change;

/* One per limit key (the URL's host[:port], or stg_request.limit_key).
 * Allocated one by one (the breaker and adaptive limiter hold mutexes and
 * must not move) and freed with the engine, or when forgotten (max_hosts:
 * the least recently used one that no request holds). */
typedef struct stg__host {
    struct stg__host *next; /* hash chain */
    stg__link lru; /* in the table's lru list */
    int64_t refs; /* the engine's requests whose r->host it is */
    char *key;
    bool has_bucket, has_adaptive, has_budget, has_breaker;
    /* The shared limiter refused this key by class (another process's
     * higher class asks): from then on it is paced as an engine with
     * classes in play is (engine_admit.c), so its requests ask again. */
    bool class_refused;
    stg_bucket bucket;
    stg_adaptive adaptive;
    stg_budget budget;
    stg_breaker breaker;
    /* A spent budget with budget_wait (engine.c): retries out past it (0
     * or 1) and retries held in the timer heap behind that one. */
    int over_budget_out;
    size_t budget_held;
    /* The requests waiting for its rate (engine_admit.c, "pacing"), in
     * their fair order (core/fairq.h: class, then tenant by weight; made
     * at the first, NULL until then), and the one of them asking the
     * limiter (struct req, opaque here; NULL when none waits). */
    struct stg__fairq *pace_fq;
    void *pace_head;
    /* Breaker changes, queued by the breaker's on_change (which runs with
     * the breaker's mutex held) and emitted as events afterwards. */
    stg__host_change changes[8];
    int n_changes;
    stg_breaker_change_fn user_change;
    void *user_data;
    /* A learned concurrency (engine_conc.c): the controller, the host's
     * requests holding one of its slots (admitted, up to the end of their
     * attempt), and those waiting for a slot in their fair order
     * (core/fairq.h; made at the first, NULL until then). */
    bool has_conc;
    stg_concurrency conc;
    int conc_out;
    struct stg__fairq *conc_fq;
    /* The servers' quotas (cfg.quotas): the host's requests submitted and
     * not finished, and those of them holding a quota reservation; the
     * difference is the demand that waits for its quotas. */
    int64_t q_alive, q_held;
    /* Its requests waiting for its quotas (engine_admit.c, quota_gate):
     * one queue per group of routes that share a quota and have waiters
     * (NULL: none waits). */
    struct stg__quota_q *quota_qs;
    /* A wait cut short when the host is idle (engine_early.c): its
     * requests waiting for admission (req.queued), its answers that were
     * neither a throttle nor a fault, its requests backing off after a
     * throttle that gave no hint (struct req by early_link, oldest
     * first), and the one of them whose wait was cut (NULL: none). */
    int64_t queued;
    int64_t answered;
    stg__list early;
    void *early_cut;
    /* What its AI API requests cost and how it counts them (stagger/cost.h),
     * made at its first such request (NULL until then). */
    stg_cost_model *cost_model;
} stg__host;

/* The quotas a waiter of a quota queue is charged to (stg_quota_route_ids
 * of its route when it joined; the head's again each time it asks), and
 * how many of the queue's members joined with exactly these (0: a free
 * slot). No id (a host that announced none yet: its cold probe, its
 * global pause) stands for every quota of the host. */
typedef struct stg__quota_keys {
    uint64_t id[STG_QUOTA_TICKET_MAX];
    unsigned n;
    size_t members;
} stg__quota_keys;

/* Distinct key sets kept per quota queue; past them a newcomer's keys are
 * added to the last slot's (a wider set: it can only group more). */
#define STG__QUOTA_Q_SETS 8

/* The requests waiting for their host's quotas whose routes share one of
 * them (engine_admit.c: "the quotas' waiters"), in their fair order
 * (core/fairq.h: class with its floor, then tenant by weight), the one of
 * them that asks the quotas (struct req, opaque here), and the key sets
 * its members joined with (a member's is sets[r->qset]). Made at a
 * group's first waiter, freed when its last leaves: a queue in the list
 * has a head. Per group of routes that share a quota: a request whose
 * route's quotas are free does not wait behind another group's head, and
 * what a shared quota frees goes by class and tenant whatever the route. */
typedef struct stg__quota_q {
    struct stg__quota_q *next;
    struct stg__fairq *fq;
    void *head;
    stg__quota_keys sets[STG__QUOTA_Q_SETS];
} stg__quota_q;

#define STG__DEFAULT_MAX_HOSTS 1024

typedef struct stg__hosts {
    stg__host **b;
    size_t cap, n;
    size_t max;                   /* hosts kept (cfg.max_hosts); 0: the default */
    stg__list lru;                /* of stg__host, most recently used first */
    stg_quota *quota; /* the servers' quotas, every key's (cfg.quotas);
                         made on first use, NULL until then */
} stg__hosts;

void stg__hosts_init(stg__hosts *t);
void stg__hosts_free(stg__hosts *t);
/* Find or create the host for key (set up from cfg at now_us), now the
 * most recently used; creating one past t->max first forgets the least
 * recently used host with refs == 0 (none: the table grows past max, by
 * the requests in flight at most). The caller takes a reference (refs++)
 * for as long as it keeps the pointer. NULL when out of memory (*err =
 * STG_ENOMEM) or cfg is invalid (*err = STG_EINVAL). */
stg__host *stg__hosts_get(stg__hosts *t, const char *key, const stg_engine_config *cfg,
                          int64_t now_us, int *err);
/* The engine's quota limiter, made on first use (NULL: out of memory). */
/* Free a quota queue (engine_admit.c; its members are the caller's). */
void stg__eng_quota_q_free(stg__quota_q *q);
stg_quota *stg__hosts_quota(stg__hosts *t);
/* Set up h's learned concurrency when cfg->learn is set (engine_conc.c). */
int stg__eng_conc_host_init(stg__host *h, const stg_engine_config *cfg, int64_t now_us);
/* Check that cfg's limiter, budget and breaker settings are valid. */
int stg__hosts_check_config(const stg_engine_config *cfg, int64_t now_us);

/* ---- events.c ------------------------------------------------------------ */

void stg__event_init(stg_event *ev, stg_event_type type, uint64_t id, int64_t now_us,
                     int64_t wall_us);
/* Coarse class of an attempt for logs and metrics: "2xx", "3xx", "4xx",
 * "quota" (429), "5xx", "outage" (503), "1xx", "error" (no response). */
const char *stg__status_class(int status, stg_net_error err);

/* A request's class and tenant (stg_request, stg_call_config) are valid:
 * a known class, no tenant or one stg_tenant_check accepts, a weight 0
 * (1) or in (0, 1e6]. */
static inline bool stg__class_valid(int priority, const char *tenant, double weight)
{
    return priority >= STG_PRIORITY_MIN && priority <= STG_PRIORITY_MAX &&
           (!tenant || !*tenant || stg_tenant_check(tenant, NULL) == STG_OK) &&
           (weight == 0 || (weight > 0 && weight <= 1e6));
}

#endif
