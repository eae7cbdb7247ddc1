#include "rankscope/coordinator/launcher.h"

#include <dirent.h>
#include <elf.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "commands/command.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/merge/merge.h"
#include "rankscope/merge/problems_text.h"
#include "rankscope/merge/rank_status.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/process_usage.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/text.h"
#include "rankscope/rank_agent/agent.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

// Who this process is in the job, as the launcher says.
struct Identity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string launcher = "none";
  std::string job_id;  // the launcher's name for the job; empty when it names none
};

std::optional<int> env_number(const char* name) {
  const char* text = std::getenv(name);
  const auto value = text ? parse_integer<int32_t>(text) : std::nullopt;
  return value && *value >= 0 ? value : std::nullopt;
}

struct Launcher {
  const char* name;
  const char *rank, *size, *local_rank, *local_size;
  const char* only_with;  // set only by this launcher, where its rank variable is a common name; or null
  // Said where rankscope's MPI cannot join the launcher's job: what sets these variables, and what to do instead.
  const char* started_by;
  const char* instead;
};
constexpr const char* kStartWithOpenMpi = "Start rankscope with Open MPI's mpirun, or srun --mpi=pmix";
// The innermost launcher first: torchrun's processes inherit the variables
// of an srun or mpirun that started torchrun itself.
constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "torchrun",
     "Put rankscope between mpirun and torchrun, one per node: mpirun -n NODES --map-by ppr:1:node rankscope run "
     "-- torchrun --nproc-per-node K SCRIPT; or start the job with mpirun in torchrun's place (mpirun -n PROCESSES "
     "rankscope run -- python SCRIPT): sidecar mode gives the program RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and "
     "MASTER_PORT as torchrun does"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr, "Open MPI's mpirun", kStartWithOpenMpi},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr,
     "MPICH's or Intel MPI's mpiexec, or srun --mpi=pmi2", kStartWithOpenMpi},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", nullptr,
     "srun without --mpi=pmix", kStartWithOpenMpi},
};

// A variable by which a launcher tells its process who it is in the job.
bool names_a_launchers_rank(std::string_view name) {
  return std::ranges::any_of(kLaunchers, [&](const Launcher& l) {
    return name == l.rank || name == l.size || (l.only_with && name == l.only_with);
  });
}

Identity launch_identity() {
  // The launcher's name for the job, the same in every rank of it: the first
  // of these that is set (Slurm's with its step, one srun of the job).
  struct JobName {
    const char* prefix;
    const char *variable, *step;
  };
  static constexpr JobName kJobNames[] = {
      {"openmpi:", "OMPI_MCA_ess_base_jobid", nullptr},  // mpirun of Open MPI 3 and 4
      {"openmpi:", "OMPI_MCA_orte_ess_jobid", nullptr},  // older Open MPI
      {"pmix:", "PMIX_NAMESPACE", nullptr},              // prterun (Open MPI 5), srun --mpi=pmix
      {"slurm:", "SLURM_JOB_ID", "SLURM_STEP_ID"},
      {"torchelastic:", "TORCHELASTIC_RUN_ID", nullptr},
  };
  Identity id;
  for (const JobName& name : kJobNames) {
    const char* value = std::getenv(name.variable);
    if (!value || !*value) continue;
    const char* step = name.step ? std::getenv(name.step) : nullptr;
    id.job_id = name.prefix + std::string(value) + (step && *step ? "." + std::string(step) : "");
    break;
  }
  for (const Launcher& l : kLaunchers) {
    const auto rank = env_number(l.rank);
    if (!rank || (l.only_with && !std::getenv(l.only_with))) continue;
    id.launcher = l.name;
    id.rank = *rank;
    id.world_size = env_number(l.size).value_or(1);
    id.local_rank = env_number(l.local_rank).value_or(0);
    id.local_size = env_number(l.local_size).value_or(1);
    break;
  }
  return id;
}

fs::path this_executable() { return fs::read_symlink("/proc/self/exe"); }

// The agent's libraries: PREFIX/lib/rankscope beside PREFIX/bin/rankscope,
// or the build tree's for the rankscope built there (never for a copy).
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

std::optional<fs::path> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return fs::path(name);
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "/usr/bin:/bin";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const fs::path candidate = fs::path(std::string(rest.substr(0, colon))) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  return std::nullopt;
}

// Searches a file for any of `needles`; returns the one found, or "".
std::string file_mentions(const fs::path& path, std::initializer_list<std::string_view> needles) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string found;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* data = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (data != MAP_FAILED) {
      const std::string_view text(static_cast<const char*>(data), static_cast<size_t>(st.st_size));
      for (std::string_view needle : needles) {
        if (text.find(needle) != std::string_view::npos) {
          found = needle;
          break;
        }
      }
      ::munmap(data, static_cast<size_t>(st.st_size));
    }
  }
  ::close(fd);
  return found;
}

bool file_starts_with(const fs::path& path, std::string_view prefix) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return false;
  std::string head(prefix.size(), '\0');
  const bool same = std::fread(head.data(), 1, head.size(), file) == head.size() && head == prefix;
  std::fclose(file);
  return same;
}

void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

// The environment every mode gives the agent: its settings, then the way
// each capture source's library enters it.
void set_agent_environment(const RunOptions& options, const Identity& id, const fs::path& shard_dir,
                           const std::string& mode) {
  agent::AgentSettings settings;
  settings.shard_dir = shard_dir.string();
  settings.capture = options.capture;
  settings.buffer_mb = options.buffer_mb;
  settings.flush_ms = options.flush_ms;
  settings.hang_timeout_s = options.hang_timeout_s;
  settings.hang_action = options.hang_action;
  settings.ring_s = options.ring_s;
  settings.delay_s = options.delay_s;
  settings.duration_s = options.duration_s;
  settings.paused = options.paused;
  settings.steps = options.steps;
  settings.capture_range = options.capture_range;
  settings.rank = id.rank;
  settings.world_size = id.world_size;
  settings.local_rank = id.local_rank;
  settings.local_size = id.local_size;
  settings.launcher = id.launcher;
  settings.job_id = id.job_id;
  settings.mode = mode;
  settings.sync_interval_s = options.sync_interval_s;
  settings.clock_thread = options.clock_thread;
  for (const auto& [variable, value] : settings.environment()) set(std::string(variable).c_str(), value);
  // Each capture source is entered through the way its library loads tools;
  // every one names the same capture library, already loaded by the preload.
  const std::string capture_library = agent_library("librankscope_capture.so").string();
  const uint32_t capture = agent::parse_capture_list(options.capture);
  if (capture & agent::kCaptureNvtx) set("NVTX_INJECTION64_PATH", capture_library);
  if (capture & agent::kCaptureCuda) set("CUDA_INJECTION64_PATH", capture_library);
  if (capture & agent::kCaptureNccl) set("NCCL_PROFILER_PLUGIN", capture_library);
  // Python interpreters find rankscope's sitecustomize first (docs/agent.md, "PyTorch").
  if (capture & agent::kCapturePython) {
    const char* path = std::getenv("PYTHONPATH");
    set("PYTHONPATH", agent_library("python").string() + (path && *path ? ":" + std::string(path) : ""));
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
  set("LD_PRELOAD", preload);
}

// Every rank of one job writes the same mark into the shard folder before its
// application can write a shard. A folder whose mark names another job, or
// that holds shards and no mark, holds what an earlier job left there (it
// ended without MPI_Finalize, or its timeline could not be written): that
// job's only record, never written over.
constexpr const char* kJobMarkFileName = "job";

// The same in every rank of the job and no other; empty where the launcher
// names no job and there are several ranks, which then cannot tell theirs.
std::string job_mark(const Identity& id) {
  if (!id.job_id.empty()) return id.job_id;
  return id.world_size == 1 ? "pid:" + std::to_string(::getpid()) : std::string();
}

std::optional<std::string> read_job_mark(const fs::path& path) {
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (!file) return std::nullopt;
  char text[512] = {};
  const size_t length = std::fread(text, 1, sizeof(text) - 1, file);
  std::fclose(file);
  return std::string(text, length);
}

// Whether every rank's shard says its rank reached MPI_Finalize: complete
// as the merge will call it, with the shim's work in MPI_Finalize counted.
bool every_rank_finalized(const fs::path& shard_dir, int world_size) {
  for (int rank = 0; rank < world_size; ++rank) {
    try {
      const ShardScan scan = ShardFile((shard_dir / shard_file_name(rank)).string()).scan();
      if (shard_rank_status(scan) != RankStatus::kComplete || scan.counters.get(counter::kCostMpiFinalizeNs) == 0) {
        return false;
      }
    } catch (const Error&) {
      return false;
    }
  }
  return world_size > 0;
}

bool holds_shards(const fs::path& shard_dir) {
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(shard_dir, ignored)) {
    if (is_shard_file(entry.path().filename().string())) return true;
  }
  return false;
}

void claim_shard_folder(const fs::path& shard_dir, const Identity& id) {
  const std::string mark = job_mark(id);
  if (mark.empty()) return;
  const fs::path mark_path = shard_dir / kJobMarkFileName;
  const auto refuse = [&](const std::string& other_job) {
    if (shard_folder_in_use(shard_dir.string())) {
      throw Error("cannot write the shards to " + shard_dir.string() + ": a job still running writes its shards there" +
                  (other_job.empty() ? std::string() : " (" + other_job + ")") + "; wait for it to end, or choose another -o");
    }
    throw Error("cannot write the shards to " + shard_dir.string() + ": it holds the shards of an earlier job" +
                (other_job.empty() ? std::string() : " (" + other_job + ")") + ", its only record; merge them with `" +
                "rankscope merge " + shard_dir.string() + " -o FILE` and then remove the folder, or choose another -o");
  };
  // Twice at most: a rank of this job may put its mark in place between our look and our own.
  for (int look = 0; look < 2; ++look) {
    // Shards first, the mark second: a rank of this job places the mark before
    // its application writes, so shards seen before a look that finds no mark
    // are an earlier job's, while shards of this job's faster ranks come with
    // its mark.
    const bool had_shards = holds_shards(shard_dir);
    if (const auto found = read_job_mark(mark_path)) {
      if (*found != mark) refuse(*found);
      return;
    }
    if (had_shards) refuse("");
    // Written whole, then put in place unless another rank was first.
    const fs::path partial = shard_dir / (std::string(kJobMarkFileName) + "." + std::to_string(::getpid()) + ".partial");
    std::FILE* file = std::fopen(partial.c_str(), "w");
    bool written = file && std::fwrite(mark.data(), 1, mark.size(), file) == mark.size();
    if (file) written = std::fclose(file) == 0 && written;
    if (!written) throw Error("cannot write " + partial.string() + ": " + errno_text(errno));
    const int placed = ::link(partial.c_str(), mark_path.c_str());
    const int link_error = errno;
    std::error_code ignored;
    fs::remove(partial, ignored);
    if (placed == 0) return;
    if (link_error != EEXIST) throw Error("cannot write " + mark_path.string() + ": " + errno_text(link_error));
  }
}

// Made, and claimed for this job, before any rank's application can write there.
void prepare_shard_folder(const fs::path& shard_dir, const Identity& id) {
  std::error_code error;
  fs::create_directories(shard_dir, error);
  if (error || ::access(shard_dir.c_str(), W_OK) != 0) {
    throw Error("cannot write the shards to " + shard_dir.string() + ": " +
                (error ? error.message() : std::strerror(errno)) + " (choose another -o)");
  }
  claim_shard_folder(shard_dir, id);
}

// The file torchrun's workers under sidecar RANK list their shards in.
constexpr std::string_view kWorkerListPrefix = "torchrun-workers-";
std::string worker_list_name(int rank) { return std::string(kWorkerListPrefix) + std::to_string(rank); }

// Once the timeline holds them. A folder made read-only meanwhile keeps
// them: said, as they take room the user may want back.
void remove_merged_shards(const fs::path& shard_dir, int world_size) {
  std::error_code failed;
  for (int rank = 0; rank < world_size; ++rank) {
    std::error_code error;
    fs::remove(shard_dir / shard_file_name(rank), error);
    if (error && !failed) failed = error;
  }
  if (failed) {
    std::fprintf(stderr, "rankscope run: the timeline is whole, but its shards stay in %s: they cannot be removed (%s)\n",
                 shard_dir.c_str(), failed.message().c_str());
  }
}

// Once no shard is left in the folder, what the job kept beside them goes, and the folder with it.
void remove_shard_folder(const fs::path& shard_dir) {
  if (holds_shards(shard_dir)) return;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(shard_dir, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name == agent::kHangFileName || name == agent::kControlFileName || name == kJobMarkFileName ||
        name.starts_with(kWorkerListPrefix)) {
      fs::remove(entry.path(), ignored);
    }
  }
  fs::remove(shard_dir, ignored);
}

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

// What stopped the application while it ran: the last signal that did
// (0: none), and the time it spent stopped in all.
struct ProcessStops {
  int signal = 0;
  uint64_t ns = 0;
};

// A forked program, and exec's errno when it could not be run (0: it runs).
struct StartedProgram {
  pid_t pid = -1;
  int exec_error = 0;
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

void pass_signals_to(pid_t child, std::initializer_list<int> signals) {
  g_application_pid = child;
  struct sigaction forward {};
  forward.sa_handler = pass_signal_on;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  for (const int signal_number : signals) ::sigaction(signal_number, &forward, nullptr);
}

StartedProgram start_application(const std::vector<std::string>& command, const std::vector<fs::path>& preload) {
  const pid_t parent = ::getpid();
  ExecReport report;
  const pid_t child = ::fork();
  if (child < 0) throw Error(std::string("cannot start the application: fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // Killed with this process (mpirun's SIGKILL reaches only the process it started).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) std::_Exit(1);
    set(agent::kEnvAgentPid, std::to_string(::getpid()));
    prepend_preload(preload);
    report.exec(command);
  }
  pass_signals_to(child, {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGALRM});
  return {child, report.exec_error()};
}

// Follows the application through wait4, and says when a signal stops it
// (SIGSTOP, SIGTSTP): it then makes no progress, and to a hang watch it is a
// rank that never arrives. The time it spent stopped goes to its shard.
class ApplicationWatch {
 public:
  ApplicationWatch(pid_t child, int rank) : child_(child), rank_(rank) {}

  // One wait4 (`flags`: 0 waits, WNOHANG looks); true once it has ended.
  bool ended(int flags, rusage& usage) {
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
  int status() const { return status_; }
  const ProcessStops& stops() const { return stops_; }

 private:
  void add_stopped_time() {
    stops_.ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - *stopped_since_).count());
    stopped_since_.reset();
  }

  pid_t child_;
  int rank_;
  int status_ = 0;
  ProcessStops stops_;
  std::optional<std::chrono::steady_clock::time_point> stopped_since_;
};

int wait_for(pid_t child, rusage* usage = nullptr) {
  int status = 0;
  while (::wait4(child, &status, 0, usage) < 0) {
    if (errno != EINTR) throw Error(std::string("waiting for the application failed: ") + std::strerror(errno));
  }
  return status;
}

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
  DeathRecord() : oom_kills_before_(oom_kill_count(::getpid())) {}

  // The time a signal kept the application stopped, before add_if_killed:
  // for a rank that ended in any way.
  static void add_stops(const fs::path& shard, pid_t application, const ProcessStops& stops, int rank) {
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

  void add_if_killed(const fs::path& shard, pid_t application, int status, const rusage& usage, int rank) const {
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

 private:
  // Stamped as the rank was last heard from, which this does not change.
  static void append_counters(const fs::path& shard, const ShardScan& scan, const Counters& counters) {
    ShardWriter writer;
    if (!writer.open_existing(shard.string()) ||
        !writer.write_counters(counters, scan.last_ns == INT64_MIN ? 0 : scan.last_ns)) {
      throw Error(writer.error());
    }
  }

  std::optional<uint64_t> oom_kills_before_;
};

// The application's exit status as this process's own: the same code, or
// death by the same signal.
int pass_status_on(int status) {
  if (WIFSIGNALED(status)) {
    ::signal(WTERMSIG(status), SIG_DFL);
    ::raise(WTERMSIG(status));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// The `rankscope merge` that makes the timeline of the shards.
std::vector<std::string> merge_command(const fs::path& shard_dir, const RunOptions& options) {
  std::vector<std::string> command = {this_executable().string(), "merge", shard_dir.string(), "-o", options.output};
  if (options.overwrite) command.emplace_back("--overwrite");
  return command;
}

std::string command_line(const std::vector<std::string>& command) {
  std::string line;
  for (const std::string& arg : command) line += (line.empty() ? "" : " ") + arg;
  return line;
}

// Nodes without a shared file system: each node's ranks wrote their shards
// into a folder of that name on its own disk. Merging what rank 0 sees would
// make a timeline of its node alone; the shards stay for the user to gather.
void report_unshared_folder(const fs::path& shard_dir, const RunOptions& options, int ranks_elsewhere, int world_size) {
  std::fprintf(stderr,
               "rankscope run: %s is not one folder shared by every node: %d of %d ranks wrote their shards into a "
               "folder of that name on their own node. No timeline was written; every shard is kept where it was "
               "written. Copy the shard folders of every node into one place and merge them: rankscope merge "
               "FOLDER... -o %s (docs/agent.md, \"Nodes without a shared file system\")\n",
               shard_dir.c_str(), ranks_elsewhere, world_size, options.output.c_str());
}

// The timeline is written by `rankscope merge` in a process of its own, a
// lone MPI process, not a member of the job: everything mpirun told this
// process about the job is left out of its environment.
int merge_in_own_process(std::vector<std::string> command) {
  std::vector<std::string> environment;
  for (char** variable = environ; *variable; ++variable) {
    const std::string_view text(*variable);
    if (text.starts_with("OMPI_") || text.starts_with("PMIX_") || text.starts_with("PMI_") ||
        names_a_launchers_rank(text.substr(0, text.find('=')))) {
      continue;
    }
    environment.emplace_back(text);
  }
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (std::string& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t merger = ::fork();
  if (merger < 0) return -1;
  if (merger == 0) {
    // What the merge says is rankscope's, not the application's output.
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    std::_Exit(127);
  }
  const int status = wait_for(merger);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// In-process mode: the application runs in a child of this process, with the
// capture library and the MPI shim preloaded, which need nothing beyond the C
// and C++ runtimes and the application's own MPI library. Once it has ended,
// this process looks at what it left, and on the first rank writes the
// timeline, so no HDF5 or merge code ever enters the application.
int run_in_process(const RunOptions& options, const Identity& id, const fs::path& shard_dir) {
  set_agent_environment(options, id, shard_dir, "inprocess");
  const DeathRecord death;
  const StartedProgram application = start_application(
      options.command, {agent_library("librankscope_mpi.so"), agent_library("librankscope_capture.so")});
  rusage usage{};
  ApplicationWatch watch(application.pid, id.rank);
  while (!watch.ended(0, usage)) continue;
  const int status = watch.status();
  DeathRecord::add_stops(shard_dir / shard_file_name(id.rank), application.pid, watch.stops(), id.rank);
  death.add_if_killed(shard_dir / shard_file_name(id.rank), application.pid, status, usage, id.rank);

  // The MPI shim leaves this mark in MPI_Finalize once every rank's shard is
  // complete (docs/agent.md).
  const fs::path finalized = shard_dir / shard_file_name(id.rank, agent::kFinalizedSuffix);
  std::error_code ignored;
  // Where the mark could not be made (a full disk, the folder made read-only
  // meanwhile), every rank's shard closed at MPI_Finalize says the same.
  const bool all_complete = fs::exists(finalized, ignored) || (id.rank == 0 && every_rank_finalized(shard_dir, id.world_size));
  int ranks_elsewhere = 0;
  if (std::FILE* mark = std::fopen(finalized.c_str(), "r")) {
    if (std::fscanf(mark, "%d", &ranks_elsewhere) != 1) ranks_elsewhere = 0;
    std::fclose(mark);
  }
  fs::remove(finalized, ignored);
  if (id.rank == 0) {
    const std::vector<std::string> merge = merge_command(shard_dir, options);
    const int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!all_complete && !holds_shards(shard_dir)) {
      // Where it could not be run, "cannot run" has said why.
      if (application.exec_error == 0) {
        std::fprintf(stderr, "rankscope run: the application ended (exit status %d) before any rank wrote a shard\n",
                     exit_status);
      }
    } else if (!all_complete) {
      std::fprintf(stderr,
                   "rankscope run: the application ended without calling MPI_Finalize on every rank (exit status %d): "
                   "its shards are kept in %s; merge them with: %s\n",
                   exit_status, shard_dir.c_str(), command_line(merge).c_str());
    } else if (ranks_elsewhere > 0) {
      report_unshared_folder(shard_dir, options, ranks_elsewhere, id.world_size);
    } else if (merge_in_own_process(merge) != 0) {
      std::fprintf(stderr, "rankscope run: writing the timeline failed; the shards stay in %s for: %s\n",
                   shard_dir.c_str(), command_line(merge).c_str());
    } else {
      remove_merged_shards(shard_dir, id.world_size);
    }
  }
  // The last rank to get here finds no shard left, as does every rank of a
  // job whose application wrote none (it could not start, say).
  remove_shard_folder(shard_dir);
  return pass_status_on(status);
}

// ---------------------------------------------------------- sidecar ---

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr) >> 24) == 127;
  }
  return address->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
}

// Where the other hosts reach rank 0's host, for torch.distributed's
// rendezvous: its host name, unless that names only a loopback address (as
// Debian's installer writes into /etc/hosts: 127.0.1.1), when no other host
// could reach it by that name; then the first IPv4 address of an interface
// that is up and not loopback. A MASTER_ADDR the user set wins.
std::string master_address() {
  if (const char* given = std::getenv("MASTER_ADDR"); given && *given) return given;
  const std::string name = host_name();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  bool reachable_by_name = false;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) == 0) {
    for (const addrinfo* a = found; a; a = a->ai_next) reachable_by_name = reachable_by_name || !is_loopback(a->ai_addr);
    ::freeaddrinfo(found);
  }
  if (reachable_by_name) return name;
  ifaddrs* interfaces = nullptr;
  std::string address = name;
  if (::getifaddrs(&interfaces) == 0) {
    for (const ifaddrs* i = interfaces; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) || is_loopback(i->ifa_addr)) continue;
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
      address = text;
      break;
    }
    ::freeifaddrs(interfaces);
  }
  return address;
}

// A port free on rank 0's host now, for torch.distributed's rendezvous,
// unless the user set MASTER_PORT.
int given_or_free_port() {
  if (const char* given = std::getenv("MASTER_PORT"); given && *given) {
    const std::optional<int> port = parse_integer<int>(given);
    if (!port || *port < 1 || *port > 65535) {
      throw Error(std::string("MASTER_PORT='") + given + "' is not a port number (1-65535)");
    }
    return *port;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  socklen_t length = sizeof(address);
  int port = 29500;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) ::close(fd);
  return port;
}

std::string broadcast_string(std::string text, int root) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, root, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, root, MPI_COMM_WORLD);
  return text;
}

// torchrun, by its own name or as `python -m torch.distributed.run` (or
// torch.distributed.launch): its workers, not it, are the job's ranks.
bool is_torchrun(const std::vector<std::string>& command) {
  if (fs::path(command.at(0)).filename() == "torchrun") return true;
  for (size_t i = 1; i + 1 < command.size(); ++i) {
    if (command[i] == "-m") return command[i + 1] == "torch.distributed.run" || command[i + 1] == "torch.distributed.launch";
  }
  return false;
}

// Sets `name` unless the user did.
void set_unless_given(const char* name, const std::string& value) {
  if (const char* given = std::getenv(name); !given || !*given) set(name, value);
}

class Sidecar {
 public:
  Sidecar(const RunOptions& options, const Identity& launched, const fs::path& shard_dir)
      : options_(options), shard_dir_(shard_dir) {
    MPI_Comm_rank(MPI_COMM_WORLD, &id_.rank);
    const clocksync::Placement where = clocksync::placement(MPI_COMM_WORLD);
    id_.world_size = where.world_size;
    id_.local_rank = where.local_rank;
    id_.local_size = where.local_size;
    id_.launcher = launched.launcher;
    id_.job_id = launched.job_id;
    node_id_ = where.node_id;
    torchrun_ = is_torchrun(options.command);
    worker_list_ = shard_dir / worker_list_name(id_.rank);
    std::error_code ignored;
    fs::remove(worker_list_, ignored);  // an earlier job's, which its shards left behind
    job_start_wall_ns_ = clocksync::job_start_wall_ns(MPI_COMM_WORLD);
    sync_.emplace(MPI_COMM_WORLD, clocksync::Clock::for_rank(id_.rank));
  }

  int run() {
    measure();
    const std::string master_addr = broadcast_string(id_.rank == 0 ? master_address() : "", 0);
    int master_port = id_.rank == 0 ? given_or_free_port() : 0;
    MPI_Bcast(&master_port, 1, MPI_INT, 0, MPI_COMM_WORLD);

    const DeathRecord death;
    const StartedProgram program = start_child(master_addr, master_port);
    rusage usage{};
    ApplicationWatch watch(program.pid, id_.rank);
    wait_with_sync_rounds(watch, usage);
    const int status = watch.status();
    // torchrun's workers, not torchrun, write the shards.
    if (!torchrun_) {
      DeathRecord::add_stops(shard_dir_ / shard_file_name(id_.rank), program.pid, watch.stops(), id_.rank);
      death.add_if_killed(shard_dir_ / shard_file_name(id_.rank), program.pid, status, usage, id_.rank);
    }
    measure();
    // A program that could not be run wrote no shard to add them to.
    if (program.exec_error == 0) append_measurements();
    int started = program.exec_error == 0 ? 1 : 0, ranks_started = 0;
    MPI_Allreduce(&started, &ranks_started, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (ranks_started > 0) write_timeline();
    else if (id_.rank == 0) remove_shard_folder(shard_dir_);
    return status;
  }
 private:
  StartedProgram start_child(const std::string& master_addr, int master_port) {
    set_agent_environment(options_, id_, shard_dir_, "sidecar");
    // The program's events go on the clock this process measures (its TSC
    // calibration, not one the program would make of its own).
    set(clocksync::kClockBaseVariable, clocksync::process_base_clock().text());
    set(agent::kEnvNodeId, std::to_string(node_id_));
    set(agent::kEnvJobStart, std::to_string(job_start_wall_ns_));
    if (!torchrun_) {  // torchrun gives its workers these itself; it takes none of them
      set("RANK", std::to_string(id_.rank));
      set("WORLD_SIZE", std::to_string(id_.world_size));
      set("LOCAL_RANK", std::to_string(id_.local_rank));
      set("LOCAL_WORLD_SIZE", std::to_string(id_.local_size));
      set("MASTER_ADDR", master_addr);
      set("MASTER_PORT", std::to_string(master_port));
    } else {
      // One torchrun per node, one node per sidecar: torchrun's own
      // rendezvous, as its PET_ variables set its options (where the
      // command line gives none).
      set_unless_given("PET_NNODES", std::to_string(id_.world_size));
      set_unless_given("PET_NODE_RANK", std::to_string(id_.rank));
      set_unless_given("PET_MASTER_ADDR", master_addr);
      set_unless_given("PET_MASTER_PORT", std::to_string(master_port));
      set(agent::kEnvWorkerList, worker_list_.string());
    }
    const std::vector<fs::path> preload = {agent_library("librankscope_sidecar_guard.so"),
                                           agent_library("librankscope_capture.so")};
    ExecReport report;
    const pid_t child = ::fork();
    if (child < 0) throw Error(std::string("cannot start the application: fork failed: ") + std::strerror(errno));
    if (child == 0) {
      set(torchrun_ ? agent::kEnvWorkersOf : agent::kEnvAgentPid, std::to_string(::getpid()));
      prepend_preload(preload);
      report.exec(options_.command);
    }
    // mpirun passes SIGUSR1 and SIGUSR2 on to the processes it started: they
    // are the program's (a checkpoint, a profiler's trigger), not the end of
    // this sidecar, which they would be by default.
    pass_signals_to(child, {SIGUSR1, SIGUSR2});
    return {child, report.exec_error()};
  }

  // Every sidecar takes part in every round, so they tick together: each
  // tick, an allreduce says whether any application still runs.
  void wait_with_sync_rounds(ApplicationWatch& watch, rusage& usage) {
    using Clock = std::chrono::steady_clock;
    constexpr auto kTick = std::chrono::milliseconds(100);
    auto next_round = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(options_.sync_interval_s));
    bool running = true;
    for (;;) {
      if (running && watch.ended(WNOHANG, usage)) running = false;
      // {still running, round due} here; anywhere, after. Idle: the
      // sidecars' cores are the application's.
      int mine[2] = {running ? 1 : 0, Clock::now() >= next_round ? 1 : 0}, anywhere[2] = {0, 0};
      MPI_Request request;
      MPI_Iallreduce(mine, anywhere, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &request);
      clocksync::wait_idle(request);
      if (!anywhere[0]) return;
      if (anywhere[1]) {
        measure();
        next_round = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.sync_interval_s));
      }
      std::this_thread::sleep_for(kTick);
    }
  }

  void measure() {
    if (const auto point = sync_->round()) points_.push_back(*point);
    else std::fprintf(stderr, "rankscope run: rank %d: %s\n", id_.rank, sync_->error().c_str());
    // Every sidecar leaves the round once all have measured, and none spins
    // meanwhile beside pairs still measuring.
    clocksync::idle_barrier(MPI_COMM_WORLD);
  }

  // The shards this sidecar's program wrote: its own rank's, or those of
  // torchrun's workers (each on this node's clock), as they listed them.
  std::vector<fs::path> program_shards() const {
    if (!torchrun_) return {shard_dir_ / shard_file_name(id_.rank)};
    std::vector<fs::path> shards;
    std::FILE* list = std::fopen(worker_list_.c_str(), "r");
    if (!list) return shards;
    char line[256];
    while (std::fgets(line, sizeof(line), list)) {
      const std::string name(line, ::strcspn(line, "\n"));
      // A restarted worker lists its shard again.
      if (is_shard_file(name) && std::ranges::find(shards, shard_dir_ / name) == shards.end()) {
        shards.push_back(shard_dir_ / name);
      }
    }
    std::fclose(list);
    return shards;
  }

  // The measurements go into the program's shards, after what they wrote.
  void append_measurements() {
    shards_ = program_shards();
    for (const fs::path& shard : shards_) {
      ShardWriter writer;
      if (!writer.open_existing(shard.string()) ||
          !writer.write_sync_points(points_, clocksync::Clock::for_rank(id_.rank).now_ns())) {
        std::fprintf(stderr, "rankscope run: rank %d: cannot add clock measurements to %s: %s\n", id_.rank,
                     shard.c_str(), writer.error().c_str());
      }
    }
  }

  void write_timeline() {
    if (const int elsewhere = clocksync::ranks_not_sharing_folder(MPI_COMM_WORLD, shard_dir_.string()); elsewhere > 0) {
      if (id_.rank == 0) report_unshared_folder(shard_dir_, options_, elsewhere, id_.world_size);
      return;
    }
    try {
      MergeOptions merge;
      merge.inputs = {shard_dir_.string()};
      merge.output = options_.output;
      merge.replace_output = options_.overwrite;
      merge.derive_tables = cli::matched_collectives_writer("run");
      const MergeResult result = merge_shards(MPI_COMM_WORLD, merge);
      if (id_.rank == 0) {
        std::fputs((merge_warnings_text(result, "run") + missing_and_dead_ranks_text(result, "shard")).c_str(), stderr);
        std::fprintf(stderr, "rankscope run: timeline %s: %d ranks, %llu events (merged in %.2f s)\n",
                     options_.output.c_str(), result.world_size, static_cast<unsigned long long>(result.events),
                     result.seconds);
      }
      if (result.dead_ranks.empty()) {
        std::error_code ignored;
        for (const fs::path& shard : shards_) fs::remove(shard, ignored);
        fs::remove(worker_list_, ignored);
        MPI_Barrier(MPI_COMM_WORLD);
        if (id_.rank == 0) {
          remove_shard_folder(shard_dir_);
          report_earlier_runs();
        }
      }
    } catch (const Error& e) {
      if (id_.rank == 0) {
        // A folder with no shard (the application could not start, say) is no result to keep.
        if (holds_shards(shard_dir_)) {
          std::fprintf(stderr, "rankscope run: writing the timeline failed: %s; the shards stay in %s for `rankscope merge`\n",
                       e.what(), shard_dir_.c_str());
        } else {
          remove_shard_folder(shard_dir_);
          std::fprintf(stderr, "rankscope run: writing the timeline failed: %s\n", e.what());
        }
      }
    }
  }

  // torchelastic's restarts leave the workers' earlier runs in restart-N/.
  void report_earlier_runs() const {
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(shard_dir_, ignored)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_directory() || !name.starts_with(agent::kRestartFolderPrefix)) continue;
      std::fprintf(stderr,
                   "rankscope run: torchelastic restarted workers; the timeline holds their last run, and an earlier "
                   "one's shards are kept in %s (rankscope merge %s -o %s.h5)\n",
                   entry.path().c_str(), entry.path().c_str(), name.c_str());
    }
  }

  const RunOptions& options_;
  fs::path shard_dir_;
  Identity id_;
  bool torchrun_ = false;
  fs::path worker_list_;  // torchrun's workers list their shards here
  std::vector<fs::path> shards_;  // what the program wrote
  int node_id_ = 0;
  int64_t job_start_wall_ns_ = 0;
  std::optional<clocksync::ClockSynchronizer> sync_;
  std::vector<SyncPoint> points_;
};

int run_sidecar(const RunOptions& options, const Identity& id, const fs::path& shard_dir) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
  // Refused by every rank together, before anything is written or run: a
  // rank that went on alone would wait for the others.
  std::exception_ptr refusal;
  try {
    int world_size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    // Rank 0 alone would run its program as a job of one, and the others not at all.
    check_launcher_joined(world_size, LoneRankZero::kRefused);
    prepare_shard_folder(shard_dir, id);
  } catch (const Error&) {
    refusal = std::current_exception();
  }
  int refused = refusal ? 1 : 0, refused_anywhere = 0;
  MPI_Allreduce(&refused, &refused_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (refused_anywhere) {
    // The folder this rank made and claimed is no earlier job's record: the
    // next job must find it free. Before MPI_Finalize, which the refusing
    // rank leaves only after every rank came: its exit has mpirun end the
    // others, and a rank ended first would leave its claim behind.
    if (!refusal) remove_shard_folder(shard_dir);
    MPI_Finalize();
    if (refusal) std::rethrow_exception(refusal);
    return kRunErrorStatus;  // the rank that refused says why
  }
  int status = 0;
  try {
    Sidecar sidecar(options, id, shard_dir);
    status = sidecar.run();
  } catch (const Error& e) {
    std::fprintf(stderr, "rankscope run: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return pass_status_on(status);
}

}  // namespace

// The libraries of MPI implementations, by their names without the version:
// libmpi.so.40 is Open MPI's C library, libmpich.so.12 MPICH's, libmpi.so.12
// that of MPICH's ABI (Intel MPI's among them); the others are Fortran's.
constexpr std::string_view kMpiCLibraries[] = {"libmpi", "libmpich"};
constexpr std::string_view kMpiFortranLibraries[] = {"libmpi_mpifh", "libmpi_usempif08", "libmpi_usempi_ignore_tkr",
                                                     "libmpifort", "libmpichfort"};

bool named_in(std::string_view library, std::span<const std::string_view> stems) {
  library.remove_prefix(library.rfind('/') + 1);  // a NEEDED entry or ldd's line may give a path
  const size_t suffix = library.find(".so");
  return suffix != std::string_view::npos && std::ranges::find(stems, library.substr(0, suffix)) != stems.end();
}
bool is_mpi_c_library(std::string_view library) { return named_in(library, kMpiCLibraries); }
bool is_mpi_library(std::string_view library) {
  return is_mpi_c_library(library) || named_in(library, kMpiFortranLibraries);
}

// The libraries a 64-bit ELF program names in its own DT_NEEDED entries, read
// from the file (a millisecond, where ldd takes tens); empty for anything else.
std::vector<std::string> elf_needed(const fs::path& path) {
  std::vector<std::string> needed;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return needed;
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const auto size = regular ? static_cast<size_t>(st.st_size) : 0;
  void* data = size >= sizeof(Elf64_Ehdr) ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (data == MAP_FAILED) return needed;
  const auto* bytes = static_cast<const unsigned char*>(data);
  const auto inside = [&](uint64_t offset, uint64_t length) { return offset <= size && length <= size - offset; };
  const auto* header = static_cast<const Elf64_Ehdr*>(data);
  if (header->e_ident[EI_CLASS] == ELFCLASS64 && header->e_ident[EI_DATA] == ELFDATA2LSB &&
      header->e_phentsize == sizeof(Elf64_Phdr) && inside(header->e_phoff, uint64_t{header->e_phnum} * sizeof(Elf64_Phdr))) {
    const auto* segments = reinterpret_cast<const Elf64_Phdr*>(bytes + header->e_phoff);
    const std::span<const Elf64_Phdr> all(segments, header->e_phnum);
    // Addresses in the dynamic section are where the loader maps them: back to file offsets.
    const auto file_offset = [&](uint64_t address) -> std::optional<uint64_t> {
      for (const Elf64_Phdr& segment : all) {
        if (segment.p_type == PT_LOAD && address >= segment.p_vaddr && address - segment.p_vaddr < segment.p_filesz) {
          return segment.p_offset + (address - segment.p_vaddr);
        }
      }
      return std::nullopt;
    };
    for (const Elf64_Phdr& segment : all) {
      if (segment.p_type != PT_DYNAMIC || !inside(segment.p_offset, segment.p_filesz)) continue;
      const std::span<const Elf64_Dyn> entries(reinterpret_cast<const Elf64_Dyn*>(bytes + segment.p_offset),
                                               segment.p_filesz / sizeof(Elf64_Dyn));
      std::optional<uint64_t> strings;
      for (const Elf64_Dyn& entry : entries) {
        if (entry.d_tag == DT_STRTAB) strings = file_offset(entry.d_un.d_ptr);
      }
      for (const Elf64_Dyn& entry : entries) {
        if (entry.d_tag == DT_NULL) break;
        if (entry.d_tag != DT_NEEDED || !strings || !inside(*strings + entry.d_un.d_val, 1)) continue;
        const char* name = reinterpret_cast<const char*>(bytes + *strings + entry.d_un.d_val);
        needed.emplace_back(name, ::strnlen(name, size - (*strings + entry.d_un.d_val)));
      }
    }
  }
  ::munmap(data, size);
  return needed;
}

// The MPI libraries an ELF program loads, by the names the loader looks for
// (libmpi.so.40): those the program names itself, and where these hold no C
// library, those it loads through its own libraries too (a program on
// libmeep_mpi, a Fortran one on libmpi_mpifh), as `ldd` resolves them:
// through the dynamic loader, so the program itself never runs.
std::vector<std::string> mpi_libraries_loaded(const fs::path& program) {
  std::vector<std::string> found;
  for (std::string& library : elf_needed(program)) {
    if (is_mpi_library(library)) found.push_back(std::move(library));
  }
  if (std::ranges::any_of(found, is_mpi_c_library)) return found;
  std::string command = "ldd '";
  for (const char c : program.string()) command += c == '\'' ? std::string("'\\''") : std::string(1, c);
  command += "' 2>/dev/null";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return found;
  char line[4096];
  // "\tlibmpi.so.40 => /usr/lib/x86_64-linux-gnu/libmpi.so.40 (0x...)"
  while (std::fgets(line, sizeof(line), pipe)) {
    std::string_view name(line);
    name.remove_prefix(std::min(name.find_first_not_of(" \t"), name.size()));
    name = name.substr(0, name.find_first_of(" \t\n"));
    if (is_mpi_library(name) && std::ranges::find(found, name) == found.end()) found.emplace_back(name);
  }
  ::pclose(pipe);
  return found;
}

bool is_elf(const fs::path& path) { return file_starts_with(path, "\x7f" "ELF"); }

// The program a command runs, found once for auto mode and the MPI check:
// its file on the PATH, and the MPI libraries it loads if it is an ELF
// program (ldd, where asked, takes tens of milliseconds).
struct ProgramFound {
  std::optional<fs::path> path;
  std::vector<std::string> mpi_libraries;
};

ProgramFound find_program_of(const std::vector<std::string>& command) {
  ProgramFound found{find_program(command.at(0)), {}};
  if (found.path && is_elf(*found.path)) found.mpi_libraries = mpi_libraries_loaded(*found.path);
  return found;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string_view version(text, static_cast<size_t>(std::max(length, 0)));
  return std::string(version.substr(0, version.find(',')));
}

// In-process mode preloads the MPI shim, built against rankscope's MPI
// library: a program of another MPI (MPICH's libmpich.so.12, Intel MPI's
// libmpi.so.12) would load both, and its calls would reach its own MPI
// through the shim with the handles of the other (MPI_Init fails).
void check_program_mpi_is_the_shims(const ProgramFound& program) {
  const auto program_mpi = std::ranges::find_if(program.mpi_libraries, is_mpi_c_library);
  if (program_mpi == program.mpi_libraries.end()) return;
  const std::vector<std::string> needed = elf_needed(agent_library("librankscope_mpi.so"));
  const auto shim_mpi = std::ranges::find_if(needed, is_mpi_c_library);
  if (shim_mpi == needed.end() || fs::path(*shim_mpi).filename() == fs::path(*program_mpi).filename()) return;
  const std::string ours = mpi_library_version();
  throw Error(program.path->string() + " loads " + *program_mpi + ", another MPI than rankscope's (" + *shim_mpi + ", " +
              ours + "): rankscope cannot capture its MPI calls, and its capture would make them fail; profile a " +
              "build of the program for " + ours + " (made with its mpicc), started by its mpirun");
}

void check_launcher_joined(int mpi_world_size, LoneRankZero lone_rank_zero) {
  const Identity id = launch_identity();
  // Slurm tells the one process of a batch script that it is task 0 of all the job's tasks: alone, rightly.
  const bool alone_rightly = id.rank == 0 && (lone_rank_zero == LoneRankZero::kGoesOn || id.launcher == "slurm");
  if (mpi_world_size != 1 || id.world_size <= 1 || alone_rightly) return;
  const auto launcher =
      std::ranges::find_if(kLaunchers, [&](const Launcher& l) { return id.launcher == l.name; });
  if (launcher == std::end(kLaunchers)) return;
  throw Error(printf_string("this process is rank %d of %d to its launcher (%s, %s: %s), but alone in its world to "
                            "rankscope's MPI, %s, which cannot join that launcher's jobs: every process would take "
                            "itself for the whole job and write over the others' results. %s",
                            id.rank, id.world_size, launcher->rank, launcher->size, launcher->started_by,
                            mpi_library_version().c_str(), launcher->instead));
}

// Whether Python code imports mpi4py: a statement `import mpi4py...` or
// `from mpi4py...` (alone or in a list), not the word in a comment or a string.
bool imports_mpi4py(std::string_view code) {
  while (!code.empty()) {
    const size_t end = code.find('\n');
    std::string_view line = code.substr(0, end);
    code = end == std::string_view::npos ? std::string_view() : code.substr(end + 1);
    line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
    line = line.substr(0, line.find('#'));
    // Statements joined by ';' on one line.
    while (!line.empty()) {
      const size_t semicolon = line.find(';');
      std::string_view statement = line.substr(0, semicolon);
      line = semicolon == std::string_view::npos ? std::string_view() : line.substr(semicolon + 1);
      statement.remove_prefix(std::min(statement.find_first_not_of(" \t"), statement.size()));
      const bool from = statement.starts_with("from "), import = statement.starts_with("import ");
      if (!from && !import) continue;
      statement.remove_prefix(from ? 5 : 7);
      // `from mpi4py...`: the module itself; `import a, mpi4py.MPI as m`: any of the list.
      const std::string_view modules = from ? statement.substr(0, statement.find(' ')) : statement;
      for (size_t at = modules.find("mpi4py"); at != std::string_view::npos; at = modules.find("mpi4py", at + 1)) {
        const bool starts = at == 0 || modules[at - 1] == ' ' || modules[at - 1] == ',' || modules[at - 1] == '\t';
        const char after = at + 6 < modules.size() ? modules[at + 6] : ' ';
        if (starts && (after == ' ' || after == '.' || after == ',' || after == '\t' || after == '\r')) return true;
        if (from) break;
      }
    }
  }
  return false;
}

// A text file's whole contents; empty for anything unreadable or over 16 MiB.
std::string file_text(const fs::path& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  if (error || size > (uint64_t{16} << 20) || !fs::is_regular_file(path, error)) return {};
  std::string text(size, '\0');
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return {};
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  return text;
}

// Whether the program of `command` uses MPI, and what showed it: an MPI
// library among its dependencies, MPI calls in its binary, an import of
// mpi4py in its Python code (not the word in a comment).
bool program_uses_mpi(const ProgramFound& found, const std::vector<std::string>& command, std::string& evidence) {
  const auto& program = found.path;
  if (!program) return false;
  if (!found.mpi_libraries.empty()) {
    evidence = program->string() + " loads " + found.mpi_libraries.front();
    return true;
  }
  // C (libmpi.so) and Fortran (libmpi_mpifh.so, libmpi_usempif08.so, mpi_init_) programs.
  if (is_elf(*program)) {
    const std::string in_binary =
        file_mentions(*program, {"libmpi.so", "libmpi_mpifh.so", "libmpi_usempi", "MPI_Init", "mpi_init_"});
    if (!in_binary.empty()) {
      evidence = program->string() + " mentions " + in_binary;
      return true;
    }
  } else if (imports_mpi4py(file_text(*program))) {  // a script run by its #! line
    evidence = program->string() + " imports mpi4py";
    return true;
  }
  // An interpreter: its code given on the command line (python -c CODE, or
  // -m MODULE), or its script, the first argument that is not an option.
  for (size_t i = 1; i < command.size(); ++i) {
    if ((command[i] == "-c" || command[i] == "-m") && i + 1 < command.size()) {
      const std::string& code = command[i + 1];
      if (command[i] == "-c" ? !imports_mpi4py(code) : !code.starts_with("mpi4py")) break;
      evidence = command[0] + " " + command[i] + " imports mpi4py";
      return true;
    }
    if (command[i].empty() || command[i][0] == '-') continue;
    if (imports_mpi4py(file_text(command[i]))) {
      evidence = command[i] + " imports mpi4py";
      return true;
    }
    break;
  }
  return false;
}

// The agent maps its event buffers whole when it starts (recorder.cpp): a
// size the kernel refuses would leave every rank capturing nothing, found
// only after the job. The launcher asks for the same mapping first.
void check_buffers_can_be_mapped(uint64_t buffer_mb) {
  const uint64_t bytes = buffer_mb << 20;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw Error("--buffer-mb " + std::to_string(buffer_mb) + ": this node will not map that much for one rank (" +
                errno_text(errno) + "; the kernel's overcommit limit, or ulimit -v): give less");
  }
  ::munmap(memory, bytes);
}

int run_application(const RunOptions& options) {
  check_buffers_can_be_mapped(options.buffer_mb);
  const Identity id = launch_identity();
  const fs::path shard_dir = fs::absolute(options.output + ".shards");
  std::string mode = options.mode, why = "as asked";
  const ProgramFound program = mode == "sidecar" ? ProgramFound{} : find_program_of(options.command);
  if (mode == "auto") {
    std::string evidence;
    mode = program_uses_mpi(program, options.command, evidence) ? "inprocess" : "sidecar";
    why = mode == "inprocess" ? evidence : "found no MPI in " + options.command[0];
  }
  if (id.rank == 0) {
    std::fprintf(stderr, "rankscope run: %s mode (%s); timeline %s\n",
                 mode == "inprocess" ? "in-process" : "sidecar", why.c_str(), options.output.c_str());
  }
  if (mode == "sidecar") return run_sidecar(options, id, shard_dir);
  // Found now, with a clear message, rather than by every rank's agent later.
  check_program_mpi_is_the_shims(program);
  prepare_shard_folder(shard_dir, id);
  return run_in_process(options, id, shard_dir);
}

}  // namespace rankscope
