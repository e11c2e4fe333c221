/*
 * The work queue's order by class and tenant (issue #32; docs/queue.md
 * "Order") against a redis-server of its own on 127.0.0.1: interactive
 * jobs loaded behind a batch backlog are handed out first (but for the
 * floor's pick), three tenants 1:1:2 share 200 claims 50/50/100, a tenant
 * with an empty lane leaves its share to the others and is picked at once
 * when it comes back, batch keeps its floor under an endless interactive
 * backlog; every claim compared with the pure model (src/core/qpick.c)
 * job by job over random loads and claims; finish, renew, give-back,
 * takeover (and its review rules), counts and export (in input order) on
 * entries of any lane; a queue whose lane state is missing (as one an
 * older stagger loaded) still hands out every job.
 *
 * No assertion depends on time but the takeover's, which waits longer
 * than claim_idle (a busy machine only makes entries idler).
 */
#define _GNU_SOURCE
#include "cmocka_all.h"

#include "core/fairq.h"
#include "core/qpick.h"
#include "integration/redis_helper.h"

#include <stagger/redis/queue.h>

static int g_seq;

#define FP1 "1111111111111111111111111111111111111111111111111111111111111111"
#define MAXJ 5000

static void queue_url(char *buf, size_t n)
{
    snprintf(buf, n, "redis://127.0.0.1:%d/p%d", g_port, ++g_seq);
}

/* One job to load: its class (NULL: none) and tenant ("NAME;w=N", NULL:
 * none). */
typedef struct jdef {
    const char *cls, *tenant;
    bool post; /* a POST without an idempotency key: not replay-safe */
} jdef;

/* Load jobs from..to (ids) of a queue of total MAXJ, each as def says. */
static void load(stg_queue *q, int64_t from, int64_t to, jdef def)
{
    static char keys[100][24], urls[100][48], hp[100][48], ht[100][96];
    static const char *hs[100][2];
    stg_queue_spec s[100];
    for (int64_t i = from; i <= to;) {
        size_t n = 0;
        for (; i <= to && n < 100; i++, n++) {
            snprintf(keys[n], sizeof keys[n], "k%lld", (long long)i);
            snprintf(urls[n], sizeof urls[n], "http://127.0.0.1:9/j/%lld", (long long)i);
            size_t nh = 0;
            if (def.cls) {
                snprintf(hp[n], sizeof hp[n], "Stagger-Priority: %s", def.cls);
                hs[n][nh++] = hp[n];
            }
            if (def.tenant) {
                snprintf(ht[n], sizeof ht[n], "Stagger-Tenant: %s", def.tenant);
                hs[n][nh++] = ht[n];
            }
            s[n] = (stg_queue_spec){.id = i, .key = keys[n], .method = def.post ? "POST" : "GET",
                                    .url = urls[n], .headers = hs[n], .n_headers = nh,
                                    .replay_safe = !def.post};
        }
        int64_t added = 0;
        assert_int_equal(stg_queue_load(q, FP1, MAXJ, s, n, &added), STG_OK);
        assert_int_equal(added, (int64_t)n);
    }
}

/* The lane of a handed-out entry: "ID" is lane 0, "ID@K" lane K. */
static int lane_of(const stg_queue_job *j)
{
    const char *at = strchr(j->entry, '@');
    return at ? atoi(at + 1) : 0;
}

/* Claim up to max; ids[] gets the jobs' ids in order, lanes[] their lanes
 * (may be NULL). Returns how many. */
static int claim(stg_queue *q, int max, int64_t *ids, int *lanes)
{
    stg_queue_job j[64];
    assert_true(max <= 64);
    int n = 0;
    assert_int_equal(stg_queue_claim(q, max, j, &n, NULL, NULL), STG_OK);
    for (int i = 0; i < n; i++) {
        if (ids)
            ids[i] = j[i].id;
        if (lanes)
            lanes[i] = lane_of(&j[i]);
        stg_queue_job_clear(&j[i]);
    }
    return n;
}

/* 300 batch jobs, 10 claimed; then 20 interactive: the next 21 claimed are
 * the 20 interactive and the floor's one batch job (the 20th pick). */
static void test_interactive_first(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "w", 0, 0);
    load(q, 1, 300, (jdef){.cls = "batch"});
    int64_t ids[64];
    assert_int_equal(claim(q, 10, ids, NULL), 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(ids[i], i + 1); /* one lane: first in, first out */
    load(q, 301, 320, (jdef){.cls = "interactive"});
    int inter = 0, batch = 0, last_inter = 0, k = 0;
    while (inter < 20) {
        int n = claim(q, 7, ids, NULL);
        assert_true(n > 0);
        for (int i = 0; i < n; i++) {
            k++;
            if (ids[i] > 300) {
                inter++;
                last_inter = k;
            } else if (inter < 20) {
                batch++;
                assert_int_equal(k, STG__FQ_FLOOR_EVERY); /* the floor's pick */
            }
        }
    }
    print_message("interactive-first: 20 interactive within the first %d claimed after them, "
                  "%d batch (floor) among them\n", last_inter, batch);
    assert_int_equal(last_inter, 21);
    assert_int_equal(batch, 1);
    stg_queue_free(q);
}

/* Three tenants 1:1:2 with backlogs, claimed by two workers: the first 200
 * split 50/50/100 (within 5%; the model says within one per round of 4). */
static void test_tenant_shares(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *a = queue_open(url, "a", 0, 0), *b = queue_open(url, "b", 0, 0);
    load(a, 1, 400, (jdef){.tenant = "t1;w=1"});
    load(a, 401, 800, (jdef){.tenant = "t2;w=1"});
    load(a, 801, 1200, (jdef){.tenant = "t3;w=2"});
    int n[3] = {0, 0, 0}, got = 0;
    while (got < 200) {
        int64_t ids[64];
        int k = claim(got % 2 ? b : a, 200 - got < 13 ? 200 - got : 13, ids, NULL);
        assert_true(k > 0);
        for (int i = 0; i < k; i++)
            n[(ids[i] - 1) / 400]++;
        got += k;
        if (got % 4 == 0) {
            int r = got / 4;
            assert_true(abs(n[0] - r) <= 1 && abs(n[1] - r) <= 1 && abs(n[2] - 2 * r) <= 1);
        }
    }
    print_message("shares 1:1:2, first 200 claimed: %d/%d/%d\n", n[0], n[1], n[2]);
    assert_true(abs(n[0] - 50) <= 10 && abs(n[1] - 50) <= 10 && abs(n[2] - 100) <= 10);
    stg_queue_free(a);
    stg_queue_free(b);
}

/* Claim want jobs, chunk at a time, counted in n[] by tenant: ids 1..1000
 * t1, 1001..2000 t2, the rest t3. */
static void claim_by_tenant(stg_queue *q, int want, int chunk, int n[3])
{
    int64_t ids[64];
    for (int got = 0; got < want;) {
        int k = claim(q, chunk, ids, NULL);
        assert_true(k > 0);
        for (int i = 0; i < k; i++)
            n[ids[i] <= 1000 ? 0 : ids[i] <= 2000 ? 1 : 2]++;
        got += k;
    }
}

/* A tenant whose lane runs dry leaves its share to the others (1:2 of all
 * the claims), and is picked at once when it has jobs again. */
static void test_idle_tenant(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "w", 0, 0);
    load(q, 1, 1000, (jdef){.tenant = "t1"});
    load(q, 1001, 1010, (jdef){.tenant = "t2"});
    load(q, 2001, 3000, (jdef){.tenant = "t3;w=2"});
    int n[3] = {0, 0, 0};
    int64_t ids[64];
    claim_by_tenant(q, 300, 50, n);
    print_message("t2 dry after 10 of 300: %d/%d/%d\n", n[0], n[1], n[2]);
    assert_int_equal(n[1], 10);
    /* 1:1:2 until t2's 10 are out (40 claims), then 1:2 of the other 260. */
    assert_true(abs(n[0] - (10 + 260 / 3)) <= 2 && abs(n[2] - (20 + 2 * 260 / 3)) <= 2);
    load(q, 1011, 1100, (jdef){.tenant = "t2"});
    int k = claim(q, 4, ids, NULL);
    assert_int_equal(k, 4);
    bool t2 = false;
    for (int i = 0; i < k; i++)
        t2 |= ids[i] > 1000 && ids[i] <= 2000;
    assert_true(t2); /* back at once */
    memset(n, 0, sizeof n);
    claim_by_tenant(q, 200, 40, n);
    print_message("t2 back, next 200: %d/%d/%d\n", n[0], n[1], n[2]);
    assert_true(abs(n[0] - 50) <= 2 && abs(n[1] - 50) <= 2 && abs(n[2] - 100) <= 2);
    stg_queue_free(q);
}

/* Batch under an endless interactive backlog gets its floor: one claim in
 * STG__FQ_FLOOR_EVERY. */
static void test_floor(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "w", 0, 0);
    load(q, 1, 200, (jdef){.cls = "batch"});
    load(q, 201, 2200, (jdef){.cls = "interactive", .tenant = "web"});
    int batch = 0, since = 0, got = 0;
    int64_t ids[64];
    while (got < 400) {
        int k = claim(q, 64, ids, NULL);
        for (int i = 0; i < k && got < 400; i++, got++) {
            if (ids[i] <= 200) {
                batch++;
                assert_int_equal(since, STG__FQ_FLOOR_EVERY - 1);
                since = 0;
            } else {
                since++;
            }
        }
    }
    print_message("floor: %d batch of 400 under an interactive backlog\n", batch);
    assert_int_equal(batch, 400 / STG__FQ_FLOOR_EVERY);
    stg_queue_free(q);
}

/* ---- the script against the model ------------------------------------- */

typedef struct mlane {
    int cls;
    char tenant[32];
    int64_t ids[MAXJ]; /* FIFO of the ids waiting in it */
    int head, tail;
} mlane;

static const char *const cls_names[] = {"interactive", "normal", "batch", NULL};

/* Random loads (class, tenant, weight) and claims of random sizes by three
 * workers; each claim's jobs, in order, are the model's picks. */
static void test_same_as_model(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *w[3] = {queue_open(url, "w0", 0, 0), queue_open(url, "w1", 0, 0),
                       queue_open(url, "w2", 0, 0)};
    static mlane ml[16];
    memset(ml, 0, sizeof ml);
    stg__qpick_lane lanes[16];
    memset(lanes, 0, sizeof lanes);
    stg__qpick p = {.lanes = lanes, .n = 1};
    lanes[0].cls = STG_PRIORITY_INDEX(STG_PRIORITY_NORMAL);
    lanes[0].weight = 1;
    ml[0].cls = lanes[0].cls;
    unsigned seed = 12345;
    int64_t next_id = 1, claimed = 0;
    for (int step = 0; step < 400; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = (seed >> 8) % 100;
        if (r < 35 && next_id < MAXJ - 60) {
            /* A load of 1..40 jobs of one class and tenant. */
            int ci = (int)((seed >> 3) % 4); /* 3: no class (normal) */
            int ti = (int)((seed >> 13) % 4); /* 3: no tenant */
            int wt = 1 + (int)((seed >> 17) % 3);
            int cnt = 1 + (int)((seed >> 20) % 40);
            char tenant[32];
            snprintf(tenant, sizeof tenant, "t%d;w=%d", ti, wt);
            load(w[0], next_id, next_id + cnt - 1,
                 (jdef){.cls = cls_names[ci], .tenant = ti < 3 ? tenant : NULL});
            int mci = ci == 3 ? 1 : ci;
            int l = -1;
            if (mci == 1 && ti == 3) {
                l = 0;
            } else {
                char tn[32];
                snprintf(tn, sizeof tn, "%s", ti < 3 ? tenant : "");
                if (ti < 3)
                    *strchr(tn, ';') = '\0';
                for (size_t k = 1; k < p.n; k++)
                    if (ml[k].cls == mci && !strcmp(ml[k].tenant, tn))
                        l = (int)k;
                if (l < 0) {
                    l = (int)p.n++;
                    assert_true(p.n <= 16);
                    ml[l].cls = lanes[l].cls = mci;
                    lanes[l].weight = 1;
                    snprintf(ml[l].tenant, sizeof ml[l].tenant, "%s", tn);
                }
            }
            if (ti < 3)
                lanes[l].weight = wt;
            for (int i = 0; i < cnt; i++)
                ml[l].ids[ml[l].tail++] = next_id + i;
            lanes[l].unread += cnt;
            next_id += cnt;
        } else {
            int max = 1 + (int)((seed >> 4) % 30);
            int64_t ids[64];
            int got[64];
            int n = claim(w[r % 3], max, ids, got);
            int want = 0;
            for (; want < max; want++) {
                int l = stg__qpick_next(&p);
                if (l < 0)
                    break;
                stg__qpick_take(&p, l);
                assert_true(want < n);
                if (got[want] != l || ids[want] != ml[l].ids[ml[l].head])
                    fail_msg("step %d pick %d: the script gave lane %d job %lld, the model "
                             "lane %d job %lld", step, want, got[want], (long long)ids[want], l,
                             (long long)ml[l].ids[ml[l].head]);
                ml[l].head++;
            }
            assert_int_equal(n, want);
            claimed += n;
        }
    }
    print_message("model: %lld jobs claimed in the model's order over %zu lanes\n",
                  (long long)claimed, p.n);
    assert_true(claimed > 500);
    assert_true(p.n >= 8);
    for (int i = 0; i < 3; i++)
        stg_queue_free(w[i]);
}

/* ---- the rest of a job's life in any lane ------------------------------ */

static int count_row(void *data, const stg_queue_row *row)
{
    int *n = data;
    n[row->state]++;
    n[STG_QUEUE_NSTATES] += row->id; /* every id once: the sum */
    if (row->id <= n[STG_QUEUE_NSTATES + 1])
        n[STG_QUEUE_NSTATES + 2]++; /* out of input order */
    n[STG_QUEUE_NSTATES + 1] = (int)row->id;
    return 0;
}

static void test_lanes_life(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *a = queue_open(url, "a", STG_MS(100), 0), *b = queue_open(url, "b", STG_MS(100), 0);
    load(a, 1, 10, (jdef){0});
    load(a, 11, 20, (jdef){.cls = "batch", .tenant = "x"});
    load(a, 21, 30, (jdef){.cls = "interactive"});
    stg_queue_job j[12];
    int n = 0;
    assert_int_equal(stg_queue_claim(a, 12, j, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 12);
    /* The 10 interactive, then normal (batch waited 11 picks: under the
     * floor's 20). */
    for (int i = 0; i < 10; i++)
        assert_true(j[i].id > 20);
    assert_true(j[10].id <= 10 && j[11].id <= 10);
    const char *ents[12];
    bool mine[12];
    for (int i = 0; i < n; i++)
        ents[i] = j[i].entry;
    assert_int_equal(stg_queue_renew(a, ents, (size_t)n, mine), STG_OK);
    for (int i = 0; i < n; i++)
        assert_true(mine[i]);
    bool rec = false;
    stg_queue_outcome done = {.state = STG_QUEUE_DONE, .status = 200, .attempts = 1};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(stg_queue_finish(a, &j[i], &done, &rec), STG_OK);
        assert_true(rec);
        assert_int_equal(stg_queue_finish(a, &j[i], &done, &rec), STG_OK);
        assert_false(rec); /* twice: once */
    }
    stg_queue_outcome back = {.state = STG_QUEUE_PENDING};
    assert_int_equal(stg_queue_finish(a, &j[5], &back, &rec), STG_OK);
    assert_true(rec);
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(b, &c), STG_OK);
    assert_int_equal(c.n[STG_QUEUE_DONE], 5);
    assert_int_equal(c.n[STG_QUEUE_INFLIGHT], 7); /* the given back one is still pending-listed */
    int rows[STG_QUEUE_NSTATES + 3] = {0};
    assert_int_equal(stg_queue_export(b, 0, false, count_row, rows), STG_OK);
    assert_int_equal(rows[STG_QUEUE_DONE], 5);
    assert_int_equal(rows[STG_QUEUE_INFLIGHT], 7);
    assert_int_equal(rows[STG_QUEUE_PENDING], 18);
    assert_int_equal(rows[STG_QUEUE_NSTATES], 30 * 31 / 2);
    assert_int_equal(rows[STG_QUEUE_NSTATES + 2], 0); /* three lanes, rows in input order */
    stg_queue_class_row *cr = NULL;
    size_t ncr = 0;
    assert_int_equal(stg_queue_classes_get(b, &cr, &ncr), STG_OK);
    int64_t infl = 0, tot = 0;
    for (size_t i = 0; i < ncr; i++) {
        infl += cr[i].n[STG_QUEUE_INFLIGHT];
        for (int s = 0; s < STG_QUEUE_NSTATES; s++)
            tot += cr[i].n[s];
    }
    free(cr);
    assert_int_equal(infl, 7);
    assert_int_equal(tot, 30);
    /* a stops: b takes its 7 (the given back one among them) and the rest. */
    sleep_us(STG_MS(200));
    int taken = 0, total = 0;
    stg_queue_job jb[64];
    int nb;
    do {
        assert_int_equal(stg_queue_claim(b, 64, jb, &nb, NULL, NULL), STG_OK);
        for (int i = 0; i < nb; i++) {
            taken += jb[i].deliveries > 1;
            assert_int_equal(stg_queue_finish(b, &jb[i], &done, &rec), STG_OK);
            assert_true(rec);
            stg_queue_job_clear(&jb[i]);
        }
        total += nb;
    } while (nb > 0);
    assert_int_equal(taken, 7);
    assert_int_equal(total, 25);
    for (int i = 5; i < n; i++) {
        assert_int_equal(stg_queue_finish(a, &j[i], &done, &rec), STG_OK);
        assert_false(rec); /* b had them */
    }
    assert_int_equal(stg_queue_renew(a, ents + 5, (size_t)n - 5, mine), STG_OK);
    for (int i = 0; i < n - 5; i++)
        assert_false(mine[i]);
    assert_int_equal(stg_queue_counts_get(b, &c), STG_OK);
    assert_int_equal(c.n[STG_QUEUE_DONE], 30);
    assert_int_equal(c.n[STG_QUEUE_INFLIGHT], 0); /* pending: the MAXJ - 30 never loaded */
    for (int i = 0; i < n; i++)
        stg_queue_job_clear(&j[i]);
    stg_queue_free(a);
    stg_queue_free(b);
}

/* The takeover's review rules in a tenant's lane: a job not replay-safe
 * with a sent-mark, and one delivered more than max_deliveries times, end
 * in review there, the rest is handed out again. */
static void test_review_any_lane(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *a = queue_open(url, "dead", STG_MS(100), 2),
              *b = queue_open(url, "b", STG_MS(100), 2);
    load(a, 1, 2, (jdef){.cls = "batch", .tenant = "x", .post = true});
    load(a, 3, 3, (jdef){.cls = "interactive", .tenant = "y"});
    stg_queue_job j[4];
    int n = 0, rev = 0;
    assert_int_equal(stg_queue_claim(a, 3, j, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 3);
    assert_int_equal(j[0].id, 3); /* interactive first */
    assert_non_null(strchr(j[1].entry, '@'));
    assert_int_equal(stg_queue_mark_sent(a, &j[1]), STG_OK); /* job 1 may have left */
    sleep_us(STG_MS(200));
    stg_queue_job jb[4];
    int nb = 0;
    assert_int_equal(stg_queue_claim(b, 4, jb, &nb, &rev, NULL), STG_OK);
    assert_int_equal(rev, 1);
    assert_int_equal(nb, 2); /* jobs 3 and 2, delivered twice */
    for (int i = 0; i < nb; i++)
        assert_int_equal(jb[i].deliveries, 2);
    /* b dies too: a third delivery is over max_deliveries (2). */
    sleep_us(STG_MS(200));
    stg_queue_job jc[4];
    int nc = 0;
    assert_int_equal(stg_queue_claim(a, 4, jc, &nc, &rev, NULL), STG_OK);
    assert_int_equal(nc, 0);
    assert_int_equal(rev, 2);
    stg_queue_counts c;
    assert_int_equal(stg_queue_counts_get(a, &c), STG_OK);
    assert_int_equal(c.n[STG_QUEUE_REVIEW], 3);
    assert_int_equal(c.n[STG_QUEUE_INFLIGHT], 0);
    for (int i = 0; i < n; i++)
        stg_queue_job_clear(&j[i]);
    for (int i = 0; i < nb; i++)
        stg_queue_job_clear(&jb[i]);
    stg_queue_free(a);
    stg_queue_free(b);
}

/* A queue without lane state (as an older stagger loaded it: {NAME}:jobs
 * alone): every job is still handed out, once. */
static void test_no_lane_state(void **state)
{
    (void)state;
    char url[128];
    queue_url(url, sizeof url);
    stg_queue *q = queue_open(url, "w", 0, 0);
    load(q, 1, 50, (jdef){0});
    char cmd[128];
    snprintf(cmd, sizeof cmd, "DEL stagger:q:{p%d}:lanes", g_seq);
    raw_status(g_port, cmd);
    static bool seen[51];
    memset(seen, 0, sizeof seen);
    int total = 0, n;
    int64_t ids[64];
    while ((n = claim(q, 8, ids, NULL)) > 0) {
        for (int i = 0; i < n; i++) {
            assert_false(seen[ids[i]]);
            seen[ids[i]] = true;
        }
        total += n;
    }
    assert_int_equal(total, 50);
    /* And a load by the older stagger after a newer one's claims: found. */
    snprintf(cmd, sizeof cmd, "stagger:q:{p%d}:jobs", g_seq);
    redisContext *rc = raw_connect(g_port);
    assert_non_null(rc);
    redisReply *x = redisCommand(rc, "XADD %s * id 51 key k m GET u x h %s hb 0 b %s k %s rs 1",
                                 cmd, "", "", "");
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_STRING);
    freeReplyObject(x);
    redisFree(rc);
    stg_queue_job j[4];
    assert_int_equal(stg_queue_claim(q, 4, j, &n, NULL, NULL), STG_OK);
    assert_int_equal(n, 1);
    assert_int_equal(j[0].id, 51);
    stg_queue_job_clear(&j[0]);
    stg_queue_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interactive_first), cmocka_unit_test(test_tenant_shares),
        cmocka_unit_test(test_idle_tenant),       cmocka_unit_test(test_floor),
        cmocka_unit_test(test_same_as_model),     cmocka_unit_test(test_lanes_life),
        cmocka_unit_test(test_review_any_lane), cmocka_unit_test(test_no_lane_state),
    };
    return cmocka_run_group_tests(tests, redis_group_setup, redis_group_teardown);
}
