/*
 * The JSON-lines logger: one JSON object per event, built with jansson (no
 * hand-made JSON), written as one line and flushed.
 *
 * Keys: ts (RFC 3339 UTC from the event's wall clock), t_us (monotonic),
 * event, id, method, url, final_url, host, attempt, status, status_class
 * ("quota" for 429, "outage" for 503, "2xx", "4xx", "5xx", ..., "error"),
 * error (transport class), curl_code, retry_after_ms (the parsed server
 * hint), wait_ms, duration_ms, reason, outcome, breaker_from/breaker_to;
 * attempt_end also: connects (connections the attempt opened), conn_reused
 * (sent on a kept connection), tls_handshake_ms (when it made one),
 * concurrency (the host's learned limit, when it learns one),
 * never_processed (true when the server refused the stream or sent GOAWAY
 * above it: the engine sends it again itself), stream_error (the error
 * type of a held event stream's first event, which the status stands for).
 * An engine's events also: class (the request's priority class) and
 * tenant (when it has one); its attempt_start: admission_wait_ms (its
 * wait for admission, docs/priorities.md).
 * Keys that do not apply to an event are left out.
 *
 * Invariants: only what the event carries is written, and events carry
 * redacted URLs and no header values, so no secret reaches the log; lines
 * never interleave (a mutex per logger) and each is flushed whole.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "curl/internal.h"

struct stg_logger {
    FILE *out;
    pthread_mutex_t mu;
};

stg_logger *stg_logger_new(FILE *out)
{
    if (!out)
        return NULL;
    stg_logger *l = malloc(sizeof *l);
    if (!l)
        return NULL;
    l->out = out;
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return NULL;
    }
    return l;
}

void stg_logger_free(stg_logger *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void set_str(json_t *o, const char *key, const char *val)
{
    if (val)
        json_object_set_new(o, key, json_string(val)); /* NULL (bad UTF-8): skipped */
}

static void set_int(json_t *o, const char *key, int64_t v)
{
    json_object_set_new(o, key, json_integer((json_int_t)v));
}

static void set_ms(json_t *o, const char *key, int64_t us)
{
    json_object_set_new(o, key, json_real((double)us / 1000.0));
}

static void format_ts(int64_t wall_us, char *buf, size_t size)
{
    time_t s = (time_t)(wall_us / 1000000);
    int64_t frac = wall_us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        s--;
    }
    struct tm tm;
    if (!gmtime_r(&s, &tm)) {
        snprintf(buf, size, "1970-01-01T00:00:00.000000Z");
        return;
    }
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%06lldZ", date, (long long)frac);
}

static json_t *event_json(const stg_event *ev)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    char ts[48];
    format_ts(ev->wall_us, ts, sizeof ts);
    set_str(o, "ts", ts);
    set_int(o, "t_us", ev->now_us);
    set_str(o, "event", stg_event_type_name(ev->type));
    json_object_set_new(o, "id", json_integer((json_int_t)ev->request_id));
    set_str(o, "method", ev->method);
    set_str(o, "url", ev->url);
    set_str(o, "host", ev->host);
    if (ev->type != STG_EVENT_BREAKER)
        set_int(o, "attempt", ev->attempt);
    const stg_class_stats *cls = ev->more ? ev->more->cls : NULL;
    if (cls) { /* an engine's request: its class and tenant */
        set_str(o, "class", stg_priority_name(cls->priority));
        if (cls->tenant)
            set_str(o, "tenant", cls->tenant);
    }
    switch (ev->type) {
    case STG_EVENT_ATTEMPT_START:
        if (cls) /* its wait for admission */
            set_ms(o, "admission_wait_ms", ev->wait_us);
        break;
    case STG_EVENT_ATTEMPT_END:
    case STG_EVENT_SUCCESS:
    case STG_EVENT_GIVE_UP:
        set_str(o, "final_url", ev->final_url);
        if (ev->type != STG_EVENT_ATTEMPT_END || ev->status > 0 || ev->error != STG_NET_NONE) {
            if (ev->status > 0)
                set_int(o, "status", ev->status);
            else
                json_object_set_new(o, "status", json_null());
            if (ev->attempt > 0)
                set_str(o, "status_class", stg__status_class(ev->status, ev->error));
        }
        if (ev->error != STG_NET_NONE) {
            set_str(o, "error", stg_net_error_name(ev->error));
            set_int(o, "curl_code", ev->curl_code);
        }
        if (ev->retry_after_us >= 0)
            set_ms(o, "retry_after_ms", ev->retry_after_us);
        set_ms(o, "duration_ms", ev->duration_us);
        if (ev->type == STG_EVENT_ATTEMPT_END) {
            set_str(o, "outcome", stg__status_class(ev->status, ev->error));
            set_int(o, "connects", ev->connects);
            json_object_set_new(o, "conn_reused", json_boolean(ev->conn_reused));
            if (ev->tls_handshake_us > 0)
                set_ms(o, "tls_handshake_ms", ev->tls_handshake_us);
            if (ev->concurrency_limit > 0) /* a learned concurrency's limit */
                set_int(o, "concurrency", ev->concurrency_limit);
            if (ev->never_processed)
                json_object_set_new(o, "never_processed", json_true());
            if (ev->stream_error) /* a word (sse.c), or "" */
                set_str(o, "stream_error", *ev->stream_error ? ev->stream_error : "unknown");
        } else {
            set_str(o, "reason", stg_reason_name(ev->reason));
            set_str(o, "outcome", ev->type == STG_EVENT_SUCCESS ? "success" : "give_up");
        }
        break;
    case STG_EVENT_WAIT:
        if (ev->status > 0)
            set_int(o, "status", ev->status);
        if (ev->error != STG_NET_NONE)
            set_str(o, "error", stg_net_error_name(ev->error));
        if (ev->retry_after_us >= 0)
            set_ms(o, "retry_after_ms", ev->retry_after_us);
        set_ms(o, "wait_ms", ev->wait_us);
        set_str(o, "reason", stg_reason_name(ev->reason));
        set_str(o, "outcome", "retry");
        break;
    case STG_EVENT_LIMITER_WAIT:
        set_ms(o, "wait_ms", ev->wait_us);
        break;
    case STG_EVENT_WAITED:
        set_ms(o, "wait_ms", ev->wait_us);
        if (ev->more && ev->more->waited_for)
            set_str(o, "waited_for", ev->more->waited_for);
        break;
    case STG_EVENT_BREAKER:
        set_str(o, "breaker_from", stg_breaker_state_name(ev->breaker_from));
        set_str(o, "breaker_to", stg_breaker_state_name(ev->breaker_to));
        break;
    }
    return o;
}

void stg_log_event(const stg_event *ev, void *logger)
{
    stg_logger *l = logger;
    if (!l || !ev)
        return;
    json_t *o = event_json(ev);
    if (!o)
        return;
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!line)
        return;
    pthread_mutex_lock(&l->mu);
    fputs(line, l->out);
    fputc('\n', l->out);
    fflush(l->out);
    pthread_mutex_unlock(&l->mu);
    free(line);
}
