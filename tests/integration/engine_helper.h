/*
 * What the engine's integration tests share: a completion tally (the
 * outcome of every request, counted by what a test asserts on), a policy
 * that retries fast (so a test's time is the server's hints, not the
 * backoff), and the check of stg_hostile's pattern body (byte i of a body
 * is i % 251, so order and offsets are checked byte for byte). Include
 * after cmocka and <stagger/curl.h>. Each test file keeps the sinks and
 * records of its own subject; only what several of them do the same way
 * is here.
 */
#ifndef STG_TEST_ENGINE_HELPER_H
#define STG_TEST_ENGINE_HELPER_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef struct done_tally {
    int done;          /* completions: each request's exactly once */
    int ok;            /* ended in success */
    int ok_200;        /* ended in success with a 200 */
    int first_try;     /* ended after one attempt */
    int cancelled, breaker_open, budget, deadline; /* ended for that reason */
    int64_t last_done_us; /* CLOCK_MONOTONIC of the last completion */
    stg_reason last_reason;
    int last_attempts;
} done_tally;

static inline int64_t tally_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* An stg_done_fn whose data is a done_tally. */
static inline void tally_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    done_tally *t = data;
    t->done++;
    t->ok += r->action == STG_ACTION_SUCCESS;
    t->ok_200 += r->action == STG_ACTION_SUCCESS && r->status == 200;
    t->first_try += r->attempts == 1;
    t->cancelled += r->reason == STG_REASON_CANCELLED;
    t->breaker_open += r->reason == STG_REASON_BREAKER_OPEN;
    t->budget += r->reason == STG_REASON_BUDGET_EXHAUSTED;
    t->deadline += r->reason == STG_REASON_DEADLINE;
    t->last_done_us = tally_now_us();
    t->last_reason = r->reason;
    t->last_attempts = r->attempts;
}

/* attempts tries, 1-5 ms apart, within a minute; a server's wait of up
 * to a minute is taken. */
static inline stg_policy fast_policy(int attempts)
{
    stg_policy p = {0};
    p.max_attempts = attempts;
    p.backoff.base_us = STG_MS(1);
    p.backoff.cap_us = STG_MS(5);
    p.deadline_us = STG_SEC(60);
    p.max_server_wait_us = STG_SEC(60);
    return p;
}

/* How many of the len bytes at buf, which start at offset off of the
 * body, are not stg_hostile's pattern there. */
static inline size_t pattern_bad(size_t off, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    size_t bad = 0;
    for (size_t i = 0; i < len; i++)
        bad += p[i] != (unsigned char)((off + i) % 251);
    return bad;
}

#endif
