/*
 * Unit tests of the weighted fair queue (src/core/fairq.h), in virtual
 * time: a pick is one admission. The bounds asserted are the algorithm's
 * (fairq.h): strict classes, one pick in floor_every for a waiting lower
 * class, |n_i/w_i - n_j/w_j| <= 1/w_i + 1/w_j between waiting tenants, and
 * a returning tenant picked before any other gets 1 + w_j/w more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "fairq.h"

typedef struct item {
    stg__fq_item fq;
    int tenant; /* index into names */
    int cls;
} item;

static const char *const names[] = {"a", "b", "c", "d"};

static item *mk(stg__fairq *q, int priority, int tenant, double weight)
{
    item *it = calloc(1, sizeof *it);
    assert_non_null(it);
    it->tenant = tenant;
    it->cls = priority;
    stg_class c = {.priority = priority, .tenant = tenant >= 0 ? names[tenant] : NULL,
                   .weight = weight};
    assert_int_equal(stg__fq_push(q, &it->fq, &c), STG_OK);
    return it;
}

static item *pop(stg__fairq *q)
{
    stg__fq_item *p = stg__fq_peek(q);
    stg__fq_item *t = stg__fq_pop(q);
    assert_ptr_equal(p, t); /* peek says what pop does */
    return (item *)t;
}

static void drain(stg__fairq *q)
{
    item *it;
    while ((it = pop(q)))
        free(it);
    assert_int_equal(q->n, 0);
    stg__fq_free(q);
}

/* Classes go strictly by number while the floor is not reached; FIFO
 * within one tenant. */
static void test_class_order(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    item *b1 = mk(&q, STG_PRIORITY_BATCH, -1, 0);
    item *n1 = mk(&q, STG_PRIORITY_NORMAL, -1, 0);
    item *i1 = mk(&q, STG_PRIORITY_INTERACTIVE, -1, 0);
    item *n2 = mk(&q, STG_PRIORITY_NORMAL, -1, 0);
    item *i2 = mk(&q, STG_PRIORITY_INTERACTIVE, -1, 0);
    item *b2 = mk(&q, STG_PRIORITY_BATCH, -1, 0);
    assert_int_equal(stg__fq_class_len(&q, 0), 2);
    item *want[] = {i1, i2, n1, n2, b1, b2};
    for (size_t k = 0; k < 6; k++) {
        item *it = pop(&q);
        assert_ptr_equal(it, want[k]);
        free(it);
    }
    assert_null(stg__fq_pop(&q));
    /* A priority out of range is normal. */
    item *x = mk(&q, 7, -1, 0);
    item *y = mk(&q, STG_PRIORITY_INTERACTIVE, -1, 0);
    assert_int_equal(x->fq.cls, STG_PRIORITY_INDEX(STG_PRIORITY_NORMAL));
    assert_ptr_equal(pop(&q), y);
    free(y);
    drain(&q);
}

/* The floor: a batch backlog under an endless interactive one gets exactly
 * one pick in every floor_every, and nothing more. */
static void test_floor(void **state)
{
    (void)state;
    for (unsigned every = 2; every <= 40; every += 19) {
        stg__fairq q;
        stg__fq_init(&q, every == 21 ? 0 : every);
        unsigned fe = q.floor_every;
        for (int k = 0; k < 50; k++)
            mk(&q, STG_PRIORITY_BATCH, -1, 0);
        for (int k = 0; k < 10; k++)
            mk(&q, STG_PRIORITY_INTERACTIVE, -1, 0);
        unsigned since = 0, batch = 0;
        for (unsigned pick = 0; pick < 20 * fe; pick++) {
            mk(&q, STG_PRIORITY_INTERACTIVE, -1, 0); /* interactive never runs dry */
            item *it = pop(&q);
            if (it->cls == STG_PRIORITY_BATCH) {
                batch++;
                assert_int_equal(since, fe - 1); /* exactly at the floor */
                since = 0;
            } else {
                since++;
                assert_true(since < fe);
            }
            free(it);
        }
        assert_int_equal(batch, 20);
        drain(&q);
    }
    /* Two starved classes: each within floor_every + 1 picks. */
    stg__fairq q;
    stg__fq_init(&q, 10);
    for (int k = 0; k < 100; k++) {
        mk(&q, STG_PRIORITY_BATCH, -1, 0);
        mk(&q, STG_PRIORITY_NORMAL, -1, 0);
    }
    int last[STG_N_PRIORITIES] = {0, 0, 0};
    for (int pick = 1; pick <= 500; pick++) {
        mk(&q, STG_PRIORITY_INTERACTIVE, -1, 0);
        item *it = pop(&q);
        int ci = STG_PRIORITY_INDEX(it->cls);
        last[ci] = pick;
        for (int c = 1; c < STG_N_PRIORITIES; c++)
            assert_true(pick - last[c] <= 10 + STG_N_PRIORITIES - 2);
        free(it);
    }
    drain(&q);
}

/* n_i/w_i - n_j/w_j for every pair of waiting tenants, at every prefix. */
static void check_pairs(const int *n, const double *w, int nt)
{
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nt; j++)
            assert_true(fabs(n[i] / w[i] - n[j] / w[j]) <= 1 / w[i] + 1 / w[j] + 1e-9);
}

/* 1:1:2 under contention: 25/25/50% within the SFQ bound at every prefix,
 * so within one pick of the exact share here. */
static void test_shares(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    double w[3] = {1, 1, 2};
    for (int k = 0; k < 300; k++)
        for (int t = 0; t < 3; t++)
            mk(&q, STG_PRIORITY_NORMAL, t, w[t]);
    int n[3] = {0, 0, 0};
    for (int pick = 1; pick <= 400; pick++) {
        item *it = pop(&q);
        n[it->tenant]++;
        free(it);
        check_pairs(n, w, 3);
        for (int t = 0; t < 3; t++)
            assert_true(fabs(n[t] - pick * w[t] / 4.0) <= 2.0);
    }
    assert_int_equal(n[0], 100);
    assert_int_equal(n[1], 100);
    assert_int_equal(n[2], 200);
    drain(&q);
}

/* A share left unused flows to the others at once; a tenant that comes
 * back after a long pause gets no credit for it, and its share back at
 * its first pick. */
static void test_unused_share_and_comeback(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    double w[3] = {1, 1, 2};
    /* a and b wait; c (weight 2) sends nothing: a and b split 50/50. */
    int n[3] = {0, 0, 0};
    for (int k = 0; k < 500; k++) {
        mk(&q, STG_PRIORITY_NORMAL, 0, 1);
        mk(&q, STG_PRIORITY_NORMAL, 1, 1);
    }
    for (int pick = 1; pick <= 200; pick++) {
        item *it = pop(&q);
        n[it->tenant]++;
        free(it);
        assert_true(abs(n[0] - n[1]) <= 1);
    }
    /* c comes back with a backlog of its own: its last finish long
     * passed, its tag is V, which a's and b's heads can only tie, and c's
     * larger weight wins the tie: its first item is the next pick. From
     * then on the three hold the pairwise bound (no credit for the pause:
     * not more than its share). */
    for (int k = 0; k < 300; k++)
        mk(&q, STG_PRIORITY_NORMAL, 2, 2);
    int m[3] = {0, 0, 0};
    int first_c = 0;
    for (int pick = 1; pick <= 200; pick++) {
        item *it = pop(&q);
        m[it->tenant]++;
        if (it->tenant == 2 && !first_c)
            first_c = pick;
        free(it);
        if (first_c)
            check_pairs(m, w, 3);
    }
    assert_int_equal(first_c, 1);
    assert_true(abs(m[2] - 100) <= 2);
    drain(&q);
}

/* A tenant of the same weight as the others comes back after a pause:
 * at most one pick of each other waiting tenant comes before its first
 * (their heads can tie its tag V, and are older). */
static void test_comeback_equal_weight(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    for (int k = 0; k < 300; k++)
        for (int t = 0; t < 3; t++)
            mk(&q, STG_PRIORITY_NORMAL, t, 1);
    mk(&q, STG_PRIORITY_NORMAL, 3, 1);
    for (int pick = 0; pick < 30; pick++) /* d's one item goes, then it pauses */
        free(pop(&q));
    for (int k = 0; k < 50; k++)
        mk(&q, STG_PRIORITY_NORMAL, 3, 1);
    int first = 0;
    for (int pick = 1; !first && pick <= 10; pick++) {
        item *it = pop(&q);
        if (it->tenant == 3)
            first = pick;
        free(it);
    }
    assert_true(first >= 1 && first <= 4); /* a, b, c at most once each, then d */
    drain(&q);
}

/* A tenant with one request at a time (it asks again right after each
 * pick) gets no more than its weight's share against a backlog: its tag
 * continues from its last finish. */
static void test_closed_loop_tenant(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    for (int k = 0; k < 400; k++)
        mk(&q, STG_PRIORITY_NORMAL, 0, 3);
    mk(&q, STG_PRIORITY_NORMAL, 1, 1);
    int n[2] = {0, 0};
    for (int pick = 1; pick <= 400; pick++) {
        item *it = pop(&q);
        n[it->tenant]++;
        if (it->tenant == 1)
            mk(&q, STG_PRIORITY_NORMAL, 1, 1);
        free(it);
        double w[2] = {3, 1};
        check_pairs(n, w, 2);
    }
    assert_true(abs(n[1] - 100) <= 1);
    drain(&q);
}

/* Removal is not a pick: it leaves no trace on the order, and the queue
 * forgets the tenants it no longer needs (ASan checks the memory). */
static void test_remove(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    item *a1 = mk(&q, STG_PRIORITY_NORMAL, 0, 1);
    item *a2 = mk(&q, STG_PRIORITY_NORMAL, 0, 1);
    item *b1 = mk(&q, STG_PRIORITY_NORMAL, 1, 1);
    item *c1 = mk(&q, STG_PRIORITY_BATCH, 2, 1);
    stg__fq_remove(&q, &a2->fq);
    free(a2);
    stg__fq_remove(&q, &c1->fq);
    free(c1);
    assert_null(q.c[2].flows); /* c's flow forgotten: nothing waits, no tag ahead */
    assert_int_equal(q.n, 2);
    assert_ptr_equal(pop(&q), a1);
    assert_ptr_equal(pop(&q), b1);
    free(a1);
    free(b1);
    stg__fq_remove(&q, NULL);
    assert_null(stg__fq_peek(&q));
    /* take of an item that is not the head (the caller served it). */
    item *x = mk(&q, STG_PRIORITY_BATCH, 0, 1);
    item *y = mk(&q, STG_PRIORITY_INTERACTIVE, 0, 1);
    stg__fq_take(&q, &x->fq);
    assert_null(x->fq.flow);
    assert_ptr_equal(pop(&q), y);
    free(x);
    free(y);
    /* items still queued at free are let go of, not freed */
    item *z = mk(&q, STG_PRIORITY_NORMAL, 3, 1);
    stg__fq_free(&q);
    assert_null(z->fq.flow);
    free(z);
}

/* The quota queue's case (engine_admit.c, quota_gate): tenant a (weight
 * 1) has 72 waiting and 30 picked alone, then tenant b (weight 2) comes
 * with 48: from then on b gets two picks for each of a's, within the
 * bound (1/w_a + 1/w_b = 1.5 picks), although a's were there first. */
static void test_late_tenant_backlogged(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    for (int i = 0; i < 72; i++)
        mk(&q, STG_PRIORITY_NORMAL, 0, 1);
    for (int i = 0; i < 30; i++)
        free(pop(&q));
    for (int i = 0; i < 48; i++)
        mk(&q, STG_PRIORITY_NORMAL, 1, 2);
    int n[2] = {0, 0};
    while (n[1] < 48) {
        item *it = pop(&q);
        n[it->tenant]++;
        assert_true(fabs(n[0] / 1.0 - n[1] / 2.0) <= 1.5);
        free(it);
    }
    assert_true(n[0] >= 23 && n[0] <= 25);
    drain(&q);
}

/* stg__fq_push_cost: tenants of equal weight share what the picks cost:
 * a's items cost 2, b's 1, so b gets two picks for each of a's (the bound
 * in cost: c_a/w + c_b/w = 3), and a costs 1 like stg__fq_push. */
static void test_shares_by_cost(void **state)
{
    (void)state;
    stg__fairq q;
    stg__fq_init(&q, 0);
    item *its[120];
    for (int i = 0; i < 120; i++) {
        its[i] = calloc(1, sizeof *its[i]);
        assert_non_null(its[i]);
        its[i]->tenant = i % 2;
        its[i]->cls = STG_PRIORITY_NORMAL;
        stg_class c = {.priority = STG_PRIORITY_NORMAL, .tenant = names[i % 2], .weight = 1};
        assert_int_equal(stg__fq_push_cost(&q, &its[i]->fq, &c, i % 2 ? 1.0 : 2.0), STG_OK);
    }
    int n[2] = {0, 0};
    while (n[1] < 60) {
        item *it = pop(&q);
        n[it->tenant]++;
        assert_true(fabs(n[0] * 2.0 - n[1] * 1.0) <= 3.0);
        free(it);
    }
    assert_true(n[0] >= 29 && n[0] <= 31);
    drain(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_order),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_unused_share_and_comeback),
        cmocka_unit_test(test_comeback_equal_weight),
        cmocka_unit_test(test_closed_loop_tenant),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_late_tenant_backlogged),
        cmocka_unit_test(test_shares_by_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
