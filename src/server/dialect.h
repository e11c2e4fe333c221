/*
 * Dialect personas (`stagger serve --dialect NAME`): the server answers as a
 * real provider does, enforcing that provider's kind of quotas and writing
 * exactly the header fields its public documentation shows
 * (docs/stagger-serve.1 lists them per persona; the sources are in
 * /work/shared/dialects-reference.md and in dialect_*.c).
 *
 * A persona is a row of a static table (dialect_table.c): its quotas, its
 * refusal status, how a request's path picks a route key (GitHub resource,
 * Discord bucket) and two writers, one for the fields on every answer and
 * one for refusals. This file is the engine that the rows share
 * (dialect.c): quota state per key, all-or-nothing admission.
 *
 * Quota kinds:
 *   WINDOW  fixed windows aligned to the wall clock (window k is
 *           [k*W, (k+1)*W) in Unix time): GitHub, X, Discord, Kong and the
 *           IETF policies reset at a wall-clock instant that they announce
 *           as an epoch, a date or a delta, and aligning to the wall clock is
 *           what makes an epoch-seconds reset exact.
 *   BUCKET  a continuous bucket of capacity LIMIT refilled at LIMIT per W
 *           (CLOCK_MONOTONIC): OpenAI and Anthropic ("replenished to its
 *           maximum"), Shopify's leaky bucket (used = LIMIT - level), Azure,
 *           Stripe.
 * Scopes: per client and route key (ROUTE), per client (CLIENT), or one for
 * the whole server (SERVER: Anthropic's 529 overload).
 *
 * Invariants:
 * - Admission is all-or-nothing under one mutex: a request is admitted only
 *   when every active quota that applies to it has room for its cost, and
 *   only then is every one charged. So for a WINDOW quota, admitted units in
 *   any window <= LIMIT; for a BUCKET quota, admitted units over any interval
 *   t <= LIMIT + LIMIT/W * t.
 * - A refusal's "told" instant (the earliest instant any hint it carries
 *   allows a retry) is never earlier than the instant at which the quota that
 *   refused it has room again for the same cost, at the state of the refusal:
 *   every written wait is rounded up, never down. One exception, by design:
 *   GitHub's secondary limit carries no hint, and its told instant is the
 *   minute GitHub's documentation asks for, whatever the window (a secondary
 *   window longer than 60 s can refuse a client that waited that minute).
 * - A quota with LIMIT 0 is off: it is neither enforced nor announced.
 */
#ifndef STAGGER_SERVER_DIALECT_H
#define STAGGER_SERVER_DIALECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/map.h"
#include "server/server.h"

#define SRV_DQ_MAX 6   /* quotas per persona */
#define SRV_HDR_MAX 28 /* header fields one answer may carry */

typedef enum srv_dq_kind { SRV_DQ_WINDOW, SRV_DQ_BUCKET } srv_dq_kind;
/* TOKENS is charged a request's total tokens, INPUT its input tokens and
 * OUTPUT its output tokens (the AI personas' counts, ai.h); a request
 * costed by X-Token-Cost or --token-cost charges each of them that cost. */
typedef enum srv_dq_unit { SRV_DQ_REQUESTS, SRV_DQ_TOKENS, SRV_DQ_INPUT, SRV_DQ_OUTPUT } srv_dq_unit;
typedef enum srv_dq_scope { SRV_DQ_ROUTE, SRV_DQ_CLIENT, SRV_DQ_SERVER } srv_dq_scope;

typedef struct srv_dq_spec {
    const char *name;
    srv_dq_kind kind;
    srv_dq_unit unit;
    srv_dq_scope scope;
    int64_t limit;      /* default; --quota NAME=LIMIT/W replaces it */
    int64_t window_us;
    const char *only_route; /* applies only when the route key is this; NULL: always */
} srv_dq_spec;

/* One quota as one request sees it, after the decision. */
typedef struct srv_dq_view {
    bool applies;      /* active and relevant to this request */
    bool refused;      /* had no room for the cost (nothing was charged) */
    int64_t limit;     /* units per window / capacity */
    int64_t remaining; /* units left (after the charge when admitted) */
    int64_t reset_us;  /* to the window's end / until the bucket is full */
    int64_t wait_us;   /* refused: until the cost fits again */
    int64_t window_us;
} srv_dq_view;

typedef struct srv_header {
    char name[48];
    char value[400];
} srv_header;

/* What the persona adds to an answer, or the whole refusal. */
typedef struct srv_dout {
    unsigned status;       /* 0: admitted (the route answers); else refused */
    char *body;            /* refusal body (malloc'd; the caller takes it) */
    size_t len;
    const char *ctype;     /* refusal body's Content-Type */
    int64_t told_wall_us;  /* refusal: earliest retry instant told; 0: none */
    const char *why;       /* refusal: the quota (for stats) */
    srv_header h[SRV_HDR_MAX];
    size_t nh;
} srv_dout;

struct srv_persona;

/* The request and the decision, as the writers see them. */
typedef struct srv_dctx {
    const struct srv_persona *p;
    const srv_dq_spec *q; /* the sized quotas, p's order */
    const char *client;
    const char *url;
    char route[64];        /* the persona's route key ("" when it has none) */
    int64_t now_us;        /* CLOCK_MONOTONIC */
    int64_t wall_us;       /* CLOCK_REALTIME, read with now_us */
    int64_t cost;          /* tokens of this request (TOKENS quotas) */
    int64_t cost_in;       /* its input tokens (INPUT quotas) */
    int64_t cost_out;      /* its output tokens (OUTPUT quotas) */
    unsigned route_status; /* admitted: the route's status (0 while deciding) */
    srv_dq_view v[SRV_DQ_MAX];
} srv_dctx;

typedef struct srv_persona {
    const char *name;
    const char *summary;
    srv_dq_spec q[SRV_DQ_MAX];
    size_t nq;
    /* The route key of a path (NULL: none). */
    void (*route)(const char *url, char *out, size_t n);
    /* Fields on every answer (admitted or refused, before refuse()). */
    void (*fields)(const srv_dctx *c, srv_dout *o);
    /* A refusal: status, body, its own fields and the told instant. */
    void (*refuse)(const srv_dctx *c, srv_dout *o);
} srv_persona;

typedef struct srv_dialect {
    const srv_persona *p; /* NULL: no --dialect */
    srv_dq_spec q[SRV_DQ_MAX];
    int64_t token_cost;
    pthread_mutex_t mu; /* guards every quota state */
    srv_map states;     /* scope key -> srv_dq_state[SRV_DQ_MAX] */
    _Atomic uint64_t refused[SRV_DQ_MAX];
    _Atomic uint64_t admitted;
    _Atomic uint64_t ai_answered; /* API requests answered (--insufficient-quota-after) */
    /* The AI personas' API requests by outcome (SRV_AI_OUT_*) and their
     * tokens, for /__stats ("ai"). */
    _Atomic uint64_t ai_out[8];
    _Atomic int64_t ai_tokens_charged, ai_tokens_refunded, ai_tokens_out;
} srv_dialect;

/* Outcomes of an AI persona's API request, as /__stats and the log name them. */
enum { SRV_AI_OUT_OK, SRV_AI_OUT_STREAM, SRV_AI_OUT_STREAM_ERROR, SRV_AI_OUT_REFUSED,
       SRV_AI_OUT_OVERLOADED, SRV_AI_OUT_INSUFFICIENT_QUOTA, SRV_AI_OUT_INVALID,
       SRV_AI_OUT_ERROR };
extern const char *const srv_ai_out_names[8];

/* Count one API request's outcome (its name, one of srv_ai_out_names) and
 * tokens. Thread-safe. */
void srv_dialect_ai_count(srv_dialect *d, const char *outcome, int64_t charged, int64_t out,
                          int64_t refunded);

/* A request's tokens by unit (the AI personas', ai.h). */
typedef struct srv_dcost {
    int64_t total, in, out;
} srv_dcost;

/* The personas, NULL-terminated (dialect_table.c). */
extern const srv_persona *const srv_personas[];
const srv_persona *srv_persona_find(const char *name);

/* Set up for cfg->dialect (off when NULL). Returns 0, or -1 with a message
 * in err (unknown persona or quota, bad size, out of memory). */
int srv_dialect_init(srv_dialect *d, const stg_srv_config *cfg, char *err, size_t errlen);
void srv_dialect_destroy(srv_dialect *d);

/* Decide one request (client: the early-retry client id; cost: its tokens
 * by unit, or NULL: token_hdr, the X-Token-Cost value, else --token-cost,
 * for every unit). On return c holds the views; o->status is 0 when
 * admitted, and o holds the fields to add either way. Thread-safe. */
void srv_dialect_decide(srv_dialect *d, srv_dctx *c, srv_dout *o, const char *client,
                        const char *url, const char *token_hdr, const srv_dcost *cost,
                        int64_t now_us, int64_t wall_us);

/* Give back `tokens` output tokens an admitted request (c, decided by
 * srv_dialect_decide) was charged and did not use, to its OUTPUT and
 * TOKENS bucket quotas (never above their capacity). Thread-safe. */
void srv_dialect_refund(srv_dialect *d, const srv_dctx *c, int64_t tokens);

/* An admitted answer's fields that depend on its status (Stripe's verdict). */
void srv_dialect_after_route(const srv_dctx *c, unsigned status, srv_dout *o);

/* {"name":..., "quotas":[{name, unit, limit, window_s, refused}], "admitted"}
 * for /__stats; NULL when off. New reference. */
struct json_t;
struct json_t *srv_dialect_json(srv_dialect *d);

/* Helpers for the writers (dialect_fmt.c). */
void srv_dout_add(srv_dout *o, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void srv_dout_body(srv_dout *o, const char *ctype, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Go time.Duration.String() of us rounded up to whole ms: "12ms", "1s",
 * "1.5s", "6m0s", "1h2m3.5s". */
void srv_fmt_go_duration(int64_t us, char *buf, size_t n);
/* RFC 3339 UTC of Unix seconds: "2025-08-21T12:40:59Z". */
void srv_fmt_rfc3339(int64_t unix_s, char *buf, size_t n);
/* us as decimal seconds with `places` decimals, rounded up: "0.573". */
void srv_fmt_dec_seconds(int64_t us, int places, char *buf, size_t n);
/* Standard base64 (RFC 4648, padded) of s. */
void srv_fmt_base64(const char *s, char *buf, size_t n);
/* Ceil of us / unit (us >= 0). */
int64_t srv_ceil_div(int64_t us, int64_t unit);

#endif
