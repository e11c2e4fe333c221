/*
 * The monotonic clock in microseconds, for the parts that do I/O (the
 * server, the proxy, the Redis client, the batch source and the CLI):
 * written once here instead of once per file. The core never reads a
 * clock (time is a parameter there), and libstagger-curl's decisions read
 * it through its injectable stg_env (env.c); only its metrics, which show
 * a quota's time to reset and decide nothing, read it here. And the
 * condition variable whose timed waits count on that clock.
 */
#ifndef STG_UTIL_CLOCK_H
#define STG_UTIL_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, in microseconds. */
static inline int64_t stg__clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* pthread_cond_init for a condition variable whose pthread_cond_timedwait
 * deadlines are CLOCK_MONOTONIC times (a wall clock step neither wakes nor
 * delays it). Returns pthread_cond_init's result. */
static inline int stg__cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

#endif
