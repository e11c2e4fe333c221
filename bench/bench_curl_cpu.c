/*
 * bench_curl_cpu: libcurl's own CPU per keep-alive GET, the floor under
 * the proxy's upstream half in bench/bench_proxy.sh (issue #35 goal 1).
 * Prints figures, asserts nothing. No stagger code is linked in: only
 * libcurl, with the fewest options a GET needs, driven the way curl's own
 * tool drives it (curl_multi_perform, then curl_multi_poll).
 *
 *   bench_curl_cpu URL SECONDS C
 *
 * Keeps C transfers of URL on one multi (HTTP/1.1, the connection cache
 * sized to C, so every connection is kept alive and reused, as the
 * proxy's engine does), re-adding each easy handle as it finishes, for
 * SECONDS, and prints one line:
 *
 *   curl_cpu c=.. requests=.. ok=.. user_us=.. sys_us=.. cpu_us=.. rps=..
 *
 * the user, system and total CPU time this process spent per request
 * (getrusage over the timed part). A proxy makes these same transfers for
 * its upstream half, and a client connection's read and write besides:
 * whatever else it does, it cannot spend less than cpu_us per request
 * while libcurl is its transport. Only 127.0.0.1 should be given as URL
 * (the script does).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <curl/curl.h>

static size_t discard(char *data, size_t size, size_t nmemb, void *arg)
{
    (void)data;
    (void)arg;
    return size * nmemb;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double tv_us(struct timeval tv)
{
    return (double)tv.tv_sec * 1e6 + (double)tv.tv_usec;
}

static void start(CURLM *m, CURL *e, const char *url)
{
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_multi_add_handle(m, e);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_curl_cpu URL SECONDS C\n");
        return 2;
    }
    const char *url = argv[1];
    double secs = atof(argv[2]);
    long c = atol(argv[3]);
    if (secs <= 0 || c <= 0 || c > 10000) {
        fprintf(stderr, "bench_curl_cpu: SECONDS > 0 and 0 < C <= 10000\n");
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    CURLM *m = curl_multi_init();
    CURL **easy = calloc((size_t)c, sizeof *easy);
    if (!m || !easy)
        return 1;
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, c);
    for (long i = 0; i < c; i++)
        if (!(easy[i] = curl_easy_init()))
            return 1;
    /* A first round opens the connections: the timed part reuses them. */
    for (long i = 0; i < c; i++)
        start(m, easy[i], url);
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        if (running)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            curl_multi_remove_handle(m, msg->easy_handle);

    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_s(), end = t0 + secs;
    long requests = 0, ok = 0, active = 0;
    for (long i = 0; i < c; i++, active++)
        start(m, easy[i], url);
    bool more = true;
    while (active > 0) {
        curl_multi_perform(m, &running);
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *e = msg->easy_handle;
            long code = 0;
            if (msg->data.result == CURLE_OK)
                curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
            requests++;
            ok += code == 200;
            curl_multi_remove_handle(m, e);
            active--;
            if (more && (requests & 63) == 0 && now_s() >= end)
                more = false;
            if (more) {
                start(m, e, url);
                active++;
            }
        }
        if (active > 0)
            curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    double wall = now_s() - t0;
    getrusage(RUSAGE_SELF, &r1);
    double user = tv_us(r1.ru_utime) - tv_us(r0.ru_utime);
    double sys = tv_us(r1.ru_stime) - tv_us(r0.ru_stime);
    double n = requests > 0 ? (double)requests : 1.0;
    printf("curl_cpu c=%ld requests=%ld ok=%ld user_us=%.1f sys_us=%.1f cpu_us=%.1f rps=%.0f\n", c,
           requests, ok, user / n, sys / n, (user + sys) / n, requests / (wall > 0 ? wall : 1));
    for (long i = 0; i < c; i++)
        curl_easy_cleanup(easy[i]);
    free(easy);
    curl_multi_cleanup(m);
    curl_global_cleanup();
    return 0;
}
