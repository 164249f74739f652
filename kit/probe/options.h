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
    int help, version;
};

enum parse_result { PARSE_OK, PARSE_EXIT_OK, PARSE_ERROR };

const char *op_name(enum op_kind op);
/* Fill *o from argv; on PARSE_ERROR, err holds one sentence naming the option and the fix. */
enum parse_result options_parse(int argc, char **argv, struct options *o, char *err);
void options_usage(void);
/* Physical memory of this node in bytes (0 if unknown). */
uint64_t physical_memory(void);

#endif
