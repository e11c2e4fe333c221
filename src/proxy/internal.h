/*
 * libstagger-proxy internals shared by its files (never installed):
 *   front.c    libmicrohttpd: the access handler, answers, the body reader;
 *   relay.c    the engine thread: commands from the front, the body sink,
 *              the done callback;
 *   target.c   where a request goes: routes, forward mode, CONNECT;
 *   head_check.c  the request-head rules (pure: what is refused, why);
 *   headers.c  header rewriting both ways (hop-by-hop, Host, Via);
 *   control.c  the Stagger-Deadline/-Retries/-Priority/-Cost/-Timeout request headers;
 *   watch.c    clients that hang up while their connection is suspended;
 *   admin.c    /__stagger/metrics and /__stagger/health;
 *   conns.c    the client connections: head timeout, slots kept free;
 *   via.c      the proxy's Via pseudonym, and loop detection by it;
 *   proxy.c    start, drain, stop, the log.
 *
 * Threads and the one lock: the loop thread (relay.c: MHD in external
 * epoll mode, the front's callbacks, the engine), the watcher and the
 * controlling thread meet in p->mu, which guards every px_req field marked
 * "mu" and the command queue. The engine and MHD (but for
 * MHD_resume_connection, which is thread-safe, and MHD_stop_daemon once
 * the loop has ended) are touched only by the loop thread; the front asks
 * the engine for things through commands, which the loop runs after each
 * MHD_run. Nobody calls into the engine or MHD's stop/start with p->mu
 * held; the only MHD calls made under it are MHD_suspend_connection (from
 * a callback of that connection) and MHD_resume_connection, which never
 * call back into us.
 *
 * Lifetime: a px_req has one reference per holder: the MHD side (from the
 * URI callback to the completed callback), the engine side (from submit
 * to done), each queued command, and a streaming response's reader. The
 * last unref frees it.
 *
 * Invariants (asserted in front.c, relay.c and watch.c where they can be):
 * a request is submitted at most once, and its done callback
 * comes exactly once (the engine's contract), after which the engine never
 * touches it; a connection is resumed only by the side that finds
 * `suspended` set, which clears it under mu, so it is resumed once per
 * suspension; a 2xx body is buffered at most PX_HIGH_WATER (+ one libcurl
 * write) before the upstream transfer is paused; buffered request bodies
 * hold at most max_buffered bytes together (each request's `charged`,
 * given back when it is freed); a non-2xx body is held
 * in memory up to PX_SPOOL_MEM, the rest on disk, up to max_body (a retry
 * may follow, so it can neither be sent yet nor be dropped), never cut:
 * a longer one is a 502.
 */
#ifndef STAGGER_PROXY_INTERNAL_H
#define STAGGER_PROXY_INTERNAL_H

#include <pthread.h>
#include <stdio.h>

#include <microhttpd.h>

#include "proxy/head_check.h"
#include "proxy/proxy.h"
#include "util/list.h"

#define PX_HIGH_WATER ((size_t)256 << 10) /* buffered 2xx body: pause upstream */
#define PX_LOW_WATER ((size_t)64 << 10)   /* ... and resume it below this */
#define PX_DEFAULT_MAX_REQUEST_BODY ((size_t)16 << 20)
/* Buffered request bodies, all requests together (--max-request-buffer):
 * a body that would pass it streams once instead. A buffered body is held
 * once: by the front while it arrives (its buffer grows as the bytes come,
 * doubling up to its Content-Length), then by the engine (which copies it
 * at submit; the front's copy is freed then). */
#define PX_DEFAULT_MAX_BUFFERED ((size_t)256 << 20)
/* A connection's libmicrohttpd pool: its request head must fit (a larger
 * one gets 431; 16 KiB heads, Node's limit, fit), and MHD zeroes the whole
 * pool after each request, so it is what a kept-alive idle connection
 * costs. */
#define PX_CONN_POOL ((size_t)32 << 10)
/* A submitted request first waits unsuspended for this many MHD_run calls
 * (front.c, park): most answers come within them on a loaded proxy, and a
 * suspension costs MHD an epoll_ctl DEL, an ADD and a recv that finds
 * nothing at its resume. */
#define PX_PARK_RUNS 2
/* A request head must be whole within this of its connection's start (of
 * its request line on a kept-alive one): --head-timeout's default. */
#define PX_DEFAULT_HEAD_TIMEOUT STG_SEC(10)
#define PX_SPOOL_MEM ((size_t)64 << 10) /* a non-2xx body beyond: to a file */
/* ... and beyond max_body (--max-body, this by default) a 502, not a cut:
 * a client of --forward picks the upstream, so the upstream is no
 * reason to trust the size of what it sends. */
#define PX_DEFAULT_MAX_BODY ((uint64_t)64 << 20)
#define PX_DEFAULT_MAX_SPOOL ((uint64_t)1 << 30) /* all requests' together */

typedef struct px_req px_req;

/* A client connection (conns.c): loop thread only. */
typedef struct px_conn {
    struct stg_proxy *p;
    int fd;
    int64_t head_start_us; /* its open head began (connection, or request line) */
    bool busy;             /* a request's head is whole: it is being handled */
    bool kept;             /* a request completed on it: kept alive */
    bool line;             /* kept, and the next request line came */
    bool closing;          /* shut down by us; MHD closes it */
    stg__link link;        /* in p->conns */
} px_conn;

/* A request's Stagger-Timeout (control.c): each time in µs, 0 where the
 * proxy's own applies. */
typedef struct px_timeouts {
    int64_t connect_us, first_byte_us, idle_us, total_us;
} px_timeouts;

struct px_req {
    stg_proxy *p;
    uint64_t serial;   /* unique, for the watcher */
    int refs;          /* mu */
    struct MHD_Connection *conn;
    int fd;            /* the client's socket */
    char *uri;         /* the raw request target */
    char *host;        /* the client's Host field (what it calls us), or NULL */
    int64_t start_us;

    /* The upstream request, built by the front before submit, read-only
     * afterwards (the engine copies it at submit). */
    char *method;
    char *url;
    char **hdrs;       /* "Name: value", NULL-terminated */
    size_t n_hdrs;
    char idem_key[64]; /* "" : none */
    int64_t deadline_us;
    int max_attempts;
    int priority;      /* Stagger-Priority: a class (stagger/priority.h) */
    char tenant[STG_TENANT_MAX + 1]; /* Stagger-Tenant; "": none */
    double weight;     /* its ;w= (0: 1) */
    stg_quota_cost *cost; /* Stagger-Cost (control.c), n_cost units; NULL: none */
    size_t n_cost;
    px_timeouts timeouts; /* Stagger-Timeout; zeros: the proxy's */
    bool begun;        /* the first handler call happened */
    bool early;        /* answered by the front (admin, error): no upstream */
    const char *why;   /* the front's own reason for its answer (a static
                        * token: "bad-field-name", "no-route"...), for the
                        * log; NULL: the engine's reason */
    char *body;        /* the request body */
    size_t body_len, body_cap;
    bool body_too_big;
    size_t charged;    /* mu: bytes of p->buffered this request holds */
    /* A body over max_request_body streams once (mu while streaming):
     * body[body_off..body_len) is what the engine has not read yet, at
     * most PX_HIGH_WATER; body_total its Content-Length, or -1. */
    bool body_stream;
    size_t body_off;
    int64_t body_total;
    bool body_done;      /* the client's last body byte is in */
    bool read_paused;    /* the engine's read found nothing: resume it */
    bool upload_blocked; /* the buffer was full: the upload is suspended */

    /* Shared with the engine thread (mu). */
    bool submitted;    /* a SUBMIT command was queued */
    bool engine_done;  /* the done callback ran */
    bool has_id;
    uint64_t id;
    bool suspended;    /* we suspended conn and nobody resumed it yet */
    int suspends, resumes; /* mu: counted for the resume-once assertion
                              (suspends - resumes is 1 exactly while
                              suspended) */
    int park_runs;     /* MHD runs left before a waiting request suspends */
    bool client_gone;  /* the client hung up: cancel, answer nothing */
    bool head;         /* a 2xx head arrived: the answer streams */
    bool queued;       /* an MHD response was queued */
    int status;
    char *rhdrs;       /* the answer's raw header block */
    size_t rhdrs_len;
    int64_t rlen;      /* the 2xx head's Content-Length, or -1 */
    char *sbuf;        /* streamed body bytes not yet given to MHD */
    size_t slen, soff, scap;
    bool upstream_paused;
    bool stream_end, stream_ok;
    bool final;        /* the done callback's answer (when not streamed) */
    stg_reason reason;
    stg_net_error error;
    char errtext[256];
    int attempts;
    char *fbody;       /* the final body when none was spooled */
    size_t fbody_len;
    /* The body of a non-2xx answer (STG_BODY_OTHER), kept whole until the
     * engine says whether it is the final answer: PX_SPOOL_MEM bytes in
     * memory, then all of it in an unlinked temporary file. Written by
     * the engine thread until done, read by the front's reader after. */
    char *obuf;
    size_t olen;
    FILE *ofile;
    uint64_t ototal;
    bool ofull;        /* it passed max_body (or the disk is full) */
    bool otoo_large;   /* ... because it passed max_body or max_spool */
    bool ospool_full;  /* ... max_spool, all requests' bodies together */
    uint64_t ocharged; /* mu: bytes of p->spooled this request holds */
    px_req *w_next, *w_prev; /* the watch list, while suspended */
};

enum px_cmd_kind { PX_SUBMIT = 1, PX_CANCEL = 2, PX_RESUME = 3, PX_REOPEN = 4 };

typedef struct px_cmd {
    enum px_cmd_kind kind;
    px_req *r; /* holds a reference; NULL for REOPEN */
} px_cmd;

typedef struct px_route {
    char *prefix;   /* without a trailing '/', "" for the default */
    char *base;     /* the upstream without a trailing '/' */
    /* base's parts, to recognise a Location on it (px_location): scheme
     * and host lower-cased, the port explicit, the path without a
     * trailing '/' ("" for the root). */
    char *scheme, *host, *port, *path;
} px_route;

struct stg_proxy {
    stg_proxy_config cfg;
    px_route *routes;
    size_t n_routes;
    size_t max_request_body;
    size_t max_buffered; /* cfg's, or the default */
    size_t buffered;     /* mu: the bytes the requests' body buffers hold */
    uint64_t max_body;   /* a held (non-2xx) answer body: cfg's, or the default */
    uint64_t max_spool;  /* ... all of them together: cfg's, or the default */
    uint64_t spooled;    /* mu: the bytes they hold now */
    struct MHD_Daemon *mhd;
    int mhd_fd;          /* MHD's epoll descriptor: the loop waits on it */
    unsigned port;
    stg_engine *engine;
    pthread_t engine_thread, watch_thread;
    bool engine_started, watch_started;

    pthread_mutex_t mu;
    pthread_cond_t cv;   /* signalled when a request finishes (drain) */
    px_cmd *cmds;        /* mu */
    size_t n_cmds, cap_cmds;
    bool stopping;       /* mu: the engine thread cancels all and exits */
    bool draining;       /* mu: not accepting new requests */
    bool quiesce, quiesced; /* mu: a drain asked the loop to stop listening; done */
    int in_flight;       /* mu: submitted, done not yet run */
    int open;            /* mu: submitted, the client's exchange not yet over */
    uint64_t next_serial;
    px_req *watch_head;  /* mu */
    uint64_t watch_gen;  /* mu: bumped on every change */
    int watch_fd;        /* eventfd: the watch list changed, or stop */
    bool watch_stop;     /* mu */

    stg_metrics *metrics;
    /* Whole requests as the client saw them, head to answer (admin.c:
     * stagger_proxy_request_duration_seconds), behind hist_mu. */
    pthread_mutex_t hist_mu;
    uint64_t hist_le[15], hist_count;
    double hist_sum;
    pthread_mutex_t log_mu;
    FILE *log;
    stg_logger *logger;
    uint64_t requests, client_gone; /* mu: counters for health */

    char via[32];        /* "1.1 stagger-<8 hex>": ours (via.c) */
    /* The client connections (conns.c), loop thread only. */
    stg__list conns;     /* of px_conn, oldest first */
    unsigned n_conns;    /* those not being closed by us */
    unsigned conn_limit; /* MHD's connection limit */
    int64_t head_timeout_us;
    int64_t next_sweep_us;
};

/* ---- relay.c ---------------------------------------------------------- */
/* The loop thread: MHD, the commands, the engine. */
void *px_engine_main(void *arg);
/* Queue a command (takes a reference on r). Call with p->mu held; wake
 * the engine after unlocking (px_wake). Returns false when out of memory. */
bool px_cmd_push(stg_proxy *p, enum px_cmd_kind kind, px_req *r);
void px_wake(stg_proxy *p);
/* Resume r's connection if we suspended it. p->mu held. */
void px_resume_locked(px_req *r);
/* Drop a reference; frees r at the last. p->mu held. */
void px_unref_locked(px_req *r);
void px_req_free(px_req *r);

/* ---- front.c ----------------------------------------------------------- */
void *px_uri_cb(void *cls, const char *uri, struct MHD_Connection *c);
enum MHD_Result px_on_request(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls);
void px_on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                     enum MHD_RequestTerminationCode toe);
/* Queue a small answer: status, a JSON body {"error": msg}, Via. */
enum MHD_Result px_answer_error(struct MHD_Connection *c, unsigned status, const char *msg,
                                const char *stagger_error);
/* The same with an Allow field (allow may be NULL) and, when close is
 * set, Connection: close (MHD then closes the connection after it and
 * reads nothing more from it). */
enum MHD_Result px_answer_error2(struct MHD_Connection *c, unsigned status, const char *msg,
                                 const char *stagger_error, const char *allow, bool close);

/* ---- target.c ---------------------------------------------------------- */
/* The upstream URL of a request target (malloc'd), or NULL with *status and
 * msg saying why (404 no route, 400 bad target or forward mode off). */
char *px_target(const stg_proxy *p, const char *uri, unsigned *status, char *msg, size_t msgsize);
int px_routes_init(stg_proxy *p, char *err, size_t errsize);
/* The Location an upstream answer to r's request should carry to the
 * client (malloc'd), or NULL to pass loc unchanged. */
char *px_location(const stg_proxy *p, const px_req *r, const char *loc);
void px_routes_free(stg_proxy *p);

/* ---- headers.c --------------------------------------------------------- */
/* The request's header fields as MHD parsed them (pointers into MHD's
 * pool: valid until the request ends), in a malloc'd array (free it; never
 * NULL but when out of memory), *n of them. */
px_field *px_request_fields(struct MHD_Connection *c, size_t *n);
/* The lines that go upstream for the fields f[0..n) (px_head_check
 * accepted them): "Name: value", malloc'd, in a malloc'd NULL-terminated
 * array *lines (*n_lines of them); hop-by-hop fields and the names any
 * Connection field lists, Host, Content-Length, Expect, Stagger-* and
 * the first Idempotency-Key removed (that one copied into idem when it
 * fits); Via added; "Accept:" when the client sent no Accept (so libcurl
 * adds none). Pure but for malloc. Returns 0, or -1 when out of memory
 * (nothing allocated). */
int px_forward_fields(const px_field *f, size_t n, char ***lines, size_t *n_lines, char *idem,
                      size_t idem_size);
/* px_forward_fields into r->hdrs, r->n_hdrs and r->idem_key. */
int px_request_headers(px_req *r, const px_field *f, size_t n);
/* The bytes the answer's fields take in the head the front sends for
 * block (what px_response_headers adds, Via included). */
size_t px_response_head_size(const px_req *r, const char *block, size_t len);
/* Add the answer's end-to-end headers from a raw block to resp (a
 * Location on a routed upstream rewritten by px_location), and Via. */
void px_response_headers(struct MHD_Response *resp, const px_req *r, const char *block,
                         size_t len);
/* The status code of a raw header block's status line, 0 if none. */
int px_block_status(const char *block, size_t len);
/* The Content-Length of a raw header block, or -1. */
int64_t px_block_length(const char *block, size_t len);

/* ---- control.c --------------------------------------------------------- */
/* Read and check Stagger-Deadline, -Retries, -Priority, -Cost into r. Returns 0,
 * or -1 with msg saying which header is bad. */
int px_control(px_req *r, struct MHD_Connection *c, char *msg, size_t msgsize);
/* A duration as the control header takes it: "20s", "500ms", "2m", "1h",
 * "100us"; a bare number is seconds. > 0. */
bool px_parse_duration(const char *s, int64_t *us);
/* A Stagger-Timeout value into *t (zeroed first, and left zero when the
 * value is bad). Pure; fuzzed (fuzz/fuzz_proxy_timeout.c). */
bool px_parse_timeout(const char *s, px_timeouts *t);
/* A Stagger-Tenant value, "name" or "name;w=2" (blanks around ; and =):
 * the name (stg_tenant_check) into name[size], the weight (0: not given;
 * else > 0, <= 1e6) into *weight. False (outputs untouched) when bad. */
bool px_parse_tenant(const char *s, char *name, size_t size, double *weight);

/* ---- watch.c ----------------------------------------------------------- */
void *px_watch_main(void *arg);
/* Suspend r's connection and watch its socket. p->mu held, from a
 * callback of r's connection. */
void px_suspend_locked(px_req *r);
void px_watch_remove_locked(px_req *r);

/* ---- admin.c ----------------------------------------------------------- */
/* Answer /__stagger/... (GET and HEAD only: 405 with Allow otherwise);
 * *status gets the status queued. Returns MHD_YES/NO like a handler. */
enum MHD_Result px_admin(stg_proxy *p, struct MHD_Connection *c, const char *path,
                         const char *method, unsigned *status);

/* ---- conns.c ----------------------------------------------------------- */
/* MHD_OPTION_NOTIFY_CONNECTION: a connection starts or closes. */
void px_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                    enum MHD_ConnectionNotificationCode toe);
/* c's px_conn, or NULL. */
px_conn *px_conn_of(struct MHD_Connection *c);
/* A request line came (the URI callback); its head is whole (the access
 * handler's first call); its exchange is over (the completed callback). */
void px_conn_request_line(struct MHD_Connection *c);
void px_conn_head_done(struct MHD_Connection *c);
void px_conn_request_done(struct MHD_Connection *c);
/* Close the heads open too long, and free slots near the limit (after
 * each MHD_run, loop thread). */
void px_conns_sweep(stg_proxy *p);

/* ---- via.c ------------------------------------------------------------- */
/* Choose p->via. */
void px_via_init(stg_proxy *p);
/* Does the request's Via hold p's own pseudonym (a loop)? */
bool px_via_loop(const stg_proxy *p, struct MHD_Connection *c);
/* What a looping request is answered (508, Stagger-Error: loop-detected). */
#define PX_LOOP_MSG                                                                                \
    "this request has been through this stagger proxy already (its Via holds the proxy's "       \
    "own name): the proxy is pointed at itself"

/* ---- proxy.c ----------------------------------------------------------- */
void px_log_event(const stg_event *ev, void *data);
/* One "proxy" line for a finished request (redacted). */
void px_log_request(stg_proxy *p, const px_req *r, int client_status);
/* A request answered after us microseconds (admin.c). */
void px_observe_request(stg_proxy *p, int64_t us);
/* Print the proxy's own series (a stg_metrics source; admin.c). */
void px_metrics_source(FILE *f, void *proxy);
int64_t px_mono_us(void);

#endif
