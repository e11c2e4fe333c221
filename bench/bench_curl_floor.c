/*
 * bench_curl_floor: libcurl's own memory per transfer on the wire, the
 * floor under stagger's figure in bench/bench_mem.sh (issue #19 goal 2).
 * Prints figures, asserts nothing. No stagger code is linked into the
 * transfers: only libcurl, with the fewest options a GET needs.
 *
 *   bench_curl_floor URL N [BUFFERSIZE]
 *
 * Opens N transfers at once on one curl_multi (URL with "/fN-<i>"
 * appended: one key each; the multi's connection cache sized to N like
 * the engine's, HTTP/1.1 like stagger's default), with only CURLOPT_URL,
 * a write callback that discards and CURLOPT_NOSIGNAL (BUFFERSIZE > 0:
 * CURLOPT_BUFFERSIZE too), runs them to the end and prints one line:
 *
 *   floor N=.. rss0_kib=.. peak_kib=.. heap_peak=.. heap_per_xfer=..
 *         easy_bytes=.. allocs_per_xfer=.. ok=.. max_running=.. wall_ms=..
 *   floor classes (...): SIZExCOUNT ...
 *   floor cached connections live (...): SIZExCOUNT ...
 *
 * rss0 is VmRSS with libcurl initialised and the multi made, peak is VmHWM
 * at the end (bench_mem.sh takes the difference of the runs at 10 and at
 * N, as for stagger). The heap figures come from counting malloc (glibc's
 * mallinfo2: bytes in use), so they need no clock: heap_peak is the most
 * in use at once above the start, heap_per_xfer that over N, easy_bytes
 * the heap one bare curl_easy_init takes, allocs the allocations libcurl
 * made per transfer (curl_global_init_mem's hooks), and the second line
 * the size classes that held most of libcurl's heap at its peak
 * (bench/curl_alloc_count.h); the third what libcurl still holds once
 * the easy handles are cleaned up: the connections in its cache, so the
 * classes that are per connection (shared by HTTP/2 streams, kept
 * between requests) stand apart from those per transfer. wall_ms is the
 * transfers' time: run with N = 1 (or a few hundred) against stg_hostile
 * big-body, it is the buffer size's cost in speed. Only 127.0.0.1 should
 * be given as URL (the script does).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "curl_alloc_count.h"

static size_t discard(char *data, size_t size, size_t nmemb, void *arg)
{
    (void)data;
    (void)arg;
    return size * nmemb;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_curl_floor URL N [BUFFERSIZE]\n");
        return 2;
    }
    const char *base = argv[1];
    long n = atol(argv[2]);
    long bufsize = argc > 3 ? atol(argv[3]) : 0;
    if (n <= 0) {
        fprintf(stderr, "bench_curl_floor: N must be > 0\n");
        return 2;
    }
    if (ac_install() != CURLE_OK)
        return 1;
    CURLM *m = curl_multi_init();
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, n);
    size_t h0 = heap_in_use();
    CURL *probe = curl_easy_init();
    size_t easy_bytes = heap_in_use() - h0;
    curl_easy_cleanup(probe);
    long rss0 = status_kib("VmRSS:");
    h0 = heap_in_use();
    unsigned long a0 = n_allocs;
    CURL **easy = calloc((size_t)n, sizeof *easy);
    if (!easy)
        return 1;
    size_t list_bytes = heap_in_use() - h0;
    char url[512];
    for (long i = 0; i < n; i++) {
        easy[i] = curl_easy_init();
        if (!easy[i])
            return 1;
        snprintf(url, sizeof url, "%s/fN-%ld", base, i);
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy[i], CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy[i], CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        if (bufsize > 0)
            curl_easy_setopt(easy[i], CURLOPT_BUFFERSIZE, bufsize);
        curl_multi_add_handle(m, easy[i]);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t heap_peak = 0;
    int running = 1, max_running = 0;
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        if (running > max_running)
            max_running = running;
        size_t h = heap_in_use() - h0 - list_bytes;
        if (h > heap_peak)
            heap_peak = h;
        note_peak();
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    long ok = 0;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE && msg->data.result == CURLE_OK) {
            long code = 0;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
            ok += code == 200;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    unsigned long allocs = n_allocs - a0;
    long peak = status_kib("VmHWM:");
    printf("floor N=%ld bufsize=%ld rss0_kib=%ld peak_kib=%ld heap_peak=%zu heap_per_xfer=%.0f "
           "easy_bytes=%zu allocs_per_xfer=%.1f ok=%ld max_running=%d wall_ms=%.0f\n",
           n, bufsize, rss0, peak, heap_peak, (double)heap_peak / (double)n, easy_bytes,
           (double)allocs / (double)n, ok, max_running, wall_ms);
    print_classes("floor", n);
    for (long i = 0; i < n; i++) {
        curl_multi_remove_handle(m, easy[i]);
        curl_easy_cleanup(easy[i]);
    }
    free(easy);
    print_live("floor cached connections", n);
    curl_multi_cleanup(m);
    curl_global_cleanup();
    return 0;
}
