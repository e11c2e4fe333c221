/*
 * Clocks, seeds and the one process-wide libcurl initialisation.
 *
 * curl_global_init() is not thread-safe and must run once before libcurl is
 * used; the library calls it lazily through a pthread_once from
 * stg_curl_perform() and stg_engine_new(), so callers need not. That
 * pthread_once and the CURLcode it caches are the only global state of
 * libstagger-curl. (curl_global_cleanup() is never called: the library cannot
 * know when the last user is done, and the OS reclaims it at exit.)
 *
 * Invariants: the clocks are read only through stg__mono_us/stg__wall_us,
 * which honour an injected stg_env.
 */
#include <pthread.h>
#include <time.h>

#include "curl/internal.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

CURLcode stg__curl_global_init(void)
{
    pthread_once(&global_once, global_init);
    return global_rc;
}

static int64_t read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t stg__mono_us(const stg_env *env)
{
    if (env && env->mono_us)
        return env->mono_us(env->ctx);
    return read_clock(CLOCK_MONOTONIC);
}

int64_t stg__wall_us(const stg_env *env)
{
    if (env && env->wall_us)
        return env->wall_us(env->ctx);
    return read_clock(CLOCK_REALTIME);
}

uint64_t stg__seed(const void *addr, int64_t now_us)
{
    /* splitmix64 finaliser over the clock and an address: distinct per call
     * and per process without any shared generator. */
    uint64_t z = (uint64_t)now_us ^ ((uint64_t)(uintptr_t)addr * UINT64_C(0x9E3779B97F4A7C15));
    z ^= (uint64_t)read_clock(CLOCK_REALTIME);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
