/*
 * Scenario "quota": N clients (default 100) share one server limited to
 * limit_rps (default 100/s, burst one second's worth) that answers 429 with
 * `Retry-After: 5` when over. Each client makes `requests` requests (default
 * 10) one after another. Rows compare Retry-After modes: honoured exactly
 * (what most clients do), honoured with spread (libstagger's default:
 * hint + uniform(0, max(hint * 0.2, base))) and used as a cap on the backoff
 * (the mistake of the shared-quota note).
 *
 * Figures: the peak arrival rate after t = peak_after (5 s: when the first
 * refused clients come back), measured as the most arrivals in any `window`
 * (100 ms) scaled to a second; calls; 429s; retries sent before the
 * Retry-After had passed ("early"); time until the last request finished
 * ("drain"); requests given up.
 */
#include "scenario.h"

static void quota_figures(const sim_opts *o, sim_row *row, const sim_reqsim_out *out)
{
    size_t peak = sim_max_in_window(out->arrivals.v, out->arrivals.n, o->window_us,
                                    o->peak_after_us);
    sim_row_add(row, "peak_rps", (double)peak * 1e6 / (double)o->window_us);
    sim_row_add(row, "calls", (double)out->calls);
    sim_row_add(row, "throttled", (double)out->throttled);
    sim_row_add(row, "early", (double)out->early);
    sim_row_add(row, "total_ms", (double)out->finish_us / 1e3);
    sim_row_add(row, "failed", (double)out->failed);
}

int sim_quota_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    sim_reqsim_cfg cfg = {.clients = row->clients, .per_client = o->requests};
    return sim_reqsim_trial(o, row, row->mode, &cfg, seed, chart, quota_figures);
}
