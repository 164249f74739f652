/* halo: the kit's application-shaped check, a 1-D Jacobi sweep with halo exchanges.
 *
 * Why: a point-to-point model is worth what it predicts about applications, and users need
 * an application to check that needs no external code. This one is small and its cost is
 * known: every iteration each rank exchanges a halo of WIDTH cells (8 * WIDTH bytes) with
 * each neighbour (MPI_Sendrecv, or MPI_Irecv/MPI_Isend/MPI_Waitall), relaxes its N cells,
 * and computes for COMPUTE_US microseconds. It builds with mpicc (real runs: `pt2pt` campaign
 * tool `app`) and with smpicc (`pt2pt simulate --app`), from this one source.
 *
 * The compute phase: for real, a busy wait on CLOCK_MONOTONIC until COMPUTE_US have passed
 * (a sleep would overshoot by the kernel's timer slack, ~50 us); under SMPI, smpi_execute()
 * of exactly that long. The relaxation itself is a few flops per cell, small beside both.
 *
 * Usage: halo [-n CELLS] [-w WIDTH] [-i ITERATIONS] [-c COMPUTE_US] [-m sendrecv|isend]
 * Output (rank 0): a parameter line, "rank R time T" per rank (each rank's loop time, s),
 * and "wall_time_s T": the slowest rank's loop time, what the kit records.
 * Bad arguments: a message on stderr and exit status 2.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(int rank, const char *why) {
  if (rank == 0)
    fprintf(stderr, "halo: %s\nusage: halo [-n CELLS] [-w WIDTH] [-i ITERATIONS] "
                    "[-c COMPUTE_US] [-m sendrecv|isend]\n", why);
}

static int parse_long(const char *text, long lo, long hi, long *out) {
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (!end || *end || end == text || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static void compute(double seconds) {
  if (seconds <= 0) return;
#ifdef SMPI_H
  smpi_execute(seconds);
#else
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < seconds);
#endif
}

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long cells = 4096, width = 1024, iters = 20, compute_us = 100;
  int isend = 0;
  for (int a = 1; a < argc; a++) {
    long *target = NULL, lo = 1, hi = 1L << 30;
    if (!strcmp(argv[a], "-n")) target = &cells;
    else if (!strcmp(argv[a], "-w")) target = &width;
    else if (!strcmp(argv[a], "-i")) { target = &iters; hi = 1000000; }
    else if (!strcmp(argv[a], "-c")) { target = &compute_us; lo = 0; hi = 60000000; }
    else if (!strcmp(argv[a], "-m") && a + 1 < argc) {
      a++;
      if (!strcmp(argv[a], "isend")) isend = 1;
      else if (strcmp(argv[a], "sendrecv")) { usage(rank, "-m takes sendrecv or isend"); MPI_Finalize(); return 2; }
      continue;
    } else { usage(rank, "unknown argument"); MPI_Finalize(); return 2; }
    if (a + 1 >= argc || parse_long(argv[++a], lo, hi, target)) {
      usage(rank, "a numeric option is missing its value or is out of range");
      MPI_Finalize();
      return 2;
    }
  }
  if (width > cells) { usage(rank, "the halo width (-w) cannot exceed the cells (-n)"); MPI_Finalize(); return 2; }
  double *u = malloc(sizeof(double) * (size_t)(cells + 2 * width));
  double *v = malloc(sizeof(double) * (size_t)(cells + 2 * width));
  if (!u || !v) { fprintf(stderr, "halo: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 3); }
  for (long i = 0; i < cells + 2 * width; i++) u[i] = v[i] = (double)(rank * cells + i);
  int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  int count = (int)width;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (long it = 0; it < iters; it++) {
    double *own_lo = u + width, *own_hi = u + cells, *ghost_lo = u, *ghost_hi = u + cells + width;
    if (isend) {
      MPI_Request req[4];
      MPI_Irecv(ghost_lo, count, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[0]);
      MPI_Irecv(ghost_hi, count, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[1]);
      MPI_Isend(own_hi, count, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[2]);
      MPI_Isend(own_lo, count, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[3]);
      MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    } else {
      MPI_Sendrecv(own_hi, count, MPI_DOUBLE, right, 0, ghost_lo, count, MPI_DOUBLE, left, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Sendrecv(own_lo, count, MPI_DOUBLE, left, 1, ghost_hi, count, MPI_DOUBLE, right, 1,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    for (long i = width; i < cells + width; i++) v[i] = 0.5 * (u[i - 1] + u[i + 1]);
    double *swap = u; u = v; v = swap;
    compute(1e-6 * (double)compute_us);
  }
  double mine = MPI_Wtime() - t0;
  double *all = rank == 0 ? malloc(sizeof(double) * (size_t)size) : NULL;
  MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double wall = 0;
    printf("halo: np %d cells %ld width %ld bytes %ld iterations %ld compute_us %ld mode %s\n",
           size, cells, width, 8 * width, iters, compute_us, isend ? "isend" : "sendrecv");
    for (int r = 0; r < size; r++) {
      printf("rank %d time %.9e\n", r, all[r]);
      if (all[r] > wall) wall = all[r];
    }
    printf("wall_time_s %.9e\n", wall);
    free(all);
  }
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
