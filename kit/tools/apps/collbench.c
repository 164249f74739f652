/* collbench: one MPI collective in a timed loop, the driver of `pt2pt collectives`.
 *
 * Why: the collective-algorithm sweep (issue 61) needs the same program for real (Open MPI,
 * an algorithm forced through coll_tuned) and under SMPI (an algorithm chosen with
 * --cfg=smpi/<coll>:<algorithm>), small enough that 1,024 simulated ranks fit in memory.
 * Under SMPI the buffers come from SMPI_SHARED_MALLOC: one physical copy shared by every
 * rank, so the host's memory does not grow with ranks x message size (the payload is
 * meaningless then, which a timing study does not mind). For real, they are malloc'ed and
 * touched before the first timed call.
 *
 * Each repetition: MPI_Barrier, then the collective timed on every rank (MPI_Wtime before
 * and after), and the slowest rank's duration (MPI_Reduce MAX to rank 0) is the repetition's
 * time: what a caller waits for, and meaningful without synchronised clocks.
 *
 * Sizes follow OSU's conventions: alltoall and allgather -s bytes per rank pair / per rank's
 * block, bcast/allreduce/reduce -s bytes of the whole buffer (MPI_FLOAT and MPI_SUM for the
 * reductions, so -s is rounded down to a multiple of 4, at least 4).
 *
 * -a NAME (real runs, Open MPI only): forces the tuned component's algorithm by setting
 * OMPI_MCA_coll_tuned_use_dynamic_rules=1 and OMPI_MCA_coll_tuned_<coll>_algorithm=NAME
 * before MPI_Init (what `--mca coll_tuned_<coll>_algorithm NAME` does), then reads the value
 * back through MPI_T and refuses to run (exit 4) if Open MPI did not take it (an unknown
 * name reads back as 0, "ignore"). Under SMPI the
 * algorithm is smpirun's --cfg, and -a is refused (exit 2).
 *
 * Usage: collbench -c alltoall|allreduce|bcast|allgather|reduce -s BYTES [-r REPS] [-w WARMUP]
 *                  [-a ALGORITHM]
 * Output (rank 0): a parameter line (collective, bytes, ranks, reps, warmup, algorithm),
 * "rep I time_s T" per repetition, and "collective_time_s T": the mean over repetitions.
 * Bad arguments: a message on stderr and exit status 2. A collective that returns an error
 * (errors return, not abort, on MPI_COMM_WORLD): a message and MPI_Abort with 5.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SMPI_SHARED_MALLOC
#define COLLBENCH_SMPI 1
#define BUFFER_ALLOC(n) SMPI_SHARED_MALLOC(n)
#define BUFFER_FREE(p) SMPI_SHARED_FREE(p)
#else
#define COLLBENCH_SMPI 0
#define BUFFER_ALLOC(n) malloc(n)
#define BUFFER_FREE(p) free(p)
#endif

static const char *const COLLECTIVES[] = {"alltoall", "allreduce", "bcast", "allgather",
                                          "reduce"};
enum { ALLTOALL, ALLREDUCE, BCAST, ALLGATHER, REDUCE, NCOLL };

static int parse_long(const char *text, long lo, long hi, long *out) {
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (!end || *end || end == text || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int usage(const char *why) {
  fprintf(stderr, "collbench: %s\nusage: collbench -c alltoall|allreduce|bcast|allgather|"
                  "reduce -s BYTES [-r REPS] [-w WARMUP] [-a ALGORITHM]\n", why);
  return 2;
}

/* Arguments are read before MPI_Init (the forced algorithm must be in the environment
 * then); every rank reads the same ones, rank-independent. */
static int parse(int argc, char **argv, int *coll, long *bytes, long *reps, long *warmup,
                 const char **algorithm) {
  *coll = -1;
  *bytes = -1;
  for (int a = 1; a < argc; a++) {
    if (a + 1 >= argc) return usage("an option is missing its value");
    const char *opt = argv[a], *val = argv[++a];
    if (!strcmp(opt, "-c")) {
      for (int c = 0; c < NCOLL; c++)
        if (!strcmp(val, COLLECTIVES[c])) *coll = c;
      if (*coll < 0) return usage("-c takes alltoall, allreduce, bcast, allgather or reduce");
    } else if (!strcmp(opt, "-s")) {
      if (parse_long(val, 0, 1L << 34, bytes)) return usage("-s takes 0..2^34 bytes");
    } else if (!strcmp(opt, "-r")) {
      if (parse_long(val, 1, 1000000, reps)) return usage("-r takes 1..1000000");
    } else if (!strcmp(opt, "-w")) {
      if (parse_long(val, 0, 1000000, warmup)) return usage("-w takes 0..1000000");
    } else if (!strcmp(opt, "-a")) {
      if (COLLBENCH_SMPI)
        return usage("-a forces an Open MPI algorithm; under SMPI give smpirun "
                     "--cfg=smpi/<collective>:<algorithm>");
      *algorithm = val;
    } else {
      return usage("unknown option");
    }
  }
  if (*coll < 0 || *bytes < 0) return usage("-c and -s are required");
  return 0;
}

#if !COLLBENCH_SMPI
/* The forced algorithm as Open MPI holds it (MPI_T control variable), or -1. */
static int forced_value(const char *name) {
  int provided, index, count, value = -1;
  MPI_T_cvar_handle handle;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
    if (count != 1 || MPI_T_cvar_read(handle, &value) != MPI_SUCCESS) value = -1;
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}
#endif

int main(int argc, char **argv) {
  int coll, rank, np;
  long bytes, reps = 5, warmup = 1;
  const char *algorithm = NULL;
  int bad = parse(argc, argv, &coll, &bytes, &reps, &warmup, &algorithm);
  char var[128] = "";
  if (!bad && algorithm) {
    snprintf(var, sizeof var, "OMPI_MCA_coll_tuned_%s_algorithm", COLLECTIVES[coll]);
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
    setenv(var, algorithm, 1);
  }
  MPI_Init(&argc, &argv);
  if (bad) {
    MPI_Finalize();
    return bad;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int forced = -1;
#if !COLLBENCH_SMPI
  if (algorithm) {
    forced = forced_value(var + strlen("OMPI_MCA_"));
    if (forced <= 0) {
      if (rank == 0)
        fprintf(stderr, "collbench: Open MPI did not take %s=%s (MPI_T reads %d): not "
                        "Open MPI's tuned component, or an unknown algorithm\n",
                var, algorithm, forced);
      MPI_Finalize();
      return 4;
    }
  }
#endif
  int count = (int)bytes;
  MPI_Datatype type = MPI_BYTE;
  size_t send_bytes = (size_t)bytes, recv_bytes = (size_t)bytes;
  if (coll == ALLREDUCE || coll == REDUCE) {
    count = (int)(bytes / 4 > 0 ? bytes / 4 : 1);
    type = MPI_FLOAT;
    bytes = 4L * count;
    send_bytes = recv_bytes = (size_t)bytes;
  } else if (coll == ALLTOALL) {
    send_bytes = recv_bytes = (size_t)bytes * (size_t)np;
  } else if (coll == ALLGATHER) {
    recv_bytes = (size_t)bytes * (size_t)np;
  }
  char *sendbuf = BUFFER_ALLOC(send_bytes > 0 ? send_bytes : 1);
  char *recvbuf = BUFFER_ALLOC(recv_bytes > 0 ? recv_bytes : 1);
  if (!sendbuf || !recvbuf) {
    fprintf(stderr, "collbench: out of memory (%zu + %zu bytes)\n", send_bytes, recv_bytes);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (!COLLBENCH_SMPI) {
    memset(sendbuf, 1, send_bytes);
    memset(recvbuf, 0, recv_bytes);
  }
  double *times = calloc((size_t)reps, sizeof(double));
  if (!times) MPI_Abort(MPI_COMM_WORLD, 3);
  for (long i = -warmup; i < reps; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc;
    switch (coll) {
      case ALLTOALL:
        rc = MPI_Alltoall(sendbuf, count, type, recvbuf, count, type, MPI_COMM_WORLD);
        break;
      case ALLREDUCE:
        rc = MPI_Allreduce(sendbuf, recvbuf, count, type, MPI_SUM, MPI_COMM_WORLD);
        break;
      case BCAST:
        rc = MPI_Bcast(sendbuf, count, type, 0, MPI_COMM_WORLD);
        break;
      case ALLGATHER:
        rc = MPI_Allgather(sendbuf, count, type, recvbuf, count, type, MPI_COMM_WORLD);
        break;
      default:
        rc = MPI_Reduce(sendbuf, recvbuf, count, type, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    }
    if (rc != MPI_SUCCESS) {
      /* an algorithm that refuses this rank count (e.g. SMPI's 3dmesh off a cube) returns
       * an error instead of doing the collective: its time would mean nothing */
      char text[MPI_MAX_ERROR_STRING] = "";
      int len = 0;
      MPI_Error_string(rc, text, &len);
      fprintf(stderr, "collbench: error: %s returned %d (%s) on rank %d\n", COLLECTIVES[coll],
              rc, text, rank);
      MPI_Abort(MPI_COMM_WORLD, 5);
    }
    double mine = MPI_Wtime() - t0, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (i >= 0) times[i] = slowest;
  }
  if (rank == 0) {
    printf("collbench collective %s bytes %ld ranks %d reps %ld warmup %ld algorithm %s%s\n",
           COLLECTIVES[coll], bytes, np, reps, warmup, algorithm ? algorithm : "default",
           COLLBENCH_SMPI ? " (smpi)" : "");
    if (algorithm) printf("forced %s %d (read back through MPI_T)\n", var + 9, forced);
    double sum = 0;
    for (long i = 0; i < reps; i++) {
      printf("rep %ld time_s %.9e\n", i, times[i]);
      sum += times[i];
    }
    printf("collective_time_s %.9e\n", sum / (double)reps);
    fflush(stdout);
  }
  free(times);
  BUFFER_FREE(sendbuf);
  BUFFER_FREE(recvbuf);
  MPI_Finalize();
  return 0;
}
