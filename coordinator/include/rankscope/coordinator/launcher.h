// `rankscope run`: profiles one rank of an mpirun-launched job.
#pragma once

#include <string>
#include <vector>

#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope {

// Sidecar mode looks at its application ten times a second, so sync rounds
// come no oftener; a day apart they are as good as none.
inline constexpr double kMinSyncIntervalS = 0.1;
inline constexpr double kMaxSyncIntervalS = 86400;
// A hang is a collective longer than --hang-timeout (0: none is watched):
// under a second, a busy job's slow collectives would pass for hangs.
inline constexpr double kMinHangTimeoutS = 1;
inline constexpr double kMaxHangTimeoutS = 86400;
// The longest --ring, --delay and --duration: a day.
inline constexpr double kMaxRunSeconds = 86400;

// Checked on the command line (commands/run.cpp).
struct RunOptions {
  std::string output = "rankscope.h5";  // the job's timeline; shards go to OUTPUT.shards/ meanwhile
  bool overwrite = false;               // an earlier timeline at `output` may be replaced
  std::string mode = "auto";            // auto, inprocess or sidecar
  // What the agent captures and how, as the options set it; who each rank
  // is and the mode are filled in per process, as it starts.
  agent::AgentSettings agent;
  std::vector<std::string> command;  // the application and its arguments
};

// What `rankscope run` exits with for its own errors: 1 may be the application's.
inline constexpr int kRunErrorStatus = 2;

// Runs the application in a child of this process, in the mode asked or
// found, and returns its exit status, or re-raises the signal that ended it.
int run_application(const RunOptions& options);

// Throws where the launcher started this process as one rank of several but
// rankscope's MPI, initialized, found it alone in its world (MPICH's mpiexec,
// srun without PMIx, torchrun: launchers Open MPI cannot join). Each process
// would take itself for the whole job and write over the others' shards and
// outputs. A command whose one process can do the whole job (a merge) lets
// the launcher's rank 0 go on alone: it may be the one process of a script's
// subprocess, started by that rank alone.
enum class LoneRankZero { kGoesOn, kRefused };
void check_launcher_joined(int mpi_world_size, LoneRankZero lone_rank_zero);

}  // namespace rankscope
