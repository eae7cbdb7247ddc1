// `rankscope run`: profiles one rank of an mpirun-launched job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  std::string capture;                  // capture sources (`run` starts from the agent's default)
  std::string mode = "auto";            // auto, inprocess or sidecar
  uint64_t buffer_mb = 64;              // event buffers per rank
  uint32_t flush_ms = 200;              // how often the agent writes to its shard
  double sync_interval_s = 10;          // clock sync rounds while the application runs
  std::string clock_thread = "auto";    // in-process mode: rounds on a thread of the agent's (auto, always, never)
  double hang_timeout_s = 0;            // a collective this long makes every rank write its state (0: off)
  std::string hang_action = "report";   // report (keep running) or abort (end the job after the state is written)
  double ring_s = 0;                    // flight recorder: keep only the last this many seconds of events in memory (0: off)
  double delay_s = -1;                  // capture starts this long after the job started (-1: at the start)
  double duration_s = -1;               // and lasts this long (-1: to the end)
  bool paused = false;                  // capture starts paused, until `rankscope trigger JOB start`
  std::string steps;                    // capture window by step: "A:B[/PERIOD]" ("": none)
  std::string capture_range;            // capture window by range: "nvtx:NAME[@DOMAIN]" or "cudaProfilerApi" ("": none)
  std::vector<std::string> command;     // the application and its arguments
};

// What `rankscope run` exits with for its own errors: 1 may be the application's.
inline constexpr int kRunErrorStatus = 2;

// In-process mode replaces this process with the application and does not
// return unless that fails. Sidecar mode returns the application's exit
// status, or re-raises the signal that ended it.
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
