/*
 * Quotas: every limit a server announced, kept per host and per the key the
 * server names, and the admission that respects all of them at once.
 *
 * A response may announce several quotas (requests and tokens; per minute
 * and per day; one per IETF policy), each parsed by stg_hints_feed() into
 * a stg_quota_obs of a stg_quota_set. This limiter keeps each one, keyed by
 * (host, server key, unit, window): the server key is what the dialect
 * names (GitHub's resource, Discord's bucket, an IETF policy and its pk),
 * "" for quotas of the whole host. It learns which requests spend which
 * key: a response to a route (METHOD and path, never the query) that named
 * keys maps later requests of that route to those keys (several routes may
 * share one key, as Discord's buckets do). A request of a route not yet
 * seen is charged to every quota the host announced, the safe guess; its
 * answer then refunds the keys it did not name.
 *
 * Cold start: before a host's first answer nothing is known, so its first
 * send goes alone and the others wait for that answer (one round trip),
 * instead of a first wave that could pass any quota before the server had
 * a chance to announce it (stg_quota_config.no_cold_probe turns it off).
 * The answer is there when its head is (stg_quota_head: the status line
 * and header fields, where the quotas are told), not when its body ends:
 * a first call that streams for minutes holds the others for one round
 * trip, not for the stream.
 *
 * Admission (stg_quota_acquire) admits a request only when every quota of
 * its key, the host's own quotas and the host's global pause (Discord
 * global, GitHub secondary limits) all allow it, and otherwise says how
 * long to wait. Rules, for one quota with `remaining` r known:
 *  - never more than r units are admitted before the announced reset,
 *    counting the requests still in flight (reserve, then settle: a
 *    request's cost is reserved at admission; the next answer's remaining
 *    count replaces the estimate, less what is still in flight);
 *  - pace, don't burst: with r and the reset t known, a request of cost c
 *    moves the quota's pace on by c * t * (1 + margin) / r (a GCRA whose
 *    rate spreads the r units over t), and the pace may run ahead of now
 *    by at most burst * t (about 38% of r at once with the default burst),
 *    so that a large demand is spread instead of spending r at once and
 *    meeting the wall. The caller that knows how many requests wait for
 *    the host (stg_quota_acquire_demand) paces only when they do not fit:
 *    d waiting requests of cost c with d * c <= r all go now (the last
 *    window's few requests are not spread over its reset), neither paced
 *    nor moving the pace; the pace ends before the reset by the margin's
 *    share of the time since the reset was told, so that the count is all
 *    sent, and arrives, before the window turns;
 *  - a reset said in whole seconds is rounded up: an answer of the same
 *    window (its count did not grow, its reset less than a second after
 *    the one held) bounds the instant from above, and the earliest bound
 *    is kept; the window may turn up to a second before it (GitHub's and
 *    X's epoch resets too), so the pace ends at that earliest instant,
 *    and the count all goes in its window whatever the window's phase;
 *  - the server counts in the order requests arrive, not in the order
 *    they were admitted: a higher count of the window held is older news,
 *    whichever request's answer it is (only that request's unit comes
 *    back);
 *  - at the reset the full quota is NOT assumed back (the IETF draft: t
 *    says when *more* quota comes, not that all of it does): the estimate
 *    keeps what it held (a reset never takes quota away), and a spent one
 *    becomes unknown: one request at a time probes until an answer gives
 *    the count. A quota the probe's answer does not mention again goes
 *    dormant (no count) until the server announces it again;
 *  - a quota spent with no reset announced (Shopify's used/size) probes
 *    again after empty_wait (1 s), not at once; so does one left spent
 *    with nothing in flight and no reset known, however it got there (an
 *    answer that did not mention it, a send that got no answer): one
 *    probe after empty_wait, never a wait for an answer that is not coming;
 *  - OpenAI's and Anthropic's resets are the instant the bucket is full:
 *    such a quota refills one unit per t / (limit - remaining) and is not
 *    spread over t (the bucket paces itself);
 *  - a request declares its cost per unit (stg_quota_cost, e.g. 1200
 *    "tokens"); a unit it does not declare costs 1. A cost above a quota's
 *    announced limit can never be admitted: STG_ETOOBIG.
 *
 * Memory is bounded (stg_quota_config): at most max_hosts hosts, each with
 * at most max_keys quotas and max_routes routes; past a cap the least
 * recently used entry is forgotten (a forgotten quota is relearned from the
 * next answer that announces it; a ticket naming it settles nothing).
 *
 * Time is a parameter (monotonic microseconds), nothing here reads a clock
 * or does I/O. The handle is thread-safe (one mutex).
 */
#ifndef STAGGER_QUOTA_H
#define STAGGER_QUOTA_H

#include "common.h"
#include "hints.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most quotas one ticket can charge, and so most quotas kept per host. */
#define STG_QUOTA_TICKET_MAX 32

/* Unit names, as stg_quota_obs.unit and stg_quota_cost.unit. */
#define STG_QUOTA_UNIT_LEN 24

/* What one request costs in one unit ("tokens", "requests", ...). */
typedef struct stg_quota_cost {
    char unit[STG_QUOTA_UNIT_LEN]; /* NUL-terminated, matched exactly */
    int64_t amount;                /* >= 0 */
    uint64_t stg__reserved[2];     /* room to grow (docs/ABI.md); leave zero */
} stg_quota_cost;

/* The request header that carries a cost, "Stagger-Cost: tokens=1200,
 * requests=1": how a batch job's JSONL "cost" is stored with its headers
 * (so a resumed batch still has it), and the spelling a client of the
 * proxy may use. It is stagger's own: the engine's callers take it out of
 * the headers they send (stg_quota_cost_parse) and never send it. */
#define STG_QUOTA_COST_HEADER "Stagger-Cost"

/* Most units one cost names. */
#define STG_QUOTA_COSTS_MAX 8

/* Parse a Stagger-Cost value: a comma-separated list of unit=amount, a
 * unit being 1..23 characters of [A-Za-z0-9_.-], an amount 0..10^15
 * (decimal digits), optional spaces or tabs around each item; a unit at
 * most once. Untrusted bytes: (value, len), not NUL-terminated, never
 * read past. Fills costs[0..*n) (at most max). Returns STG_OK, STG_EPARSE
 * (malformed, empty, a unit twice) or STG_ERANGE (more than max items, an
 * amount too large); STG_EINVAL for NULL pointers. Thread-safe. */
STG_API int stg_quota_cost_parse(const char *value, size_t len, stg_quota_cost *costs,
                                 size_t max, size_t *n);

/* Zeroed fields take the defaults given. */
typedef struct stg_quota_config {
    int64_t max_hosts;     /* hosts kept; 0: 256 */
    int64_t max_keys;      /* quotas kept per host, 1..STG_QUOTA_TICKET_MAX; 0: 32 */
    int64_t max_routes;    /* route -> key mappings per host; 0: 256 */
    double margin;         /* pacing slack, 0..1: r units over t * (1 + margin);
                              0: 0.05 (a negative value means none) */
    int64_t probe_wait_us; /* a request behind a probe asks again after this;
                              0: 20 ms */
    bool no_cold_probe;    /* admit at once to a host that never answered
                              (default false: its first send goes alone) */
    double burst;          /* how far the pace may run ahead, as a share of
                              the time to the reset, 0..1; 0: 0.5 (about 38%
                              of a remaining count may go at once); a
                              negative value means none */
    int64_t empty_wait_us; /* a quota spent with no reset said: probe again
                              after this; 0: 1 s */
    uint64_t stg__reserved[5]; /* room to grow (docs/ABI.md); leave zero */
} stg_quota_config;

typedef struct stg_quota stg_quota;

/* What an admitted request reserved, to be settled once by
 * stg_quota_settle. Owned by the caller, contents private; a zeroed ticket
 * (or one settled already) holds nothing. */
typedef struct stg_quota_ticket {
    int64_t stg__private[2 + 2 * STG_QUOTA_TICKET_MAX];
} stg_quota_ticket;

/* What the limiter knows of one host, for display and tests. */
typedef struct stg_quota_host_info {
    int64_t quotas;         /* quotas kept */
    int64_t routes;         /* routes mapped to keys */
    int64_t paused_for_us;  /* global pause left, 0: none */
    uint64_t stg__reserved[4];
} stg_quota_host_info;

/* A new limiter (cfg may be NULL: defaults). Returns NULL with *err (if not
 * NULL) STG_EINVAL for a bad config or STG_ENOMEM. Free with stg_quota_free. */
STG_API stg_quota *stg_quota_new(const stg_quota_config *cfg, int *err);

/* Count an answered send against the quotas ticket t charged (call it
 * before t is settled, which empties it): as refused (the server's 429,
 * 503 or 529) or admitted; stg_quota_each shows the counts per quota. A
 * send whose ticket charged nothing (no quota known yet, a host's cold
 * probe) is counted nowhere. Returns STG_OK or STG_EINVAL. Thread-safe. */
STG_API int stg_quota_tally(stg_quota *q, const char *host, const stg_quota_ticket *t,
                            bool refused);

/* Free the limiter. Accepts NULL. */
STG_API void stg_quota_free(stg_quota *q);

/* Admit a request of route (e.g. "GET /repos/x/y", may be NULL: unknown)
 * to host (the limit key) at now_us, costing costs[0..n_costs) (may be
 * NULL/0: one request). Strings are borrowed.
 * STG_OK: admitted; what it spent is in *t (the caller settles it once,
 *   with the answer, or without one if the send never happened).
 * STG_EAGAIN: not now; *wait_us (> 0) is when to ask again; nothing taken.
 * STG_ETOOBIG: the cost passes a quota's announced limit: never admitted.
 * STG_EINVAL: q, host or t NULL, or a negative amount.
 * A host that never answered admits one send at a time (cold start; its
 * entry is made here, the one allocation; out of memory: admitted).
 * Thread-safe. */
STG_API int stg_quota_acquire(stg_quota *q, const char *host, const char *route,
                              const stg_quota_cost *costs, size_t n_costs, int64_t now_us,
                              stg_quota_ticket *t, int64_t *wait_us);

/* stg_quota_acquire, knowing the demand: demand requests (this one
 * included) wait for host's quotas. A quota whose remaining count holds
 * them all (demand * cost <= remaining) admits without pacing; one that
 * does not paces as stg_quota_acquire does (demand <= 0: unknown, always
 * paced). The count itself is never passed either way. Thread-safe. */
STG_API int stg_quota_acquire_demand(stg_quota *q, const char *host, const char *route,
                                     const stg_quota_cost *costs, size_t n_costs,
                                     int64_t demand, int64_t now_us, stg_quota_ticket *t,
                                     int64_t *wait_us);

/* Settle t (from stg_quota_acquire; may be NULL or empty) with the answer's
 * quotas qs (NULL: no answer came, e.g. a transport error; then what t
 * reserved stays spent), and learn them: every quota in qs is kept or
 * updated (its remaining count, less what is still in flight, becomes the
 * estimate), a global one pauses the whole host for its reset, and route
 * is mapped to the keys qs named. t is emptied. Returns STG_OK, STG_EINVAL
 * (q or host NULL) or STG_ENOMEM (then what could not be kept is not).
 * Thread-safe. */
STG_API int stg_quota_settle(stg_quota *q, const char *host, const char *route,
                             stg_quota_ticket *t, const stg_quota_set *qs, int64_t now_us);

/* stg_quota_settle, knowing what the request really used per unit,
 * used[0..n_used) (an AI API answer's usage, read from its body; all
 * zero for a refusal, 429 or 529, which the server did not count): a
 * quota that t charged and qs tells no remaining count for gets back what
 * t reserved beyond its unit's use (or gives up what the use passed it
 * by), within its limit; a unit not in used, or a quota qs tells the count
 * of (the server's own word), is settled as stg_quota_settle does.
 * used may be NULL when n_used is 0. Returns as stg_quota_settle, and
 * STG_EINVAL for a negative amount. Thread-safe. */
STG_API int stg_quota_settle_used(stg_quota *q, const char *host, const char *route,
                                  stg_quota_ticket *t, const stg_quota_set *qs,
                                  const stg_quota_cost *used, size_t n_used, int64_t now_us);

/* The head of t's answer arrived (its final status line and header
 * fields, the body still to come: a long body, an SSE stream), announcing
 * qs (NULL: nothing): learn qs now, as stg_quota_settle would, so that the
 * sends that follow are paced by it, and end t's cold probe (the host has
 * answered: the others need not wait for the body). What t reserved in a
 * quota qs tells the count of is settled now (that count is the server's
 * word and has t in it); the rest stays reserved until t is settled,
 * once, at the end with the body's usage (stg_quota_settle_used) or with
 * no answer (NULL: stays spent). That settle does not learn its qs again
 * (the head's, told already: its count and reset are old by then), nor
 * count t's cold probe twice; a second stg_quota_head of t is a no-op.
 * Strings are borrowed. Returns STG_OK, STG_EINVAL (q, host or t NULL) or
 * STG_ENOMEM (then what could not be kept is not). Thread-safe. */
STG_API int stg_quota_head(stg_quota *q, const char *host, const char *route,
                           stg_quota_ticket *t, const stg_quota_set *qs, int64_t now_us);

/* Give back what t reserved, for a send that never happened (the request
 * ended before it left): in-flight and estimate both return. t is emptied.
 * Returns STG_OK or STG_EINVAL (q or host NULL). Thread-safe. */
STG_API int stg_quota_cancel(stg_quota *q, const char *host, stg_quota_ticket *t);

/* What the limiter holds for host at now_us (all zero when unknown).
 * Returns STG_OK or STG_EINVAL. Thread-safe. */
STG_API int stg_quota_host_get(stg_quota *q, const char *host, int64_t now_us,
                               stg_quota_host_info *info);

/* Which of host's quotas a request of route (e.g. "GET /repos/x/y"; NULL:
 * not known) is charged to now, as stg_quota_acquire would charge it: the
 * quotas of the keys the route's answers named and the host's own (key
 * ""), or, for a route not mapped yet, every quota the host holds. Each
 * quota is named by an id of its own, never reused by this limiter (a
 * quota forgotten and learned again gets a new one), so that a caller can
 * tell whether two routes share a quota (the engine orders the waiters of
 * routes that share one in one queue). Routes are learned from answers,
 * so the answer can change with the next settle. Writes at most max ids,
 * in no particular order, to ids[0..*n) (STG_QUOTA_TICKET_MAX always
 * suffice); a host never seen, or that announced no quota, gives *n = 0.
 * Changes nothing (no route or quota becomes more recently used). Strings
 * are borrowed. Returns STG_OK or STG_EINVAL (q, host or n NULL, or ids
 * NULL with max > 0). Thread-safe. */
STG_API int stg_quota_route_ids(stg_quota *q, const char *host, const char *route,
                                uint64_t *ids, size_t max, size_t *n);

/* One quota as the limiter holds it (stg_quota_each): what the server
 * announced beside what stagger reserved. -1: not known. */
typedef struct stg_quota_view {
    char key[64];                  /* the server's key; "" for the host's own */
    char unit[STG_QUOTA_UNIT_LEN]; /* "requests", "tokens", ... */
    int64_t window_us;             /* the quota's window as announced, or -1 */
    int64_t limit;                 /* the announced limit */
    int64_t told_remaining;        /* the remaining count last announced */
    int64_t estimate;              /* units admissible now, in flight excluded */
    int64_t inflight;              /* units reserved by sends not answered yet */
    int64_t reset_in_us;           /* until the announced reset (0: passed) */
    /* Answered sends whose ticket charged this quota (stg_quota_tally):
     * not refused, and refused (429, 503, 529). */
    int64_t admitted, refused;
    uint64_t stg__reserved[2];     /* room to grow (docs/ABI.md); zero */
} stg_quota_view;

/* Called once per quota, host first (borrowed strings), with the limiter's
 * lock held: fn must not call the limiter. */
typedef void (*stg_quota_each_fn)(const char *host, const stg_quota_view *v, void *data);

/* Every quota the limiter holds at now_us, for display (the live pages,
 * the metrics). Returns STG_OK or STG_EINVAL (NULL). Thread-safe. */
STG_API int stg_quota_each(stg_quota *q, int64_t now_us, stg_quota_each_fn fn, void *data);

#ifdef __cplusplus
}
#endif
#endif
