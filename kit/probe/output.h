/* PREFIX.samples.csv (written in blocks, fsync'ed) and PREFIX.meta.json (atomic rewrites). */
#ifndef PT2PT_OUTPUT_H
#define PT2PT_OUTPUT_H

#include <mpi.h>
#include <stdint.h>

#include "ops.h"
#include "options.h"
#include "plan.h"

struct csv_out {
    int fd;
    char *buf;            /* preallocated text for one block */
    uint64_t rows;        /* data rows written so far */
    double fsync_interval;
    double last_sync;     /* CLOCK_MONOTONIC seconds of the last fsync */
    int extended;         /* contention mode: seq is the row number, plus pair and round */
};

/* Create PREFIX.samples.csv; refuses (never truncates) when PREFIX.samples.csv or
 * PREFIX.meta.json exists. The file stays flock'ed while the probe runs. */
int csv_open(struct csv_out *c, const char *prefix, uint64_t block_rows, double fsync_interval,
             char *err);
/* Remove a samples file this run created and wrote no sample to (its meta failed). */
void csv_discard(struct csv_out *c, const char *prefix);
/* Format n samples and write them with one write() loop; fsync when `force` is set or
 * fsync_interval seconds have passed since the last one. Never called inside a timed region. */
int csv_flush(struct csv_out *c, const struct sample *s, uint64_t n, int force, char *err);
/* Append x >= 0 as printf("%.9e") would (last digit may differ by one in rare ties). */
char *format_e9(char *p, double x);
void csv_close(struct csv_out *c);

struct meta {
    const struct options *opt;
    const struct plan *plan;
    int argc;
    char **argv;
    const char *mpi_version;
    int nranks;
    const char (*hosts)[MPI_MAX_PROCESSOR_NAME]; /* processor name per rank */
    const int *places;        /* per rank: cpu, socket, core, cpu at the end (-1 unknown) */
    double timer_resolution, timer_overhead;
    char start[40], end[40];  /* ISO 8601 UTC; end empty while running */
    uint64_t samples_written;
    double loop_seconds;      /* wall time of the measurement loop, -1 while running */
    int complete;
    const char *stop_reason;  /* NULL while running */
};

/* Write PREFIX.meta.json via PREFIX.meta.json.tmp + fsync + rename. */
int meta_write(const char *prefix, const struct meta *m, char *err);
/* Current UTC time as 2026-01-01T00:00:00.000000Z. */
void iso_now(char *out, int len);

#endif
