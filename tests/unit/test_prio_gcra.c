/*
 * Unit tests of the cross-process decision by class and tenant
 * (src/core/prio_gcra.c), in virtual time: clients of several classes and
 * tenants call stg__prio_decide on one key's state as processes sharing a
 * Redis key would, and the tests check the bound (B + t/T for any mix), the
 * order of classes (a batch never reserves the future and leaves headroom
 * while a higher class has fresh demand), the floor, the tenants' shares
 * (1:1:2), a share flowing to the others at once and a tenant coming back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prio_gcra.h"

#define MS INT64_C(1000000)
#define T50 (20 * MS) /* 50/s */

/* A deterministic RNG (splitmix64). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Sends seen, to check the bound afterwards. */
typedef struct sends {
    int64_t *t;
    size_t n, cap;
} sends;

static void add_send(sends *s, int64_t t)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->t = realloc(s->t, s->cap * sizeof *s->t);
        assert_non_null(s->t);
    }
    s->t[s->n++] = t;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Every run of sends s_i..s_j: j - i + 1 <= B + (s_j - s_i) / T. */
static void check_bound(sends *s, int64_t T, int64_t B)
{
    qsort(s->t, s->n, sizeof *s->t, cmp64);
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = i + (size_t)B; j < s->n; j++) {
            int64_t over = (int64_t)(j - i + 1) - B;
            if (over * T > s->t[j] - s->t[i]) {
                fail_msg("bound broken: %zu sends in %lld ns (B %lld, T %lld)", j - i + 1,
                         (long long)(s->t[j] - s->t[i]), (long long)B, (long long)T);
            }
        }
}

static stg__prio_req req(int64_t now, int prio, const char *tenant, double w, int64_t n)
{
    stg__prio_req r = {.now_ns = now,
                       .interval_ns = T50,
                       .burst = 5,
                       .priority = prio,
                       .tenant = tenant,
                       .weight = w,
                       .n = n,
                       .max_wait_ns = 0,
                       .lead_ns = 0,
                       .hold_ns = 80 * MS};
    return r;
}

static void test_rejects_bad_requests(void **state)
{
    (void)state;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    stg__prio_req r = req(0, STG_PRIORITY_BATCH, NULL, 1, 1);
    r.priority = 2;
    assert_int_equal(stg__prio_decide(st, &r, &g), -1);
    r = req(0, STG_PRIORITY_BATCH, NULL, 1, 0);
    assert_int_equal(stg__prio_decide(st, &r, &g), -1);
    r = req(0, STG_PRIORITY_BATCH, NULL, -1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), -1);
    r = req(0, STG_PRIORITY_BATCH, NULL, 1, 1);
    r.burst = INT64_C(1) << 40; /* B * T > 2^50 */
    assert_int_equal(stg__prio_decide(st, &r, &g), -1);
    r = req(0, STG_PRIORITY_BATCH, NULL, 1, 1);
    r.floor_pm = 1001;
    assert_int_equal(stg__prio_decide(st, &r, &g), -1);
    stg__prio_state zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(st, &zero, sizeof zero);
    assert_int_equal(stg__prio_weight_m(0), 1000);
    assert_int_equal(stg__prio_weight_m(2.5), 2500);
    assert_int_equal(stg__prio_weight_m(1e-9), 1);
    free(st);
}

/* Alone on a key, each class is the plain GCRA: B at once, then one per T;
 * a caller that may wait (interactive) reserves ahead, a batch does not. */
static void test_alone_is_gcra(void **state)
{
    (void)state;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    for (int i = 0; i < 5; i++) {
        stg__prio_req r = req(0, STG_PRIORITY_BATCH, NULL, 1, 1);
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        assert_int_equal(g.k, 1);
        assert_int_equal(g.wait_ns, 0);
    }
    stg__prio_req r = req(0, STG_PRIORITY_BATCH, NULL, 1, 1);
    r.max_wait_ns = 1000 * MS; /* a batch never reserves, whatever its timeout */
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 0);
    assert_int_equal(g.wait_ns, T50); /* the next token conforms in T */
    /* interactive, alone after the batch's mark is stale: reserves ahead */
    stg__prio_state *s2 = calloc(1, sizeof *s2);
    for (int i = 0; i < 7; i++) {
        r = req(0, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
        r.max_wait_ns = 1000 * MS;
        assert_int_equal(stg__prio_decide(s2, &r, &g), 0);
        assert_int_equal(g.k, 1);
        assert_int_equal(g.wait_ns, i < 5 ? 0 : (i - 4) * T50);
    }
    /* a lease: as many as conform now, with the window's end at the lead */
    stg__prio_state *s3 = calloc(1, sizeof *s3);
    r = req(0, STG_PRIORITY_NORMAL, NULL, 1, 3);
    r.lead_ns = 30 * MS;
    assert_int_equal(stg__prio_decide(s3, &r, &g), 0);
    assert_int_equal(g.k, 3); /* 30 + 3 * 20 <= 100 ms */
    assert_true(g.lease);
    assert_int_equal(g.end_ns, 30 * MS);
    assert_int_equal(g.wait_ns, 0);
    free(st);
    free(s2);
    free(s3);
}

/* A client of the simulations below. */
typedef struct client {
    int prio;
    const char *tenant;
    double weight;
    int64_t n;         /* tokens per call (a lease when > 1) */
    int64_t lead;      /* lease lead */
    int64_t max_wait;  /* reservation horizon */
    int64_t period;    /* between calls (a saturating client: short) */
    int64_t start, stop; /* active in [start, stop) */
    /* results */
    int64_t next;      /* next call */
    int64_t got;       /* tokens granted */
    int64_t got_from;  /* ... counted from this instant on */
    int64_t wait_max;  /* longest wait of a granted call */
    int64_t calls_granted;
    int64_t calls_refused;
    int64_t floor_tokens;
} client;

/* Run clients on one key from 0 to end in virtual time; every grant is a
 * send (leased tokens sent at once, the bound's worst case). Each call's
 * time gets a jitter so that clients interleave in varying order. */
static void run(stg__prio_state *st, client *c, int n, int64_t end, sends *out, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        c[i].next = c[i].start + (int64_t)(rng_next(&seed) % (uint64_t)(c[i].period + 1));
    for (;;) {
        int who = -1;
        for (int i = 0; i < n; i++)
            if (c[i].next < c[i].stop && (who < 0 || c[i].next < c[who].next))
                who = i;
        if (who < 0 || c[who].next >= end)
            break;
        client *x = &c[who];
        int64_t now = x->next;
        stg__prio_req r = {.now_ns = now,
                           .interval_ns = T50,
                           .burst = 5,
                           .priority = x->prio,
                           .tenant = x->tenant,
                           .weight = x->weight,
                           .n = x->n,
                           .max_wait_ns = x->max_wait,
                           .lead_ns = x->lead,
                           .hold_ns = 80 * MS};
        stg__prio_grant g;
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        int64_t jitter = (int64_t)(rng_next(&seed) % (uint64_t)(x->period / 4 + 1));
        if (g.k > 0) {
            for (int64_t i = 0; i < g.k; i++)
                if (out)
                    add_send(out, now + g.wait_ns);
            if (now >= x->got_from)
                x->got += g.k;
            if (g.wait_ns > x->wait_max)
                x->wait_max = g.wait_ns;
            x->calls_granted++;
            x->floor_tokens += g.floor;
            /* a closed loop: the next call after this one is sent */
            x->next = now + g.wait_ns + x->period + jitter;
        } else {
            x->calls_refused++;
            x->next = now + x->period + jitter;
        }
    }
}

/* The bound holds under any mix: random classes, tenants, weights, leases,
 * leads and horizons, 20 s of virtual time, several seeds. */
static void test_bound_any_mix(void **state)
{
    (void)state;
    const char *tenants[] = {NULL, "a", "b", "c"};
    for (uint64_t seed = 1; seed <= 6; seed++) {
        uint64_t s = seed * 7919;
        client c[12];
        memset(c, 0, sizeof c);
        for (int i = 0; i < 12; i++) {
            c[i].prio = (int)(rng_next(&s) % 3) - 1;
            c[i].tenant = tenants[rng_next(&s) % 4];
            c[i].weight = 1.0 + (double)(rng_next(&s) % 4);
            c[i].n = 1 + (int64_t)(rng_next(&s) % 4);
            c[i].lead = c[i].n > 1 ? (int64_t)(rng_next(&s) % 60) * MS : 0;
            c[i].max_wait = (int64_t)(rng_next(&s) % 3) * 150 * MS;
            c[i].period = (1 + (int64_t)(rng_next(&s) % 40)) * MS;
            c[i].start = (int64_t)(rng_next(&s) % 5000) * MS;
            c[i].stop = c[i].start + (int64_t)(rng_next(&s) % 15000) * MS;
        }
        stg__prio_state *st = calloc(1, sizeof *st);
        sends sd = {0};
        run(st, c, 12, 20000 * MS, &sd, seed);
        assert_true(sd.n > 500);
        check_bound(&sd, T50, 5);
        free(sd.t);
        free(st);
    }
}

/* A batch saturating the key (leases of up to 4 and single takes) while an
 * interactive client asks at 20% of the rate: the interactive call never
 * waits more than one interval T; the batch never reserves the future
 * (waits 0 but for floor tokens) and keeps >= 90% of the rest. */
static void test_interactive_beside_batch(void **state)
{
    (void)state;
    client c[4];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 3; i++) {
        c[i] = (client){.prio = STG_PRIORITY_BATCH, .n = i == 0 ? 1 : 4,
                        .lead = i == 0 ? 0 : 2 * MS, .max_wait = 1000 * MS,
                        .period = 3 * MS, .stop = INT64_MAX, .got_from = 1000 * MS};
    }
    c[3] = (client){.prio = STG_PRIORITY_INTERACTIVE, .n = 1, .max_wait = 1000 * MS,
                    .period = 5 * T50 - 5 * MS, .start = 500 * MS, .stop = INT64_MAX,
                    .got_from = 1000 * MS};
    stg__prio_state *st = calloc(1, sizeof *st);
    sends sd = {0};
    run(st, c, 4, 11000 * MS, &sd, 42);
    check_bound(&sd, T50, 5);
    int64_t total = 10 * 50; /* tokens in the 10 s measured */
    int64_t inter = c[3].got;
    int64_t batch = c[0].got + c[1].got + c[2].got;
    print_message("interactive %lld (wait max %lld us), batch %lld of %lld\n",
                  (long long)inter, (long long)(c[3].wait_max / 1000), (long long)batch,
                  (long long)total);
    assert_true(c[3].wait_max <= T50);
    assert_int_equal(c[3].calls_refused, 0);
    assert_true(inter >= 85); /* one call per 5T plus jitter */
    assert_true(batch * 10 >= (total - inter) * 9);
    for (int i = 0; i < 3; i++)
        assert_true(c[i].wait_max == 0 || c[i].floor_tokens > 0);
    free(sd.t);
    free(st);
}

/* While a higher class has fresh demand, a batch's grant leaves one token
 * that conforms now; once the mark is stale, it takes the bucket. */
static void test_batch_leaves_headroom(void **state)
{
    (void)state;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    stg__prio_req r = req(0, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0); /* 4 left, mark to 80 ms */
    r = req(MS, STG_PRIORITY_BATCH, NULL, 1, 5);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 3); /* one of the 4 left for the interactive */
    r = req(2 * MS, STG_PRIORITY_BATCH, NULL, 1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 1); /* the floor: one token, no headroom */
    assert_true(g.floor);
    r = req(3 * MS, STG_PRIORITY_BATCH, NULL, 1, 1);
    r.max_wait_ns = 1000 * MS;
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 0); /* floor spent, no reservation */
    /* interactive finds its token... after at most T */
    r = req(4 * MS, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
    r.max_wait_ns = 1000 * MS;
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 1);
    assert_true(g.wait_ns <= T50);
    /* normal behaves like batch while interactive demand is fresh... */
    stg__prio_state *s2 = calloc(1, sizeof *s2);
    r = req(0, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
    assert_int_equal(stg__prio_decide(s2, &r, &g), 0);
    r = req(0, STG_PRIORITY_NORMAL, NULL, 1, 5);
    assert_int_equal(stg__prio_decide(s2, &r, &g), 0);
    assert_int_equal(g.k, 3);
    /* ... and a batch leaves one token for each fresh higher class */
    r = req(0, STG_PRIORITY_BATCH, NULL, 1, 5);
    r.floor_pm = 1; /* floor not due (its bucket is spent below) */
    s2->floor_tat_ns[2] = 1000 * MS;
    assert_int_equal(stg__prio_decide(s2, &r, &g), 0);
    assert_int_equal(g.k, 0);
    /* after the marks went stale (80 ms), normal takes like interactive */
    r = req(200 * MS, STG_PRIORITY_NORMAL, NULL, 1, 5);
    assert_int_equal(stg__prio_decide(s2, &r, &g), 0);
    assert_int_equal(g.k, 5);
    free(st);
    free(s2);
}

/* Floor: interactive clients saturate the key with reservations; a batch
 * asking all the time still gets >= 5% of the rate (the default floor),
 * and a configured 20% floor gives 20%. */
static void test_floor(void **state)
{
    (void)state;
    int pms[] = {0, 200};
    for (int f = 0; f < 2; f++) {
        client c[4];
        memset(c, 0, sizeof c);
        for (int i = 0; i < 3; i++)
            c[i] = (client){.prio = STG_PRIORITY_INTERACTIVE, .n = 1, .max_wait = 300 * MS,
                            .period = 5 * MS, .stop = INT64_MAX, .got_from = 1000 * MS};
        c[3] = (client){.prio = STG_PRIORITY_BATCH, .n = 1, .max_wait = 1000 * MS,
                        .period = 4 * MS, .stop = INT64_MAX, .got_from = 1000 * MS};
        stg__prio_state *st = calloc(1, sizeof *st);
        /* the floor is a per-request field: run() uses the default, so set
         * the configured one through a second pass below */
        if (pms[f]) {
            /* run with a floor of 20%: a local copy of run's loop */
            uint64_t seed = 9;
            for (int i = 0; i < 4; i++)
                c[i].next = (int64_t)(rng_next(&seed) % (uint64_t)c[i].period);
            for (;;) {
                int who = 0;
                for (int i = 1; i < 4; i++)
                    if (c[i].next < c[who].next)
                        who = i;
                if (c[who].next >= 11000 * MS)
                    break;
                client *x = &c[who];
                stg__prio_req r = req(x->next, x->prio, NULL, 1, 1);
                r.max_wait_ns = x->max_wait;
                r.floor_pm = pms[f];
                stg__prio_grant g;
                assert_int_equal(stg__prio_decide(st, &r, &g), 0);
                if (g.k && x->next >= x->got_from)
                    x->got += g.k;
                x->next += (g.k ? g.wait_ns : 0) + x->period;
            }
        } else {
            run(st, c, 4, 11000 * MS, NULL, 9);
        }
        int64_t want = 500 * (pms[f] ? pms[f] : STG__PRIO_FLOOR_PM_DEFAULT) / 1000;
        print_message("floor %d pm: batch got %lld of 500 (want >= %lld)\n", pms[f],
                      (long long)c[3].got, (long long)want);
        assert_true(c[3].got * 100 >= want * 95);
        /* and the interactive clients got the rest */
        assert_true(c[0].got + c[1].got + c[2].got + c[3].got >= 490);
        free(st);
    }
}

/* Three batch tenants 1:1:2 saturating the key from several processes
 * each: 25/25/50% within +-5% of their shares. */
static void test_tenant_shares(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    double ws[] = {1, 1, 2};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        client c[9];
        memset(c, 0, sizeof c);
        for (int i = 0; i < 9; i++)
            c[i] = (client){.prio = STG_PRIORITY_BATCH, .tenant = names[i % 3],
                            .weight = ws[i % 3], .n = i < 3 ? 1 : 3, .lead = i < 3 ? 0 : 2 * MS,
                            .period = (2 + i % 4) * MS, .stop = INT64_MAX,
                            .got_from = 1000 * MS};
        stg__prio_state *st = calloc(1, sizeof *st);
        sends sd = {0};
        run(st, c, 9, 21000 * MS, &sd, seed);
        check_bound(&sd, T50, 5);
        int64_t got[3] = {0};
        for (int i = 0; i < 9; i++)
            got[i % 3] += c[i].got;
        int64_t total = got[0] + got[1] + got[2];
        print_message("shares: %lld %lld %lld of %lld\n", (long long)got[0],
                      (long long)got[1], (long long)got[2], (long long)total);
        assert_true(total >= 990);
        for (int t = 0; t < 3; t++) {
            double share = (double)got[t] / (double)total, want = ws[t] / 4.0;
            assert_true(share >= want * 0.95 && share <= want * 1.05);
        }
        free(sd.t);
        free(st);
    }
}

/* Tenants as the engine asks (src/curl/engine_admit.c): each process holds
 * one asker per key (its pace queue's head), which asks again exactly when
 * the hint says (no jitter: every process computes its instants from the
 * same clock), and asks for the next request one round trip after a grant.
 * Processes whose instants fall into step must still get their shares:
 * three backlogged batch tenants 1:1:2 on a 100/s key, for several round
 * trips, each tenant within 5% of its share over 10 s. */
static void test_tenant_shares_paced_askers(void **state)
{
    (void)state;
    const char *names[] = {"a", "b", "c"};
    double ws[] = {1, 1, 2};
    const int64_t T = 10 * MS, end = 10000 * MS, from = 1000 * MS;
    int64_t rtts[] = {100000, 250000, 400000, 1000000};
    int bad = 0;
    for (int ri = 0; ri < 4; ri++) {
        for (int64_t off = 0; off < 10; off++) {
            stg__prio_state *st = calloc(1, sizeof *st);
            int64_t next[3] = {off * MS, off * 700000 + 13000, off * 1100000 + 29000};
            int64_t got[3] = {0};
            uint64_t seed = (uint64_t)(ri * 10 + off + 1);
            for (;;) {
                int who = 0;
                for (int i = 1; i < 3; i++)
                    if (next[i] < next[who])
                        who = i;
                int64_t now = next[who];
                if (now >= end)
                    break;
                stg__prio_req r = req(now, STG_PRIORITY_BATCH, names[who], ws[who], 1);
                r.interval_ns = T;
                r.max_wait_ns = 5 * MS; /* the engine's fixed horizon, T / 2 */
                stg__prio_grant g;
                assert_int_equal(stg__prio_decide(st, &r, &g), 0);
                if (g.k && now >= from)
                    got[who] += g.k;
                /* the reply comes a round trip later, the next head asks
                 * then; a refused one when its hint says, its timer late by
                 * up to a millisecond (an event loop's) */
                next[who] = now + rtts[ri] + g.wait_ns;
                if (!g.k)
                    next[who] += (int64_t)(rng_next(&seed) % (uint64_t)MS);
            }
            int64_t total = got[0] + got[1] + got[2];
            int ok = 1;
            for (int t = 0; t < 3; t++) {
                double share = (double)got[t] / (double)total, want = ws[t] / 4.0;
                if (share < want * 0.95 || share > want * 1.05)
                    ok = 0;
            }
            if (!ok) {
                bad++;
                print_message("rtt %lld off %lld: %lld %lld %lld of %lld\n", (long long)rtts[ri],
                              (long long)off, (long long)got[0], (long long)got[1],
                              (long long)got[2], (long long)total);
            }
            free(st);
        }
    }
    assert_int_equal(bad, 0);
}

/* Rule 5's lender protection. a and b (1:1:2 with c) asked once and
 * their marks are fresh (a long hold); c asks every millisecond, takes its
 * share and borrows the rest. A borrower leaves the tokens that accrue
 * over the retry-slot spacing of a tenant within its share (half its share
 * interval: 40 ms / 2, 2 of the key's tokens) plus one: so a, back at its
 * slot, finds 3 tokens (and a lease takes them at once), where the old
 * rule left it 1 and c had borrowed what a's slot was for (a 1:1:2 run
 * through Redis split 0.21 / 0.25 / 0.54 that way). And the key is not
 * idle for it: c borrows all the rest. */
static void test_borrow_leaves_the_slow_asker(void **state)
{
    (void)state;
    const int64_t T = 10 * MS;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    const char *names[] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        stg__prio_req r = req(0, STG_PRIORITY_BATCH, names[i], 1, 1);
        r.interval_ns = T;
        r.hold_ns = 2000 * MS;
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        assert_int_equal(g.k, 1);
    }
    int64_t c_got = 0;
    for (int64_t now = 0; now < 1000 * MS; now += MS) {
        stg__prio_req r = req(now, STG_PRIORITY_BATCH, "c", 2, 1);
        r.interval_ns = T;
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        c_got += g.k;
    }
    /* the key's tokens up to 999 ms (its burst, 5, and one per 10 ms
     * after 0: 99), less a's and b's 2 and the 3 left; c's own share
     * (50 and its burst, 5) is far less: the rest was borrowed */
    print_message("c got %lld in 1 s\n", (long long)c_got);
    assert_int_equal(c_got, 5 + 99 - 2 - 3);
    stg__prio_req r = req(1000 * MS, STG_PRIORITY_BATCH, "a", 1, 4);
    r.interval_ns = T;
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 4); /* the 3 left and the one due at 1 s */
    assert_int_equal(g.wait_ns, 0);
    free(st);
}

/* A share nobody asks for flows to the others at once (after the mark's
 * hold), and a tenant that comes back gets its share again from its first
 * call on: interactive tenants reserving (n = 1) and batch tenants. */
static void test_share_flows_and_comes_back(void **state)
{
    (void)state;
    int prios[] = {STG_PRIORITY_BATCH, STG_PRIORITY_INTERACTIVE};
    for (int p = 0; p < 2; p++) {
        /* phase 1 [0, 6 s): a, b, c (1:1:2); phase 2 [6, 12 s): c stopped;
         * phase 3 [12, 18 s): c back. Measured: each phase from 100 ms
         * after its start (the hold, 80 ms, plus a margin) to its end. A
         * tenant's own bucket (burst B) lets it run up to B tokens over its
         * share in a window: 5 of 295 here, inside the 5% asked. */
        int64_t got[3][3] = {{0}};
        const char *names[] = {"a", "b", "c"};
        double ws[] = {1, 1, 2};
        stg__prio_state *st = calloc(1, sizeof *st);
        /* two processes per tenant, each with one request out at a time */
        int64_t next[6] = {0, MS, 2 * MS, 3 * MS, 4 * MS, 5 * MS};
        uint64_t seed = 5;
        for (;;) {
            int who = 0;
            for (int i = 1; i < 6; i++)
                if (next[i] < next[who])
                    who = i;
            int64_t now = next[who];
            if (now >= 18000 * MS)
                break;
            int phase = (int)(now / (6000 * MS));
            int t = who % 3;
            if (t == 2 && phase == 1) {
                next[who] = 12000 * MS + who * MS;
                continue;
            }
            stg__prio_req r = req(now, prios[p], names[t], ws[t], 1);
            r.max_wait_ns = 200 * MS;
            stg__prio_grant g;
            assert_int_equal(stg__prio_decide(st, &r, &g), 0);
            if (g.k && now % (6000 * MS) >= 100 * MS)
                got[phase][t] += g.k;
            int64_t period = (2 + (int64_t)(rng_next(&seed) % 3)) * MS;
            next[who] = now + (g.k ? g.wait_ns : 0) + period;
        }
        for (int ph = 0; ph < 3; ph++) {
            int64_t total = got[ph][0] + got[ph][1] + got[ph][2];
            print_message("%s phase %d: %lld %lld %lld\n", p ? "interactive" : "batch", ph,
                          (long long)got[ph][0], (long long)got[ph][1], (long long)got[ph][2]);
            assert_true(total >= 290); /* 5.9 s at 50/s, all used */
            double sum = ph == 1 ? 2.0 : 4.0;
            for (int t = 0; t < 3; t++) {
                double want = ph == 1 && t == 2 ? 0.0 : ws[t] / sum;
                double share = (double)got[ph][t] / (double)total;
                assert_true(share >= want - 0.05 * want - 1e-9 &&
                            share <= want + 0.05 * want + 1e-9);
            }
        }
        free(st);
    }
}

/* Rule 7: callers refused together are told successive retry slots, half
 * a share interval apart (here a tenant alone: T / 2), so they come back
 * two per token rather than all at once every interval: the hint grows
 * with the callers waiting. A later refusal is told the next free slot. */
static void test_retry_slots(void **state)
{
    (void)state;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    for (int i = 0; i < 5; i++) { /* the burst */
        stg__prio_req r = req(0, STG_PRIORITY_BATCH, "a", 1, 1);
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        assert_int_equal(g.k, 1);
    }
    int64_t first = 0;
    for (int i = 0; i < 20; i++) {
        stg__prio_req r = req(MS, STG_PRIORITY_BATCH, "a", 1, 1);
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        assert_int_equal(g.k, 0);
        if (i == 0)
            first = g.wait_ns;
        assert_int_equal(g.wait_ns, first + i * (T50 / 2));
    }
    /* one more, later: the next slot, not an earlier one */
    stg__prio_req r = req(10 * MS, STG_PRIORITY_BATCH, "a", 1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 0);
    assert_int_equal(10 * MS + g.wait_ns, MS + first + 20 * (T50 / 2));
    free(st);
}

/* Rule 3: normal reserves at most one interval ahead, so an interactive
 * request after a pause (its mark stale) waits at most two intervals
 * however many normal callers asked before it. */
static void test_normal_reserves_one_interval(void **state)
{
    (void)state;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    /* The key had an interactive caller (its demand mark gone after the
     * hold, 80 ms, but seen): normal reserves one interval ahead. */
    stg__prio_req r = req(0, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
    r.max_wait_ns = 200 * MS;
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 1);
    int granted = 0;
    for (int i = 0; i < 30; i++) {
        r = req(100 * MS, STG_PRIORITY_NORMAL, NULL, 1, 1);
        r.max_wait_ns = 200 * MS;
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        if (g.k) {
            granted++;
            assert_true(g.wait_ns <= T50);
        }
    }
    assert_int_equal(granted, 6); /* the burst, then one interval ahead */
    r = req(100 * MS, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
    r.max_wait_ns = 200 * MS;
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_int_equal(g.k, 1);
    assert_true(g.wait_ns <= 2 * T50);
    free(st);

    /* A key no interactive caller used (or not for STG__PRIO_SEEN_NS):
     * normal reserves as far as it may, as the plain GCRA does. */
    st = calloc(1, sizeof *st);
    granted = 0;
    for (int i = 0; i < 30; i++) {
        r = req(0, STG_PRIORITY_NORMAL, NULL, 1, 1);
        r.max_wait_ns = 200 * MS;
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        if (g.k) {
            granted++;
            assert_true(g.wait_ns <= 200 * MS);
        }
    }
    assert_true(granted >= 5 + 200 * MS / T50); /* the burst, then 200 ms ahead */
    r = req(STG__PRIO_SEEN_NS + 1, STG_PRIORITY_INTERACTIVE, NULL, 1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    for (int i = 0; i < 30; i++) { /* seen again: one interval */
        r = req(STG__PRIO_SEEN_NS + 1, STG_PRIORITY_NORMAL, NULL, 1, 1);
        r.max_wait_ns = 200 * MS;
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        assert_true(!g.k || g.wait_ns <= T50);
    }
    free(st);
}

/* The tenant table: stale tenants are forgotten, a full table leaves a
 * new tenant untracked (alone, within its share). */
static void test_tenant_table(void **state)
{
    (void)state;
    stg__prio_state *st = calloc(1, sizeof *st);
    stg__prio_grant g;
    char name[16];
    for (int i = 0; i < STG__PRIO_TENANTS_MAX; i++) {
        snprintf(name, sizeof name, "t%d", i);
        stg__prio_req r = req(0, STG_PRIORITY_BATCH, name, 1, 1);
        assert_int_equal(stg__prio_decide(st, &r, &g), 0);
        assert_true(g.tracked);
    }
    stg__prio_req r = req(0, STG_PRIORITY_BATCH, "late", 1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_false(g.tracked);
    /* 10 s later every mark is stale and every bucket full: forgotten */
    r = req(10000 * MS, STG_PRIORITY_BATCH, "late", 1, 1);
    assert_int_equal(stg__prio_decide(st, &r, &g), 0);
    assert_true(g.tracked);
    int used = 0;
    for (int i = 0; i < STG__PRIO_TENANTS_MAX; i++)
        used += st->tenants[i].used;
    assert_int_equal(used, 1);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejects_bad_requests),
        cmocka_unit_test(test_alone_is_gcra),
        cmocka_unit_test(test_bound_any_mix),
        cmocka_unit_test(test_interactive_beside_batch),
        cmocka_unit_test(test_batch_leaves_headroom),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_tenant_shares),
        cmocka_unit_test(test_tenant_shares_paced_askers),
        cmocka_unit_test(test_borrow_leaves_the_slow_asker),
        cmocka_unit_test(test_share_flows_and_comes_back),
        cmocka_unit_test(test_retry_slots),
        cmocka_unit_test(test_normal_reserves_one_interval),
        cmocka_unit_test(test_tenant_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
