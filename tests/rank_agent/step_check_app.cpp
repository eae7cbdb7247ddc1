// A training loop on NCCL that checks for a stop message once a step, over
// MPI, as jobs with an MPI side channel do; it hangs the way hang_app does:
// every rank makes three MPI_Allreduces and a barrier, then LATE_RANK posts
// an MPI_Irecv from rank 0 with tag 98 (never sent) and, for STEPS steps,
// tests it with MPI_Test and, with "nccl", enqueues a NCCL all-reduce
// (fake_nccl.h; its kernel ends at once), a millisecond apart; then it
// sleeps, while the others wait in their fourth MPI_Allreduce. With "none"
// its tests come in a row, a thread polling for the message.
// Usage: step_check_app LATE_RANK STEPS nccl|none
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fake_nccl.h"

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[3], "nccl") != 0 && std::strcmp(argv[3], "none") != 0)) {
    std::fprintf(stderr, "usage: step_check_app LATE_RANK STEPS nccl|none\n");
    return 2;
  }
  const int late_rank = std::atoi(argv[1]), steps = std::atoi(argv[2]);
  const bool with_nccl = std::strcmp(argv[3], "nccl") == 0;
  MPI_Init(&argc, &argv);
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::unique_ptr<fake_nccl::Communicator> nccl;
  if (with_nccl) {
    fake_nccl::abi::ProfilerV5* profiler = fake_nccl::load_plugin("step_check_app");
    if (!profiler) MPI_Abort(MPI_COMM_WORLD, 2);
    nccl = std::make_unique<fake_nccl::Communicator>(*profiler, rank, world);
  }
  int value = rank, sum = 0;
  for (int i = 0; i < 3; ++i) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == late_rank) {
    int stop = 0, stopped = 0;
    MPI_Request request;
    MPI_Irecv(&stop, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, &request);
    for (int step = 0; step < steps && !stopped; ++step) {
      MPI_Test(&request, &stopped, MPI_STATUS_IGNORE);
      if (nccl) {
        fake_nccl::abi::EventDescrV5 allreduce = nccl->allreduce(uint64_t(step));
        nccl->finish(nccl->launch(allreduce, 2, fake_nccl::gpu_now()));
      }
      usleep(1000);
    }
    sleep(100);
  }
  MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  nccl.reset();
  MPI_Finalize();
  return 0;
}
