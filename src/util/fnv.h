/*
 * FNV-1a, 64 bits (Fowler, Noll, Vo; the IETF draft
 * draft-eastlake-fnv): the one string hash of the tree's own hash tables
 * (the quota limiter's keys in the core, the engine's hosts, the shared
 * quotas' routes), header-only, pure. Not for anything an attacker could
 * aim at where a collision costs more than a longer probe: the tables it
 * serves are bounded (max_hosts, the keys the caller configures).
 */
#ifndef STG_UTIL_FNV_H
#define STG_UTIL_FNV_H

#include <stddef.h>
#include <stdint.h>

#define STG__FNV64_OFFSET UINT64_C(1469598103934665603)
#define STG__FNV64_PRIME UINT64_C(1099511628211)

/* FNV-1a of the NUL-terminated s. */
static inline uint64_t stg__fnv1a64(const char *s)
{
    uint64_t h = STG__FNV64_OFFSET;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= STG__FNV64_PRIME;
    }
    return h;
}

/* h (STG__FNV64_OFFSET, or another offset for a second hash) folded with
 * the n bytes at p: FNV-1a over bytes that may hold NUL. */
static inline uint64_t stg__fnv1a64_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= STG__FNV64_PRIME;
    }
    return h;
}

#endif /* STG_UTIL_FNV_H */
