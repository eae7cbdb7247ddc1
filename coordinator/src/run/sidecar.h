// Sidecar mode: this process is the rank's MPI process, for programs that
// use no MPI (PyTorch's own launchers, NCCL and gloo jobs): it measures the
// clocks, runs the program beside it, and the job's sidecars write the
// timeline together.
#pragma once

#include <filesystem>

#include "rankscope/coordinator/launcher.h"
#include "run/identity.h"

namespace rankscope::launch {

int run_sidecar(const RunOptions& options, const Identity& id, const std::filesystem::path& shard_dir);

}  // namespace rankscope::launch
