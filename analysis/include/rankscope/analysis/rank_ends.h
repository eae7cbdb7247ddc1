// How each rank's process ended and what it used (docs/report.md, "How
// ranks ended"): the process_* counters of the agent or, for a process
// killed before its shard was closed, of `rankscope run`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/model/metadata.h"
#include "rankscope/model/signals.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

struct ProcessUsage {
  uint64_t peak_rss_bytes = 0;
  uint64_t user_cpu_ns = 0;
  uint64_t system_cpu_ns = 0;
  uint64_t involuntary_switches = 0;
  uint64_t major_faults = 0;
};
// A fatal signal the agent caught, the shard closed first (the crash_* counters).
struct Crash {
  int signal = 0;
  int code = 0;           // the kernel's si_code; 0: a process sent it (abort(), kill)
  uint64_t address = 0;   // the fault's address (SIGSEGV, SIGBUS) or instruction (SIGFPE, SIGILL); 0: none given
  uint64_t thread = 0;    // the crashing thread's id, its thread track's
  int64_t sender_pid = 0;  // the process that sent it, where one did (code 0); 0: not known
  bool sent_by_itself = false;  // sender_pid is the rank's own (abort(), raise(), a handler passing a fault on)
  std::string where;      // the code it faulted in ("crash_app+0x12a4"), from its crash instant; "" where not known
};
struct RankEnd {
  int32_t rank = -1;
  RankStatus status = RankStatus::kMissing;
  int killed_by_signal = 0;  // 0: not killed before its shard was closed (or not known)
  uint64_t oom_kills = 0;    // in its memory cgroup while it ran
  int stopped_by_signal = 0;  // the signal that last stopped it (SIGSTOP, SIGTSTP); 0: never stopped
  uint64_t stopped_ns = 0;    // the time it spent stopped, in all
  std::optional<Crash> crash;  // a `crashed` rank's
  std::optional<ProcessUsage> usage;
  std::optional<int> mpi_abort_code;  // an `aborted` rank's that called MPI_Abort
  std::optional<int> exit_status;  // where the agent saw it (exit, main's return, _exit)
  int terminating_signal = 0;  // a `terminated` rank's
  bool sidecar_refused_mpi_init = false;  // stopped at MPI_Init: sidecar mode runs no MPI program

  // A crash, caught by the agent or only seen by `rankscope run` (one before
  // the agent's handlers were in place, or under a handler the program set first).
  bool crashed() const { return crash.has_value() || is_crash_signal(killed_by_signal); }
};
// One rank's end from its counters: a timeline's, or those `rankscope run`
// writes for the process it saw killed.
RankEnd rank_end(int32_t rank, RankStatus status, const Counters& counters, int64_t pid);
std::vector<RankEnd> rank_ends(const Timeline& timeline);  // by rank
// How a rank that was neither killed nor crashed ended early, said once for
// info and report: "exited with status 3 (exit or a return from main)
// without calling MPI_Finalize; its shard was closed at exit", "called
// MPI_Abort with code 2", "ended by _exit(1) ...", "stopped at MPI_Init
// ...", "ended by SIGTERM (signal 15); its shard was closed first". Empty
// for other ends.
std::string describe_early_end(const RankEnd& end);
// How a fatal signal ended the rank: "killed by SIGKILL (signal 9) before
// its shard was closed; the kernel's OOM killer killed 1 process of its
// memory cgroup meanwhile; peak memory 310 MiB", or "crashed with SIGSEGV
// (signal 11: address not mapped) at 0x0 on thread 4242; its shard was
// closed first, with the calls it was inside; peak memory 40 MiB" (one the
// agent never caught: "crashed with SIGSEGV (signal 11) before its shard was
// closed, where its capture could not catch the crash"); "" for a rank
// neither killed nor crashed.
std::string describe_fatal_signal(const RankEnd& end);
// "peak memory per rank: median 42 MiB, largest 310 MiB (rank 2)"; "" when no rank recorded it.
std::string peak_memory_summary(const std::vector<RankEnd>& ends);

}  // namespace rankscope::analysis
