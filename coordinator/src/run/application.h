// The program the user runs, in a child of this process: started with the
// agent preloaded, followed while it runs, and how it ended passed on as
// this process's own end.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rankscope::launch {

// How the program is started.
struct ProgramStart {
  std::vector<std::filesystem::path> preload;  // before any LD_PRELOAD the user set
  const char* pid_variable = nullptr;          // set in the child to its own pid: whose agent captures
  std::vector<int> signals_passed_on;          // signals this process gets that are the program's
  bool ends_with_launcher = false;             // killed when this process dies (PR_SET_PDEATHSIG)
};

// A forked program, and exec's errno when it could not be run (0: it runs):
// a program that never ran leaves no errors about the shard it could not
// write.
struct StartedProgram {
  pid_t pid = -1;
  int exec_error = 0;
};
StartedProgram start_program(const std::vector<std::string>& command, const ProgramStart& how);

// What stopped the application while it ran: the last signal that did
// (0: none), and the time it spent stopped in all.
struct ProcessStops {
  int signal = 0;
  uint64_t ns = 0;
};

// Follows the application through wait4, and says when a signal stops it
// (SIGSTOP, SIGTSTP): it then makes no progress, and to a hang watch it is a
// rank that never arrives. The time it spent stopped goes to its shard.
class ApplicationWatch {
 public:
  ApplicationWatch(pid_t child, int rank) : child_(child), rank_(rank) {}

  // One wait4 (`flags`: 0 waits, WNOHANG looks); true once it has ended.
  bool ended(int flags, rusage& usage);
  int status() const { return status_; }
  const ProcessStops& stops() const { return stops_; }

 private:
  void add_stopped_time();

  pid_t child_;
  int rank_;
  int status_ = 0;
  ProcessStops stops_;
  std::optional<std::chrono::steady_clock::time_point> stopped_since_;
};

// Waits for a child to end; its wait status.
int wait_for(pid_t child, rusage* usage = nullptr);

// What the rank's own end could not record. A process killed before its
// shard was closed (SIGKILL: kill -9, the OOM killer, mpirun signalled
// twice; a crash the agent could not catch) leaves no end record, and its
// counters as they were up to a second before. Its parent, this process,
// adds what it saw to the shard: the signal, what the process used (wait4),
// and the OOM kills counted in its memory cgroup since it started. The
// shard still has no end record, as the events after its last flush are
// lost: the rank stays `dead`.
class DeathRecord {
 public:
  // Before the application starts.
  DeathRecord();

  // The time a signal kept the application stopped, before add_if_killed:
  // for a rank that ended in any way.
  static void add_stops(const std::filesystem::path& shard, pid_t application, const ProcessStops& stops, int rank);

  void add_if_killed(const std::filesystem::path& shard, pid_t application, int status, const rusage& usage,
                     int rank) const;

 private:
  std::optional<uint64_t> oom_kills_before_;
};

// The application's exit status as this process's own: the same code, or
// death by the same signal.
int pass_status_on(int status);

}  // namespace rankscope::launch
