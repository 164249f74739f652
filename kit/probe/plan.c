#include "plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rng.h"

/* Warm-up sizes come from their own stream so --warmup does not change the measured sequence. */
#define WARMUP_STREAM UINT64_C(0x7761726D75702121) /* "warmup!!" */
/* Repeated entries are chosen from their own stream, so --repeat-fraction 0 is today's plan. */
#define REPEAT_STREAM UINT64_C(0x7265706561742121) /* "repeat!!" */
#define MAX_GRID_POINTS 100000

/* Log-uniform in (size + 1) so that 0 is a valid size; integer result in [min, max]. */
static uint64_t draw_loguniform(rng_t *r, uint64_t min, uint64_t max)
{
    double a = log((double)min + 1.0), b = log((double)max + 2.0);
    double x = floor(exp(a + rng_uniform(r) * (b - a))) - 1.0;
    uint64_t s = x <= (double)min ? min : (uint64_t)x;
    return s > max ? max : s;
}

/* Grid points: 0 if MIN is 0, then round(max(MIN,1) * FACTOR^k) <= MAX, duplicates dropped. */
static uint64_t *grid_sizes(const struct size_spec *sp, uint64_t *n, char *err)
{
    uint64_t *v = malloc(MAX_GRID_POINTS * sizeof *v);
    if (!v) {
        snprintf(err, ERRMSG_LEN, "out of memory building the size grid");
        return NULL;
    }
    uint64_t m = 0;
    if (sp->min == 0)
        v[m++] = 0;
    double base = sp->min == 0 ? 1.0 : (double)sp->min;
    for (int k = 0;; k++) {
        double x = floor(base * pow(sp->factor, k) + 0.5);
        if (x > (double)sp->max)
            break;
        uint64_t s = (uint64_t)x;
        if (m > 0 && v[m - 1] == s)
            continue;
        if (m == MAX_GRID_POINTS) {
            free(v);
            snprintf(err, ERRMSG_LEN, "--sizes '%s': more than %d grid points; use a larger "
                     "FACTOR", sp->text, MAX_GRID_POINTS);
            return NULL;
        }
        v[m++] = s;
    }
    *n = m;
    return v;
}

static int g_op_rank[MAX_OPS]; /* position of each op in --op, for the blocked order */

static int cmp_blocked(const void *pa, const void *pb)
{
    const struct plan_entry *a = pa, *b = pb;
    int ra = g_op_rank[a->op], rb = g_op_rank[b->op];
    if (ra != rb)
        return ra < rb ? -1 : 1;
    return a->size < b->size ? -1 : a->size > b->size;
}

static void fnv1a(uint64_t *h, uint64_t value, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        *h ^= (value >> (8 * i)) & 0xFF;
        *h *= UINT64_C(0x100000001B3);
    }
}

int plan_build(const struct options *o, struct plan *p, char *err)
{
    const struct size_spec *sp = &o->sizes;
    const uint64_t *fixed = NULL;
    uint64_t *grid = NULL, n_fixed = 0;
    if (sp->kind == SIZES_GRID) {
        if (!(grid = grid_sizes(sp, &n_fixed, err)))
            return -1;
        fixed = grid;
    } else if (sp->kind == SIZES_LIST) {
        fixed = sp->list;
        n_fixed = sp->n_list;
    }

    uint64_t per_op = sp->kind == SIZES_LOGUNIFORM ? 1 : n_fixed;
    double base_d = (double)o->n_ops * (double)o->samples * (double)per_op;
    /* floor(F * n + 0.5) distinct entries, each measured repeat_count more times */
    double chosen_d = floor(o->repeat_fraction * base_d + 0.5);
    double total_d = base_d + chosen_d * (double)o->repeat_count + (double)o->warmup;
    uint64_t mem = physical_memory();
    if (total_d > 4294967295.0 || (mem && total_d * sizeof(struct plan_entry) > (double)mem / 4)) {
        snprintf(err, ERRMSG_LEN, "--samples %llu: the plan would hold %.3g samples, more than "
                 "fits (at most 2^32-1 and a quarter of memory); lower --samples or --warmup",
                 (unsigned long long)o->samples, total_d);
        free(grid);
        return -1;
    }
    p->n = (uint64_t)total_d;
    p->n_warmup = o->warmup;
    p->n_repeated = (uint64_t)chosen_d * o->repeat_count;
    p->e = malloc((p->n ? p->n : 1) * sizeof *p->e);
    if (!p->e) {
        snprintf(err, ERRMSG_LEN, "out of memory for a plan of %llu samples; lower --samples",
                 (unsigned long long)p->n);
        free(grid);
        return -1;
    }

    rng_t main_rng, warm_rng;
    rng_seed(&main_rng, o->seed);
    rng_seed(&warm_rng, o->seed ^ WARMUP_STREAM);

    struct plan_entry *w = p->e, *m = p->e + p->n_warmup;
    for (uint64_t j = 0; j < p->n_warmup; j++) {
        w[j].op = (uint8_t)o->ops[j % (uint64_t)o->n_ops];
        w[j].size = sp->kind == SIZES_LOGUNIFORM ? draw_loguniform(&warm_rng, sp->min, sp->max)
                                                 : fixed[j % n_fixed];
        w[j].warmup = 1;
    }
    uint64_t k = 0;
    for (int op = 0; op < o->n_ops; op++) {
        for (uint64_t i = 0; i < o->samples; i++) {
            for (uint64_t f = 0; f < per_op; f++, k++) {
                m[k].op = (uint8_t)o->ops[op];
                m[k].size = sp->kind == SIZES_LOGUNIFORM
                                ? draw_loguniform(&main_rng, sp->min, sp->max) : fixed[f];
                m[k].warmup = 0;
            }
        }
    }
    /* Repeats: a partial Fisher-Yates over the entry indices on the repeat stream picks
     * `chosen` distinct entries; their copies are appended (copy-major), then shuffled in. */
    uint64_t chosen = (uint64_t)chosen_d;
    if (chosen > 0) {
        uint32_t *idx = malloc(k * sizeof *idx);
        if (!idx) {
            snprintf(err, ERRMSG_LEN, "out of memory choosing the repeated entries; lower "
                     "--repeat-fraction or --samples");
            plan_free(p);
            free(grid);
            return -1;
        }
        rng_t rep_rng;
        rng_seed(&rep_rng, o->seed ^ REPEAT_STREAM);
        for (uint64_t i = 0; i < k; i++)
            idx[i] = (uint32_t)i;
        for (uint64_t i = 0; i < chosen; i++) {
            uint64_t j = i + rng_below(&rep_rng, k - i);
            uint32_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        for (uint64_t c = 0; c < o->repeat_count; c++)
            for (uint64_t i = 0; i < chosen; i++)
                m[k++] = m[idx[i]];
        free(idx);
    }
    if (o->order == ORDER_SHUFFLED) {
        /* Fisher-Yates: ops and sizes interleaved so that drift in time cannot alias with size. */
        for (uint64_t i = k; i > 1; i--) {
            uint64_t j = rng_below(&main_rng, i);
            struct plan_entry t = m[i - 1];
            m[i - 1] = m[j];
            m[j] = t;
        }
    } else {
        /* Blocked: per op in the order given, sizes ascending, equal entries back to back.
         * Equal (op, size) entries are identical, so an unstable sort gives the same plan. */
        for (int r = 0; r < o->n_ops; r++)
            g_op_rank[o->ops[r]] = r;
        qsort(m, k, sizeof *m, cmp_blocked);
    }

    p->hash = UINT64_C(0xCBF29CE484222325);
    for (uint64_t i = 0; i < p->n; i++) {
        fnv1a(&p->hash, p->e[i].op, 1);
        fnv1a(&p->hash, p->e[i].size, 8);
        fnv1a(&p->hash, p->e[i].warmup, 1);
    }
    free(grid);
    return 0;
}

void plan_free(struct plan *p)
{
    free(p->e);
    p->e = NULL;
}
