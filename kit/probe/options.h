/* Command-line options of pt2pt-probe: parsing and validation (no MPI needed). */
#ifndef PT2PT_OPTIONS_H
#define PT2PT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "timer.h"

#define PROBE_VERSION "0.1.0"
#define MAX_OPS 6
#define MAX_LIST_SIZES 4096
#define ERRMSG_LEN 4608

enum op_kind { OP_PINGPONG, OP_SEND, OP_RECV, OP_ISEND, OP_IRECV, OP_STREAM };

enum sizes_kind { SIZES_LOGUNIFORM, SIZES_GRID, SIZES_LIST };

/* Order of the measured entries: shuffled (default) or blocked (per op, sizes ascending, every
 * repetition of a size back to back, as osu_latency and most benchmarks sweep). */
enum order_kind { ORDER_SHUFFLED, ORDER_BLOCKED };

#define MAX_PAIRS 4096

struct size_spec {
    enum sizes_kind kind;
    const char *text;          /* the --sizes argument as given */
    uint64_t min, max;         /* loguniform and grid bounds; list: smallest and largest */
    double factor;             /* grid only */
    size_t n_list;             /* list only */
    uint64_t list[MAX_LIST_SIZES];
};

struct options {
    enum op_kind ops[MAX_OPS];
    int n_ops;
    struct size_spec sizes;
    uint64_t samples;          /* per op: draws (loguniform) or repetitions of each size */
    uint64_t seed;
    uint64_t warmup;
    enum timer_kind timer;
    const char *output;
    double max_seconds;        /* 0: no limit */
    uint64_t flush_every;
    double fsync_interval;     /* seconds between fsyncs of the CSV; 0: after every block */
    int window;                /* stream op: messages per window */
    unsigned long inject_delay_us;
    const char *inject_delay_host; /* NULL: the peer (role 1) delays; else ranks on this host */
    int inject_delay_sleep;    /* sleep instead of busy-waiting */
    enum order_kind order;
    double repeat_fraction;    /* share of measured entries measured again (0: none) */
    uint64_t repeat_count;     /* extra measurements of each repeated entry */
    int n_pairs;               /* concurrent pairs (1: the classic two-rank probe) */
    int pair_a[MAX_PAIRS], pair_b[MAX_PAIRS]; /* initiator and peer rank of each pair */
    int explicit_pairs;        /* --pairs gave a list of rank pairs, not a count */
    int contention;            /* --pairs given: barrier per round, pair/round CSV columns */
    int bidirectional;         /* stream: both ranks of a pair send a window at once */
    int help, version;
};

enum parse_result { PARSE_OK, PARSE_EXIT_OK, PARSE_ERROR };

const char *op_name(enum op_kind op);
const char *order_name(enum order_kind order);
/* Fill *o from argv; on PARSE_ERROR, err holds one sentence naming the option and the fix. */
enum parse_result options_parse(int argc, char **argv, struct options *o, char *err);
void options_usage(void);
/* Physical memory of this node in bytes (0 if unknown). */
uint64_t physical_memory(void);

#endif
