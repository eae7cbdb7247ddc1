// What a poll costs beside memory-bound work, as HPCC's MPIRandomAccess does
// it: random updates of a 256 MiB table, each followed by POLLS calls of
// MPI_Testany on a receive that never completes. Prints the time of one
// update and its polls, on rank 0.
// Usage: poll_table [UPDATES [POLLS]]   (default 10,000,000 and 1)
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long updates = argc > 1 ? atol(argv[1]) : 10000000;
  const int polls = argc > 2 ? atoi(argv[2]) : 1;
  const size_t size = (size_t)1 << 25;  // 256 MiB of 64-bit words
  uint64_t* table = malloc(size * sizeof(uint64_t));
  if (!table) return 1;
  for (size_t i = 0; i < size; ++i) table[i] = i;
  int message;
  MPI_Request never;
  MPI_Irecv(&message, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &never);
  uint64_t random = 1;
  struct timespec began, ended;
  clock_gettime(CLOCK_MONOTONIC, &began);
  for (long i = 0; i < updates; ++i) {
    random = (random << 1) ^ ((int64_t)random < 0 ? 7 : 0);  // HPCC's generator
    table[random & (size - 1)] ^= random;
    for (int p = 0; p < polls; ++p) {
      int index, flag;
      MPI_Testany(1, &never, &index, &flag, MPI_STATUS_IGNORE);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &ended);
  const double seconds = (double)(ended.tv_sec - began.tv_sec) + 1e-9 * (double)(ended.tv_nsec - began.tv_nsec);
  if (rank == 0) printf("%.1f\n", seconds * 1e9 / (double)updates);
  MPI_Cancel(&never);
  MPI_Wait(&never, MPI_STATUS_IGNORE);
  free(table);
  MPI_Finalize();
  return 0;
}
