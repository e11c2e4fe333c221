/*
 * libstagger-curl in two small steps: one blocking request with polite
 * retries (stg_curl_perform), then several URLs through the event-driven
 * engine with a per-host token bucket, logging JSON lines to stderr.
 *
 *   example_curl_engine URL [URL...]
 *
 * Compiled by every build so it cannot rot; it sends requests only to the
 * URLs it is given.
 */
#include <stdio.h>

#include <stagger/curl.h>

static void on_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)data;
    printf("request %llu: %s (%s), HTTP %d after %d attempt(s), %zu bytes%s%s\n",
           (unsigned long long)id, stg_action_name(r->action), stg_reason_name(r->reason),
           r->status, r->attempts, r->body_len, r->error_text[0] ? ": " : "", r->error_text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [URL...]\n", argv[0]);
        return 2;
    }
    stg_logger *log = stg_logger_new(stderr);

    /* 1. Blocking: the caller prepares the handle, the library retries. */
    CURL *easy = curl_easy_init();
    if (!easy)
        return 1;
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    /* Redirects are followed by stagger, hop by hop through the limiter;
     * a body over max_body is an error, never a short success. */
    stg_call_config call = {.method = STG_METHOD_GET, .url = argv[1], .on_event = stg_log_event,
                            .event_data = log, .follow_redirects = true,
                            .max_body = 1 << 20};
    stg_policy_preset(&call.policy, "bounded"); /* 2 retries, 429/503 only */
    stg_result r;
    if (stg_curl_perform(easy, &call, &r) == STG_OK)
        printf("blocking: HTTP %d, %s\n", r.status, stg_reason_message(r.reason));
    stg_result_free(&r);
    curl_easy_cleanup(easy);

    /* 2. Engine: one thread, timers for every wait, 10 requests/s per host. */
    stg_engine_config cfg = {.concurrency = 20, .limiter = STG_LIMITER_FIXED, .rate = 10,
                             .breaker = true, .on_event = stg_log_event, .event_data = log};
    int err = 0;
    stg_engine *e = stg_engine_new(&cfg, &err);
    if (!e) {
        fprintf(stderr, "engine: %s\n", stg_strerror(err));
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        stg_request req = {.url = argv[i], .follow_redirects = true};
        if (stg_engine_submit(e, &req, on_done, NULL, NULL) != STG_OK)
            fprintf(stderr, "cannot submit %s\n", argv[i]);
    }
    int left = stg_engine_drain(e);
    stg_engine_free(e);
    stg_logger_free(log);
    return left == 0 ? 0 : 1;
}
