/*
 * The request log (--log FILE): one line per client request, JSONL or CSV.
 *
 * Fields: arrival time in µs since server start, client id, method, path,
 * outcome (the status sent, or "reset", "hang", "aborted"), Idempotency-Key
 * (null / empty when absent). CSV files start with one header line.
 * With an AI persona (ai.h), the tokens of each API request follow
 * (srv_reqlog_ai; JSONL: only on API requests; CSV: columns always, empty
 * on other requests).
 *
 * Invariants: a line is formatted outside the lock and written whole under
 * it, so lines never interleave; the stdio buffer is flushed by the
 * server's ticker (every 200 ms) and at close, so a reader sees every line
 * once the server has exited.
 */
#ifndef STAGGER_SERVER_REQLOG_H
#define STAGGER_SERVER_REQLOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "server/server.h"

typedef struct srv_reqlog {
    FILE *f; /* NULL: logging off, every call is a no-op */
    stg_srv_log_format fmt;
    bool ai; /* CSV: the token columns */
    pthread_mutex_t mu;
} srv_reqlog;

/* An API request's tokens (ai.h), as logged. */
typedef struct srv_reqlog_ai {
    const char *ai;          /* what became of it: "ok", "stream", "stream_error",
                                "refused" (a quota), "overloaded",
                                "insufficient_quota", "invalid", "error" (admitted,
                                but not answered by the API: an
                                Idempotency-Key reused, 422) */
    int64_t tokens_in;       /* input tokens estimated from the prompt */
    int64_t tokens_max_out;  /* output tokens asked for at most */
    int64_t tokens_charged;  /* charged at arrival to the "tokens" quota (0 when
                                not admitted) */
    int64_t tokens_out;      /* output tokens answered (usage) */
    int64_t tokens_refunded; /* given back when answered (Anthropic) */
} srv_reqlog_ai;

/* Open (truncate) path; path NULL turns logging off; ai: the persona is an
 * AI one (the CSV header has the token columns). Returns 0, or -1 with a
 * message in err. */
int srv_reqlog_open(srv_reqlog *l, const char *path, stg_srv_log_format fmt, bool ai, char *err,
                    size_t errlen);

/* Log one request. status > 0 is written as a number; otherwise outcome
 * ("reset", "hang", "aborted"). key and ai may be NULL. Thread-safe. */
void srv_reqlog_write(srv_reqlog *l, int64_t rel_us, const char *client, const char *method,
                      const char *path, unsigned status, const char *outcome, const char *key,
                      const srv_reqlog_ai *ai);

void srv_reqlog_flush(srv_reqlog *l);
void srv_reqlog_close(srv_reqlog *l);

#endif
