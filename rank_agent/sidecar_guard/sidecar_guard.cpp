// Preloaded into the application in sidecar mode, where `rankscope run` is
// the job's MPI process: an application that starts MPI itself would become a
// second MPI process of the same rank, so it is stopped at once instead.
// The PMPI names are covered too: Open MPI's Fortran bindings (mpi_init_,
// mpi_init_f08_) call PMPI_Init and PMPI_Init_thread directly.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "rankscope/model/counters.h"

namespace {

[[noreturn]] void refuse() {
  std::fprintf(stderr,
               "rankscope: this program calls MPI_Init, but `rankscope run` started it in sidecar mode, where "
               "rankscope itself is the job's MPI process; profile it with `rankscope run --mode inprocess`\n");
  std::fflush(stderr);
  // The rank's shard says so too, for the run's warning and `rankscope info`:
  // the agent preloaded beside the guard closes it as _Exit ends the process.
  using AddCounter = void (*)(const char*, uint64_t);
  if (auto add = reinterpret_cast<AddCounter>(::dlsym(RTLD_DEFAULT, "rankscope_agent_add_counter"))) {
    add(rankscope::counter::kSidecarRefusedMpiInit.data(), 1);
  }
  std::_Exit(1);
}

}  // namespace

#define RANKSCOPE_GUARD extern "C" __attribute__((visibility("default")))
RANKSCOPE_GUARD int MPI_Init(int*, char***) { refuse(); }
RANKSCOPE_GUARD int MPI_Init_thread(int*, char***, int, int*) { refuse(); }
RANKSCOPE_GUARD int PMPI_Init(int*, char***) { refuse(); }
RANKSCOPE_GUARD int PMPI_Init_thread(int*, char***, int, int*) { refuse(); }
