/*
 * The batch's commit rule (src/batch/commit.c), decision by decision, on
 * a runner handle with its flags set by hand (no store, no engine): what
 * must be committed before a send (claim-open, the sent-mark of a job that
 * is not replay-safe), when a step's end commits (unsafe-open, a stop, a
 * drain, the 20 ms flush), and what a claim and an outcome open. The
 * runner with a real store is in tests/integration/test_batch_lib.c and
 * test_batch_kill*.sh (a kill -9 finds what the rule promises).
 */
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include "batch/internal.h"

static stg_batch *fresh(void)
{
    stg_batch *b = calloc(1, sizeof *b);
    assert_non_null(b);
    return b;
}

static void test_before_send(void **state)
{
    (void)state;
    stg_batch *b = fresh();
    stg_batch_slot sl;
    memset(&sl, 0, sizeof sl);
    sl.job.replay_safe = true;
    /* Nothing open: the request goes as it is. */
    assert_int_equal(stg__batch_before_send_rule(b, &sl), STG__BATCH_SEND_AS_IS);
    /* A claim written and not committed: commit before it leaves. */
    stg__batch_claimed(b, 3);
    assert_true(b->claim_open);
    assert_int_equal(stg__batch_before_send_rule(b, &sl), STG__BATCH_SEND_FLUSH);
    /* Not replay-safe, first send: its sent-mark (which commits the
     * claims with it); a second attempt of it only the open claim. */
    sl.job.replay_safe = false;
    assert_int_equal(stg__batch_before_send_rule(b, &sl), STG__BATCH_SEND_MARK);
    sl.sent = true;
    assert_int_equal(stg__batch_before_send_rule(b, &sl), STG__BATCH_SEND_FLUSH);
    /* A commit closes the claim. */
    stg__batch_committed(b);
    assert_false(b->claim_open);
    assert_int_equal(stg__batch_before_send_rule(b, &sl), STG__BATCH_SEND_AS_IS);
    /* A failed store writes nothing more (the step cancels the send). */
    sl.sent = false;
    b->store_failed = true;
    assert_int_equal(stg__batch_before_send_rule(b, &sl), STG__BATCH_SEND_AS_IS);
    free(b);
}

static void test_claims_and_outcomes_open(void **state)
{
    (void)state;
    stg_batch *b = fresh();
    stg_batch_slot sl;
    memset(&sl, 0, sizeof sl);
    stg__batch_claimed(b, 0); /* an empty claim opens nothing */
    assert_false(b->claim_open);
    sl.job.replay_safe = true;
    stg__batch_outcome_written(b, &sl); /* a replay-safe outcome may wait */
    assert_false(b->unsafe_open);
    sl.job.replay_safe = false;
    stg__batch_outcome_written(b, &sl);
    assert_true(b->unsafe_open);
    /* A queue source commits each call itself: nothing is opened. */
    stg_batch *q = fresh();
    stg_batch_source src;
    memset(&src, 0, sizeof src);
    q->source = &src;
    stg__batch_claimed(q, 5);
    stg__batch_outcome_written(q, &sl);
    assert_false(q->claim_open || q->unsafe_open);
    free(q);
    free(b);
}

static void test_after_step(void **state)
{
    (void)state;
    stg_batch *b = fresh();
    int64_t t = STG_SEC(100);
    b->commit_us = t;
    /* Within 20 ms of the last commit and nothing unsafe: no commit. */
    assert_false(stg__batch_after_step_rule(b, t));
    assert_false(stg__batch_after_step_rule(b, t + STG_MS(20) - 1));
    /* The 20 ms flush. */
    assert_true(stg__batch_after_step_rule(b, t + STG_MS(20)));
    /* An unsafe outcome is committed in its step, at once. */
    b->unsafe_open = true;
    assert_true(stg__batch_after_step_rule(b, t));
    b->unsafe_open = false;
    /* A stop and a drain commit what they have. */
    b->stopping = true;
    assert_true(stg__batch_after_step_rule(b, t));
    b->stopping = false;
    b->drained = true;
    assert_true(stg__batch_after_step_rule(b, t));
    /* An open claim alone waits for its first send, not the step. */
    b->drained = false;
    b->claim_open = true;
    assert_false(stg__batch_after_step_rule(b, t + 1));
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_send),
        cmocka_unit_test(test_claims_and_outcomes_open),
        cmocka_unit_test(test_after_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
