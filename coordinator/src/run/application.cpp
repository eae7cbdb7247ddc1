#include "run/application.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rankscope/analysis/rank_ends.h"
#include "rankscope/merge/rank_status.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/process_usage.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/text.h"
#include "rankscope/rank_agent/agent.h"
#include "run/agent_environment.h"

namespace rankscope::launch {

namespace fs = std::filesystem;

namespace {

// Whether the program could be executed, told to the process that forked it:
// the child writes exec's errno into a close-on-exec pipe, which an exec that
// succeeds closes unwritten. A program that never ran then leaves no errors
// about the shard it could not write.
class ExecReport {
 public:
  ExecReport() {
    if (::pipe2(pipe_, O_CLOEXEC) != 0) {
      throw Error(std::string("cannot start the application: pipe failed: ") + std::strerror(errno));
    }
  }
  ExecReport(const ExecReport&) = delete;
  ExecReport& operator=(const ExecReport&) = delete;
  ~ExecReport() {
    for (const int fd : pipe_) {
      if (fd >= 0) ::close(fd);
    }
  }

  // In the child.
  [[noreturn]] void exec(const std::vector<std::string>& command) {
    std::vector<char*> argv;
    for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const int error_number = errno;
    std::fprintf(stderr, "rankscope run: cannot run %s: %s\n", command[0].c_str(), std::strerror(error_number));
    // Should this write fail, the parent takes the program for started; its status still says 126 or 127.
    [[maybe_unused]] const ssize_t told = ::write(pipe_[1], &error_number, sizeof(error_number));
    std::_Exit(error_number == ENOENT ? 127 : 126);
  }

  // In the parent, once forked: 0 when the program runs, else why exec failed.
  int exec_error() {
    ::close(pipe_[1]);
    pipe_[1] = -1;
    int error_number = 0;
    ssize_t got = 0;
    do {
      got = ::read(pipe_[0], &error_number, sizeof(error_number));
    } while (got < 0 && errno == EINTR);
    return got == static_cast<ssize_t>(sizeof(error_number)) ? error_number : 0;
  }

 private:
  int pipe_[2] = {-1, -1};
};

// Signals for the application reach this process (mpirun ends a job with
// SIGTERM to the processes it started): they are passed on.
volatile sig_atomic_t g_application_pid = 0;
// Set while a signal has the application stopped (ApplicationWatch).
volatile sig_atomic_t g_application_stopped = 0;

void pass_signal_on(int signal_number) {
  if (g_application_pid <= 0) return;
  ::kill(static_cast<pid_t>(g_application_pid), signal_number);
  // A stopped process takes a signal that ends it only once continued: a
  // job ended with SIGTERM would otherwise wait for mpirun's SIGKILL, and
  // lose its shard's end. As shells end a stopped job: SIGCONT after.
  const bool ends = signal_number == SIGTERM || signal_number == SIGINT || signal_number == SIGHUP ||
                    signal_number == SIGQUIT;
  if (ends && g_application_stopped != 0) ::kill(static_cast<pid_t>(g_application_pid), SIGCONT);
}

void pass_signals_to(pid_t child, const std::vector<int>& signals) {
  g_application_pid = child;
  struct sigaction forward {};
  forward.sa_handler = pass_signal_on;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  for (const int signal_number : signals) ::sigaction(signal_number, &forward, nullptr);
}

// Stamped as the rank was last heard from, which this does not change.
void append_counters(const fs::path& shard, const ShardScan& scan, const Counters& counters) {
  ShardWriter writer;
  if (!writer.open_existing(shard.string()) ||
      !writer.write_counters(counters, scan.last_ns == INT64_MIN ? 0 : scan.last_ns)) {
    throw Error(writer.error());
  }
}

}  // namespace

StartedProgram start_program(const std::vector<std::string>& command, const ProgramStart& how) {
  const pid_t parent = ::getpid();
  ExecReport report;
  const pid_t child = ::fork();
  if (child < 0) throw Error(std::string("cannot start the application: fork failed: ") + std::strerror(errno));
  if (child == 0) {
    if (how.ends_with_launcher) {
      // mpirun's SIGKILL reaches only the process it started.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) std::_Exit(1);
    }
    set_variable(how.pid_variable, std::to_string(::getpid()));
    prepend_preload(how.preload);
    report.exec(command);
  }
  pass_signals_to(child, how.signals_passed_on);
  return {child, report.exec_error()};
}

bool ApplicationWatch::ended(int flags, rusage& usage) {
  int status = 0;
  const pid_t got = ::wait4(child_, &status, flags | WUNTRACED | WCONTINUED, &usage);
  if (got < 0 && errno != EINTR) throw Error(std::string("waiting for the application failed: ") + std::strerror(errno));
  if (got <= 0) return false;
  if (WIFSTOPPED(status)) {
    stops_.signal = WSTOPSIG(status);
    if (!stopped_since_) stopped_since_ = std::chrono::steady_clock::now();
    g_application_stopped = 1;
    std::fprintf(stderr,
                 "rankscope run: rank %d: the application was stopped by %s (signal %d): it makes no progress until "
                 "continued (SIGCONT)\n",
                 rank_, signal_name(stops_.signal).c_str(), stops_.signal);
    return false;
  }
  if (WIFCONTINUED(status)) {
    g_application_stopped = 0;
    if (stopped_since_) {
      add_stopped_time();
      std::fprintf(stderr, "rankscope run: rank %d: the application was continued\n", rank_);
    }
    return false;
  }
  if (stopped_since_) add_stopped_time();  // killed while stopped
  status_ = status;
  return true;
}

void ApplicationWatch::add_stopped_time() {
  stops_.ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - *stopped_since_).count());
  stopped_since_.reset();
}

int wait_for(pid_t child, rusage* usage) {
  int status = 0;
  while (::wait4(child, &status, 0, usage) < 0) {
    if (errno != EINTR) throw Error(std::string("waiting for the application failed: ") + std::strerror(errno));
  }
  return status;
}

DeathRecord::DeathRecord() : oom_kills_before_(oom_kill_count(::getpid())) {}

void DeathRecord::add_stops(const fs::path& shard, pid_t application, const ProcessStops& stops, int rank) {
  if (stops.signal == 0 || !fs::exists(shard)) return;
  try {
    const ShardScan scan = ShardFile(shard.string()).scan();
    if (!scan.metadata || scan.metadata->pid != application) return;
    Counters counters = scan.counters;
    counters.set(counter::kStoppedBySignal, static_cast<uint64_t>(stops.signal));
    counters.set(counter::kStoppedNs, stops.ns);
    append_counters(shard, scan, counters);
  } catch (const Error& error) {
    std::fprintf(stderr, "rankscope run: rank %d: cannot record that the application was stopped: %s\n", rank,
                 error.what());
  }
}

void DeathRecord::add_if_killed(const fs::path& shard, pid_t application, int status, const rusage& usage, int rank) const {
  if (!WIFSIGNALED(status) || !fs::exists(shard)) return;
  const int signal_number = WTERMSIG(status);
  try {
    const ShardScan scan = ShardFile(shard.string()).scan();
    // Killed before its agent wrote a shard, the one there is an earlier job's.
    if (!scan.metadata || scan.metadata->pid != application) return;
    if (scan.ended) {
      if (scan.counters.get(counter::kCrashSignal) != 0) {
        // A crash the agent caught: it closed the shard, and said how.
        const analysis::RankEnd end = analysis::rank_end(rank, RankStatus::kCrashed, scan.counters, application);
        std::fprintf(stderr, "rankscope run: rank %d: the application %s: %s\n", rank,
                     analysis::describe_fatal_signal(end).c_str(), shard.c_str());
      } else if (static_cast<int>(scan.counters.get(counter::kTerminatedBySignal)) != signal_number) {
        // After the close: a crash at exit (a destructor, a library's teardown), past what the capture covers.
        std::fprintf(stderr,
                     "rankscope run: rank %d: the application ended by %s (signal %d) after its shard was closed: "
                     "the capture is whole\n",
                     rank, signal_name(signal_number).c_str(), signal_number);
      }
      return;
    }
    Counters counters = scan.counters;
    counters.set(counter::kKilledBySignal, static_cast<uint64_t>(signal_number));
    set_usage_counters(counters, usage);
    const std::optional<uint64_t> oom_kills_after = oom_kill_count(::getpid());
    const uint64_t oom_kills = oom_kills_before_ && oom_kills_after && *oom_kills_after > *oom_kills_before_
                                   ? *oom_kills_after - *oom_kills_before_
                                   : 0;
    if (oom_kills > 0) counters.set(counter::kOomKills, oom_kills);
    append_counters(shard, scan, counters);
    const analysis::RankEnd end = analysis::rank_end(rank, RankStatus::kDead, counters, application);
    std::fprintf(stderr, "rankscope run: rank %d: the application %s%s; what it flushed is kept in %s\n", rank,
                 end.crashed() ? "" : "was ", analysis::describe_fatal_signal(end).c_str(), shard.c_str());
  } catch (const Error& error) {
    std::fprintf(stderr, "rankscope run: rank %d: cannot record how the application ended: %s\n", rank,
                 error.what());
  }
}

int pass_status_on(int status) {
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace rankscope::launch
