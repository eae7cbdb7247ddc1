#include "run/agent_environment.h"

#include <cstdint>
#include <cstdlib>
#include <system_error>

#include "rankscope/model/error.h"
#include "rankscope/rank_agent/agent.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope::launch {

namespace fs = std::filesystem;

fs::path this_executable() { return fs::read_symlink("/proc/self/exe"); }

// Never the build tree's for a copy of the rankscope built there.
fs::path agent_library(const char* file) {
  const fs::path bin = this_executable().parent_path();
  std::error_code ignored;
  const bool in_build_tree = fs::equivalent(bin, RANKSCOPE_BUILD_BIN_DIR, ignored);
  const fs::path dir = in_build_tree ? fs::path(RANKSCOPE_AGENT_BUILD_DIR) : bin.parent_path() / "lib/rankscope";
  const fs::path candidate = fs::canonical(dir / file, ignored);
  if (ignored) {
    throw Error(std::string("cannot find ") + file + " in " + dir.string() + ": is rankscope installed completely?");
  }
  return candidate;
}

void set_variable(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

void set_agent_environment(const RunOptions& options, const Identity& id, const fs::path& shard_dir,
                           const std::string& mode) {
  agent::AgentSettings settings = options.agent;
  settings.shard_dir = shard_dir.string();
  settings.rank = id.rank;
  settings.world_size = id.world_size;
  settings.local_rank = id.local_rank;
  settings.local_size = id.local_size;
  settings.launcher = id.launcher;
  settings.job_id = id.job_id;
  settings.mode = mode;
  for (const auto& [variable, value] : settings.environment()) set_variable(std::string(variable).c_str(), value);
  // Each capture source is entered through the way its library loads tools;
  // every one names the same capture library, already loaded by the preload.
  const std::string capture_library = agent_library("librankscope_capture.so").string();
  const uint32_t capture = agent::parse_capture_list(settings.capture);
  if (capture & agent::kCaptureNvtx) set_variable("NVTX_INJECTION64_PATH", capture_library);
  if (capture & agent::kCaptureCuda) set_variable("CUDA_INJECTION64_PATH", capture_library);
  if (capture & agent::kCaptureNccl) set_variable("NCCL_PROFILER_PLUGIN", capture_library);
  // Python interpreters find rankscope's sitecustomize first (docs/pytorch.md).
  if (capture & agent::kCapturePython) {
    const char* path = std::getenv("PYTHONPATH");
    set_variable("PYTHONPATH", agent_library("python").string() + (path && *path ? ":" + std::string(path) : ""));
  }
}

void prepend_preload(const std::vector<fs::path>& libraries) {
  std::string preload;
#ifdef RANKSCOPE_SANITIZER_RUNTIME
  // A sanitizer build's libraries need the sanitizer's runtime loaded first.
  preload += RANKSCOPE_SANITIZER_RUNTIME " ";
#endif
  for (const fs::path& library : libraries) preload += library.string() + " ";
  if (const char* existing = std::getenv("LD_PRELOAD")) preload += existing;
  set_variable("LD_PRELOAD", preload);
}

}  // namespace rankscope::launch
