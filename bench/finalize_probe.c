/* How long the application's MPI_Finalize takes, as the application sees it,
   after CALLS small messages and allreduces per rank (each one or two events).
   Rank 0 prints "finalize_ms X" with the largest of the ranks' times.
   Usage: finalize_probe CALLS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long calls = argc > 1 ? atol(argv[1]) : 100000;
  double value = rank, sum = 0;
  for (long i = 0; i < calls; ++i) {
    if (i % 2 == 0) {
      MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    } else {
      MPI_Sendrecv(&value, 1, MPI_DOUBLE, (rank + 1) % size, 0, &sum, 1, MPI_DOUBLE, (rank + size - 1) % size, 0,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  /* Every rank enters together, so the time is MPI_Finalize's own. */
  MPI_Barrier(MPI_COMM_WORLD);
  const double begin = now_ms();
  MPI_Finalize();
  const double elapsed = now_ms() - begin;
  /* After MPI_Finalize each rank reports through a file-less channel: stdout. */
  printf("rank %d finalize_ms %.2f\n", rank, elapsed);
  return 0;
}
