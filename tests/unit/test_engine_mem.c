/*
 * Memory of requests waiting in flight (issue #19 goal 2: <= 4 KB per
 * request at 10 000 in flight; docs/ARCHITECTURE.md "Memory"). A request
 * the engine accepted but has not put on the wire costs its own struct,
 * URL and headers, never a curl easy handle or a buffer; a job the batch
 * runner claimed costs that plus its slot. Measured as heap bytes in use
 * (the allocator's own count: ASan's when built with it, glibc's
 * mallinfo2 otherwise), so the figures are exact and not timed.
 *
 * The requests wait behind a fixed limiter of 1/s with the injected clock
 * frozen: one goes to the wire (to a socket on 127.0.0.1 that listens and
 * never answers), every other one holds a limiter reservation in the timer
 * heap. Only loopback is ever contacted.
 *
 * On the wire, libcurl's download buffer is the largest thing a transfer
 * holds; its size follows the number on the wire (stg__xfer_buffer_size,
 * xfer.c). The policy is checked as a function, and in an engine with
 * more on the wire than may have 16 KiB each: libcurl's
 * allocations are counted through curl_global_init_mem (installed in
 * main, before any engine initialises libcurl), so the test sees how many
 * 16 KiB buffers libcurl really holds.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "batch/batch.h"
#include "curl/internal.h"
#include "store/store.h"

#if defined(__SANITIZE_ADDRESS__)
#define STG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STG_ASAN 1
#endif
#endif
#ifdef STG_ASAN
/* ASan's count of bytes allocated and not freed (declared in
 * <sanitizer/allocator_interface.h>, which gcc does not install). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define N 2000
#define GOAL_BYTES 4096

static size_t heap_in_use(void)
{
#ifdef STG_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#endif
}

/* libcurl's live allocations of a default download buffer (16 KiB + 1,
 * in its allocator size class: up to 64 bytes more): counted at malloc and
 * free by the same pointer's usable size, so the two always agree. Larger
 * blocks are the multi's own (the socket hash's 911-slot table, 29 KB,
 * taken at the first socket), not a transfer's. */
static long curl_big_live;
#define BIG_ALLOC ((size_t)STG__XFER_BUF_MAX + 1)

static void big_account(void *p, long sign)
{
    size_t n = p ? malloc_usable_size(p) : 0;
    if (n >= BIG_ALLOC && n < BIG_ALLOC + 64)
        curl_big_live += sign;
}
static void *c_malloc(size_t n)
{
    void *p = malloc(n);
    big_account(p, 1);
    return p;
}
static void c_free(void *p)
{
    big_account(p, -1);
    free(p);
}
static void *c_realloc(void *p, size_t n)
{
    big_account(p, -1);
    void *q = realloc(p, n);
    big_account(q ? q : p, 1);
    return q;
}
static char *c_strdup(const char *s)
{
    char *p = strdup(s);
    big_account(p, 1);
    return p;
}
static void *c_calloc(size_t a, size_t b)
{
    void *p = calloc(a, b);
    big_account(p, 1);
    return p;
}

static int64_t frozen_us(void *ctx)
{
    return *(const int64_t *)ctx;
}

/* A socket on 127.0.0.1 that accepts connections (the kernel's backlog)
 * and never answers: a request sent there stays on the wire. */
static int silent_listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

typedef struct tally {
    int done;
} tally;

static void on_done(stg_engine *e, uint64_t id, const stg_result *r, void *data)
{
    (void)e;
    (void)id;
    (void)r;
    ((tally *)data)->done++;
}

/* setup_easy runs on the easy handle of each attempt that starts: the
 * handles taken, since a request gets one only when it goes out. */
static void count_handle(CURL *easy, void *data)
{
    (void)easy;
    ++*(int *)data;
}

/* An engine config on a clock that never moves, with a deadline no wait
 * reaches. */
static void frozen(stg_engine_config *c, stg_env *env, int64_t *clock)
{
    *clock = STG_SEC(1000);
    memset(env, 0, sizeof *env);
    env->ctx = clock;
    env->mono_us = frozen_us;
    env->wall_us = frozen_us;
    c->env = env;
    c->seed = 1;
    c->policy.deadline_us = STG_SEC(1000000); /* every reservation within it */
}

static void frozen_limited(stg_engine_config *c, stg_env *env, int64_t *clock)
{
    frozen(c, env, clock);
    c->limiter = STG_LIMITER_FIXED;
    c->rate = 1;
    c->burst = 1;
}

/* N requests accepted by one engine, all but one waiting for the limiter:
 * each costs well under the goal, and only the one sent took a handle. */
static void test_engine_waiting_requests(void **state)
{
    (void)state;
    int port;
    int lfd = silent_listener(&port);
    stg_engine_config c;
    memset(&c, 0, sizeof c);
    stg_env env;
    int64_t clock;
    frozen_limited(&c, &env, &clock);
    c.concurrency = N;
    int handles = 0;
    c.setup_easy = count_handle;
    c.setup_data = &handles;
    int err = 0;
    stg_engine *e = stg_engine_new(&c, &err);
    assert_non_null(e);
    stg_engine_run(e, 0);
    size_t before = heap_in_use();
    tally t = {0};
    const char *hdrs[] = {"Accept: application/json", "X-Trace: trace-0000001", NULL};
    char url[128];
    for (int i = 0; i < N; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/track/job-%07d", port, i);
        stg_request rq;
        memset(&rq, 0, sizeof rq);
        rq.url = url;
        rq.headers = hdrs;
        assert_int_equal(stg_engine_submit(e, &rq, on_done, &t, NULL), STG_OK);
    }
    size_t submitted = heap_in_use();
    stg_engine_run(e, 0); /* admission: one sent, the rest reserve a slot each */
    size_t admitted = heap_in_use();
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    assert_int_equal(t.done, 0);
    assert_int_equal(st.in_flight, 1);
    assert_int_equal(st.waiting, N - 1);
    assert_int_equal(handles, 1); /* the waiting ones hold no easy handle */
    double per_new = (double)(submitted - before) / N, per_waiting = (double)(admitted - before) / N;
    print_message("engine: %.0f bytes per request queued, %.0f waiting for the limiter "
                  "(%d in flight, 1 on the wire)\n", per_new, per_waiting, N);
    assert_true(per_new < GOAL_BYTES);
    assert_true(per_waiting < GOAL_BYTES);
    stg_engine_free(e); /* cancels them all: done once each */
    assert_int_equal(t.done, N);
    close(lfd);
}

/* N jobs claimed by the batch runner at -j N and handed to the engine,
 * all but one waiting for the limiter: a claimed job costs its slot, its
 * job and its request, under the goal. (A slot used to keep a 4 KiB path
 * buffer for a body file, whether or not there was an out_dir.) */
static void test_batch_claimed_jobs(void **state)
{
    (void)state;
    int port;
    int lfd = silent_listener(&port);
    char dir[] = "/tmp/stg_engine_mem.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char db[256];
    snprintf(db, sizeof db, "%s/batch.db", dir);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    for (int i = 0; i < N; i++)
        fprintf(f, "{\"id\":\"job-%07d\",\"url\":\"http://127.0.0.1:%d/track/%07d\","
                   "\"headers\":{\"X-Trace\":\"trace-%07d\"}}\n", i, port, i, i);
    fclose(f);
    FILE *in = fmemopen(text, len, "r");
    stg_job_set set;
    char err[800];
    assert_int_equal(stg__input_read(in, NULL, &set, err, sizeof err), STG_OK);
    fclose(in);
    free(text);
    stg_store *s = NULL;
    stg_store_options o = {.create = true, .exclusive = true};
    assert_int_equal(stg__store_open(db, &o, &s, err, sizeof err), STG_OK);
    bool imported = false;
    assert_int_equal(stg__store_import(s, &set, "test", stg__store_now_ms(), &imported), STG_OK);
    stg__job_set_free(&set);

    stg_batch_config c;
    memset(&c, 0, sizeof c);
    c.store = s;
    stg_env env;
    int64_t clock;
    frozen_limited(&c.engine, &env, &clock);
    c.engine.concurrency = N;
    size_t before = heap_in_use();
    stg_batch *b = NULL;
    assert_int_equal(stg__batch_new(&c, &b, NULL, err, sizeof err), STG_OK);
    assert_true(stg__batch_step(b, 0)); /* claims N, submits them, one engine pass */
    size_t claimed = heap_in_use();
    stg_batch_progress p;
    stg__batch_progress_get(b, &p);
    assert_int_equal(p.in_flight, N);
    assert_int_equal(p.counts.n[STG_JOB_INFLIGHT], N);
    double per = (double)(claimed - before) / N;
    print_message("batch: %.0f bytes per claimed job (%d in flight, 1 on the wire)\n", per, N);
    assert_true(per < GOAL_BYTES);
    stg__batch_stop(b);
    stg_batch_summary sum;
    assert_int_equal(stg__batch_end(b, &sum), STG_OK);
    assert_int_equal(sum.counts.n[STG_JOB_PENDING], N); /* all put back */
    stg__batch_free(b, 0);
    stg__store_close(s);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p2[300];
        snprintf(p2, sizeof p2, "%s%s", db, sfx[i]);
        unlink(p2);
    }
    rmdir(dir);
    close(lfd);
}

/* The buffer size by the number on the wire: libcurl's default up to 256
 * at once, its minimum beyond, never growing as more go out. */
static void test_buffer_size_policy(void **state)
{
    (void)state;
    assert_int_equal(stg__xfer_buffer_size(0), STG__XFER_BUF_MAX);
    assert_int_equal(stg__xfer_buffer_size(1), 16384);
    assert_int_equal(stg__xfer_buffer_size(256), 16384);
    assert_int_equal(stg__xfer_buffer_size(257), 1024);
    assert_int_equal(stg__xfer_buffer_size(10000), STG__XFER_BUF_MIN);
    assert_int_equal(stg__xfer_buffer_size(1 << 30), STG__XFER_BUF_MIN);
    long prev = STG__XFER_BUF_MAX, big = 0;
    for (int n = 1; n <= 20000; n++) {
        long b = stg__xfer_buffer_size(n);
        assert_true(b <= prev);
        assert_true(b == STG__XFER_BUF_MAX || b == STG__XFER_BUF_MIN);
        big += b == STG__XFER_BUF_MAX;
        prev = b;
    }
    assert_int_equal(big, STG__XFER_BUF_MANY);
}

/* WIRE transfers on the wire at once (to a listener that never answers):
 * libcurl holds a 16 KiB buffer only for the first 256 that went out, not
 * one per transfer. */
#define WIRE 600
static void test_engine_wire_buffers(void **state)
{
    (void)state;
    int port;
    int lfd = silent_listener(&port);
    stg_engine_config c;
    memset(&c, 0, sizeof c);
    stg_env env;
    int64_t clock;
    frozen(&c, &env, &clock);
    c.concurrency = WIRE;
    int err = 0;
    stg_engine *e = stg_engine_new(&c, &err);
    assert_non_null(e);
    stg_engine_run(e, 0);
    long big0 = curl_big_live;
    tally t = {0};
    char url[128];
    for (int i = 0; i < WIRE; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/wire/%d", port, i);
        stg_request rq;
        memset(&rq, 0, sizeof rq);
        rq.url = url;
        assert_int_equal(stg_engine_submit(e, &rq, on_done, &t, NULL), STG_OK);
    }
    stg_engine_run(e, 0); /* all of them out: connecting or sent */
    /* libcurl allocates a buffer when it starts the transfer (its first
     * perform after the add): a few passes, bounded, since the sockets
     * connect to a listener that never answers. */
    for (int pass = 0; pass < 20 && curl_big_live - big0 < WIRE; pass++)
        stg_engine_run(e, STG_MS(10));
    stg_engine_stats st;
    stg_engine_stats_get(e, &st);
    assert_int_equal(st.in_flight, WIRE);
    assert_int_equal(t.done, 0);
    long want = 0;
    for (int i = 1; i <= WIRE; i++)
        want += stg__xfer_buffer_size(i) >= STG__XFER_BUF_MAX;
    long big = curl_big_live - big0;
    print_message("engine: %d on the wire, %ld libcurl buffers of 16 KiB (policy: %ld)\n", WIRE,
                  big, want);
    assert_int_equal(want, STG__XFER_BUF_MANY);
    assert_int_equal(big, want); /* one per transfer (600) with the default */
    stg_engine_free(e);
    assert_int_equal(t.done, WIRE);
    assert_true(curl_big_live <= big0); /* every buffer freed (and the multi's own) */
    close(lfd);
}

int main(void)
{
    /* Before any engine: libcurl allocates through the counting hooks. */
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, c_malloc, c_free, c_realloc, c_strdup,
                             c_calloc) != CURLE_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer_size_policy),
        cmocka_unit_test(test_engine_wire_buffers),
        cmocka_unit_test(test_engine_waiting_requests),
        cmocka_unit_test(test_batch_claimed_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
