// In-process mode: the application runs in a child of this process with the
// capture library and the MPI shim preloaded; the first rank writes the
// timeline once the job has ended.
#pragma once

#include <filesystem>

#include "rankscope/coordinator/launcher.h"
#include "run/identity.h"

namespace rankscope::launch {

int run_in_process(const RunOptions& options, const Identity& id, const std::filesystem::path& shard_dir);

}  // namespace rankscope::launch
