/*
 * A concurrency limit that learns: how many requests to keep in flight at
 * one host, from the latency they see and from the host's overload answers.
 *
 * The adaptive rate (adaptive.h) answers "how often"; this answers "how
 * many at once". Many servers do not refuse when overloaded, they queue:
 * every request over their capacity waits for a worker, so latency grows
 * with what is queued while throughput stays flat. Keeping more requests
 * in flight than the server handles at once buys nothing but latency.
 *
 * The model is a gradient controller (Netflix concurrency-limits'
 * Gradient2, Envoy's adaptive concurrency filter), in sample windows:
 *  - Each response's latency is a sample. A window closes when it has
 *    lasted at least max(window_us, base RTT) and holds min_samples
 *    samples; the window's average latency is its RTT.
 *  - The base RTT is the lowest window RTT seen: the latency of the
 *    server when nothing is queued. It is a minimum of averages, not of
 *    samples, so one lucky fast answer does not set an unreachable bar.
 *  - At each window: gradient = clamp(tolerance * base / rtt, 0.5, 1),
 *    target = limit * gradient + sqrt(limit) (the sqrt term is the queue
 *    the controller allows itself, so it keeps probing upward), and the
 *    limit moves halfway there (smoothing 0.5).
 *    Against a server with capacity C that queues the rest, the RTT at a
 *    limit L > C is base * L / C, so the limit settles at L = C + sqrt(L):
 *    25 for C = 20, a latency 1.25x the unloaded one at full throughput.
 *  - A window with an overload answer (the caller decides: a throttle,
 *    a 503, a timeout) cuts the limit by backoff (0.9) once, whatever the
 *    latency said: the server told us outright.
 *  - The limit does not grow from a window where fewer than half of it
 *    were in flight (the caller had no more to send): a limit nobody used
 *    says nothing about the server.
 *  - The limit stays within [min_limit, max_limit].
 *  - A probe re-measures the base (Envoy's adaptive concurrency filter
 *    does the same, at a fixed interval). After PROBE_FIRST windows in
 *    which the latency held the limit (RTT above tolerance * (base +
 *    floor): the controller believes a queue is there), the limit reads
 *    half of itself (at least min_limit) for one window made only of the
 *    answers to requests sent after the probe began; then the limit is
 *    what it was, and the next window skips the answers to requests sent
 *    during the probe (they met no queue and would grow the limit past
 *    where it stood). The probe's requests went out with fewer than half
 *    the limit in flight, below the server's capacity when the limit is
 *    near C + sqrt(L), so they meet no queue; the base takes that
 *    window's RTT if it is lower. The gap between probes grows fourfold
 *    (in held windows) up to PROBE_FIRST << PROBE_MAX_SHIFT. An overload answer
 *    ends a probe: the window it starts cuts as above.
 * Why windows and not every sample: the samples of one window answer
 * requests sent under the previous limit; updating on each would pile up
 * the same evidence and overshoot.
 * Why probes: the base is set in the first windows, and a start on a busy
 * machine inflates them (the RTT carries the client's own scheduling).
 * A base B above the server's true S lets the limit settle where the RTT
 * is above B, that is, with a queue of (B / S - 1) C at the server, and
 * every window after then measures that queue, so no window can lower
 * the base again: 40 ms of client delay for 2 s held a C = 10, 50 ms
 * server at 19 in flight, 2 C, for good (test_concurrency.c,
 * test_busy_start_base_relearned). Only a window with fewer in flight
 * sees the unqueued RTT; the probe makes one. Why half, not min_limit: at
 * L = C + sqrt(L) half is below C for any C >= 2, and a base still too
 * high is halved toward S at each probe, at a smaller cost in throughput.
 * Why only after held windows: a limit the latency does not hold (a
 * server that never queues) has nothing to gain from a lower base. Why
 * the gap grows: a probe costs throughput (the server has fewer than C
 * for about a window: 40-60 ms of its work each against C = 20, 50 ms),
 * and a start's inflated base is best caught early; fourfold, 3 probes
 * in `stagger sim slow-server`'s 12.7 s (391 req/s of 400; 395 without
 * probes, 389 with a gap that doubles).
 * (Gradient2 instead lets a long-term average RTT drift: with a queue
 * held, every average carries the queue, so the base drifts up with it.
 * A minimum over the last K windows would too, for the same reason.)
 * Why the base RTT is never raised, by a probe either: a server that
 * slows for good makes the controller keep a lower limit than it could,
 * the safe side; and a probe on a busy machine measures the busy client.
 *
 * Time is a parameter (now_us, monotonic microseconds); nothing here reads
 * a clock, allocates or keeps global state. Not thread-safe: one owner
 * (the engine's loop thread) feeds it.
 *
 * Invariants: min_limit <= limit <= max_limit at all times (a probe's
 * half as well); the base RTT is 0 (none yet) or > 0 and never above any
 * window RTT seen, a probe's included; a probe runs only once a base is
 * known.
 */
#ifndef STAGGER_CONCURRENCY_H
#define STAGGER_CONCURRENCY_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STG_CONCURRENCY_DEFAULT_INITIAL 10
#define STG_CONCURRENCY_DEFAULT_MIN 1
#define STG_CONCURRENCY_DEFAULT_MAX 200
#define STG_CONCURRENCY_DEFAULT_WINDOW_US STG_MS(100)
#define STG_CONCURRENCY_DEFAULT_MIN_SAMPLES 5
#define STG_CONCURRENCY_DEFAULT_TOLERANCE 1.0
#define STG_CONCURRENCY_DEFAULT_SMOOTHING 0.5
#define STG_CONCURRENCY_DEFAULT_BACKOFF 0.9
/* The least rise of the RTT above the base that the controller takes for
 * a queue: below it, latency neither holds nor shrinks the limit. */
#define STG_CONCURRENCY_QUEUE_FLOOR_US STG_MS(1)
/* Windows held by latency before the first probe of the base; the gap to
 * the next grows fourfold up to FIRST << MAX_SHIFT: 10, 40, 160, 640
 * windows (each >= 100 ms: the last >= 64 s, Envoy's 60 s interval). */
#define STG_CONCURRENCY_PROBE_FIRST 10
#define STG_CONCURRENCY_PROBE_MAX_SHIFT 6

/* Zero in a field means its default. */
typedef struct stg_concurrency_config {
    int initial;        /* the limit before any window closed; 0: 10 */
    int min_limit;      /* >= 1; 0: 1 */
    int max_limit;      /* >= min_limit; 0: 200 */
    int min_samples;    /* samples a window needs to close; 0: 5 */
    int64_t window_us;  /* shortest window; 0: 100 ms */
    double tolerance;   /* rtt / base tolerated before shrinking, >= 1; 0: 1.0 */
    double smoothing;   /* 0 < s <= 1, share of the step taken; 0: 0.5 */
    double backoff;     /* cut on overload, 0 < b < 1; 0: 0.9 */
    uint64_t stg__reserved[6]; /* room to grow (docs/ABI.md); leave zero */
} stg_concurrency_config;

typedef enum stg_concurrency_signal {
    STG_CONCURRENCY_OK = 0,       /* an answer: its latency is a sample */
    STG_CONCURRENCY_OVERLOAD = 1, /* a throttle, 503, timeout: cut */
    STG_CONCURRENCY_IGNORE = 2    /* says nothing of the server (DNS, TLS,
                                     a cancelled request) */
} stg_concurrency_signal;

/* Caller-owned; read it with the getters. */
typedef struct stg_concurrency {
    stg_concurrency_config cfg; /* resolved */
    double limit;
    int64_t base_rtt_us, last_rtt_us;
    int64_t win_start_us, win_sum_us;
    int win_n, win_max_in_flight;
    bool win_overload;
    uint64_t windows, cuts;
    int64_t skip_before_us;       /* answers to requests sent before: not measured */
    int32_t probing, probe_held;  /* a probe runs; held windows since the last */
    uint64_t probes;              /* probes completed */
    uint64_t stg__reserved[1];
} stg_concurrency;

/* Fill out with cfg's values and the defaults for its zeros. STG_EINVAL
 * when a value is out of range (out is then unspecified). cfg may be NULL. */
STG_API int stg_concurrency_resolve(const stg_concurrency_config *cfg,
                                    stg_concurrency_config *out);
/* STG_OK or STG_EINVAL (see resolve). cfg may be NULL: the defaults. */
STG_API int stg_concurrency_init(stg_concurrency *c, const stg_concurrency_config *cfg,
                                 int64_t now_us);
/* One attempt ended after rtt_us; in_flight: the owner's attempts in
 * flight when it ended (itself included). */
STG_API void stg_concurrency_on_sample(stg_concurrency *c, int64_t rtt_us,
                                       stg_concurrency_signal sig, int in_flight,
                                       int64_t now_us);
/* The limit now: attempts the owner may have in flight, >= 1 (during a
 * probe of the base, half the learned one). */
STG_API int stg_concurrency_limit(const stg_concurrency *c);
/* The learned limit, also during a probe (when stg_concurrency_limit reads
 * its half): what a report or a metric says the host settled at. */
STG_API int stg_concurrency_learned(const stg_concurrency *c);
/* The base RTT (0 before the first window) and the last window's RTT. */
STG_API int64_t stg_concurrency_base_rtt(const stg_concurrency *c);
STG_API int64_t stg_concurrency_rtt(const stg_concurrency *c);

#ifdef __cplusplus
}
#endif

#endif
