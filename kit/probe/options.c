#include "options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const OP_NAMES[MAX_OPS] = {"pingpong", "send", "recv", "isend", "irecv", "stream"};

const char *op_name(enum op_kind op)
{
    return OP_NAMES[op];
}

const char *order_name(enum order_kind order)
{
    return order == ORDER_BLOCKED ? "blocked" : "shuffled";
}

void options_usage(void)
{
    printf(
        "Usage: mpirun -np 2 pt2pt-probe [options]\n"
        "Times MPI point-to-point calls between ranks 0 and 1, one CSV row per sample.\n"
        "\n"
        "  --op LIST            ops, comma-separated or repeated: pingpong, send, recv, isend,\n"
        "                       irecv, stream (default pingpong)\n"
        "  --sizes SPEC         loguniform:MIN:MAX  | grid:MIN:MAX:FACTOR | list:A,B,C\n"
        "                       bytes, suffixes K/M/G = 1024^1..3, 0 allowed (default loguniform:0:4M)\n"
        "  --samples N          per op: sizes drawn (loguniform) or repetitions of each size\n"
        "                       (grid, list) (default 1000)\n"
        "  --seed S             seed of the plan, the same on both ranks (default 1)\n"
        "  --warmup N           warm-up samples before the plan, written with warmup=1 (default 10)\n"
        "  --timer mpi|monotonic  MPI_Wtime or clock_gettime(CLOCK_MONOTONIC) (default mpi)\n"
        "  --output PREFIX      writes PREFIX.samples.csv and PREFIX.meta.json (default probe)\n"
        "  --max-seconds T      stop cleanly after T seconds, checked between blocks (default: none)\n"
        "  --flush-every N      samples per block written to the CSV (default 4096)\n"
        "  --fsync-interval T   fsync the CSV after a block if T seconds passed since the last\n"
        "                       fsync, and at the end; 0 = after every block (default 1)\n"
        "  --window N           messages per stream window (default 64)\n"
        "  --inject-delay-us N  rank 1 busy-waits N us before each pingpong reply: a known\n"
        "                       constant latency for checking the analysis (default 0)\n"
        "  --inject-delay-host H  the delay is made by the ranks running on host H (the\n"
        "                       processor name), before each pingpong message they send,\n"
        "                       whichever their role: a slow node in a multi-node campaign\n"
        "  --inject-delay-sleep  wait by sleeping (no CPU, timer slack 1 ns) instead of\n"
        "                       busy-waiting: on a loaded machine a spinning rank is preempted\n"
        "  --order shuffled|blocked  measured entries shuffled (default), or blocked: per op,\n"
        "                       sizes ascending, repetitions of a size back to back (as OSU)\n"
        "  --repeat-fraction F  measure a random share F (0..1) of the planned entries again,\n"
        "                       interleaved in the plan (per-size variance) (default 0)\n"
        "  --repeat-count R     extra measurements of each repeated entry (default 1)\n"
        "  --pairs K|LIST       K concurrent pairs (2K ranks; rank i times against rank i+K), or\n"
        "                       LIST of initiator:peer rank pairs like 0:2,1:3; every sample is\n"
        "                       one round, all pairs start together after a barrier (default 1)\n"
        "  --bidirectional      stream: both ranks of a pair send a window to each other at once\n"
        "  --help, --version\n"
        "\n"
        "Exit codes: 0 done (or stopped by --max-seconds), 2 bad input, 1 I/O or MPI failure,\n"
        "128+signal when stopped by SIGTERM/SIGINT (whole blocks kept, meta complete=false).\n");
}

static void set_err(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ERRMSG_LEN, fmt, ap);
    va_end(ap);
}

/* Unsigned decimal with an optional K/M/G suffix (powers of 1024); the whole string must parse. */
static int parse_bytes(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    uint64_t mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = UINT64_C(1) << 10; end++; break;
    case 'M': case 'm': mult = UINT64_C(1) << 20; end++; break;
    case 'G': case 'g': mult = UINT64_C(1) << 30; end++; break;
    default: break;
    }
    if (*end != '\0' || (v != 0 && (uint64_t)v > UINT64_MAX / mult))
        return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

static int parse_count(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Split `text` at ':' into at most max fields of a scratch copy; returns the field count. */
static int split(char *copy, char sep, char **fields, int max)
{
    int n = 0;
    fields[n++] = copy;
    for (char *p = copy; *p; p++) {
        if (*p == sep) {
            if (n == max)
                return max + 1;
            *p = '\0';
            fields[n++] = p + 1;
        }
    }
    return n;
}

static int parse_sizes(const char *text, struct size_spec *sp, char *err)
{
    static char copy[8192];
    char *f[5];
    if (strlen(text) >= sizeof copy) {
        set_err(err, "--sizes: the specification is longer than %zu characters", sizeof copy - 1);
        return -1;
    }
    strcpy(copy, text);
    sp->text = text;
    int n = split(copy, ':', f, 4);
    const char *usage = "use loguniform:MIN:MAX, grid:MIN:MAX:FACTOR or list:A,B,C "
                        "(bytes, suffixes K/M/G)";
    if (strcmp(f[0], "loguniform") == 0 || strcmp(f[0], "grid") == 0) {
        int grid = f[0][0] == 'g';
        if (n != (grid ? 4 : 3)) {
            set_err(err, "--sizes '%s': wrong number of fields; %s", text, usage);
            return -1;
        }
        if (parse_bytes(f[1], &sp->min) || parse_bytes(f[2], &sp->max)) {
            set_err(err, "--sizes '%s': MIN and MAX must be byte counts like 0, 512, 64K or 4M",
                    text);
            return -1;
        }
        if (sp->min > sp->max) {
            set_err(err, "--sizes '%s': MIN (%llu) > MAX (%llu); give MIN <= MAX", text,
                    (unsigned long long)sp->min, (unsigned long long)sp->max);
            return -1;
        }
        sp->kind = grid ? SIZES_GRID : SIZES_LOGUNIFORM;
        if (grid) {
            char *end;
            errno = 0;
            sp->factor = strtod(f[3], &end);
            if (errno || *end != '\0' || !(sp->factor > 1.0) || !isfinite(sp->factor)) {
                set_err(err, "--sizes '%s': FACTOR must be a number > 1, e.g. 2 or 1.5", text);
                return -1;
            }
        }
        return 0;
    }
    if (strcmp(f[0], "list") == 0) {
        if (n != 2 || f[1][0] == '\0') {
            set_err(err, "--sizes '%s': %s", text, usage);
            return -1;
        }
        char *items[MAX_LIST_SIZES];
        int m = split(f[1], ',', items, MAX_LIST_SIZES);
        if (m > MAX_LIST_SIZES) {
            set_err(err, "--sizes '%s': more than %d sizes in the list", text, MAX_LIST_SIZES);
            return -1;
        }
        sp->kind = SIZES_LIST;
        sp->n_list = (size_t)m;
        sp->min = UINT64_MAX;
        sp->max = 0;
        for (int i = 0; i < m; i++) {
            if (parse_bytes(items[i], &sp->list[i])) {
                set_err(err, "--sizes '%s': '%s' is not a byte count like 0, 512, 64K or 4M",
                        text, items[i]);
                return -1;
            }
            if (sp->list[i] < sp->min)
                sp->min = sp->list[i];
            if (sp->list[i] > sp->max)
                sp->max = sp->list[i];
        }
        return 0;
    }
    set_err(err, "--sizes '%s': unknown kind '%s'; %s", text, f[0], usage);
    return -1;
}

static int parse_ops(const char *text, struct options *o, char *err)
{
    char copy[256];
    char *items[MAX_OPS + 1];
    if (strlen(text) >= sizeof copy) {
        set_err(err, "--op '%.40s...': too long", text);
        return -1;
    }
    strcpy(copy, text);
    int n = split(copy, ',', items, MAX_OPS);
    for (int i = 0; i < n && i < MAX_OPS + 1; i++) {
        int found = -1;
        for (int k = 0; k < MAX_OPS; k++)
            if (strcmp(items[i], OP_NAMES[k]) == 0)
                found = k;
        if (found < 0) {
            set_err(err, "--op: unknown operation '%s'; choose from pingpong, send, recv, isend, "
                    "irecv, stream", items[i]);
            return -1;
        }
        for (int k = 0; k < o->n_ops; k++) {
            if (o->ops[k] == (enum op_kind)found) {
                set_err(err, "--op: '%s' is given twice; name each operation once", items[i]);
                return -1;
            }
        }
        o->ops[o->n_ops++] = (enum op_kind)found;
    }
    return 0;
}

/* --pairs K (rank i with i+K) or initiator:peer,... ; rank counts are checked after MPI_Init. */
static int parse_pairs(const char *text, struct options *o, char *err)
{
    uint64_t k;
    o->contention = 1;
    if (!strchr(text, ':')) {
        if (parse_count(text, &k) || k < 1 || k > MAX_PAIRS) {
            set_err(err, "--pairs '%s': give a number of pairs between 1 and %d, or a list of "
                    "initiator:peer ranks like 0:2,1:3", text, MAX_PAIRS);
            return -1;
        }
        o->n_pairs = (int)k;
        o->explicit_pairs = 0;
        for (int i = 0; i < o->n_pairs; i++) {
            o->pair_a[i] = i;
            o->pair_b[i] = i + o->n_pairs;
        }
        return 0;
    }
    static char copy[8 * MAX_PAIRS * 2 + 64];
    char *items[MAX_PAIRS + 1];
    if (strlen(text) >= sizeof copy) {
        set_err(err, "--pairs: the list is too long");
        return -1;
    }
    strcpy(copy, text);
    int n = split(copy, ',', items, MAX_PAIRS);
    if (n > MAX_PAIRS) {
        set_err(err, "--pairs: more than %d pairs", MAX_PAIRS);
        return -1;
    }
    int used[2 * MAX_PAIRS];
    memset(used, 0, sizeof used);
    for (int i = 0; i < n; i++) {
        char *colon = strchr(items[i], ':');
        uint64_t a, b;
        if (!colon) {
            set_err(err, "--pairs '%s': '%s' is not initiator:peer; write pairs like 0:2,1:3",
                    text, items[i]);
            return -1;
        }
        *colon = '\0';
        if (parse_count(items[i], &a) || parse_count(colon + 1, &b) || a >= 2 * MAX_PAIRS ||
            b >= 2 * MAX_PAIRS || a == b || used[a] || used[b]) {
            set_err(err, "--pairs '%s': pair %d must name two different ranks, each rank in at "
                    "most one pair", text, i);
            return -1;
        }
        used[a] = used[b] = 1;
        o->pair_a[i] = (int)a;
        o->pair_b[i] = (int)b;
    }
    o->n_pairs = n;
    o->explicit_pairs = 1;
    return 0;
}

uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* Checks that need the whole option set (sizes against memory and MPI's int counts). */
static int validate(struct options *o, char *err)
{
    if (o->n_ops == 0)
        o->ops[o->n_ops++] = OP_PINGPONG;
    /* Two ranks per node in the worst case, each with a send and a receive buffer. */
    uint64_t mem = physical_memory(), need = o->sizes.max;
    if (mem && (need > mem / 4)) {
        set_err(err, "--sizes '%s': the largest message (%llu B) does not fit in memory: "
                "2 ranks x 2 buffers need %.1f GiB, this node has %.1f GiB; lower MAX",
                o->sizes.text, (unsigned long long)need, 4.0 * (double)need / 1073741824.0,
                (double)mem / 1073741824.0);
        return -1;
    }
    if (need > (uint64_t)INT_MAX) {
        set_err(err, "--sizes '%s': the largest message (%llu B) exceeds %d B, the largest "
                "MPI int count; lower MAX", o->sizes.text, (unsigned long long)need, INT_MAX);
        return -1;
    }
    if (o->samples == 0) {
        set_err(err, "--samples must be at least 1");
        return -1;
    }
    if (o->flush_every == 0 || o->flush_every > 1000000) {
        set_err(err, "--flush-every must be between 1 and 1000000 samples");
        return -1;
    }
    if (o->bidirectional && !(o->n_ops == 1 && o->ops[0] == OP_STREAM)) {
        set_err(err, "--bidirectional applies to the stream op only; give --op stream");
        return -1;
    }
    if (o->window < 1) {
        set_err(err, "--window must be between 1 and 1000000 messages");
        return -1;
    }
    if (o->repeat_count < 1 || o->repeat_count > 1000) {
        set_err(err, "--repeat-count must be between 1 and 1000");
        return -1;
    }
    if (o->inject_delay_us > 10000000UL) {
        set_err(err, "--inject-delay-us must be at most 10000000 (10 s)");
        return -1;
    }
    return 0;
}

enum parse_result options_parse(int argc, char **argv, struct options *o, char *err)
{
    memset(o, 0, sizeof *o);
    o->samples = 1000;
    o->seed = 1;
    o->warmup = 10;
    o->timer = TIMER_MPI;
    o->output = "probe";
    o->flush_every = 4096;
    o->fsync_interval = 1.0;
    o->window = 64;
    o->order = ORDER_SHUFFLED;
    o->repeat_count = 1;
    o->n_pairs = 1;
    o->pair_a[0] = 0;
    o->pair_b[0] = 1;
    const char *sizes = "loguniform:0:4M";

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            o->help = 1;
            return PARSE_EXIT_OK;
        }
        if (strcmp(arg, "--version") == 0) {
            o->version = 1;
            return PARSE_EXIT_OK;
        }
        if (strcmp(arg, "--bidirectional") == 0) {
            o->bidirectional = 1;
            continue;
        }
        if (strcmp(arg, "--inject-delay-sleep") == 0) {
            o->inject_delay_sleep = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            set_err(err, "unexpected argument '%s'; options start with --", arg);
            return PARSE_ERROR;
        }
        /* --name=value or --name value */
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof name) {
            set_err(err, "unknown option '%.60s'; see --help", arg);
            return PARSE_ERROR;
        }
        memcpy(name, arg, len);
        name[len] = '\0';
        static const char *const known[] = {"--op", "--sizes", "--samples", "--seed", "--warmup",
                                            "--timer", "--output", "--max-seconds",
                                            "--flush-every", "--fsync-interval", "--window",
                                            "--inject-delay-us", "--inject-delay-host", "--order",
                                            "--repeat-fraction", "--repeat-count", "--pairs"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            is_known |= strcmp(name, known[k]) == 0;
        if (!is_known) {
            set_err(err, "unknown option '%s'; see --help", name);
            return PARSE_ERROR;
        }
        if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
            value = argv[++i];
        } else {
            set_err(err, "option %s needs a value; see --help", name);
            return PARSE_ERROR;
        }

        uint64_t u;
        if (strcmp(name, "--op") == 0) {
            if (parse_ops(value, o, err))
                return PARSE_ERROR;
        } else if (strcmp(name, "--sizes") == 0) {
            sizes = value;
        } else if (strcmp(name, "--timer") == 0) {
            if (strcmp(value, "mpi") == 0) {
                o->timer = TIMER_MPI;
            } else if (strcmp(value, "monotonic") == 0) {
                o->timer = TIMER_MONOTONIC;
            } else {
                set_err(err, "--timer '%s': choose mpi or monotonic", value);
                return PARSE_ERROR;
            }
        } else if (strcmp(name, "--inject-delay-host") == 0) {
            if (value[0] == '\0' || strlen(value) >= 256) {
                set_err(err, "--inject-delay-host: give a host name (at most 255 characters)");
                return PARSE_ERROR;
            }
            o->inject_delay_host = value;
        } else if (strcmp(name, "--order") == 0) {
            if (strcmp(value, "shuffled") == 0) {
                o->order = ORDER_SHUFFLED;
            } else if (strcmp(value, "blocked") == 0) {
                o->order = ORDER_BLOCKED;
            } else {
                set_err(err, "--order '%s': choose shuffled or blocked", value);
                return PARSE_ERROR;
            }
        } else if (strcmp(name, "--repeat-fraction") == 0) {
            char *end;
            errno = 0;
            o->repeat_fraction = strtod(value, &end);
            if (errno || *end != '\0' || !(o->repeat_fraction >= 0 && o->repeat_fraction <= 1)) {
                set_err(err, "--repeat-fraction '%s': give a share between 0 and 1, e.g. 0.1",
                        value);
                return PARSE_ERROR;
            }
        } else if (strcmp(name, "--pairs") == 0) {
            if (parse_pairs(value, o, err))
                return PARSE_ERROR;
        } else if (strcmp(name, "--output") == 0) {
            if (value[0] == '\0') {
                set_err(err, "--output needs a non-empty PREFIX");
                return PARSE_ERROR;
            }
            o->output = value;
        } else if (strcmp(name, "--max-seconds") == 0) {
            char *end;
            errno = 0;
            o->max_seconds = strtod(value, &end);
            if (errno || *end != '\0' || !(o->max_seconds > 0) || !isfinite(o->max_seconds)) {
                set_err(err, "--max-seconds '%s': give a number of seconds > 0", value);
                return PARSE_ERROR;
            }
        } else if (strcmp(name, "--fsync-interval") == 0) {
            char *end;
            errno = 0;
            o->fsync_interval = strtod(value, &end);
            if (errno || *end != '\0' || !(o->fsync_interval >= 0) ||
                !isfinite(o->fsync_interval)) {
                set_err(err, "--fsync-interval '%s': give a number of seconds >= 0", value);
                return PARSE_ERROR;
            }
        } else {
            if (parse_count(value, &u)) {
                set_err(err, "%s '%s': give a non-negative whole number", name, value);
                return PARSE_ERROR;
            }
            if (strcmp(name, "--samples") == 0) {
                o->samples = u;
            } else if (strcmp(name, "--seed") == 0) {
                o->seed = u;
            } else if (strcmp(name, "--warmup") == 0) {
                o->warmup = u;
            } else if (strcmp(name, "--flush-every") == 0) {
                o->flush_every = u;
            } else if (strcmp(name, "--repeat-count") == 0) {
                o->repeat_count = u;
            } else if (strcmp(name, "--window") == 0) {
                o->window = u > 1000000 ? 0 : (int)u;
            } else {
                o->inject_delay_us = u > 10000000UL ? 10000001UL : (unsigned long)u;
            }
        }
    }
    if (parse_sizes(sizes, &o->sizes, err) || validate(o, err))
        return PARSE_ERROR;
    return PARSE_OK;
}
