/*
 * stg_curl_perform(): the blocking call. One prepared easy handle, run
 * attempt after attempt under a policy until stg_decide() says success or
 * give up, the deadline passes, or the cancel token fires.
 *
 * How: attempts run on a private curl_multi whose curl_multi_poll also
 * watches the cancel token's fd, so a cancel ends an attempt in flight at
 * once; waits (backoff, Retry-After, client-side limiter) are a poll on that
 * fd with the wait as timeout, so a cancel ends them at once too.
 *
 * Invariants:
 *  - every decision comes from stg_decide(); this file only executes it
 *    (the budget and breaker are engine features);
 *  - each attempt's timeouts are the policy's, bounded by what the
 *    deadline leaves, and no attempt starts at or after the deadline;
 *  - the response buffers are reset when an attempt starts, so the result
 *    carries the last completed attempt's status, headers and body (a 429
 *    or 503 too) and never bytes of a discarded attempt; an attempt
 *    interrupted by a cancel leaves an empty result body;
 *  - the caller's handle gets libcurl's default callbacks back on return.
 */
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"

typedef struct call {
    CURL *easy;
    stg_call_config cfg;
    stg_policy pol; /* resolved */
    stg_rng rng;
    CURLM *multi;
    stg__xfer x;
    int64_t now, wall;
    const char *method_name;
    char url[2048];       /* redacted */
    char final_url[2048]; /* redacted */
} call;

static void tick(call *c)
{
    c->now = stg__mono_us(c->cfg.env);
    c->wall = stg__wall_us(c->cfg.env);
    c->x.wall_now_us = c->wall;
}

static void event(call *c, stg_event_type type, stg_event *ev)
{
    stg__event_init(ev, type, c->cfg.request_id, c->now, c->wall);
    ev->method = c->method_name;
    ev->url = c->url;
    ev->final_url = c->final_url[0] ? c->final_url : NULL;
}

static void emit(call *c, const stg_event *ev)
{
    if (c->cfg.on_event)
        c->cfg.on_event(ev, c->cfg.event_data);
}

/* Sleep wait_us unless the token fires. Returns false when cancelled. The
 * loop ends at the latest when poll times out after the whole remaining
 * wait, even with a clock that does not move. */
static bool wait_for(call *c, int64_t wait_us)
{
    int64_t until = c->now + wait_us;
    int fd = stg_cancel_fd(c->cfg.cancel);
    for (;;) {
        if (stg_cancel_fired(c->cfg.cancel))
            return false;
        int64_t left = until - c->now;
        if (left <= 0)
            return true;
        int64_t ms = (left + 999) / 1000;
        if (ms > INT_MAX)
            ms = INT_MAX;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, (int)ms);
        tick(c);
        if (rc == 0 && ms * 1000 >= left)
            return !stg_cancel_fired(c->cfg.cancel);
    }
}

/* Run one attempt to its end. Returns its CURLcode; *cancelled when the
 * token fired first (the transfer is then abandoned). */
static CURLcode run_attempt(call *c, bool *cancelled)
{
    *cancelled = false;
    if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    int fd = stg_cancel_fd(c->cfg.cancel);
    struct curl_waitfd wfd = {.fd = fd, .events = CURL_WAIT_POLLIN};
    CURLcode res = CURLE_OK;
    for (;;) {
        tick(c);
        int running = 0;
        if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
            res = CURLE_FAILED_INIT;
            break;
        }
        CURLMsg *msg;
        int left;
        bool done = false;
        while ((msg = curl_multi_info_read(c->multi, &left)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c->easy) {
                res = msg->data.result;
                done = true;
            }
        if (done)
            break;
        if (stg_cancel_fired(c->cfg.cancel)) {
            *cancelled = true;
            break;
        }
        /* curl bounds the attempt (CURLOPT_TIMEOUT_MS), so this loop ends. */
        if (curl_multi_poll(c->multi, fd >= 0 ? &wfd : NULL, fd >= 0 ? 1 : 0, 1000, NULL) !=
            CURLM_OK) {
            res = CURLE_FAILED_INIT;
            break;
        }
    }
    curl_multi_remove_handle(c->multi, c->easy);
    tick(c);
    return res;
}

static int64_t remaining_us(const call *c, int64_t start_us)
{
    if (c->pol.deadline_us <= 0)
        return INT64_MAX;
    return start_us + c->pol.deadline_us - c->now;
}

int stg_curl_perform(CURL *easy, const stg_call_config *cfg, stg_result *out)
{
    if (!out)
        return STG_EINVAL;
    memset(out, 0, sizeof *out);
    out->action = STG_ACTION_GIVE_UP;
    out->reason = STG_REASON_CANCELLED;
    out->server_wait_us = STG_UNKNOWN;
    stg_hints_init(&out->hints);
    if (!easy)
        return STG_EINVAL;
    if (stg__curl_global_init() != CURLE_OK)
        return STG_ENOMEM;

    call c;
    memset(&c, 0, sizeof c);
    c.easy = easy;
    if (cfg)
        c.cfg = *cfg;
    if (stg_policy_resolve(&c.cfg.policy, &c.pol) != STG_OK)
        return STG_EINVAL;
    c.multi = curl_multi_init();
    if (!c.multi)
        return STG_ENOMEM;
    stg__xfer_init(&c.x, c.cfg.max_body);
    stg__xfer_attach(easy, &c.x);
    tick(&c);
    stg_rng_seed(&c.rng, c.cfg.seed ? c.cfg.seed : stg__seed(&c, c.now));
    if (c.cfg.method != STG_METHOD_UNKNOWN)
        c.method_name = stg_method_name(c.cfg.method);
    if (c.cfg.url)
        stg_redact_url(c.cfg.url, c.url, sizeof c.url);
    char limit_key[512] = "default";
    if (c.cfg.limiter_key)
        snprintf(limit_key, sizeof limit_key, "%s", c.cfg.limiter_key);
    else if (c.cfg.url)
        stg__url_host_key(c.cfg.url, limit_key, sizeof limit_key);

    stg_retry_state rs = {.attempts = 0, .start_us = c.now, .prev_wait_us = 0};
    stg_decision d;
    memset(&d, 0, sizeof d);
    d.server_wait_us = STG_UNKNOWN;
    stg_reason reason = STG_REASON_CANCELLED;
    int status = 0, rc = STG_OK;
    int64_t ticket = 0; /* the shared limiter's, for its on_response */
    stg_net_error err = STG_NET_NONE;
    CURLcode code = CURLE_OK;
    char errtext[256] = "";
    stg_event ev;

    for (;;) {
        if (stg_cancel_fired(c.cfg.cancel)) {
            reason = STG_REASON_CANCELLED;
            break;
        }
        int64_t left = remaining_us(&c, rs.start_us);
        if (left <= 0) {
            reason = STG_REASON_DEADLINE;
            break;
        }
        if (c.cfg.bucket || (c.cfg.shared && c.cfg.shared->acquire)) {
            int64_t w = 0;
            int brc;
            if (c.cfg.shared && c.cfg.shared->acquire) {
                ticket = 0;
                brc = c.cfg.shared->acquire(c.cfg.shared->ctx, limit_key, left, &w, &ticket);
                if (brc != STG_OK && brc != STG_ETIMEDOUT) {
                    snprintf(errtext, sizeof errtext, "shared limiter: %s", stg_strerror(brc));
                    reason = STG_REASON_LIMITER_UNAVAILABLE;
                    break;
                }
            } else {
                brc = stg_bucket_acquire(c.cfg.bucket, 1, c.now, left, &w);
            }
            if (brc == STG_ETIMEDOUT) {
                reason = STG_REASON_DEADLINE;
                break;
            }
            if (brc == STG_OK && w > 0) {
                event(&c, STG_EVENT_LIMITER_WAIT, &ev);
                ev.attempt = rs.attempts + 1;
                ev.wait_us = w;
                emit(&c, &ev);
                if (!wait_for(&c, w)) {
                    reason = STG_REASON_CANCELLED;
                    break;
                }
                left = remaining_us(&c, rs.start_us);
                if (left <= 0) {
                    reason = STG_REASON_DEADLINE;
                    break;
                }
            }
        }
        if (rs.attempts > 0 && c.cfg.rewind_body && c.cfg.rewind_body(c.cfg.rewind_data) != 0) {
            reason = STG_REASON_ERROR_NOT_RETRYABLE; /* cannot resend the body */
            break;
        }
        long connect_ms, total_ms;
        stg__attempt_timeouts(&c.pol, left, &connect_ms, &total_ms);
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, total_ms);

        stg__xfer_reset(&c.x);
        rs.attempts++;
        int64_t started = c.now;
        event(&c, STG_EVENT_ATTEMPT_START, &ev);
        ev.attempt = rs.attempts;
        emit(&c, &ev);

        bool cancelled;
        code = run_attempt(&c, &cancelled);
        if (c.x.oom) {
            rc = STG_ENOMEM;
            goto cleanup;
        }
        const char *eff_url = NULL, *eff_method = NULL;
        curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &eff_url);
        curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_METHOD, &eff_method);
        if (eff_url && *eff_url) {
            stg_redact_url(eff_url, c.final_url, sizeof c.final_url);
            if (!c.url[0])
                stg_redact_url(eff_url, c.url, sizeof c.url);
        }
        stg_method method = c.cfg.method;
        if (method == STG_METHOD_UNKNOWN) {
            method = stg_method_parse(eff_method);
            c.method_name = stg_method_name(method);
        }
        if (cancelled) {
            stg__xfer_reset(&c.x); /* a partial answer is not an answer */
            status = 0;
            err = STG_NET_OTHER;
            code = CURLE_ABORTED_BY_CALLBACK;
            snprintf(errtext, sizeof errtext, "cancelled");
            event(&c, STG_EVENT_ATTEMPT_END, &ev);
            ev.attempt = rs.attempts;
            ev.error = err;
            ev.curl_code = (int)code;
            ev.duration_us = c.now - started;
            emit(&c, &ev);
            reason = STG_REASON_CANCELLED;
            break;
        }
        long http = 0;
        curl_off_t connect_us = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
        curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_us);
        err = stg_curl_classify(code, (int64_t)connect_us);
        status = err == STG_NET_NONE ? (int)http : 0;
        if (err == STG_NET_NONE && status == 0)
            err = STG_NET_OTHER; /* a transfer without an HTTP status */
        if (code != CURLE_OK)
            stg__redact_text(c.x.errbuf[0] ? c.x.errbuf : curl_easy_strerror(code), errtext,
                             sizeof errtext);
        else
            errtext[0] = '\0';

        stg__shared_report(c.cfg.shared, limit_key, ticket, status, &c.x.hints);

        stg_outcome o = {.status = status,
                         .error = err,
                         .method = method,
                         .has_idempotency_key = c.cfg.has_idempotency_key,
                         .cancelled = false,
                         .hints = &c.x.hints};
        stg_decide(&c.pol, &rs, &o, c.now, &c.rng, &d);
        int64_t hint = STG_UNKNOWN;
        if (!stg_hints_server_wait(&c.x.hints, &hint))
            hint = STG_UNKNOWN;

        event(&c, STG_EVENT_ATTEMPT_END, &ev);
        ev.attempt = rs.attempts;
        ev.status = status;
        ev.error = err;
        ev.curl_code = (int)code;
        ev.duration_us = c.now - started;
        ev.retry_after_us = hint;
        emit(&c, &ev);

        if (d.action != STG_ACTION_RETRY) {
            reason = d.reason;
            break;
        }
        event(&c, STG_EVENT_WAIT, &ev);
        ev.attempt = rs.attempts;
        ev.status = status;
        ev.error = err;
        ev.wait_us = d.wait_us;
        ev.retry_after_us = d.server_wait_us;
        ev.reason = d.reason;
        emit(&c, &ev);
        stg_retry_state_note(&rs, &d);
        if (!wait_for(&c, d.wait_us)) {
            reason = STG_REASON_CANCELLED;
            break;
        }
    }

    out->action = reason == STG_REASON_SUCCESS ? STG_ACTION_SUCCESS : STG_ACTION_GIVE_UP;
    out->reason = reason;
    out->status = status;
    out->error = err;
    out->curl_code = (int)code;
    snprintf(out->error_text, sizeof out->error_text, "%s", errtext);
    out->attempts = rs.attempts;
    out->elapsed_us = c.now - rs.start_us;
    out->server_wait_us = d.server_wait_us;
    stg__xfer_move_to(&c.x, out);
    if (out->server_wait_us == STG_UNKNOWN && !stg_hints_server_wait(&out->hints, &out->server_wait_us))
        out->server_wait_us = STG_UNKNOWN;
    out->final_url = strdup(c.final_url[0] ? c.final_url : c.url);
    if (!out->body || !out->headers || !out->final_url) {
        stg_result_free(out);
        rc = STG_ENOMEM;
        goto cleanup;
    }

    event(&c, out->action == STG_ACTION_SUCCESS ? STG_EVENT_SUCCESS : STG_EVENT_GIVE_UP, &ev);
    ev.attempt = rs.attempts;
    ev.status = status;
    ev.error = err;
    ev.curl_code = (int)code;
    ev.duration_us = out->elapsed_us;
    ev.retry_after_us = out->server_wait_us;
    ev.reason = reason;
    emit(&c, &ev);

cleanup:
    stg__xfer_detach(easy);
    curl_multi_cleanup(c.multi);
    stg__xfer_free(&c.x);
    return rc;
}

void stg_result_free(stg_result *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->headers);
    free(r->final_url);
    r->body = r->headers = r->final_url = NULL;
    r->body_len = r->headers_len = 0;
}
