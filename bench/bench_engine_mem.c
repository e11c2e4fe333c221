/*
 * bench_engine_mem: the memory of requests in flight in one stg_engine
 * (libstagger-curl), for bench/bench_mem.sh. Prints figures, asserts
 * nothing.
 *
 *   bench_engine_mem URL N CONCURRENCY [RATE [HOLD_S]]
 *
 * Submits N GETs (URL with "/eN-<i>" appended: one key each) to an engine
 * of CONCURRENCY slots (RATE > 0: a token bucket of RATE/s, burst 1, so
 * most of them wait for it), runs it until every request is done (with
 * HOLD_S: for that many seconds, then cancels the rest), and prints one
 * line:
 *
 *   engine N=.. conc=.. rate=.. rss0_kib=.. peak_kib=.. bytes_per_req=..
 *          max_on_wire=.. max_waiting=.. done=.. ok=.. heap_per_req=..
 *          curl_heap_per_req=..
 *   engine classes (...): SIZExCOUNT ...
 *
 * "In flight" is the engine's own meaning (docs/ARCHITECTURE.md): accepted
 * by stg_engine_submit and not yet done, whether waiting (queue, timer,
 * limiter) or on the wire (an attempt with an easy handle). rss0 is VmRSS
 * after the engine's first idle pass (libcurl and the multi set up), peak
 * is VmHWM at the end; bytes_per_req = (peak - rss0) / N. max_on_wire and
 * max_waiting (engine stats, sampled every pass) say where the requests
 * were. heap_per_req is the most heap in use at once above rss0's moment
 * (mallinfo2: stagger's and libcurl's bytes) over N, curl_heap_per_req
 * libcurl's part of it (its allocations counted through
 * curl_global_init_mem, bench/curl_alloc_count.h), so their difference is
 * stagger's own; the second line lists libcurl's biggest size classes at
 * its peak, as bench_curl_floor does for bare libcurl. Only 127.0.0.1 should be given as URL (the script does).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stagger/curl.h>

#include "curl_alloc_count.h"

typedef struct tally {
    long done, ok;
} tally;

static void on_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    tally *t = data;
    t->done++;
    t->ok += r->status == 200;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_engine_mem URL N CONCURRENCY [RATE [HOLD_S]]\n");
        return 2;
    }
    const char *base = argv[1];
    long n = atol(argv[2]);
    int conc = atoi(argv[3]);
    double rate = argc > 4 ? atof(argv[4]) : 0;
    double hold_s = argc > 5 ? atof(argv[5]) : 0;
    if (n <= 0 || conc <= 0) {
        fprintf(stderr, "bench_engine_mem: N and CONCURRENCY must be > 0\n");
        return 2;
    }
    if (ac_install() != CURLE_OK) /* before the engine's curl_global_init */
        return 1;
    stg_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.concurrency = conc;
    cfg.seed = 1;
    cfg.policy.deadline_us = STG_SEC(600);
    if (rate > 0) {
        cfg.limiter = STG_LIMITER_FIXED;
        cfg.rate = rate;
        cfg.burst = 1;
    }
    int err = 0;
    stg_engine *e = stg_engine_new(&cfg, &err);
    if (!e) {
        fprintf(stderr, "bench_engine_mem: %s\n", stg_strerror(err));
        return 1;
    }
    stg_engine_run(e, 0);
    long rss0 = status_kib("VmRSS:");
    size_t h0 = heap_in_use(), heap_peak = 0, curl0 = curl_live;
    tally t = {0, 0};
    char url[512];
    for (long i = 0; i < n; i++) {
        snprintf(url, sizeof url, "%s/eN-%ld", base, i);
        stg_request rq;
        memset(&rq, 0, sizeof rq);
        rq.url = url;
        if (stg_engine_submit(e, &rq, on_done, &t, NULL) != STG_OK) {
            fprintf(stderr, "bench_engine_mem: submit %ld failed\n", i);
            return 1;
        }
    }
    int max_wire = 0, max_wait = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (stg_engine_run(e, STG_MS(100)) > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (hold_s > 0 && (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 >= hold_s)
            stg_engine_cancel_all(e);
        stg_engine_stats st;
        stg_engine_stats_get(e, &st);
        if (st.in_flight > max_wire)
            max_wire = st.in_flight;
        if (st.waiting > max_wait)
            max_wait = st.waiting;
        size_t h = heap_in_use() - h0;
        if (h > heap_peak)
            heap_peak = h;
        note_peak();
    }
    long peak = status_kib("VmHWM:");
    printf("engine N=%ld conc=%d rate=%g rss0_kib=%ld peak_kib=%ld bytes_per_req=%.0f "
           "max_on_wire=%d max_waiting=%d done=%ld ok=%ld heap_per_req=%.0f curl_heap_per_req=%.0f\n",
           n, conc, rate, rss0, peak, (double)(peak - rss0) * 1024.0 / (double)n, max_wire,
           max_wait, t.done, t.ok, (double)heap_peak / (double)n,
           (double)(curl_peak - curl0) / (double)n);
    print_classes("engine", n);
    stg_engine_free(e);
    return 0;
}
