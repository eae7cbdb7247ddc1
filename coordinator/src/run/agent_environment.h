// What the program's process is given so that the agent starts inside it:
// the agent's settings as variables, and its libraries preloaded.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/coordinator/launcher.h"
#include "run/identity.h"

namespace rankscope::launch {

// This rankscope's own file.
std::filesystem::path this_executable();
// One of the agent's libraries: PREFIX/lib/rankscope beside
// PREFIX/bin/rankscope, or the build tree's for the rankscope built there.
std::filesystem::path agent_library(const char* file);

void set_variable(const char* name, const std::string& value);

// The agent's settings from the options, completed by who this rank is and
// the mode, then the way each capture source's library enters the program.
void set_agent_environment(const RunOptions& options, const Identity& id, const std::filesystem::path& shard_dir,
                           const std::string& mode);

// LD_PRELOAD with `libraries` first (after a sanitizer build's runtime).
void prepend_preload(const std::vector<std::filesystem::path>& libraries);

}  // namespace rankscope::launch
