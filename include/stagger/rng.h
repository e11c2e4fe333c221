/*
 * A small seedable random number generator (xoshiro256**, seeded through
 * splitmix64). Every random choice in libstagger draws from a stg_rng the
 * caller owns, so a schedule is replayed exactly by reusing the seed. There is
 * no global generator and no rand().
 *
 * A stg_rng is not thread-safe: give each thread (or each engine) its own.
 */
#ifndef STAGGER_RNG_H
#define STAGGER_RNG_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stg_rng {
    uint64_t s[4];
} stg_rng;

/* Seed the generator. Any seed, including 0, is valid; equal seeds give
 * equal sequences on every platform. */
STG_API void stg_rng_seed(stg_rng *rng, uint64_t seed);

/* Next 64 random bits. */
STG_API uint64_t stg_rng_next(stg_rng *rng);

/* Uniform double in [0, 1), 53 bits of precision. */
STG_API double stg_rng_double(stg_rng *rng);

/* Uniform integer in [lo, hi], both inclusive, without modulo bias.
 * Returns lo when hi <= lo. */
STG_API int64_t stg_rng_range(stg_rng *rng, int64_t lo, int64_t hi);

/* Standard normal deviate (mean 0, sd 1), Box-Muller. */
STG_API double stg_rng_normal(stg_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
