/*
 * Scenario "storm": a batch of `requests` jobs (default 2000) worked by N
 * workers (default 50, then 30) against a server limited to limit_rps
 * (default 100/s, burst 20). A worker takes the next job when its current
 * one finishes (succeeds or is given up). Strategies, all with 6 retries:
 *   fixed     sleep 1 s after every 429 (the incident's code; a Retry-After
 *             is ignored, as that code did)
 *   pct       base 1 s, x2, cap 30 s, +-20% jitter (the fix adopted)
 *   bucket    pct, every attempt paced by one client token bucket shared by
 *             the workers at client_share (80%) of the limit, burst 40
 *   adaptive  pct, every attempt paced by one stg_adaptive shared by the
 *             workers; it is never told the limit
 * Figures: the peak offered load (most arrivals in any `window`, scaled to a
 * second), completion time and its ratio to the ideal (jobs / limit),
 * calls, 429s and failed jobs.
 */
#include "scenario.h"

static void storm_figures(const sim_opts *o, sim_row *row, const sim_reqsim_out *out)
{
    size_t peak = sim_max_in_window(out->arrivals.v, out->arrivals.n, o->window_us,
                                    o->peak_after_us);
    double ideal_ms = (double)o->requests / o->limit_rps * 1e3;
    sim_row_add(row, "peak_rps", (double)peak * 1e6 / (double)o->window_us);
    sim_row_add(row, "total_ms", (double)out->finish_us / 1e3);
    sim_row_add(row, "ratio", (double)out->finish_us / 1e3 / ideal_ms);
    sim_row_add(row, "calls", (double)out->calls);
    sim_row_add(row, "throttled", (double)out->throttled);
    sim_row_add(row, "failed", (double)out->failed);
}

int sim_storm_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    sim_reqsim_cfg cfg = {.clients = row->clients, .per_client = 0, .jobs = o->requests};
    int mode = row->mode;
    if (row->strategy == SIM_FIXED && mode < 0)
        mode = STG_RETRY_AFTER_IGNORE;
    return sim_reqsim_trial(o, row, mode, &cfg, seed, chart, storm_figures);
}
