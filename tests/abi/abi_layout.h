/*
 * The ABI guard (docs/ABI.md): the layout of every public struct that
 * crosses the library boundary, frozen for STG_ABI_VERSION, checked at
 * compile time. Included by test_abi.c (C, in every build) and by
 * cxx_headers.cpp (C++, against the installed headers in test_install.sh),
 * so the two languages are held to the same numbers.
 *
 * Why sizes are frozen: a caller allocates these structs (or passes them
 * by value inside another) with the size its headers gave, and the library
 * reads or writes that many bytes. So within one ABI number:
 *  - a struct never changes size or moves a field;
 *  - it ends with uint64_t stg__reserved[N]; a new field takes the place
 *    of leading reserved words (one word per int64_t, uint64_t, double or
 *    bool/enum; a pointer in a union with a uint64_t), and the N here goes
 *    down by as many: the size assertion must keep passing untouched;
 *  - zero in the new field means the old behaviour, so a caller built
 *    against the older header (whose reserved words are zero) gets what it
 *    got before.
 * Changing a SIZE or OFFSET below is an ABI break: bump STG_ABI_VERSION
 * (include/stagger/version.h) in the same commit and re-freeze.
 *
 * Sizes are pinned for LP64 Linux (x86-64, aarch64: the platforms CI
 * builds on); elsewhere only the structural rules are checked. Structs
 * holding a pthread_mutex_t are pinned relative to its size, which glibc
 * sets per architecture.
 */
#ifndef STG_TESTS_ABI_LAYOUT_H
#define STG_TESTS_ABI_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#ifndef __cplusplus
#include <stdalign.h>
#endif

#include <stagger/stagger.h>
#ifdef STG_ABI_CURL
#include <stagger/curl.h>
#endif
#ifdef STG_ABI_REDIS
#include <stagger/redis.h>
#include <stagger/redis/queue.h>
#include <stagger/redis/quota.h>
#endif

#ifdef __cplusplus
#define STG_ABI_ASSERT(c, m) static_assert(c, m)
#else
#define STG_ABI_ASSERT(c, m) _Static_assert(c, m)
#endif

/* X(type, reserved words left, LP64 size in bytes; 0: has a mutex, see below) */
#define STG_ABI_CORE(X)                 \
    X(stg_backoff_config, 4, 80)        \
    X(stg_backoff, 2, 112)              \
    X(stg_bucket_config, 6, 64)         \
    X(stg_adaptive_config, 8, 144)      \
    X(stg_budget_config, 5, 64)         \
    X(stg_breaker_config, 8, 232)       \
    X(stg_breaker, 8, 0)                \
    X(stg_policy, 4, 296)               \
    X(stg_outcome, 4, 56)               \
    X(stg_retry_state, 4, 56)           \
    X(stg_decision, 4, 80)              \
    X(stg_hints, 2, 80)                 \
    X(stg_quota_obs, 4, 160)            \
    X(stg_quota_set, 4, 2832)           \
    X(stg_quota_cost, 2, 48)            \
    X(stg_quota_config, 5, 104)         \
    X(stg_quota_host_info, 4, 56)       \
    X(stg_quota_view, 2, 168)           \
    X(stg_cost_parts, 3, 48)            \
    X(stg_cost_rule, 4, 64)             \
    X(stg_concurrency_config, 6, 96)   \
    X(stg_concurrency, 1, 200)

#define STG_ABI_CURL_STRUCTS(X)         \
    X(stg_env, 4, 56)                   \
    X(stg_event, 1, 184)                \
    X(stg_event_more, 5, 64)            \
    X(stg_result, 7, 488)               \
    X(stg_shared_limiter, 7, 112)       \
    X(stg_shared_quota, 4, 72)          \
    X(stg_call_config, 7, 560)         \
    X(stg_engine_config, 9, 976)        \
    X(stg_request, 1, 176)              \
    X(stg_engine_stats, 5, 168)         \
    X(stg_class_stats, 4, 80)           \
    X(stg_event_fanout, 2, 88)         \
    X(stg_tls_config, 6, 96)

#define STG_ABI_REDIS_STRUCTS(X)        \
    X(stg_redis_url, 1, 920)            \
    X(stg_redis_tls, 3, 64)             \
    X(stg_redis_breaker_config, 4, 64)  \
    X(stg_redis_limiter_config, 12, 448) \
    X(stg_redis_stats, 3, 112)          \
    X(stg_queue_config, 5, 128)         \
    X(stg_queue_spec, 3, 112)           \
    X(stg_queue_counts, 4, 112)         \
    X(stg_queue_job, 4, 160)            \
    X(stg_queue_outcome, 6, 120)        \
    X(stg_queue_worker_row, 2, 80)      \
    X(stg_queue_report, 8, 304)         \
    X(stg_queue_row, 3, 144)            \
    X(stg_queue_stats, 4, 56)           \
    X(stg_redis_quota_config, 6, 96)    \
    X(stg_redis_quota_info, 5, 96)

#if UINTPTR_MAX == UINT64_MAX && defined(__linux__)
#define STG_ABI_PINNED 1
#else
#define STG_ABI_PINNED 0
#endif

#define STG_ABI_RESERVED(T) (sizeof(((T *)0)->stg__reserved) / sizeof(uint64_t))

/* The structural rules hold everywhere; the size only where pinned. */
#define STG_ABI_CHECK(T, words, lp64)                                                     \
    STG_ABI_ASSERT(offsetof(T, stg__reserved) + sizeof(((T *)0)->stg__reserved) ==        \
                       sizeof(T),                                                         \
                   #T ": the reserved words must end the struct");                        \
    STG_ABI_ASSERT(STG_ABI_RESERVED(T) == (words),                                        \
                   #T ": reserved words changed; see tests/abi/abi_layout.h");            \
    STG_ABI_ASSERT(!STG_ABI_PINNED || (lp64) == 0 || sizeof(T) == (lp64),                 \
                   #T ": size changed: an ABI break (docs/ABI.md)");

STG_ABI_CORE(STG_ABI_CHECK)
#ifdef STG_ABI_CURL
STG_ABI_CURL_STRUCTS(STG_ABI_CHECK)
#endif
#ifdef STG_ABI_REDIS
STG_ABI_REDIS_STRUCTS(STG_ABI_CHECK)
#endif

/* The objects with a mutex inside, and the opaque lock-free ones. */
STG_ABI_ASSERT(!STG_ABI_PINNED || sizeof(stg_breaker) == sizeof(pthread_mutex_t) + 1312,
               "stg_breaker: size changed: an ABI break (docs/ABI.md)");
STG_ABI_ASSERT(!STG_ABI_PINNED || sizeof(stg_adaptive) == sizeof(pthread_mutex_t) + 448,
               "stg_adaptive: size changed: an ABI break (docs/ABI.md)");
STG_ABI_ASSERT(sizeof(stg_bucket) == 64 && alignof(stg_bucket) == 8,
               "stg_bucket: storage changed: an ABI break (docs/ABI.md)");
STG_ABI_ASSERT(sizeof(stg_budget) == 32 && alignof(stg_budget) == 8,
               "stg_budget: storage changed: an ABI break (docs/ABI.md)");
STG_ABI_ASSERT(sizeof(stg_quota_ticket) == 528 && alignof(stg_quota_ticket) == 8,
               "stg_quota_ticket: storage changed: an ABI break (docs/ABI.md)");
/* Fixed by what they are: the generator's state and a 640-bit bitmap. */
STG_ABI_ASSERT(sizeof(stg_rng) == 32, "stg_rng: size changed: an ABI break");
STG_ABI_ASSERT(sizeof(stg_status_set) == 80, "stg_status_set: size changed: an ABI break");

#endif
