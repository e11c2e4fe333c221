/*
 * The learned concurrency limit (include/stagger/concurrency.h has the
 * model and why). Pure: time comes in as now_us, nothing is allocated.
 *
 * The queue floor (STG_CONCURRENCY_QUEUE_FLOOR_US, 1 ms) is added to the
 * base before the gradient is taken. Why: the RTT is measured by the
 * engine, from the pass that starts an attempt to the pass that reads its
 * answer, so it carries the client's own time: each pass reads every
 * answer that came in, so the more in flight the longer a pass, and a
 * shared machine adds its scheduling. Against a fast server (loopback,
 * 300 us) those rises are all there is, and the base is the lowest
 * window average of that noise: with the gradient taken against the bare
 * base, every window's rise held the limit, which settled at 11-16 on an
 * unlimited `stagger serve` that never queued (the batch is then slower
 * than at 30: each pass commits fewer answers). A server that queues still
 * raises the RTT by its queue: past the floor the rule is the old one
 * (L = C + sqrt(L) for a slow server; a 1 ms server with 20 workers is
 * held near 47, about 1 ms of queue), and overload answers cut as before.
 *
 * The probe of the base (the header has why) lives beside the windows: it
 * leaves c->limit alone and the getter reads half of it while probing, so
 * the learned limit is back the moment the probe window closes and the
 * engine wakes its waiters as for any rise. The probe's window skips the
 * answers to requests sent before it began (now - rtt < skip_before_us):
 * those were sent under the full limit and measure the queue it drains;
 * the window after it skips those sent before it ended, under the half.
 * Overload answers are never skipped: the server told us.
 *
 * Invariants (asserted where the limit changes): min_limit <= limit <=
 * max_limit; base_rtt_us is 0 or > 0 and no window's RTT is below it
 * (it is their minimum, a probe's window included); a probe runs only with
 * a base; a window holds its samples only until it closes.
 */
#include <math.h>
#include <string.h>

#include "stagger/concurrency.h"
#include "util/assert.h"

int stg_concurrency_resolve(const stg_concurrency_config *cfg, stg_concurrency_config *out)
{
    stg_concurrency_config c;
    memset(&c, 0, sizeof c);
    if (cfg)
        c = *cfg;
    if (c.initial < 0 || c.min_limit < 0 || c.max_limit < 0 || c.min_samples < 0 ||
        c.window_us < 0 || c.tolerance < 0 || c.smoothing < 0 || c.backoff < 0)
        return STG_EINVAL;
    if (!c.min_limit)
        c.min_limit = STG_CONCURRENCY_DEFAULT_MIN;
    if (!c.max_limit)
        c.max_limit = c.min_limit > STG_CONCURRENCY_DEFAULT_MAX ? c.min_limit
                                                                : STG_CONCURRENCY_DEFAULT_MAX;
    if (!c.initial)
        c.initial = STG_CONCURRENCY_DEFAULT_INITIAL;
    if (!c.min_samples)
        c.min_samples = STG_CONCURRENCY_DEFAULT_MIN_SAMPLES;
    if (!c.window_us)
        c.window_us = STG_CONCURRENCY_DEFAULT_WINDOW_US;
    if (c.tolerance == 0)
        c.tolerance = STG_CONCURRENCY_DEFAULT_TOLERANCE;
    if (c.smoothing == 0)
        c.smoothing = STG_CONCURRENCY_DEFAULT_SMOOTHING;
    if (c.backoff == 0)
        c.backoff = STG_CONCURRENCY_DEFAULT_BACKOFF;
    if (c.max_limit < c.min_limit || !(c.tolerance >= 1) || !(c.smoothing <= 1) ||
        !(c.backoff < 1) || !isfinite(c.tolerance))
        return STG_EINVAL;
    if (c.initial < c.min_limit)
        c.initial = c.min_limit;
    if (c.initial > c.max_limit)
        c.initial = c.max_limit;
    *out = c;
    return STG_OK;
}

int stg_concurrency_init(stg_concurrency *c, const stg_concurrency_config *cfg, int64_t now_us)
{
    stg_concurrency_config r;
    int rc = stg_concurrency_resolve(cfg, &r);
    if (rc != STG_OK)
        return rc;
    memset(c, 0, sizeof *c);
    c->cfg = r;
    c->limit = r.initial;
    c->win_start_us = now_us;
    c->skip_before_us = INT64_MIN; /* no probe yet: every answer counts */
    return STG_OK;
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void reset_window(stg_concurrency *c, int64_t now_us)
{
    c->windows++;
    c->win_start_us = now_us;
    c->win_sum_us = 0;
    c->win_n = 0;
    c->win_max_in_flight = 0;
    c->win_overload = false;
}

/* The window's RTT becomes the last one and, if lower, the base. */
static void measure(stg_concurrency *c)
{
    if (c->win_n == 0) /* a window of overloads alone measures nothing */
        return;
    int64_t rtt = c->win_sum_us / c->win_n;
    if (rtt < 1)
        rtt = 1;
    c->last_rtt_us = rtt;
    if (!c->base_rtt_us || rtt < c->base_rtt_us)
        c->base_rtt_us = rtt;
    STG_ASSERT(c->base_rtt_us > 0 && c->base_rtt_us <= rtt);
}

/* A window the latency held (it saw a queue) brings the next probe nearer. */
static void count_held(stg_concurrency *c, int64_t now_us)
{
    int shift = c->probes < STG_CONCURRENCY_PROBE_MAX_SHIFT / 2
                    ? 2 * (int)c->probes
                    : STG_CONCURRENCY_PROBE_MAX_SHIFT;
    if (++c->probe_held < STG_CONCURRENCY_PROBE_FIRST << shift)
        return;
    STG_ASSERT(c->base_rtt_us > 0);
    c->probe_held = 0;
    c->probing = 1;
    c->skip_before_us = now_us;
}

/* The probe's window closed: its RTT may lower the base; the limit is the
 * learned one again (it never changed, only the getter's reading). */
static void close_probe(stg_concurrency *c, int64_t now_us)
{
    measure(c);
    c->probing = 0;
    c->probes++;
    c->skip_before_us = now_us;
    reset_window(c, now_us);
}

/* The window closed: move the limit. */
static void close_window(stg_concurrency *c, int64_t now_us)
{
    const stg_concurrency_config *k = &c->cfg;
    measure(c);
    double limit = c->limit;
    bool held = false;
    if (c->win_overload) {
        limit *= k->backoff;
        c->cuts++;
    } else {
        /* The base plus the floor: a rise smaller than that is the
         * client's own pass time and scheduling, not a server's queue. */
        double g = k->tolerance * (double)(c->base_rtt_us + STG_CONCURRENCY_QUEUE_FLOOR_US) /
                   (double)c->last_rtt_us;
        held = g < 1;
        double gradient = clamp(g, 0.5, 1.0);
        double target = limit * gradient + sqrt(limit);
        /* An unused limit says nothing: never grow from it. */
        if (target > limit && 2 * c->win_max_in_flight < limit)
            target = limit;
        limit += k->smoothing * (target - limit);
    }
    c->limit = clamp(limit, k->min_limit, k->max_limit);
    STG_ASSERT(c->limit >= k->min_limit && c->limit <= k->max_limit);
    reset_window(c, now_us);
    if (held)
        count_held(c, now_us);
}

void stg_concurrency_on_sample(stg_concurrency *c, int64_t rtt_us, stg_concurrency_signal sig,
                               int in_flight, int64_t now_us)
{
    if (sig == STG_CONCURRENCY_IGNORE)
        return;
    if (rtt_us < 0)
        rtt_us = 0;
    if (sig == STG_CONCURRENCY_OVERLOAD)
        c->probing = 0; /* the server spoke: this window cuts as any */
    else if (now_us - rtt_us < c->skip_before_us)
        return; /* sent under another limit than the one this window measures */
    if (c->win_n == 0 && !c->win_overload)
        c->win_start_us = now_us - rtt_us; /* a window starts with what it measures */
    if (sig == STG_CONCURRENCY_OVERLOAD) {
        c->win_overload = true;
    } else {
        c->win_sum_us += rtt_us;
        c->win_n++;
    }
    if (in_flight > c->win_max_in_flight)
        c->win_max_in_flight = in_flight;
    int64_t span = c->cfg.window_us > c->base_rtt_us ? c->cfg.window_us : c->base_rtt_us;
    bool enough = c->win_n >= c->cfg.min_samples || c->win_overload;
    if (now_us - c->win_start_us >= span && enough) {
        if (c->probing)
            close_probe(c, now_us);
        else
            close_window(c, now_us);
    }
}

int stg_concurrency_limit(const stg_concurrency *c)
{
    if (c->probing) {
        int half = (int)(c->limit / 2);
        return half > c->cfg.min_limit ? half : c->cfg.min_limit;
    }
    return (int)c->limit;
}

int stg_concurrency_learned(const stg_concurrency *c)
{
    return (int)c->limit;
}

int64_t stg_concurrency_base_rtt(const stg_concurrency *c)
{
    return c->base_rtt_us;
}

int64_t stg_concurrency_rtt(const stg_concurrency *c)
{
    return c->last_rtt_us;
}
