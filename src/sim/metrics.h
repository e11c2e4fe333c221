/*
 * Measuring a run: the arrival log, sliding windows, percentiles, chart
 * bins, and the per-row accumulators that turn trials into mean and spread.
 *
 * The arrival log is appended in event order, so it is sorted by time
 * without sorting; every window function relies on that.
 */
#ifndef STAGGER_SIM_METRICS_H
#define STAGGER_SIM_METRICS_H

#include "sim.h"

/* A growable array of instants (arrival times, latencies), microseconds. */
typedef struct sim_log {
    int64_t *v;
    size_t n, cap;
} sim_log;

int sim_log_init(sim_log *l, size_t cap); /* 0 or -1 (out of memory) */
void sim_log_free(sim_log *l);
int sim_log_grow(sim_log *l);
static inline int sim_log_add(sim_log *l, int64_t t)
{
    if (l->n == l->cap && sim_log_grow(l) != 0)
        return -1;
    l->v[l->n++] = t;
    return 0;
}

/* Most entries of sorted t[0..n) inside any half-open window [x, x + w),
 * counting only entries >= from (pass INT64_MIN for all). */
size_t sim_max_in_window(const int64_t *t, size_t n, int64_t w, int64_t from);

/* The same maximum, online: feed instants in non-decreasing order; best is
 * the most of them inside any half-open window of length w. The ring holds
 * the instants of the current window only, so memory is bounded by best. */
typedef struct sim_window {
    int64_t *v;
    size_t head, n, cap;
    int64_t w;
    size_t best;
} sim_window;

int sim_window_init(sim_window *win, int64_t w, size_t cap); /* 0 or -1 */
int sim_window_add(sim_window *win, int64_t t);              /* 0 or -1 */
void sim_window_free(sim_window *win);

/* Arrivals per bin, online (instants >= 0 in any order). */
typedef struct sim_bins {
    uint32_t *b;
    size_t n, cap;
    int64_t bin_us;
} sim_bins;

int sim_bins_init(sim_bins *bins, int64_t bin_us, size_t cap); /* 0 or -1 */
int sim_bins_add(sim_bins *bins, int64_t t);                  /* 0 or -1 */
void sim_bins_free(sim_bins *bins);
/* Hand the bins to a row (replacing any); bins is left empty. */
void sim_row_take_bins(sim_row *row, sim_bins *bins);

/* Nearest-rank percentile (p in (0, 100]) of v[0..n); sorts v in place.
 * 0 for n = 0. */
int64_t sim_percentile(int64_t *v, size_t n, double p);

/* Count sorted t[0..n) into bins of width bin_us from 0 up to the last
 * entry. Returns a malloc'd array (caller frees) and its length in *nbins,
 * or NULL (n = 0 or out of memory; *nbins = 0). */
uint32_t *sim_bin(const int64_t *t, size_t n, int64_t bin_us, size_t *nbins);

/* Accumulators. */
void sim_stat_add(sim_stat *s, double x);

/* Add one trial's value of metric key (a static string) to a row; the first
 * value registers the metric, in order of first appearance. */
void sim_row_add(sim_row *row, const char *key, double x);

/* Mix a seed and a stream number into a seed (splitmix64 step). */
uint64_t sim_seed_mix(uint64_t seed, uint64_t stream);

#endif
