/*
 * Scenario "load": N requests (default 1000) sent at once against a server
 * limited to limit_rps (default 100/s, burst 100, plain 429 without
 * Retry-After), each with a deadline (default 10 s, the policy's deadline:
 * stg_decide never schedules a retry past it) and 5 retries, base 1 s, cap
 * 60 s. Figures: mean and p99 latency of the requests that succeeded, the
 * share that succeeded within the deadline, calls, 429s.
 */
#include "scenario.h"

static void load_figures(const sim_opts *o, sim_row *row, const sim_reqsim_out *out)
{
    (void)o;
    double sum = 0;
    for (size_t i = 0; i < out->latencies.n; i++)
        sum += (double)out->latencies.v[i];
    double mean = out->latencies.n ? sum / (double)out->latencies.n : 0;
    int64_t p99 = sim_percentile(out->latencies.v, out->latencies.n, 99.0);
    sim_row_add(row, "mean_ms", mean / 1e3);
    sim_row_add(row, "p99_ms", (double)p99 / 1e3);
    sim_row_add(row, "success_rate",
                out->requests ? (double)out->ok_in_deadline / (double)out->requests : 0.0);
    sim_row_add(row, "calls", (double)out->calls);
    sim_row_add(row, "throttled", (double)out->throttled);
    sim_row_add(row, "total_ms", (double)out->finish_us / 1e3);
    sim_row_add(row, "failed", (double)out->failed);
}

int sim_load_trial(const sim_opts *o, sim_row *row, uint64_t seed, bool chart)
{
    sim_reqsim_cfg cfg = {.clients = row->clients, .per_client = 1};
    return sim_reqsim_trial(o, row, row->mode, &cfg, seed, chart, load_figures);
}
