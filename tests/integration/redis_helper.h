/*
 * The Redis integration tests' helpers: a redis-server of their own on a
 * free loopback port (persistence off, PR_SET_PDEATHSIG so a crashed test
 * leaves none behind), raw commands beside the library, and a capture of
 * the limiter's log callback. Include after cmocka and hiredis. Only
 * 127.0.0.1 is used.
 */
#ifndef STG_TEST_REDIS_HELPER_H
#define STG_TEST_REDIS_HELPER_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <stagger/redis.h>
#include <stagger/redis/queue.h>

/* ---- helpers: clock, sleep ---------------------------------------------- */

static inline int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- helpers: a redis-server of our own ---------------------------------- */

static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static inline redisContext *raw_connect(int port)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Start redis-server on 127.0.0.1:port (extra: NULL or one more
 * "--option value" pair) and wait until it answers PING (up to 5 s). */
static inline pid_t server_start_with(int port, const char *opt, const char *val)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int dn = open("/dev/null", O_RDWR);
        if (dn >= 0) {
            dup2(dn, 0);
            dup2(dn, 1);
            dup2(dn, 2);
        }
        if (opt)
            execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save",
                   "", "--appendonly", "no", "--daemonize", "no", opt, val, (char *)NULL);
        else
            execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save",
                   "", "--appendonly", "no", "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    int64_t deadline = now_us() + 5000000;
    while (now_us() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            fail_msg("redis-server exited at start (status %d)", st);
        redisContext *c = raw_connect(port);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            /* With requirepass, PING answers NOAUTH: up all the same. */
            bool up = r != NULL;
            if (r)
                freeReplyObject(r);
            redisFree(c);
            if (up)
                return pid;
        }
        sleep_us(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("redis-server did not come up on port %d", port);
    return -1;
}

static inline pid_t server_start(int port)
{
    return server_start_with(port, NULL, NULL);
}

static inline void server_stop(pid_t pid, int sig)
{
    if (pid <= 0)
        return;
    kill(pid, sig);
    waitpid(pid, NULL, 0);
}

/* Redis TIME in microseconds. */
static inline int64_t redis_time_us(int port)
{
    redisContext *c = raw_connect(port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "TIME");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    int64_t t = strtoll(r->element[0]->str, NULL, 10) * 1000000 +
                strtoll(r->element[1]->str, NULL, 10);
    freeReplyObject(r);
    redisFree(c);
    return t;
}

static inline long long raw_int(int port, const char *cmd, const char *arg)
{
    redisContext *c = raw_connect(port);
    assert_non_null(c);
    redisReply *r = arg ? redisCommand(c, "%s %s", cmd, arg) : redisCommand(c, cmd);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -999;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static inline void raw_status(int port, const char *cmd)
{
    redisContext *c = raw_connect(port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, cmd);
    assert_non_null(r);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(c);
}

/* ---- helpers: log capture ------------------------------------------------ */

typedef struct logbook {
    pthread_mutex_t mu;
    int n;
    stg_redis_event ev[16];
    char msg[16][1400];
} logbook;

static inline void log_cb(void *data, stg_redis_event ev, const char *msg)
{
    logbook *lb = data;
    pthread_mutex_lock(&lb->mu);
    if (lb->n < 16) {
        lb->ev[lb->n] = ev;
        snprintf(lb->msg[lb->n], sizeof lb->msg[0], "%s", msg);
    }
    lb->n++;
    pthread_mutex_unlock(&lb->mu);
}

static inline int log_count(logbook *lb)
{
    pthread_mutex_lock(&lb->mu);
    int n = lb->n;
    pthread_mutex_unlock(&lb->mu);
    return n;
}

/* A work queue (<stagger/redis/queue.h>) at url for worker, claim_idle_us
 * and max_deliveries as given (0: the defaults); fails the test when it
 * cannot be made. */
static inline stg_queue *queue_open(const char *url, const char *worker, int64_t idle_us,
                                    int maxd)
{
    stg_queue_config c = {.url = url, .worker = worker, .claim_idle_us = idle_us,
                          .max_deliveries = maxd};
    int err = -1;
    char why[256] = "";
    stg_queue *q = stg_queue_new(&c, &err, why, sizeof why);
    if (!q)
        fail_msg("stg_queue_new: %d %s", err, why);
    return q;
}

/* The cmocka group fixture of the Redis test programs: one redis-server
 * on a free loopback port for the whole group, stopped by its pid. SIGPIPE
 * is left fatal: the library must survive a closed socket on its own. */
static int g_port __attribute__((unused));
static pid_t g_pid __attribute__((unused));

static inline int redis_group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_DFL);
    g_port = free_port();
    g_pid = server_start(g_port);
    return 0;
}

static inline int redis_group_teardown(void **state)
{
    (void)state;
    server_stop(g_pid, SIGTERM);
    return 0;
}

#endif
