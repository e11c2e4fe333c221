/*
 * The monotonic clock in microseconds, for the parts that do I/O (the
 * server, the proxy, the Redis client, the batch source and the CLI):
 * written once here instead of once per file. The core never reads a
 * clock (time is a parameter there), and libstagger-curl reads it through
 * its injectable stg_env (env.c), so neither includes this.
 */
#ifndef STG_UTIL_CLOCK_H
#define STG_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, in microseconds. */
static inline int64_t stg__clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
