// pipeline_stages: a pipeline-parallel training loop in the shape of GPipe,
// on the CPU under MPI: each rank is a stage; in each step, microbatches go
// forward through the stages (blocking MPI_Send and MPI_Recv) and their
// gradients come back (MPI_Irecv and MPI_Isend, completed by MPI_Wait and
// MPI_Waitall). A stage's compute is a sleep, so that more stages than
// cores keep their timing; one stage may be slowed. Each step is an NVTX
// range "ProfilerStep#N", as torch.profiler marks steps.
//
// Usage: pipeline_stages STEPS MICROBATCHES COMPUTE_US SLOW_RANK SLOWDOWN KIB
// (SLOW_RANK -1: none; KIB: each message's size). Rank 0 prints the run's own truth: each rank's
// median step, as its own clock measured it, in µs.
#include <mpi.h>
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void compute(double us) {
  const long ns = static_cast<long>(us * 1000);
  timespec wait{ns / 1'000'000'000, ns % 1'000'000'000};
  while (nanosleep(&wait, &wait) != 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, stages = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &stages);
  if (argc != 7) {
    if (rank == 0) std::fprintf(stderr, "usage: %s STEPS MICROBATCHES COMPUTE_US SLOW_RANK SLOWDOWN KIB\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int steps = std::atoi(argv[1]), microbatches = std::atoi(argv[2]);
  const double slow_factor = rank == std::atoi(argv[4]) ? std::atof(argv[5]) : 1.0;
  const double compute_us = std::atof(argv[3]) * slow_factor;
  const int count = std::max(1, std::atoi(argv[6]) * 1024 / 8);  // doubles per message
  std::vector<double> activation(static_cast<size_t>(count)), gradient(static_cast<size_t>(count));
  // A gradient sent stays untouched until the step's MPI_Waitall.
  std::vector<std::vector<double>> outgoing(static_cast<size_t>(std::max(microbatches, 1)),
                                            std::vector<double>(static_cast<size_t>(count)));
  std::vector<MPI_Request> sent;
  std::vector<double> step_us;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int step = 0; step < steps; ++step) {
    const double begin = MPI_Wtime();
    nvtxRangePushA(("ProfilerStep#" + std::to_string(step)).c_str());
    for (int m = 0; m < microbatches; ++m) {  // forward
      if (rank > 0) MPI_Recv(activation.data(), count, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      compute(compute_us);
      if (rank + 1 < stages) MPI_Send(activation.data(), count, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD);
    }
    for (int m = 0; m < microbatches; ++m) {  // backward, the last stage first
      if (rank + 1 < stages) {
        MPI_Request request;
        MPI_Irecv(gradient.data(), count, MPI_DOUBLE, rank + 1, 1, MPI_COMM_WORLD, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      }
      compute(compute_us);
      if (rank > 0) {
        sent.emplace_back();
        MPI_Isend(outgoing[static_cast<size_t>(m)].data(), count, MPI_DOUBLE, rank - 1, 1, MPI_COMM_WORLD, &sent.back());
      }
    }
    MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
    sent.clear();
    nvtxRangePop();
    step_us.push_back((MPI_Wtime() - begin) * 1e6);
  }
  std::sort(step_us.begin(), step_us.end());
  double median = step_us[step_us.size() / 2];
  std::vector<double> medians(static_cast<size_t>(stages));
  MPI_Gather(&median, 1, MPI_DOUBLE, medians.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("pipeline_stages: %d stages, %d steps of %d microbatches; median step per rank (us):", stages, steps,
                microbatches);
    for (double us : medians) std::printf(" %.0f", us);
    std::printf("\n");
  }
  MPI_Finalize();
  return 0;
}
