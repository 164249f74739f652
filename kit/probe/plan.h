/* The measurement plan: every (op, size) sample in the order it is taken, derived from the seed. */
#ifndef PT2PT_PLAN_H
#define PT2PT_PLAN_H

#include <stdint.h>

#include "options.h"

struct plan_entry {
    uint64_t size;
    uint8_t op;      /* enum op_kind */
    uint8_t warmup;  /* 1 for the warm-up samples at the start */
};

struct plan {
    struct plan_entry *e;
    uint64_t n;          /* warm-up + measured samples */
    uint64_t n_warmup;
    uint64_t n_repeated; /* extra entries from --repeat-fraction (part of the measured ones) */
    uint64_t hash;       /* FNV-1a 64 over the entries: both ranks compare it */
};

/* Build the plan (README.md, "Plan algorithm"); on error fill err and return -1. */
int plan_build(const struct options *o, struct plan *p, char *err);
void plan_free(struct plan *p);

#endif
