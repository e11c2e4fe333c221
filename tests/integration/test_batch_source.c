/*
 * The batch runner's job-source seam (stg_batch_source, src/batch/source.c)
 * with a source of the test's own, against 127.0.0.1:1 (connection
 * refused at once, so every request ends deferred after one attempt):
 *  - a claim that returns nothing but "more" does not end the run; "no
 *    more" with nothing in flight does (DRAINED);
 *  - finish is called exactly once per claimed job, never INFLIGHT;
 *  - the progress counts are the source's, not moved by the runner;
 *  - a source away (finish or tick: STG_EUNAVAIL) stops the run with cause
 *    LIMITER and the source's message;
 *  - stg__batch_drain claims nothing more and ends when in flight is empty;
 *  - a sent-mark the source cannot record stops the run before the request
 *    leaves: the job goes back (PENDING), not to review;
 *  - a job whose headers set a field batch input may not set (a queue
 *    loaded by another program: framing, connection, Host, Proxy-*) fails
 *    unsent (invalid_request, the field named, no sent-mark), the jobs
 *    beside it run; such a configuration header is refused at new.
 */
#define _GNU_SOURCE
#include "cmocka_all.h"

#include <stdlib.h>
#include <string.h>

#include "batch/batch.h"

typedef struct fake {
    int total, next, empty_claims, claims;
    int finished[64];
    stg_job_state state[64];
    int64_t counts[STG_JOB_NSTATES];
    bool post;             /* jobs are POSTs without a key (not replay-safe) */
    int fail_finish_after; /* finish answers EUNAVAIL from this call on; 0: never */
    int fail_tick_after;   /* tick answers EUNAVAIL from this call on; 0: never */
    bool fail_mark;
    int finishes, ticks, marks;
    const char *header;    /* the odd jobs carry this header line; NULL: none */
    char reason[64], error[256]; /* the last failed outcome's */
} fake;

static char *dup(const char *s)
{
    return strdup(s);
}

static int f_claim(void *ctx, int max, stg_job *out, int *n, bool *more)
{
    fake *f = ctx;
    f->claims++;
    *n = 0;
    if (f->empty_claims > 0) { /* "nothing now, more later" */
        f->empty_claims--;
        *more = true;
        return STG_OK;
    }
    while (*n < max && f->next < f->total) {
        stg_job *j = &out[(*n)++];
        memset(j, 0, sizeof *j);
        j->id = ++f->next;
        char key[16];
        snprintf(key, sizeof key, "k%lld", (long long)j->id);
        j->key = dup(key);
        j->method = dup(f->post ? "POST" : "GET");
        j->url = dup("http://127.0.0.1:1/x");
        j->url_redacted = dup(j->url);
        j->replay_safe = !f->post;
        if (f->header && j->id % 2) {
            j->headers = calloc(3, sizeof *j->headers);
            j->headers[0] = dup("X-Ok: 1");
            j->headers[1] = dup(f->header);
        }
    }
    *more = f->next < f->total;
    return STG_OK;
}

static int f_mark(void *ctx, const stg_job *j)
{
    fake *f = ctx;
    (void)j;
    f->marks++;
    return f->fail_mark ? STG_EUNAVAIL : STG_OK;
}

static int f_finish(void *ctx, const stg_job *j, const stg_job_outcome *o)
{
    fake *f = ctx;
    f->finishes++;
    if (f->fail_finish_after && f->finishes >= f->fail_finish_after)
        return STG_EUNAVAIL;
    assert_true(j->id >= 1 && j->id <= f->total);
    assert_int_not_equal(o->state, STG_JOB_INFLIGHT);
    f->finished[j->id]++;
    f->state[j->id] = o->state;
    if (o->state == STG_JOB_FAILED) {
        snprintf(f->reason, sizeof f->reason, "%s", o->reason ? o->reason : "");
        snprintf(f->error, sizeof f->error, "%s", o->error ? o->error : "");
    }
    return STG_OK;
}

static void f_counts(void *ctx, int64_t n[STG_JOB_NSTATES])
{
    fake *f = ctx;
    memcpy(n, f->counts, sizeof f->counts);
}

static int f_tick(void *ctx)
{
    fake *f = ctx;
    f->ticks++;
    return f->fail_tick_after && f->ticks >= f->fail_tick_after ? STG_EUNAVAIL : STG_OK;
}

static const char *f_err(void *ctx)
{
    (void)ctx;
    return "the fake backend is away";
}

static stg_batch_summary run(fake *f, int conc, bool drain_at_once)
{
    stg_batch_source src = {.ctx = f, .claim = f_claim, .mark_sent = f_mark, .finish = f_finish,
                            .counts = f_counts, .tick = f_tick, .errmsg = f_err};
    stg_batch_config bc = {.source = &src};
    bc.engine.concurrency = conc;
    stg_policy_preset(&bc.engine.policy, "batch");
    bc.engine.policy.max_attempts = 1;
    bc.engine.limiter = STG_LIMITER_NONE;
    stg_batch *b = NULL;
    char err[256];
    assert_int_equal(stg__batch_new(&bc, &b, NULL, err, sizeof err), STG_OK);
    stg_batch_progress p;
    stg__batch_progress_get(b, &p);
    assert_int_equal(p.counts.n[STG_JOB_DONE], f->counts[STG_JOB_DONE]); /* the source's */
    if (drain_at_once) {
        assert_true(stg__batch_step(b, STG_MS(10))); /* the first claim */
        stg__batch_drain(b);
    }
    for (int i = 0; i < 100000 && stg__batch_step(b, STG_MS(10)); i++)
        ;
    stg_batch_summary s;
    stg__batch_end(b, &s);
    stg__batch_free(b, 0);
    return s;
}

static void test_claims_finishes_counts(void **state)
{
    (void)state;
    fake f = {.total = 20, .empty_claims = 3};
    f.counts[STG_JOB_DONE] = 7; /* other workers' */
    f.counts[STG_JOB_PENDING] = 13;
    stg_batch_summary s = run(&f, 4, false);
    assert_int_equal(s.cause, STG_BATCH_DRAINED);
    assert_true(f.claims > 3);
    for (int i = 1; i <= 20; i++) {
        assert_int_equal(f.finished[i], 1);
        assert_int_equal(f.state[i], STG_JOB_DEFERRED); /* refused: kept for later */
    }
    assert_int_equal(s.finished, 20);
    assert_int_equal(s.counts.n[STG_JOB_DONE], 7); /* read back from the source */
    assert_int_equal(f.marks, 0);                  /* GETs: no sent-mark */
}

static void test_source_away(void **state)
{
    (void)state;
    fake f = {.total = 30, .fail_finish_after = 3};
    stg_batch_summary s = run(&f, 2, false);
    assert_int_equal(s.cause, STG_BATCH_LIMITER);
    assert_string_equal(s.message, "the fake backend is away");
    assert_true(f.next < 30); /* it stopped claiming */
    fake g = {.total = 30, .fail_tick_after = 2};
    s = run(&g, 2, false);
    assert_int_equal(s.cause, STG_BATCH_LIMITER);
    assert_true(g.next < 30);
}

static void test_drain(void **state)
{
    (void)state;
    fake f = {.total = 30};
    stg_batch_summary s = run(&f, 3, true);
    assert_int_equal(s.cause, STG_BATCH_DRAINED);
    assert_int_equal(f.next, 3); /* one claim of 3, then none */
    for (int i = 1; i <= 3; i++)
        assert_int_equal(f.finished[i], 1);
}

static void test_mark_unrecorded_not_sent(void **state)
{
    (void)state;
    fake f = {.total = 1, .post = true, .fail_mark = true};
    stg_batch_summary s = run(&f, 1, false);
    assert_int_equal(s.cause, STG_BATCH_LIMITER);
    assert_int_equal(f.marks, 1);
    assert_int_equal(f.finished[1], 1);
    assert_int_equal(f.state[1], STG_JOB_PENDING); /* given back, not review */
    fake g = {.total = 1, .post = true};
    s = run(&g, 1, false);
    assert_int_equal(g.marks, 1);
    assert_int_equal(s.cause, STG_BATCH_DRAINED);
    assert_int_equal(g.state[1], STG_JOB_DEFERRED); /* recorded, then refused: ran its course */
}

static void test_refused_headers_unsent(void **state)
{
    (void)state;
    static const char *const refused[] = {"Content-Length: 1", "transfer-encoding: chunked",
                                          "Connection: close", "Host: admin.internal",
                                          "Proxy-Authorization: Basic eA==", "Upgrade;",
                                          "Bad Name: x"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        fake f = {.total = 1, .post = true, .header = refused[i]};
        stg_batch_summary s = run(&f, 1, false);
        assert_int_equal(s.cause, STG_BATCH_DRAINED);
        assert_int_equal(f.finished[1], 1);
        assert_int_equal(f.state[1], STG_JOB_FAILED);
        assert_string_equal(f.reason, "invalid_request");
        if (!strstr(f.error, "refused before sending: header"))
            fail_msg("%s: error '%s'", refused[i], f.error);
        assert_int_equal(f.marks, 0); /* no attempt started: not a byte sent */
    }
    fake f = {.total = 4, .header = "Content-Length: 1"};
    stg_batch_summary s = run(&f, 2, false);
    assert_int_equal(s.cause, STG_BATCH_DRAINED);
    if (!strstr(f.error, "header Content-Length frames the message"))
        fail_msg("error '%s'", f.error);
    for (int i = 1; i <= 4; i++)
        assert_int_equal(f.state[i], i % 2 ? STG_JOB_FAILED : STG_JOB_DEFERRED);
    /* The configuration's headers (-H): refused at new, with the reason. */
    stg_batch_source src = {.ctx = &f, .claim = f_claim, .mark_sent = f_mark,
                            .finish = f_finish, .counts = f_counts, .tick = f_tick,
                            .errmsg = f_err};
    const char *cfg_headers[] = {"Authorization: Bearer t", "Keep-Alive: 5"};
    stg_batch_config bc = {.source = &src, .headers = cfg_headers, .n_headers = 2};
    stg_batch *b = NULL;
    char err[256];
    assert_int_equal(stg__batch_new(&bc, &b, NULL, err, sizeof err), STG_EINVAL);
    assert_null(b);
    assert_non_null(strstr(err, "header 2 is connection-level"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claims_finishes_counts),
        cmocka_unit_test(test_source_away),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_mark_unrecorded_not_sent),
        cmocka_unit_test(test_refused_headers_unsent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
