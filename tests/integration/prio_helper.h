/*
 * What the class-and-tenant tests against a real redis-server share
 * (test_redis_prio.c, test_redis_prio_adaptive.c: a script against its
 * pure model; test_redis_prio_fleet.c, test_redis_prio_adaptive.c: forked
 * processes on one key):
 *  - a script's call with a pinned clock, its reply as integers, and the
 *    model of a plain take of the key's GCRA (the same on both scripts);
 *  - the processes' admissions in shared memory, the fork-and-wait of the
 *    roles, and the bound checked on the promised instants with the round
 *    trip as slack (Redis decided somewhere inside it):
 *    n sends in d <= B + (d + 2 * rtt_max) / T.
 * Include after redis_helper.h (and core/prio_gcra.h for the model).
 */
#ifndef STG_TEST_PRIO_HELPER_H
#define STG_TEST_PRIO_HELPER_H

#include <math.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ---- a script against its model ------------------------------------------ */

/* The sequences' generator (splitmix64): each seed gives the same calls on
 * every run, so a failing call can be replayed by its seed and index. */
static inline uint64_t prio_rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Load lua into the server on port; its SHA into sha. */
static inline void prio_script_load(int port, const char *lua, char *sha, size_t size)
{
    redisContext *c = raw_connect(port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", lua);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    snprintf(sha, size, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
}

/* The server a script test runs against, with the script loaded. */
typedef struct prio_server {
    int port;
    pid_t pid;
    char sha[64];
} prio_server;

static inline void prio_server_up(prio_server *s, const char *lua)
{
    s->port = free_port();
    s->pid = server_start(s->port);
    prio_script_load(s->port, lua, s->sha, sizeof s->sha);
}

static inline void prio_server_down(const prio_server *s)
{
    server_stop(s->pid, SIGTERM);
}

/* EVALSHA sha 1 key args[0..n): the reply's first max elements as
 * integers into v; returns the reply's length. The key is made
 * persistent after: the pinned clock is not Redis's, so expiry (real time)
 * stays out of the sequence. */
static inline int prio_script_eval(redisContext *c, const char *sha, const char *key, int n,
                                   char args[][128], long long *v, int max)
{
    const char *argv[4 + 16] = {"EVALSHA", sha, "1", key};
    assert_true(n <= 16);
    for (int i = 0; i < n; i++)
        argv[4 + i] = args[i];
    redisReply *r = redisCommandArgv(c, 4 + n, argv, NULL);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg("script error: %s", r->str);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    int m = (int)r->elements;
    for (int i = 0; i < m && i < max; i++) {
        assert_int_equal(r->element[i]->type, REDIS_REPLY_INTEGER);
        v[i] = r->element[i]->integer;
    }
    freeReplyObject(r);
    redisReply *p = redisCommand(c, "PERSIST %s", key);
    freeReplyObject(p);
    return m;
}

/* ns to the script's µs, rounded up as it does. */
static inline int64_t prio_ceil_us(int64_t ns)
{
    return ns >= 0 ? (ns + 999) / 1000 : -((-ns) / 1000);
}

#ifdef STG_CORE_PRIO_GCRA_H
/* A plain take of one token with timeout 0 and no lead on the model's
 * state, as both scripts' plain path does (plain and class callers share
 * the key's TAT). */
static inline bool prio_model_plain(stg__prio_state *st, int64_t now, int64_t T, int64_t B)
{
    int64_t tat = st->has_tat && st->tat_ns > now ? st->tat_ns : now;
    if (st->last_interval_ns > 0 && T > st->last_interval_ns && tat > now) {
        double d = ceil((double)(tat - now) * ((double)T / (double)st->last_interval_ns));
        tat = now + (int64_t)d;
    }
    if (tat + T - B * T - now > 0)
        return false;
    st->has_tat = true;
    st->tat_ns = tat + T;
    st->last_interval_ns = T;
    return true;
}
#endif

/* ---- processes on one key ------------------------------------------------ */

typedef struct prio_rec {
    int64_t at_us;   /* promised send instant (monotonic, µs) */
    int64_t wait_us; /* the wait the limiter gave */
    int64_t rtt_us;  /* the call's round trip */
    int who;         /* role index */
} prio_rec;

typedef struct prio_shm {
    int64_t n;
    prio_rec r[20000];
} prio_shm;

/* Record an admission (from a child: shared memory, atomically). */
static inline void prio_shm_add(prio_shm *m, prio_rec rec)
{
    int64_t i = __atomic_fetch_add(&m->n, 1, __ATOMIC_SEQ_CST);
    if (i < (int64_t)(sizeof m->r / sizeof m->r[0]))
        m->r[i] = rec;
}

/* Fork n children, child(who, m, ctx) each (it must _exit), and wait for
 * them all to exit 0; their admissions in the returned shared memory. */
static inline prio_shm *prio_fork_roles(int n, void (*child)(int who, prio_shm *m, const void *ctx),
                                        const void *ctx)
{
    prio_shm *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    m->n = 0;
    pid_t pids[16];
    assert_true(n <= 16);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            child(i, m, ctx);
            _exit(0);
        }
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("role %d ended with status %d", i, st);
    }
    return m;
}

static inline int prio_cmp_at(const void *a, const void *b)
{
    int64_t x = ((const prio_rec *)a)->at_us, y = ((const prio_rec *)b)->at_us;
    return (x > y) - (x < y);
}

static inline int prio_cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* n sends in d: n <= B + (d + 2 * rtt_max) / T (m sorted by instant). */
static inline void prio_check_bound(prio_shm *m, int64_t T_us, int64_t B)
{
    qsort(m->r, (size_t)m->n, sizeof m->r[0], prio_cmp_at);
    int64_t rtt_max = 0;
    for (int64_t i = 0; i < m->n; i++)
        if (m->r[i].rtt_us > rtt_max)
            rtt_max = m->r[i].rtt_us;
    for (int64_t i = 0; i < m->n; i++)
        for (int64_t j = i + B; j < m->n; j++) {
            int64_t d = m->r[j].at_us - m->r[i].at_us + 2 * rtt_max;
            if ((j - i + 1 - B) * T_us > d)
                fail_msg("bound: %lld sends in %lld us (rtt max %lld us)",
                         (long long)(j - i + 1), (long long)(m->r[j].at_us - m->r[i].at_us),
                         (long long)rtt_max);
        }
    print_message("bound held over %lld sends (round trip max %lld us)\n", (long long)m->n,
                  (long long)rtt_max);
}

#endif
