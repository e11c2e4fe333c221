/*
 * The AI request cost model (include/stagger/cost.h) in virtual time: a
 * simulated server meters tokens per minute as OpenAI does (a bucket of
 * `limit` that refills limit/60 per second, each request charged at its
 * arrival by the server's own rule, the remaining count told in every
 * answer, a request over the count refused and not counted), requests go
 * out several at a time and their answers come back out of order. The
 * model must converge on each of the two charging rules sources describe:
 * the prompt plus max_tokens, and the larger of the two; and on a server
 * whose characters per token is not four.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <stagger/cost.h>

typedef struct server {
    double level, limit, rate; /* tokens, tokens/s */
    int64_t at;                /* last refill instant, us */
    bool max_rule;             /* charge max(in, out), else in + out */
    double cpt;                /* the server's characters per token */
} server;

/* The rule learned for unit (one must have been). */
static stg_cost_rule rule_of(const stg_cost_model *m, const char *unit)
{
    stg_cost_rule r;
    assert_int_equal(stg_cost_rule_get(m, unit, &r), STG_OK);
    return r;
}

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t charge_of(const server *s, const stg_cost_parts *p)
{
    int64_t in = (int64_t)ceil((double)p->chars / s->cpt) + p->tokens;
    return s->max_rule ? (in > p->max_out ? in : p->max_out) : in + p->max_out;
}

static void refill(server *s, int64_t now)
{
    s->level += s->rate * (double)(now - s->at) / 1e6;
    if (s->level > s->limit)
        s->level = s->limit;
    s->at = now;
}

/* The server counts a request arriving at now: the obs its answer carries. */
static stg_quota_obs arrive(server *s, const stg_cost_parts *p, int64_t now, bool *counted)
{
    refill(s, now);
    int64_t c = charge_of(s, p);
    *counted = (double)c <= s->level;
    if (*counted)
        s->level -= (double)c;
    stg_quota_obs o;
    memset(&o, 0, sizeof o);
    snprintf(o.unit, sizeof o.unit, "tokens");
    o.limit = (int64_t)s->limit;
    o.remaining = (int64_t)floor(s->level);
    o.reset_us = (int64_t)((s->limit - floor(s->level)) / s->rate * 1e6);
    o.window_us = -1;
    o.dialect = STG_DIALECT_OPENAI;
    return o;
}

static stg_cost_parts parts(void)
{
    stg_cost_parts p = {0};
    p.chars = 40 + (int64_t)(rnd() % 6000);
    p.max_out = (rnd() % 4) ? 16 + (int64_t)(rnd() % 1500) : 0;
    return p;
}

/* Run n requests, `conc` at a time (answers in a shuffled order), spaced
 * so that the bucket stays low; returns the mean relative error of the
 * estimate over the last quarter of them. */
static double run(stg_cost_model *m, server *s, int n, int conc)
{
    int64_t now = s->at; /* the server's clock goes on across runs */
    double err = 0;
    int counted_err = 0;
    for (int i = 0; i < n; i += conc) {
        int64_t seq[16];
        stg_quota_obs o[16];
        bool counted[16];
        stg_cost_parts p[16];
        for (int k = 0; k < conc; k++) {
            p[k] = parts();
            int64_t est = stg_cost_estimate(m, "tokens", &p[k]);
            if (i >= n * 3 / 4) {
                double truth = (double)charge_of(s, &p[k]);
                err += fabs((double)est - truth) / truth;
                counted_err++;
            }
            seq[k] = stg_cost_sent(m, &p[k], now);
            now += 1000 + (int64_t)(rnd() % 3000); /* 1..4 ms apart */
            o[k] = arrive(s, &p[k], now, &counted[k]);
        }
        /* Answers in a shuffled order. */
        int ord[16];
        for (int k = 0; k < conc; k++)
            ord[k] = k;
        for (int k = conc - 1; k > 0; k--) {
            int x = (int)(rnd() % (uint64_t)(k + 1)), t = ord[k];
            ord[k] = ord[x];
            ord[x] = t;
        }
        for (int k = 0; k < conc; k++) {
            int x = ord[k];
            stg_cost_answer(m, seq[x], counted[x], &o[x], 1, now);
        }
        /* Time for the bucket to refill what went, as a limiter would
         * give it (it stays about where it was, well below full). */
        double spent = 0;
        for (int k = 0; k < conc; k++)
            spent += counted[k] ? (double)charge_of(s, &p[k]) : 0;
        now += (int64_t)(spent / s->rate * 1e6);
    }
    return err / counted_err;
}

static server make_server(bool max_rule, double cpt)
{
    server s = {.limit = 40000, .rate = 40000 / 60.0, .max_rule = max_rule, .cpt = cpt};
    s.level = 20000; /* half full: every span is measurable */
    return s;
}

static void converges_on_sum(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    server s = make_server(false, 4.0);
    double err = run(m, &s, 400, 4);
    stg_cost_rule r = rule_of(m, "tokens");
    printf("sum rule: k=%.4f w=%.3f learned=%lld err=%.4f\n", r.k, r.w, (long long)r.learned,
           err);
    assert_true(r.learned > 50);
    assert_true(fabs(r.w - 1.0) < 0.05);
    assert_true(fabs(r.k - 0.25) < 0.01);
    assert_true(err < 0.03);
    stg_cost_model_free(m);
}

static void converges_on_max(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    server s = make_server(true, 4.0);
    /* Before learning, the estimate is the sum: never below the charge. */
    stg_cost_parts p = {.chars = 4000, .max_out = 500};
    assert_int_equal(stg_cost_estimate(m, "tokens", &p), 1500);
    double err = run(m, &s, 400, 4);
    stg_cost_rule r = rule_of(m, "tokens");
    printf("max rule: k=%.4f w=%.3f learned=%lld err=%.4f\n", r.k, r.w, (long long)r.learned,
           err);
    assert_true(r.w < 0.05);
    assert_true(fabs(r.k - 0.25) < 0.01);
    assert_true(err < 0.03);
    assert_int_equal(stg_cost_estimate(m, "tokens", &p) / 10, 100); /* about 1000 */
    stg_cost_model_free(m);
}

/* Early on, an error either parameter could explain moves w (whether
 * max_tokens is added is in doubt) rather than k (characters / 4 is a known
 * rule of thumb): learning the max rule never takes the prompt's share
 * down with it, so the estimate does not fall below the charge meanwhile
 * (an estimate below it is a refusal at the server). */
static void early_steps_move_w(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    server s = make_server(true, 4.0);
    for (int b = 0; b < 20; b++) {
        run(m, &s, 4, 4);
        stg_cost_rule r = rule_of(m, "tokens");
        assert_true(fabs(r.k - 0.25) < 0.025);
    }
    assert_true(rule_of(m, "tokens").w < 0.2);
    stg_cost_model_free(m);
}

static void learns_chars_per_token(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    server s = make_server(false, 3.0); /* a denser tokenizer */
    double err = run(m, &s, 600, 8);
    stg_cost_rule r = rule_of(m, "tokens");
    printf("3 chars/token: k=%.4f w=%.3f err=%.4f\n", r.k, r.w, err);
    assert_true(fabs(r.k - 1.0 / 3.0) < 0.02);
    assert_true(err < 0.04);
    stg_cost_model_free(m);
}

static void units_and_defaults(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    stg_cost_parts p = {.chars = 401, .tokens = 10, .max_out = 50};
    assert_int_equal(stg_cost_estimate(m, "requests", &p), 1);
    assert_int_equal(stg_cost_estimate(m, "", &p), 1);
    assert_int_equal(stg_cost_estimate(m, "input-tokens", &p), 111); /* ceil(100.25) + 10 */
    assert_int_equal(stg_cost_estimate(m, "output-tokens", &p), 50);
    assert_int_equal(stg_cost_estimate(m, "tokens", &p), 161);
    assert_int_equal(stg_cost_estimate(m, "widgets", &p), -1);
    assert_int_equal(stg_cost_estimate(m, "tokens", NULL), -1);
    stg_cost_parts none = {0};
    assert_int_equal(stg_cost_estimate(m, "tokens", &none), 0);
    assert_int_equal(stg_cost_estimate(NULL, "tokens", &p), 161); /* the defaults */
    stg_cost_rule r;
    assert_int_equal(stg_cost_rule_get(m, "tokens", &r), STG_ENOTFOUND);
    assert_int_equal(stg_cost_rule_get(m, NULL, &r), STG_EINVAL);
    stg_cost_model_free(NULL);
    stg_cost_model_free(m);
}

/* Sends the model cannot price (no parts) stop an observation; a refused
 * send, or one that never reached the server, counts nothing; a send
 * forgotten from the log stops it too. */
static void spans_it_cannot_price(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    stg_quota_obs o;
    memset(&o, 0, sizeof o);
    snprintf(o.unit, sizeof o.unit, "tokens");
    o.limit = 100000;
    o.reset_us = -1;
    o.window_us = -1;
    o.dialect = STG_DIALECT_X_RATELIMIT; /* a fixed window: no refill */
    stg_cost_parts p = {.chars = 4000, .max_out = 0}; /* 1000 tokens */
    int64_t a = stg_cost_sent(m, &p, 0);
    o.remaining = 50000;
    stg_cost_answer(m, a, true, &o, 1, 0);
    int64_t b = stg_cost_sent(m, NULL, 1); /* not estimated */
    int64_t c = stg_cost_sent(m, &p, 2);
    stg_cost_answer(m, b, true, NULL, 0, 3);
    o.remaining = 48000; /* charged 2000 for c: twice the estimate */
    stg_cost_answer(m, c, true, &o, 1, 3);
    stg_cost_rule none;
    assert_int_equal(stg_cost_rule_get(m, "tokens", &none), STG_OK);
    assert_int_equal(none.learned, 0);
    /* A refused one in the span counts nothing: c..e measures e alone. */
    int64_t d = stg_cost_sent(m, &p, 4);
    int64_t e = stg_cost_sent(m, &p, 5);
    stg_cost_answer(m, d, false, NULL, 0, 6);
    o.remaining = 47000;
    stg_cost_answer(m, e, true, &o, 1, 6);
    stg_cost_rule r = rule_of(m, "tokens");
    assert_int_equal(r.learned, 1);
    assert_true(fabs(r.k - 0.25) < 1e-9); /* exact: nothing to correct */
    /* One that never reached the server counts nothing either. */
    int64_t d2 = stg_cost_sent(m, &p, 6);
    int64_t e2 = stg_cost_sent(m, &p, 6);
    stg_cost_uncounted(m, d2);
    o.remaining = 46000;
    stg_cost_answer(m, e2, true, &o, 1, 6);
    r = rule_of(m, "tokens");
    assert_int_equal(r.learned, 2);
    assert_true(fabs(r.k - 0.25) < 1e-9);
    /* A count that grew in a fixed window is a new window: skipped. */
    int64_t f = stg_cost_sent(m, &p, 7);
    o.remaining = 90000;
    stg_cost_answer(m, f, true, &o, 1, 8);
    assert_int_equal(rule_of(m, "tokens").learned, 2);
    /* More sends than the log holds between two answers: skipped. */
    int64_t g = 0;
    for (int i = 0; i < STG_COST_LOG + 1; i++)
        g = stg_cost_sent(m, &p, 9);
    o.remaining = 1000;
    stg_cost_answer(m, g, true, &o, 1, 10);
    assert_int_equal(rule_of(m, "tokens").learned, 2);
    /* An answer for a send the log forgot is ignored. */
    stg_cost_answer(m, a, true, &o, 1, 11);
    assert_int_equal(rule_of(m, "tokens").learned, 2);
    stg_cost_model_free(m);
}

/* Noise (answers that say counts off by up to 10%) keeps the rule within
 * its bounds and near the truth: each step is clipped. */
static void noise_is_bounded(void **state)
{
    (void)state;
    stg_cost_model *m = stg_cost_model_new(NULL);
    assert_non_null(m);
    stg_quota_obs o;
    memset(&o, 0, sizeof o);
    snprintf(o.unit, sizeof o.unit, "input-tokens");
    o.limit = -1;
    o.reset_us = -1;
    o.window_us = -1;
    int64_t rem = INT64_C(1) << 40;
    for (int i = 0; i < 2000; i++) {
        stg_cost_parts p = {.chars = 100 + (int64_t)(rnd() % 4000)};
        int64_t s = stg_cost_sent(m, &p, i);
        double noise = 0.9 + (double)(rnd() % 2001) / 10000.0;
        rem -= (int64_t)((double)p.chars / 4.0 * noise);
        o.remaining = rem;
        stg_cost_answer(m, s, true, &o, 1, i);
        stg_cost_rule r = rule_of(m, "input-tokens");
        assert_true(r.k >= 1.0 / 16 && r.k <= 1.0 && r.w >= 0 && r.w <= 1);
    }
    stg_cost_rule r = rule_of(m, "input-tokens");
    assert_true(fabs(r.k - 0.25) < 0.02);
    /* Deterministic: the same inputs give the same rule. */
    assert_true(r.learned > 1000);
    stg_cost_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(units_and_defaults),     cmocka_unit_test(converges_on_sum),
        cmocka_unit_test(converges_on_max),       cmocka_unit_test(learns_chars_per_token),
        cmocka_unit_test(spans_it_cannot_price),  cmocka_unit_test(noise_is_bounded),
        cmocka_unit_test(early_steps_move_w),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
