/* The kit's ping-pong for SimGrid/SMPI: `pt2pt simulate` compiles it with smpicc.
 *
 * Why a separate program from kit/probe: under SMPI the clock is global, so the time of
 * each message one way (send call on one rank to receive return on the other) is known
 * exactly; the probe can only measure round trips. Printing both lets the closed loop
 * compare the model's one-way time (the probe's RTT/2) with what SimGrid computes per
 * message.
 *
 * Usage: pingpong SIZES_FILE REPS
 *   SIZES_FILE  one message size in bytes per line (the plan, in the order to run it)
 *   REPS        ping-pongs per line
 * Output (rank 0, stdout): CSV "size,rtt_half,fwd,back" per ping-pong, seconds.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_sizes(const char *path, long **out) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long cap = 64, n = 0, v;
  long *s = malloc(cap * sizeof *s);
  while (s && fscanf(f, "%ld", &v) == 1) {
    if (v < 0) { free(s); fclose(f); return -2; }
    if (n == cap) { cap *= 2; s = realloc(s, cap * sizeof *s); }
    if (s) s[n++] = v;
  }
  fclose(f);
  *out = s;
  return s ? (int)n : -1;
}

int main(int argc, char **argv) {
  int rank, nproc;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nproc);
  if (nproc != 2 || argc != 3) {
    if (rank == 0) fprintf(stderr, "pingpong: usage: smpirun -np 2 pingpong SIZES_FILE REPS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long *sizes = NULL;
  int n = read_sizes(argv[1], &sizes);
  int reps = atoi(argv[2]);
  if (n <= 0 || reps <= 0) {
    if (rank == 0) fprintf(stderr, "pingpong: cannot read sizes from %s or bad REPS %s\n", argv[1], argv[2]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  long maxs = 1;
  for (int i = 0; i < n; i++) if (sizes[i] > maxs) maxs = sizes[i];
  char *buf = malloc((size_t)maxs);
  long total = (long)n * reps;
  double *t = malloc((size_t)total * 2 * sizeof *t); /* rank 0: start, end; rank 1: recv end, send start */
  if (!buf || !t) { fprintf(stderr, "pingpong: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 3); }
  memset(buf, 1, (size_t)maxs);
  long k = 0;
  for (int i = 0; i < n; i++) {
    int s = (int)sizes[i];
    for (int r = 0; r < reps; r++, k++) {
      if (rank == 0) {
        t[2 * k] = MPI_Wtime();
        MPI_Send(buf, s, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, s, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t[2 * k + 1] = MPI_Wtime();
      } else {
        MPI_Recv(buf, s, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t[2 * k] = MPI_Wtime();
        t[2 * k + 1] = MPI_Wtime();
        MPI_Send(buf, s, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
  }
  if (rank == 1) {
    MPI_Send(t, (int)(2 * total), MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
  } else {
    double *o = malloc((size_t)total * 2 * sizeof *o);
    if (!o) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Recv(o, (int)(2 * total), MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("size,rtt_half,fwd,back\n");
    k = 0;
    for (int i = 0; i < n; i++)
      for (int r = 0; r < reps; r++, k++)
        printf("%ld,%.12g,%.12g,%.12g\n", sizes[i], (t[2 * k + 1] - t[2 * k]) / 2,
               o[2 * k] - t[2 * k], t[2 * k + 1] - o[2 * k + 1]);
    free(o);
  }
  free(t);
  free(buf);
  free(sizes);
  MPI_Finalize();
  return 0;
}
