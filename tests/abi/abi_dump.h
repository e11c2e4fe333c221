/*
 * Print the layout abi_layout.h checks, one line per struct
 * ("name size offset-of-reserved alignment"), so test_install.sh can diff
 * what C and C++ see of the same headers: a header whose struct the two
 * languages lay out differently would pass each language's asserts and
 * still break a C++ caller.
 */
#ifndef STG_TESTS_ABI_DUMP_H
#define STG_TESTS_ABI_DUMP_H

#include <stdio.h>

#include "abi_layout.h"

#define STG_ABI_DUMP_ONE(T, words, lp64)                                          \
    printf("%s %zu %zu %zu\n", #T, sizeof(T), offsetof(T, stg__reserved),          \
           (size_t)alignof(T));

static inline void stg_abi_dump(void)
{
    STG_ABI_CORE(STG_ABI_DUMP_ONE)
#ifdef STG_ABI_CURL
    STG_ABI_CURL_STRUCTS(STG_ABI_DUMP_ONE)
#endif
#ifdef STG_ABI_REDIS
    STG_ABI_REDIS_STRUCTS(STG_ABI_DUMP_ONE)
#endif
    printf("stg_bucket %zu - %zu\n", sizeof(stg_bucket), (size_t)alignof(stg_bucket));
    printf("stg_budget %zu - %zu\n", sizeof(stg_budget), (size_t)alignof(stg_budget));
    printf("stg_adaptive %zu - %zu\n", sizeof(stg_adaptive), (size_t)alignof(stg_adaptive));
    printf("stg_rng %zu - %zu\n", sizeof(stg_rng), (size_t)alignof(stg_rng));
}

#endif
