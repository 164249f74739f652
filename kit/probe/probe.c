/* pt2pt-probe: raw per-message timings of MPI point-to-point calls between two ranks.
 *
 * Rank 0 times every sample and owns the output files; rank 1 is its peer. Both build the same
 * shuffled plan from the seed and compare plan hashes before measuring. Samples go to a
 * preallocated block that is written between blocks (and fsync'ed at least every
 * --fsync-interval seconds), never inside a timed region, so a run killed by Slurm keeps every
 * block written before the kill. See README.md. */
#include <mpi.h>
#include <signal.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cpu.h"
#include "ops.h"
#include "options.h"
#include "output.h"
#include "plan.h"
#include "timer.h"

#define EXIT_BAD_INPUT 2
#define EXIT_FAILURE_IO 1
#define TAG_COLLECT 3 /* blocks of samples sent to rank 0 (ops use tags 1 and 2) */
#define TAG_CONNECT 4 /* connect_pair */

static volatile sig_atomic_t g_signal = 0;

static pid_t g_parent = 0;

/* Seconds a rank keeps going after its launcher died: enough to flush the block and rewrite
 * the meta (complete: false), then SIGALRM's default action ends it even if an MPI call
 * waits for a peer that is gone. */
#define ORPHAN_GRACE_S 10

static void on_signal(int sig)
{
    g_signal = sig;
    if (g_parent && getppid() != g_parent)
        alarm(ORPHAN_GRACE_S); /* the launcher is gone (PR_SET_PDEATHSIG sent this) */
}

/* The ranks die with their launcher: with Open MPI a SIGKILL'ed mpirun left both ranks
 * running, and a surviving rank later marked its run complete. The parent's death sends
 * SIGTERM, handled like any SIGTERM (whole blocks kept, meta complete=false). */
static void die_with_parent(void)
{
#ifdef __linux__
    g_parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != g_parent) /* it died before the call */
        raise(SIGTERM);
#endif
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

/* Page-aligned buffer, as osu_latency allocates them. malloc's 16-byte offset from the page
 * makes a 64 KiB message span 17 pages instead of 16, and over shared memory (vader's CMA
 * single copy) that costs 3-8 % at 64 KiB; from the heap (MAX <= 128 KiB) it also sometimes
 * put a whole run in a 4x slower mode. See README.md, "Fidelity against OSU". */
static char *page_alloc(size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p = NULL;
    if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytes))
        return NULL;
    return p;
}

/* Messages each rank sends its peer before any other traffic: more than Open MPI's shared-memory
 * fast-box threshold (btl_vader_fbox_threshold / btl_sm_fbox_threshold, 16 sends). */
#define CONNECT_ROUNDS 32

/* Connect each pair with zero-byte ping-pongs before the probe's own set-up exchanges (plan
 * hashes, host names, places). Over Open MPI's vader the per-peer fast box, the ring that
 * carries every small message, is carved out of the sender's shared segment on its 16th send
 * to that peer, after whatever fragments earlier traffic allocated there. With the 256-B
 * host-name gather first, the probe's 8 B samples sat at one level (0.36 us on the test VM)
 * where osu_latency's alternate message by message between 0.25 and 0.47 us (same mean);
 * connected first, the probe's alternate too. Untimed, not recorded. README.md, "Fidelity". */
static void connect_pair(int role, int peer)
{
    for (int k = 0; k < CONNECT_ROUNDS; k++) {
        if (role == 0) {
            MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_CONNECT, MPI_COMM_WORLD);
            MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_CONNECT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_CONNECT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_CONNECT, MPI_COMM_WORLD);
        }
    }
}

/* Contention mode, after each block: every initiator other than rank 0 sends its block of
 * samples to rank 0, which writes them pair by pair (rank 0's own pair was written already).
 * Outside every timed region; all initiators hold the same number of samples. */
static void collect_pairs(const struct options *o, int rank, int role, const struct sample *rec,
                          struct sample *rec_in, uint64_t k, struct csv_out *csv)
{
    char err[ERRMSG_LEN];
    int bytes = (int)(k * sizeof *rec);
    for (int p = 0; p < o->n_pairs; p++) {
        int src = o->pair_a[p];
        if (src == 0)
            continue;
        if (rank == src && role == 0) {
            MPI_Send(rec, bytes, MPI_BYTE, 0, TAG_COLLECT, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Recv(rec_in, bytes, MPI_BYTE, src, TAG_COLLECT, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            if (csv_flush(csv, rec_in, k, 0, err)) {
                error_msg(err);
                MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE_IO);
            }
        }
    }
}

int main(int argc, char **argv)
{
    static struct options o;
    char err[ERRMSG_LEN] = "";
    enum parse_result pr = options_parse(argc, argv, &o, err);
    if (pr != PARSE_OK) {
        /* Every rank sees the same argv, so every rank stops here, before MPI_Init. Rank 0
         * alone says why and exits 2; the others exit 0: a launcher aborts the job on the
         * first non-zero exit, and SIGTERM would kill a rank 0 that has not printed yet. */
        int first = launcher_rank() == 0;
        if (first) {
            if (pr == PARSE_ERROR)
                error_msg(err);
            else if (o.help)
                options_usage();
            else
                printf("pt2pt-probe %s\n", PROBE_VERSION);
        }
        return pr == PARSE_ERROR && first ? EXIT_BAD_INPUT : 0;
    }

    install_handlers();
    die_with_parent();
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int max_rank = 0;
    for (int p = 0; p < o.n_pairs; p++) {
        max_rank = o.pair_a[p] > max_rank ? o.pair_a[p] : max_rank;
        max_rank = o.pair_b[p] > max_rank ? o.pair_b[p] : max_rank;
    }
    if (nranks != 2 * o.n_pairs || max_rank >= nranks) {
        if (rank == 0) {
            if (!o.contention)
                snprintf(err, sizeof err, "needs exactly 2 MPI ranks, got %d; start it with "
                         "'mpirun -np 2' or 'srun -n 2' (or give --pairs K for 2K ranks)",
                         nranks);
            else
                snprintf(err, sizeof err, "--pairs: %d pair(s) need exactly %d MPI ranks "
                         "numbered 0..%d, got %d ranks; start 2K ranks for K pairs",
                         o.n_pairs, 2 * o.n_pairs, 2 * o.n_pairs - 1, nranks);
            error_msg(err);
        }
        MPI_Finalize();
        return EXIT_BAD_INPUT;
    }

    /* This rank's pair and role: every rank is in exactly one pair (checked above). */
    int my_pair = 0, role = 0, peer = 0;
    for (int p = 0; p < o.n_pairs; p++) {
        if (o.pair_a[p] == rank || o.pair_b[p] == rank) {
            my_pair = p;
            role = o.pair_a[p] == rank ? 0 : 1;
            peer = role == 0 ? o.pair_b[p] : o.pair_a[p];
        }
    }
    connect_pair(role, peer);
    struct cpu_place where = cpu_place_now();

    /* Plan and buffers on every rank; any failure stops all with exit code 2. */
    struct plan plan = {NULL, 0, 0, 0, 0};
    int st = plan_build(&o, &plan, err) ? 1 : 0;
    size_t bytes = o.sizes.max ? (size_t)o.sizes.max : 1;
    struct op_ctx ctx = {role, peer, MPI_COMM_WORLD, NULL, NULL, NULL, o.window,
                         o.bidirectional, o.inject_delay_us, 0, timer_get(o.timer)};
    struct sample *rec = NULL, *rec_in = NULL;
    if (!st) {
        ctx.sbuf = page_alloc(bytes);
        ctx.rbuf = page_alloc(bytes);
        ctx.reqs = malloc(2 * (size_t)o.window * sizeof *ctx.reqs);
        rec = malloc((size_t)o.flush_every * sizeof *rec);
        rec_in = rank == 0 && o.contention ? malloc((size_t)o.flush_every * sizeof *rec) : NULL;
        if (!ctx.sbuf || !ctx.rbuf || !ctx.reqs || !rec || (rank == 0 && o.contention && !rec_in)) {
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
    if (agree(st, err, "another rank could not build its plan or allocate its buffers "
              "(see its limits); lower --sizes MAX or --samples")) {
        MPI_Finalize();
        return EXIT_BAD_INPUT;
    }

    unsigned long long mine = plan.hash, *hashes = malloc((size_t)nranks * sizeof *hashes);
    char (*names)[MPI_MAX_PROCESSOR_NAME] = malloc((size_t)nranks * sizeof *names);
    int *places = malloc((size_t)nranks * 4 * sizeof *places);
    if (!hashes || !names || !places) {
        error_msg("out of memory for the per-rank tables");
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE_IO);
    }
    MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, hashes, 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    for (int r = 1; r < nranks; r++) {
        if (hashes[r] != hashes[0]) {
            if (rank == 0) {
                snprintf(err, sizeof err, "plan mismatch: rank 0 has plan hash %016llx, rank %d "
                         "has %016llx; start every rank with identical --op/--sizes/--samples/"
                         "--seed/--warmup/--order/--repeat-fraction and the same probe build",
                         hashes[0], r, hashes[r]);
                error_msg(err);
            }
            MPI_Finalize();
            return EXIT_BAD_INPUT;
        }
    }

    char me[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    memset(me, 0, sizeof me);
    MPI_Get_processor_name(me, &len);
    /* Who injects the delay: the peer by default, else every rank on the named host. */
    if (o.inject_delay_host)
        ctx.inject_delay_us = strcmp(me, o.inject_delay_host) == 0 ? o.inject_delay_us : 0;
    else
        ctx.inject_delay_us = role == 1 ? o.inject_delay_us : 0;
    ctx.inject_sleep = o.inject_delay_sleep;
    if (ctx.inject_sleep && ctx.inject_delay_us)
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* wake at the deadline, not 50 us on */
    MPI_Gather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    int place[4] = {where.cpu, where.socket, where.core, -1};
    MPI_Gather(place, 4, MPI_INT, places, 4, MPI_INT, 0, MPI_COMM_WORLD);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(version, &len);

    struct meta meta;
    memset(&meta, 0, sizeof meta);
    meta.opt = &o;
    meta.plan = &plan;
    meta.argc = argc;
    meta.argv = argv;
    meta.mpi_version = version;
    meta.nranks = nranks;
    meta.hosts = (const char(*)[MPI_MAX_PROCESSOR_NAME])names;
    meta.places = places;
    meta.loop_seconds = -1;
    struct csv_out csv = {-1, NULL, 0, 0.0, 0.0, o.contention};
    st = 0;
    if (rank == 0) {
        meta.timer_resolution = timer_resolution(o.timer);
        meta.timer_overhead = timer_overhead(ctx.now);
        iso_now(meta.start, sizeof meta.start);
        st = csv_open(&csv, o.output, o.flush_every, o.fsync_interval, err);
        if (!st && meta_write(o.output, &meta, err)) {
            csv_discard(&csv, o.output);
            st = 1;
        }
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
    int *cpu_end = malloc((size_t)nranks * sizeof *cpu_end);
    if (!cpu_end) {
        error_msg("out of memory for the per-rank tables");
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE_IO);
    }
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
            if (o.contention) /* one round: every pair starts together */
                MPI_Barrier(MPI_COMM_WORLD);
            op_run(&ctx, &plan.e[i + k], &rec[k]);
            rec[k].seq = i + k;
            rec[k].pair = (uint32_t)my_pair;
            if (rank == 0 && g_signal) {
                interrupted = g_signal; /* the signal landed in this sample: drop it */
                break;
            }
            k++;
        }
        if (rank == 0 && csv_flush(&csv, role == 0 ? rec : NULL, role == 0 ? k : 0,
                                   interrupted, err)) {
            error_msg(err);
            MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE_IO);
        }
        if (o.contention && !interrupted)
            collect_pairs(&o, rank, role, rec, rec_in, k, &csv);
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
    struct cpu_place end_place = cpu_place_now();
    MPI_Gather(&end_place.cpu, 1, MPI_INT, cpu_end, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; rank == 0 && r < nranks; r++)
        places[4 * r + 3] = cpu_end[r];
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
    free(rec_in);
    free(hashes);
    free(names);
    free(places);
    free(cpu_end);
    plan_free(&plan);
    MPI_Finalize();
    return rc;
}
