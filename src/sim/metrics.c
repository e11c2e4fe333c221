/*
 * Metrics (see metrics.h). The window scan is two pointers over a sorted
 * log: O(n). Percentiles sort a copy the caller owns.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "util/grow.h"

int sim_log_init(sim_log *l, size_t cap)
{
    l->n = 0;
    l->cap = cap ? cap : 16;
    l->v = malloc(l->cap * sizeof *l->v);
    if (!l->v) {
        l->cap = 0;
        return -1;
    }
    return 0;
}

void sim_log_free(sim_log *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

int sim_log_grow(sim_log *l)
{
    return STG__GROW(l->v, l->n, l->cap, 16) ? 0 : -1;
}

size_t sim_max_in_window(const int64_t *t, size_t n, int64_t w, int64_t from)
{
    size_t lo = 0, best = 0;
    while (lo < n && t[lo] < from)
        lo++;
    /* For each start i, j is the first entry at or past t[i] + w. */
    size_t j = lo;
    for (size_t i = lo; i < n; i++) {
        if (j < i)
            j = i;
        while (j < n && t[j] - t[i] < w)
            j++;
        if (j - i > best)
            best = j - i;
    }
    return best;
}

int sim_window_init(sim_window *win, int64_t w, size_t cap)
{
    memset(win, 0, sizeof *win);
    win->w = w;
    win->cap = cap ? cap : 64;
    win->v = malloc(win->cap * sizeof *win->v);
    return win->v ? 0 : -1;
}

int sim_window_add(sim_window *win, int64_t t)
{
    /* Drop instants at or before t - w: with t as the window's last
     * instant, (t - w, t] is the window; its maximum over all t equals the
     * maximum over half-open windows [x, x + w). */
    while (win->n > 0 && win->v[win->head] <= t - win->w) {
        win->head = win->head + 1 == win->cap ? 0 : win->head + 1;
        win->n--;
    }
    if (win->n == win->cap) {
        size_t cap = win->cap * 2;
        int64_t *v = malloc(cap * sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < win->n; i++)
            v[i] = win->v[(win->head + i) % win->cap];
        free(win->v);
        win->v = v;
        win->cap = cap;
        win->head = 0;
    }
    size_t tail = win->head + win->n;
    if (tail >= win->cap)
        tail -= win->cap;
    win->v[tail] = t;
    win->n++;
    if (win->n > win->best)
        win->best = win->n;
    return 0;
}

void sim_window_free(sim_window *win)
{
    free(win->v);
    memset(win, 0, sizeof *win);
}

int sim_bins_init(sim_bins *bins, int64_t bin_us, size_t cap)
{
    memset(bins, 0, sizeof *bins);
    bins->bin_us = bin_us > 0 ? bin_us : 1;
    bins->cap = cap ? cap : 64;
    bins->b = calloc(bins->cap, sizeof *bins->b);
    return bins->b ? 0 : -1;
}

int sim_bins_add(sim_bins *bins, int64_t t)
{
    size_t k = (size_t)((t < 0 ? 0 : t) / bins->bin_us);
    size_t had = bins->cap;
    if (!stg__reserve(&bins->b, &bins->cap, k + 1, sizeof *bins->b, 1))
        return -1;
    memset(bins->b + had, 0, (bins->cap - had) * sizeof *bins->b);
    bins->b[k]++;
    if (k + 1 > bins->n)
        bins->n = k + 1;
    return 0;
}

void sim_bins_free(sim_bins *bins)
{
    free(bins->b);
    memset(bins, 0, sizeof *bins);
}

void sim_row_take_bins(sim_row *row, sim_bins *bins)
{
    free(row->bins);
    row->bins = bins->b;
    row->nbins = bins->n;
    row->bin_us = bins->bin_us;
    memset(bins, 0, sizeof *bins);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t sim_percentile(int64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_i64);
    double rank = ceil(p / 100.0 * (double)n);
    size_t k = rank < 1 ? 0 : (size_t)rank - 1;
    if (k >= n)
        k = n - 1;
    return v[k];
}

uint32_t *sim_bin(const int64_t *t, size_t n, int64_t bin_us, size_t *nbins)
{
    *nbins = 0;
    if (n == 0 || bin_us <= 0)
        return NULL;
    int64_t last = t[n - 1] < 0 ? 0 : t[n - 1];
    size_t nb = (size_t)(last / bin_us) + 1;
    uint32_t *b = calloc(nb, sizeof *b);
    if (!b)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int64_t x = t[i] < 0 ? 0 : t[i];
        b[x / bin_us]++;
    }
    *nbins = nb;
    return b;
}

void sim_stat_add(sim_stat *s, double x)
{
    if (s->n == 0 || x < s->min)
        s->min = x;
    if (s->n == 0 || x > s->max)
        s->max = x;
    s->sum += x;
    s->sumsq += x * x;
    s->n++;
}

double sim_stat_mean(const sim_stat *s)
{
    return s->n ? s->sum / s->n : 0.0;
}

double sim_stat_sd(const sim_stat *s)
{
    if (s->n < 2)
        return 0.0;
    double m = s->sum / s->n;
    double var = (s->sumsq - s->n * m * m) / (s->n - 1);
    return var > 0 ? sqrt(var) : 0.0;
}

void sim_row_add(sim_row *row, const char *key, double x)
{
    for (int i = 0; i < row->nmetrics; i++) {
        if (!strcmp(row->m[i].key, key)) {
            sim_stat_add(&row->m[i].s, x);
            return;
        }
    }
    if (row->nmetrics == SIM_MAX_METRICS)
        return;
    sim_metric *m = &row->m[row->nmetrics++];
    memset(m, 0, sizeof *m);
    m->key = key;
    sim_stat_add(&m->s, x);
}

const sim_stat *sim_row_metric(const sim_row *row, const char *key)
{
    for (int i = 0; i < row->nmetrics; i++)
        if (!strcmp(row->m[i].key, key))
            return &row->m[i].s;
    return NULL;
}

uint64_t sim_seed_mix(uint64_t seed, uint64_t stream)
{
    uint64_t z = seed + UINT64_C(0x9E3779B97F4A7C15) * (stream + 1);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
