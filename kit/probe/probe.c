/* pt2pt-probe: raw per-message timings of MPI point-to-point calls between two ranks.
 *
 * Rank 0 times every sample and owns the output files; rank 1 is its peer. Both build the same
 * shuffled plan from the seed and compare plan hashes before measuring. Samples go to a
 * preallocated block that is written between blocks (and fsync'ed at least every
 * --fsync-interval seconds), never inside a timed region, so a run killed by Slurm keeps every
 * block written before the kill. See README.md. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "options.h"
#include "output.h"
#include "plan.h"
#include "timer.h"

#define EXIT_BAD_INPUT 2
#define EXIT_FAILURE_IO 1

static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig)
{
    g_signal = sig;
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

/* Rank as told by the launcher, so that errors found before MPI_Init print only once. */
static int launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

static void error_msg(const char *msg)
{
    fprintf(stderr, "pt2pt-probe: error: %s\n", msg);
    fflush(stderr);
}

static const char *signal_reason(int sig)
{
    return sig == SIGINT ? "signal SIGINT" : sig == SIGTERM ? "signal SIGTERM" : "signal";
}

/* All ranks learn the worst local status; rank 0 explains it. Returns the agreed status. */
static int agree(int local, const char *own_err, const char *peer_err)
{
    int rank, all = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (all && rank == 0)
        error_msg(local ? own_err : peer_err);
    return all;
}

int main(int argc, char **argv)
{
    static struct options o;
    char err[ERRMSG_LEN] = "";
    enum parse_result pr = options_parse(argc, argv, &o, err);
    if (pr != PARSE_OK) {
        /* Every rank sees the same argv, so every rank stops here, before MPI_Init. */
        if (launcher_rank() == 0) {
            if (pr == PARSE_ERROR)
                error_msg(err);
            else if (o.help)
                options_usage();
            else
                printf("pt2pt-probe %s\n", PROBE_VERSION);
        }
        return pr == PARSE_ERROR ? EXIT_BAD_INPUT : 0;
    }

    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (rank == 0) {
            snprintf(err, sizeof err, "needs exactly 2 MPI ranks, got %d; start it with "
                     "'mpirun -np 2' or 'srun -n 2'", nranks);
            error_msg(err);
        }
        MPI_Finalize();
        return EXIT_BAD_INPUT;
    }
    install_handlers();

    /* Plan and buffers on both ranks; any failure stops both with exit code 2. */
    struct plan plan = {NULL, 0, 0, 0};
    int st = plan_build(&o, &plan, err) ? 1 : 0;
    size_t bytes = o.sizes.max ? (size_t)o.sizes.max : 1;
    struct op_ctx ctx = {rank, MPI_COMM_WORLD, NULL, NULL, NULL, o.window, o.inject_delay_us,
                         timer_get(o.timer)};
    struct sample *rec = NULL;
    if (!st) {
        ctx.sbuf = malloc(bytes);
        ctx.rbuf = malloc(bytes);
        ctx.reqs = malloc((size_t)o.window * sizeof *ctx.reqs);
        rec = malloc((size_t)o.flush_every * sizeof *rec);
        if (!ctx.sbuf || !ctx.rbuf || !ctx.reqs || !rec) {
            snprintf(err, sizeof err, "--sizes '%s': cannot allocate 2 buffers of %zu B; lower "
                     "MAX", o.sizes.text, bytes);
            st = 1;
        } else {
            /* Touch every page now so that no page fault lands in a timed region. */
            memset(ctx.sbuf, 0xA5, bytes);
            memset(ctx.rbuf, 0x5A, bytes);
            memset(rec, 0, (size_t)o.flush_every * sizeof *rec);
        }
    }
    if (agree(st, err, "rank 1 could not build its plan or allocate its buffers "
              "(see its limits); lower --sizes MAX or --samples")) {
        MPI_Finalize();
        return EXIT_BAD_INPUT;
    }

    unsigned long long hashes[2] = {0, 0}, mine = plan.hash;
    MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, hashes, 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    if (hashes[0] != hashes[1]) {
        if (rank == 0) {
            snprintf(err, sizeof err, "plan mismatch: rank 0 has plan hash %016llx, rank 1 has "
                     "%016llx; start both ranks with identical --op/--sizes/--samples/--seed/"
                     "--warmup and the same probe build", hashes[0], hashes[1]);
            error_msg(err);
        }
        MPI_Finalize();
        return EXIT_BAD_INPUT;
    }

    char names[2][MPI_MAX_PROCESSOR_NAME], me[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    memset(me, 0, sizeof me);
    MPI_Get_processor_name(me, &len);
    MPI_Gather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(version, &len);

    struct meta meta;
    memset(&meta, 0, sizeof meta);
    meta.opt = &o;
    meta.plan = &plan;
    meta.argc = argc;
    meta.argv = argv;
    meta.mpi_version = version;
    meta.hosts[0] = names[0];
    meta.hosts[1] = names[1];
    meta.loop_seconds = -1;
    struct csv_out csv = {-1, NULL, 0, 0.0, 0.0};
    st = 0;
    if (rank == 0) {
        meta.timer_resolution = timer_resolution(o.timer);
        meta.timer_overhead = timer_overhead(ctx.now);
        iso_now(meta.start, sizeof meta.start);
        st = csv_open(&csv, o.output, o.flush_every, o.fsync_interval, err) ||
             meta_write(o.output, &meta, err);
    }
    MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (st) {
        if (rank == 0)
            error_msg(err);
        MPI_Finalize();
        return EXIT_BAD_INPUT;
    }

    /* Measure. Between blocks both ranks agree whether to go on: 0 yes, 1 --max-seconds hit,
     * 100+sig a signal arrived. Within a block only rank 0 reacts to a signal: it drops the
     * sample during which it arrived (signal delivery perturbed it), flushes, rewrites the meta
     * and aborts the job so that rank 1 cannot hang. */
    MPI_Barrier(MPI_COMM_WORLD);
    double t_loop = mono_now();
    uint64_t i = 0;
    int stop = 0;
    while (i < plan.n) {
        int local = g_signal ? 100 + g_signal
                    : (rank == 0 && o.max_seconds > 0 && mono_now() - t_loop >= o.max_seconds);
        MPI_Allreduce(&local, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (stop)
            break;
        uint64_t n = plan.n - i < o.flush_every ? plan.n - i : o.flush_every, k = 0;
        int interrupted = 0;
        while (k < n) {
            op_run(&ctx, &plan.e[i + k], &rec[k]);
            rec[k].seq = i + k;
            if (rank == 0 && g_signal) {
                interrupted = g_signal; /* the signal landed in this sample: drop it */
                break;
            }
            k++;
        }
        if (rank == 0 && csv_flush(&csv, rec, k, interrupted, err)) {
            error_msg(err);
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE_IO);
        }
        i += k;
        if (interrupted) {
            meta.loop_seconds = mono_now() - t_loop;
            iso_now(meta.end, sizeof meta.end);
            meta.samples_written = csv.rows;
            meta.stop_reason = signal_reason(interrupted);
            if (meta_write(o.output, &meta, err))
                error_msg(err);
            csv_close(&csv);
            fprintf(stderr, "pt2pt-probe: stopped by %s after %llu of %llu samples; "
                    "%s.samples.csv holds them all\n", meta.stop_reason,
                    (unsigned long long)csv.rows, (unsigned long long)plan.n, o.output);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 128 + interrupted);
        }
    }

    int rc = 0;
    if (rank == 0) {
        meta.loop_seconds = mono_now() - t_loop;
        if (csv_flush(&csv, rec, 0, 1, err)) { /* the final fsync */
            error_msg(err);
            rc = EXIT_FAILURE_IO;
        }
        iso_now(meta.end, sizeof meta.end);
        meta.samples_written = csv.rows;
        meta.complete = i == plan.n;
        meta.stop_reason = stop == 0 ? "done" : stop == 1 ? "max-seconds"
                                                          : signal_reason(stop - 100);
        csv_close(&csv);
        if (meta_write(o.output, &meta, err)) {
            error_msg(err);
            rc = EXIT_FAILURE_IO;
        }
        if (stop == 1)
            fprintf(stderr, "pt2pt-probe: --max-seconds %g reached after %llu of %llu samples\n",
                    o.max_seconds, (unsigned long long)i, (unsigned long long)plan.n);
    }
    if (stop >= 100)
        rc = 128 + (stop - 100);
    free(ctx.sbuf);
    free(ctx.rbuf);
    free(ctx.reqs);
    free(rec);
    plan_free(&plan);
    MPI_Finalize();
    return rc;
}
