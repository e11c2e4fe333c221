/*
 * The end of one attempt, written once for the blocking call (perform.c)
 * and the engine (engine_done.c): classify -> redact -> report -> decide ->
 * ATTEMPT_END event. The callers only execute the decision (wait, hop,
 * finish), each with its own timers.
 *
 * Invariants:
 *  - a transfer that ended without an HTTP status is a transport error
 *    (status 0), and one with a status is NONE unless the step itself
 *    stopped it (body over max_body, a failed body sink, out of memory):
 *    then the status is kept, the error is OTHER and the failure is
 *    deterministic;
 *  - a deterministic failure is never retried, whatever the policy's
 *    retry_errors say: another attempt would get the same answer;
 *  - a resend libcurl tried on its own (xfer.c) is what it replaced: the
 *    first send got no answer, a RESET, so stg_decide retries it only when
 *    the method may repeat, through the limiter like any retry;
 *  - except a stream the server never processed (RFC 9113 §8.7: HTTP/2
 *    REFUSED_STREAM, or above a GOAWAY's last-stream-id; xfer.c tells it
 *    apart): the server says it did nothing, so it is resent at once, even
 *    a POST without a key, outside the policy's attempts (like a hop), the
 *    retry budget and the breaker (report sees a->resend), at most
 *    STG__NEVER_PROCESSED_MAX times a request; past that cap, and for a
 *    caller that does not resend (step.refused NULL), it is the RESET it
 *    looks like, and stg_decide has it;
 *  - every string that leaves here (errtext, final_url) is redacted; the
 *    redirect target is not (it is sent) and never goes to an event;
 *  - a redirect hop is a send (rs->attempts counts it) but not a retry:
 *    stg_decide sees attempts - hops, so hops do not use up max_attempts;
 *    only http and https targets are followed.
 */
#include <stdio.h>
#include <string.h>

#include "curl/internal.h"

static bool is_redirect(int status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

void stg__attempt_end(CURL *easy, CURLcode code, const stg__xfer *x, const char *url,
                      stg__attempt *a)
{
    memset(a, 0, sizeof *a);
    a->hint = STG_UNKNOWN;
    long http = 0;
    curl_off_t connect_us = 0;
    const char *eff = NULL, *loc = NULL;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
    curl_easy_getinfo(easy, CURLINFO_CONNECT_TIME_T, &connect_us);
    /* CONNECT_TIME is 0 on a connection made by an earlier transfer too:
     * "no connection was made" is then not "the request never left". Bytes
     * of this request sent (REQUEST_SIZE) say it may have reached the
     * server, so a timeout is not a connect timeout, and a keyless POST is
     * not sent again. */
    long sent = 0;
    curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &sent);
    if (connect_us <= 0 && sent > 0)
        connect_us = 1;
    curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &eff);
    stg_redact_url(eff && *eff ? eff : url ? url : "", a->final_url, sizeof a->final_url);
    a->curl_code = (int)code;

    const char *note = "";
    a->err = stg__classify_text(code, (int64_t)connect_us, x->errbuf, &a->deterministic, &note);
    a->status = a->err == STG_NET_NONE ? (int)http : 0;
    stg__xfer_conn(easy, &a->conn);
    if (code != CURLE_OK) {
        /* "note: libcurl's message", the message redacted. */
        int off = *note ? snprintf(a->errtext, sizeof a->errtext, "%s: ", note) : 0;
        if (off < 0 || (size_t)off >= sizeof a->errtext)
            off = 0;
        stg__redact_text(x->errbuf[0] ? x->errbuf : curl_easy_strerror(code), a->errtext + off,
                         sizeof a->errtext - (size_t)off);
    }

    if (code == CURLE_ABORTED_BY_CALLBACK && x->timed_out) {
        /* The first-byte or idle time ran out (xfer.c on_progress): a
         * timeout after the request left, as CURLOPT_TIMEOUT's is. */
        char d[32];
        int64_t us = x->timed_out == STG__XFER_FIRST_BYTE ? x->first_byte_us : x->idle_us;
        if (us % 1000000 == 0)
            snprintf(d, sizeof d, "%lld s", (long long)(us / 1000000));
        else
            snprintf(d, sizeof d, "%lld ms", (long long)(us / 1000));
        a->err = STG_NET_TIMEOUT;
        a->status = 0;
        a->deterministic = false;
        if (x->timed_out == STG__XFER_FIRST_BYTE)
            snprintf(a->errtext, sizeof a->errtext,
                     "first-byte timeout: no answer within %s of sending the request", d);
        else
            snprintf(a->errtext, sizeof a->errtext,
                     "idle timeout: no byte for %s after %lld bytes of the answer (HTTP %ld)", d,
                     (long long)x->dl_seen, http);
    } else if (x->oom) {
        a->err = STG_NET_OTHER;
        a->status = 0;
        a->deterministic = true;
        snprintf(a->errtext, sizeof a->errtext, "out of memory for the response");
    } else if (x->stream_error) {
        /* A held event stream's first event was an error (xfer.c, sse.c):
         * nothing of it reached the caller, and it is the answer the same
         * error has outside a stream, retried or given back as that. */
        a->err = STG_NET_NONE;
        a->status = x->stream_error;
        a->deterministic = false;
        a->stream_error = true;
        snprintf(a->stream_error_type, sizeof a->stream_error_type, "%s", x->stream_error_type);
        snprintf(a->errtext, sizeof a->errtext,
                 "the stream's first event was an error (%s): taken as HTTP %d",
                 x->stream_error_type[0] ? x->stream_error_type : "of no known type",
                 x->stream_error);
    } else if (x->sink_failed) {
        /* The destination refused the bytes (disk full, ...): the answer
         * came, but it did not reach where it belongs. */
        a->err = STG_NET_OTHER;
        a->status = (int)http;
        a->deterministic = true;
        snprintf(a->errtext, sizeof a->errtext,
                 "the body sink failed (the destination refused the bytes): transfer stopped");
    } else if (x->truncated) {
        /* The answer arrived (status kept) but is longer than the caller
         * accepts: an error, never a quietly shortened success. */
        a->err = STG_NET_OTHER;
        a->status = (int)http;
        a->deterministic = true;
        snprintf(a->errtext, sizeof a->errtext,
                 "response body larger than max_body (%zu bytes): transfer stopped",
                 x->max_body);
    } else if (stg__never_processed(code, http, x->sent_h2, x->resend_blocked && x->refused_stream,
                                    x->errbuf)) {
        a->err = STG_NET_RESET;
        a->status = 0;
        a->never_processed = true;
        snprintf(a->errtext, sizeof a->errtext,
                 "never processed by the server (HTTP/2 REFUSED_STREAM or GOAWAY)");
    } else if (x->resend_blocked && http > 0) {
        /* An answer came and libcurl wanted to send again on its own (HTTP
         * authentication negotiation, a 417 to Expect): refused, and
         * another attempt would go the same way. */
        a->err = STG_NET_OTHER;
        a->status = (int)http;
        a->deterministic = true;
        snprintf(a->errtext, sizeof a->errtext,
                 "libcurl wanted to resend after HTTP %ld (authentication negotiation or "
                 "Expect): refused, every send is stagger's",
                 http);
    } else if (x->resend_blocked) {
        /* libcurl's internal resend was refused: what happened is that the
         * reused connection closed without an answer. */
        a->err = STG_NET_RESET;
        a->status = 0;
        snprintf(a->errtext, sizeof a->errtext,
                 "connection closed without an answer (a reused connection; "
                 "libcurl's own resend refused)");
    } else if (code == CURLE_OUT_OF_MEMORY) {
        /* libcurl says "Out of memory" when a status or header line passes
         * its line limit (100 KB in 7.x/8.x): say what most likely happened. */
        a->err = STG_NET_OTHER;
        a->status = 0;
        a->deterministic = true;
        snprintf(a->errtext, sizeof a->errtext,
                 "response header or status line too long for libcurl (over its "
                 "line limit), or out of memory");
    } else if (a->deterministic && !*note) {
        snprintf(a->errtext, sizeof a->errtext, "response headers too large for libcurl");
    }
    if (a->err == STG_NET_NONE && a->status == 0)
        a->err = STG_NET_OTHER; /* a transfer without an HTTP status */
    if (a->err == STG_NET_NONE) {
        int64_t h = STG_UNKNOWN;
        if (stg_hints_server_wait(&x->hints, &h))
            a->hint = h;
    }
    if (a->err == STG_NET_NONE && is_redirect(a->status) &&
        curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc && *loc &&
        strlen(loc) < sizeof a->redirect_url)
        snprintf(a->redirect_url, sizeof a->redirect_url, "%s", loc);
}

void stg__attempt_step(const stg__step *s, stg__attempt *a, const stg_hints *h,
                       stg_decision *d)
{
    a->resend = a->never_processed && s->refused && *s->refused < STG__NEVER_PROCESSED_MAX;
    if (a->never_processed && !a->resend && s->refused) {
        size_t n = strlen(a->errtext);
        snprintf(a->errtext + n, sizeof a->errtext - n, ", resent %d times already: a reset",
                 *s->refused);
    }
    if (s->report)
        s->report(s->report_ctx, a, h);

    memset(d, 0, sizeof *d);
    d->server_wait_us = STG_UNKNOWN;
    if (a->resend) {
        (*s->refused)++;
        d->action = STG_ACTION_RETRY;
        d->reason = STG_REASON_SUCCESS; /* not a failure: never processed */
    } else if (a->deterministic) {
        d->action = STG_ACTION_GIVE_UP;
        d->reason = STG_REASON_ERROR_NOT_RETRYABLE;
    } else if (s->follow && a->redirect_url[0]) {
        if (!stg__http_url(a->redirect_url)) {
            d->action = STG_ACTION_GIVE_UP;
            d->reason = STG_REASON_STATUS_NOT_RETRYABLE;
            a->err = STG_NET_OTHER;
            a->deterministic = true;
            snprintf(a->errtext, sizeof a->errtext,
                     "redirect to a URL that is not http or https: not followed");
        } else if (s->hops >= s->max_redirects) {
            d->action = STG_ACTION_GIVE_UP;
            d->reason = STG_REASON_STATUS_NOT_RETRYABLE;
            a->err = STG_NET_OTHER;
            a->deterministic = true;
            snprintf(a->errtext, sizeof a->errtext,
                     "too many redirects: more than %d (a redirect loop?)", s->max_redirects);
        } else {
            a->redirect = true;
            a->redirect_method = stg__redirect_method(a->status, s->method);
            a->redirect_cross_origin = stg__cross_origin(s->origin_url, a->redirect_url);
            d->action = STG_ACTION_RETRY;
            d->reason = STG_REASON_SUCCESS; /* not a failure: the next hop */
        }
    } else {
        stg_retry_state st = *s->rs;
        st.attempts -= s->hops + (s->refused ? *s->refused : 0);
        if (st.attempts < 1)
            st.attempts = 1;
        stg_outcome o = {.status = a->status,
                         .error = a->err,
                         .method = s->method,
                         .has_idempotency_key = s->has_key,
                         .cancelled = false,
                         .hints = h};
        stg_decide(s->pol, &st, &o, s->now_us, s->rng, d);
    }

    if (s->ev) {
        s->ev->type = STG_EVENT_ATTEMPT_END;
        s->ev->status = a->status;
        s->ev->error = a->err;
        s->ev->curl_code = a->curl_code;
        s->ev->duration_us = s->duration_us;
        s->ev->retry_after_us = a->hint;
        s->ev->final_url = a->final_url;
        s->ev->connects = a->conn.connects;
        s->ev->conn_reused = a->conn.reused;
        s->ev->tls_handshake_us = a->conn.tls_handshake_us;
        s->ev->never_processed = a->never_processed;
        s->ev->stream_error = a->stream_error ? a->stream_error_type : NULL;
        if (s->on_event)
            s->on_event(s->ev, s->event_data);
    }
}
