/* Portable, seedable random numbers shared by both ranks and by Python (see README.md). */
#ifndef PT2PT_RNG_H
#define PT2PT_RNG_H

#include <stdint.h>

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit word of state, trivially reproducible. */
typedef struct {
    uint64_t state;
} rng_t;

void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_next(rng_t *r);
/* Uniform double in [0, 1): the top 53 bits of the next word times 2^-53. */
double rng_uniform(rng_t *r);
/* Integer in [0, n) as next() % n (the bias is below n / 2^64: negligible for plan sizes). */
uint64_t rng_below(rng_t *r, uint64_t n);

#endif
