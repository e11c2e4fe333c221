/*
 * Server statistics (see stats.h): /__stats as JSON and /metrics as
 * Prometheus text, from the same counters.
 *
 * Invariants: arr[0..n) holds one entry per arrival ever recorded; the
 * busiest window of length W is the largest count of arrivals a[i..j] with
 * a[j] - a[i] < W over the sorted times (a half-open window [t, t + W)).
 * /metrics reads the counters and the windows exactly as /__stats does, so
 * the two never disagree about a quiet server; it holds no path, no client
 * address and no header (labels are status codes, fault kinds and window
 * lengths).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/stats.h"
#include "util/grow.h"

int srv_stats_init(srv_stats *st)
{
    for (int i = 0; i < SRV_C__COUNT; i++)
        atomic_init(&st->c[i], 0);
    for (int i = 0; i < 600; i++)
        atomic_init(&st->status[i], 0);
    st->arr = NULL;
    st->n = st->cap = 0;
    return pthread_mutex_init(&st->mu, NULL) ? -1 : 0;
}

void srv_stats_destroy(srv_stats *st)
{
    free(st->arr);
    st->arr = NULL;
    pthread_mutex_destroy(&st->mu);
}

void srv_stats_arrival(srv_stats *st, int64_t rel_us)
{
    atomic_fetch_add_explicit(&st->c[SRV_C_TOTAL], 1, memory_order_relaxed);
    pthread_mutex_lock(&st->mu);
    if (!STG__GROW(st->arr, st->n, st->cap, 4096)) {
        /* the windows will undercount; counters stay exact */
        pthread_mutex_unlock(&st->mu);
        return;
    }
    st->arr[st->n++] = rel_us;
    pthread_mutex_unlock(&st->mu);
}

void srv_stats_count(srv_stats *st, enum srv_counter c)
{
    atomic_fetch_add_explicit(&st->c[c], 1, memory_order_relaxed);
}

void srv_stats_status(srv_stats *st, unsigned status)
{
    if (status < 600)
        atomic_fetch_add_explicit(&st->status[status], 1, memory_order_relaxed);
}

uint64_t srv_stats_get(srv_stats *st, enum srv_counter c)
{
    return atomic_load_explicit(&st->c[c], memory_order_relaxed);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A sorted copy of the arrival times, taken under the lock so that the
 * reports never sort while the request threads append. false: no memory
 * (with n > 0); an empty log gives *a = NULL, *n = 0. */
static bool arrivals_sorted(srv_stats *st, int64_t **a, size_t *n)
{
    pthread_mutex_lock(&st->mu);
    *n = st->n;
    *a = *n ? malloc(*n * sizeof **a) : NULL;
    if (*a)
        memcpy(*a, st->arr, *n * sizeof **a);
    pthread_mutex_unlock(&st->mu);
    if (*n && !*a)
        return false;
    if (*n)
        qsort(*a, *n, sizeof **a, cmp_i64);
    return true;
}

static size_t busiest(const int64_t *a, size_t n, int64_t window_us)
{
    size_t best = 0, i = 0;
    for (size_t j = 0; j < n; j++) {
        while (a[j] - a[i] >= window_us)
            i++;
        if (j - i + 1 > best)
            best = j - i + 1;
    }
    return best;
}

static int set_u64(json_t *o, const char *key, uint64_t v)
{
    return json_object_set_new(o, key, json_integer((json_int_t)v));
}

json_t *srv_stats_json(srv_stats *st, int64_t uptime_us)
{
    size_t n;
    int64_t *a;
    if (!arrivals_sorted(st, &a, &n))
        return NULL;

    json_t *o = json_object();
    json_t *status = json_object();
    json_t *faults = json_object();
    json_t *hist = json_array();
    int err = !o || !status || !faults || !hist;

    uint64_t c[SRV_C__COUNT];
    for (int i = 0; i < SRV_C__COUNT; i++)
        c[i] = srv_stats_get(st, (enum srv_counter)i);
    if (!err) {
        err |= set_u64(o, "uptime_us", (uint64_t)(uptime_us > 0 ? uptime_us : 0));
        err |= set_u64(o, "total", c[SRV_C_TOTAL]);
        err |= set_u64(o, "admitted", c[SRV_C_ADMITTED]);
        err |= set_u64(o, "limited", c[SRV_C_LIMITED]);
        err |= set_u64(o, "fail_first", c[SRV_C_FAIL_FIRST]);
        err |= set_u64(o, "aborted", c[SRV_C_ABORTED]);
        err |= set_u64(o, "duplicates_without_key", c[SRV_C_DUPS]);
        err |= set_u64(o, "idempotent_replays", c[SRV_C_REPLAYS]);
        err |= set_u64(o, "max_in_10ms", busiest(a, n, 10000));
        err |= set_u64(o, "max_in_1s", busiest(a, n, 1000000));
        for (unsigned s = 0; s < 600; s++) {
            uint64_t v = atomic_load_explicit(&st->status[s], memory_order_relaxed);
            if (v) {
                char key[8];
                snprintf(key, sizeof key, "%u", s);
                err |= set_u64(status, key, v);
            }
        }
        int64_t last = n ? a[n - 1] : 0;
        if (uptime_us > last)
            last = uptime_us;
        size_t secs = (size_t)(last / 1000000) + 1, i = 0;
        for (size_t sec = 0; sec < secs && !err; sec++) {
            uint64_t count = 0;
            while (i < n && a[i] < (int64_t)(sec + 1) * 1000000) {
                count++;
                i++;
            }
            err |= json_array_append_new(hist, json_integer((json_int_t)count));
        }
        err |= set_u64(faults, "resets", c[SRV_C_RESETS]);
        err |= set_u64(faults, "hangs", c[SRV_C_HANGS]);
        err |= set_u64(faults, "slow_bodies", c[SRV_C_SLOW]);
        err |= set_u64(faults, "outage_503", c[SRV_C_OUTAGE]);
    }
    free(a);
    if (!err) {
        err |= json_object_set(o, "status", status);
        err |= json_object_set(o, "per_second", hist);
        err |= json_object_set(o, "faults", faults);
    }
    json_decref(status);
    json_decref(hist);
    json_decref(faults);
    if (err) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- Prometheus text ------------------------------------------------------ */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *srv_stats_prometheus(srv_stats *st, int64_t uptime_us, size_t *len)
{
    size_t n;
    int64_t *a;
    if (!arrivals_sorted(st, &a, &n))
        return NULL;
    uint64_t c[SRV_C__COUNT];
    for (int i = 0; i < SRV_C__COUNT; i++)
        c[i] = srv_stats_get(st, (enum srv_counter)i);
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) {
        free(a);
        return NULL;
    }
    family(f, "stagger_server_uptime_seconds", "gauge", "Seconds since the server started.");
    fprintf(f, "stagger_server_uptime_seconds %.6f\n",
            (double)(uptime_us > 0 ? uptime_us : 0) / 1e6);
    family(f, "stagger_server_requests_total", "counter",
           "Client requests that arrived (not /__stats or /metrics).");
    fprintf(f, "stagger_server_requests_total %llu\n", (unsigned long long)c[SRV_C_TOTAL]);
    static const struct {
        enum srv_counter c;
        const char *outcome;
    } outcomes[] = {
        {SRV_C_ADMITTED, "admitted"}, {SRV_C_LIMITED, "limited"},
        {SRV_C_FAIL_FIRST, "fail_first"}, {SRV_C_RESETS, "reset"},
        {SRV_C_HANGS, "hang"}, {SRV_C_OUTAGE, "outage"},
        {SRV_C_ABORTED, "aborted"},
    };
    family(f, "stagger_server_outcomes_total", "counter",
           "Requests by what the server did with them (they add up to requests_total once "
           "every request has finished).");
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
        fprintf(f, "stagger_server_outcomes_total{outcome=\"%s\"} %llu\n", outcomes[i].outcome,
                (unsigned long long)c[outcomes[i].c]);
    family(f, "stagger_server_responses_total", "counter", "Responses sent, by HTTP status.");
    for (unsigned s = 0; s < 600; s++) {
        uint64_t v = atomic_load_explicit(&st->status[s], memory_order_relaxed);
        if (v)
            fprintf(f, "stagger_server_responses_total{code=\"%u\"} %llu\n", s,
                    (unsigned long long)v);
    }
    family(f, "stagger_server_slow_bodies_total", "counter",
           "Admitted answers whose body was trickled (--slow-body).");
    fprintf(f, "stagger_server_slow_bodies_total %llu\n", (unsigned long long)c[SRV_C_SLOW]);
    family(f, "stagger_server_duplicates_total", "counter",
           "POST or PATCH requests repeated without an Idempotency-Key.");
    fprintf(f, "stagger_server_duplicates_total %llu\n", (unsigned long long)c[SRV_C_DUPS]);
    family(f, "stagger_server_idempotent_replays_total", "counter",
           "Answers replayed for a known Idempotency-Key.");
    fprintf(f, "stagger_server_idempotent_replays_total %llu\n",
            (unsigned long long)c[SRV_C_REPLAYS]);
    family(f, "stagger_server_busiest_window_requests", "gauge",
           "The most requests that arrived within any window of this length since the start.");
    fprintf(f, "stagger_server_busiest_window_requests{window=\"10ms\"} %zu\n",
            busiest(a, n, 10000));
    fprintf(f, "stagger_server_busiest_window_requests{window=\"1s\"} %zu\n",
            busiest(a, n, 1000000));
    free(a);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
