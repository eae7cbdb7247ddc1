/* A job that hangs the way real ones do: every rank makes a few collectives,
 * then one rank is late to an MPI_Allreduce (it sleeps, or waits in an
 * MPI_Recv nobody sends to) while the others wait inside it; with
 * "nonblocking", the others post an MPI_Iallreduce and wait in MPI_Wait.
 * Built with NVTX (HANG_APP_NVTX), every rank is inside the range "step 4"
 * from the barrier on, and the late rank inside "late work" too.
 * Usage: hang_app LATE_RANK sleep SECONDS [nonblocking] | LATE_RANK recv */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if HANG_APP_NVTX
#include <nvtx3/nvToolsExt.h>
#define RANGE_PUSH(name) nvtxRangePushA(name)
#define RANGE_POP() nvtxRangePop()
#else
#define RANGE_PUSH(name) ((void)0)
#define RANGE_POP() ((void)0)
#endif

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hang_app LATE_RANK sleep SECONDS [nonblocking] | LATE_RANK recv\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int value = rank, sum = 0;
  for (int i = 0; i < 3; ++i) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  RANGE_PUSH("step 4");
  if (rank == atoi(argv[1])) {
    RANGE_PUSH("late work");
    if (strcmp(argv[2], "recv") == 0) {
      MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      sleep((unsigned)atoi(argc > 3 ? argv[3] : "60"));
    }
    RANGE_POP();
  }
  if (argc > 4 && strcmp(argv[4], "nonblocking") == 0) {
    MPI_Request request;
    MPI_Iallreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  } else {
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  RANGE_POP();
  if (rank == 0) printf("sum %d\n", sum);
  MPI_Finalize();
  return 0;
}
