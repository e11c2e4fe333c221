/*
 * xoshiro256** (Blackman & Vigna), seeded through splitmix64 so that any
 * 64-bit seed, 0 included, gives a well-mixed non-zero state. Integer ranges
 * use Lemire's multiply-and-reject method: no modulo bias.
 */
#include <math.h>

#include <stagger/rng.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void stg_rng_seed(stg_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

uint64_t stg_rng_next(stg_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double stg_rng_double(stg_rng *rng)
{
    return (double)(stg_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, bound) for bound >= 1. */
static uint64_t bounded(stg_rng *rng, uint64_t bound)
{
    unsigned __int128 m = (unsigned __int128)stg_rng_next(rng) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t threshold = (0 - bound) % bound;
        while (low < threshold) {
            m = (unsigned __int128)stg_rng_next(rng) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

int64_t stg_rng_range(stg_rng *rng, int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    /* Width hi - lo + 1 computed in unsigned arithmetic: no overflow. */
    uint64_t width = (uint64_t)hi - (uint64_t)lo;
    uint64_t off = (width == UINT64_MAX) ? stg_rng_next(rng) : bounded(rng, width + 1);
    return (int64_t)((uint64_t)lo + off);
}

double stg_rng_normal(stg_rng *rng)
{
    double u1 = stg_rng_double(rng);
    double u2 = stg_rng_double(rng);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
