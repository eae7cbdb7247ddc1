/* A steady job for the flight recorder: an MPI_Allreduce every INTERVAL_MS
 * milliseconds for SECONDS seconds, then a line with how many it made.
 * Usage: ring_app SECONDS INTERVAL_MS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ring_app SECONDS INTERVAL_MS\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double seconds = atof(argv[1]);
  const long interval_ns = atol(argv[2]) * 1000000L;
  const struct timespec pause = {interval_ns / 1000000000L, interval_ns % 1000000000L};
  int value = rank, sum = 0, count = 0, go_on = 1;
  const double start = seconds_now();
  while (go_on) {
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    ++count;
    nanosleep(&pause, NULL);
    /* Rank 0's clock decides, so that every rank makes as many. */
    go_on = rank != 0 || seconds_now() - start < seconds;
    MPI_Bcast(&go_on, 1, MPI_INT, 0, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("ring_app: %d allreduces in %.1f s\n", count, seconds_now() - start);
  MPI_Finalize();
  return 0;
}
