// `rankscope run`: which mode, decided from the program, and the checks made
// before any rank's program starts.
#include <cstdio>
#include <filesystem>
#include <string>

#include "rankscope/coordinator/launcher.h"
#include "run/identity.h"
#include "run/in_process.h"
#include "run/program_check.h"
#include "run/shard_folder.h"
#include "run/sidecar.h"

namespace rankscope {

namespace fs = std::filesystem;

int run_application(const RunOptions& options) {
  launch::check_buffers_can_be_mapped(options.agent.buffer_mb);
  const launch::Identity id = launch::launch_identity();
  const fs::path shard_dir = fs::absolute(options.output + ".shards");
  std::string mode = options.mode, why = "as asked";
  const launch::ProgramFound program =
      mode == "sidecar" ? launch::ProgramFound{} : launch::find_program_of(options.command);
  if (mode == "auto") {
    std::string evidence;
    mode = launch::program_uses_mpi(program, options.command, evidence) ? "inprocess" : "sidecar";
    why = mode == "inprocess" ? evidence : "found no MPI in " + options.command[0];
  }
  if (id.rank == 0) {
    std::fprintf(stderr, "rankscope run: %s mode (%s); timeline %s\n",
                 mode == "inprocess" ? "in-process" : "sidecar", why.c_str(), options.output.c_str());
  }
  if (mode == "sidecar") return launch::run_sidecar(options, id, shard_dir);
  // Found now, with a clear message, rather than by every rank's agent later.
  launch::check_program_mpi_is_the_shims(program);
  launch::prepare_shard_folder(shard_dir, id);
  return launch::run_in_process(options, id, shard_dir);
}

}  // namespace rankscope
