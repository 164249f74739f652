#include "rng.h"

void rng_seed(rng_t *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

double rng_uniform(rng_t *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_below(rng_t *r, uint64_t n)
{
    return rng_next(r) % n;
}
