// The capture library's life: it starts when loaded into the process that
// `rankscope run` names, writes the rank's shard from a background thread,
// and finishes at MPI_Finalize (through the MPI shim) or at exit.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "rankscope/rank_agent/agent.h"
#include "capture_source.h"
#include "rankscope/clocksync/clock.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/process_usage.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/signals.h"
#include "rankscope/model/steps.h"
#include "rankscope/model/text.h"
#include "rankscope/model/version.h"
#include "code_location.h"
#include "doorbell.h"
#include "range_windows.h"
#include "recorder.h"

namespace rankscope::agent {
namespace {


using clocksync::wall_now_ns;

uint64_t nanoseconds_since(std::chrono::steady_clock::time_point then) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - then).count());
}

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

bool make_directories(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
    if (slash == std::string::npos) return true;
  }
}

// What one recorded call adds to the application's, in picoseconds: its two
// clock reads and the event copied, timed here in a few short batches (some
// microseconds in all) so that the figure is this machine's. The fastest
// batch counts: a batch the scheduler interrupted says nothing about the call.
// The wrappers' bookkeeping (communicator and request tables) is not in it.
uint64_t calibrate_event_cost_ps(const clocksync::Clock& clock) {
  constexpr int kBatches = 8, kRounds = 64;
  Event scratch[8];
  uint64_t fastest = UINT64_MAX;
  for (int batch = 0; batch < kBatches; ++batch) {
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) {
      Event e{};
      e.begin_ns = clock.now_ns();
      e.end_ns = clock.now_ns();
      scratch[i & 7] = e;
      asm volatile("" : : "r"(scratch) : "memory");  // the copies are kept
    }
    fastest = std::min(fastest, nanoseconds_since(began));
  }
  return fastest * 1000 / kRounds;
}

// A process may end off the agent's own paths (MPI_Finalize, exit): by a
// signal, or by _exit. Either asks the closer to close the shard and waits
// for it (close_before_end); these say which, for the shard's counters.
// Lock-free atomics: safe in a signal handler, and ordered across threads.
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<int> g_end_asked{0};
std::atomic<int> g_terminating_signal{0};
std::atomic<int> g_exit_called{0};
std::atomic<int> g_exit_status{0};
// A fatal signal the agent caught (docs/agent.md, "How each rank ended"): a
// crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL) or abort() (an assert,
// std::terminate, a watchdog's abort), with what the kernel said of it.
std::atomic<int> g_crash_signal{0};
std::atomic<int> g_crash_code{0};  // si_code where the kernel raised it; 0 where a process sent it
std::atomic<uint64_t> g_crash_address{0};
std::atomic<int> g_crash_thread{0};
std::atomic<uint64_t> g_crash_instruction{0};  // where a fault the kernel raised happened; 0: not one
std::atomic<int64_t> g_crash_at_ns{0};          // on the rank's clock
std::atomic<int> g_crash_sender{0};             // the pid that sent it, where a process did
std::atomic<bool> g_crash_claimed{false};       // by the first thread to crash, whose crash the counters describe
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free);

// The agent's own threads: the flusher, which writes at nice 19, and the
// closer, which closes the shard at the application's priority when a
// signal or _exit ends the process (a close at nice 19 waits seconds for a
// core where every core runs a rank, past mpirun's SIGKILL). Neither waits
// for a close begun elsewhere (a close at a normal end joins the flusher),
// and neither ends the process.
enum class OwnThread : uint8_t { kNone, kFlusher, kCloser };
void place_crash_handlers_once();
constinit thread_local OwnThread t_own_thread = OwnThread::kNone;

// What a flush writes: routinely, what came since the last (with --ring,
// nothing: the ring keeps it); a dump, the ring's window up to the instant
// it was asked for too; the final flush, everything, the ring's window included.
enum class Flush { kRoutine, kDump, kFinal };

class Agent {
 public:
  static constexpr uint32_t kMaxSyncPoints = 4096;

  // Starts capture if this process is the one `rankscope run` launched;
  // nullptr otherwise, or with a message when something is wrong.
  static Agent* start_from_environment();
  // Starts the requested capture sources and the flusher; once the agent is
  // reachable, as the sources use it.
  void start_capture();

  bool capturing(uint32_t source) const { return (capture_.load(std::memory_order_relaxed) & source) != 0; }
  const uint32_t* capture_bits() const {
    static_assert(sizeof(capture_) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
    return reinterpret_cast<const uint32_t*>(&capture_);
  }
  int64_t now() const { return clock_.now_ns(); }
  int32_t rank() const { return rank_; }
  const std::string& clock_base() const { return clock_base_; }
  Recorder& recorder() { return recorder_; }
  RangeWindows& range_windows() { return range_windows_; }
  const std::string& shard_path() const { return shard_path_; }
  bool in_this_process() const { return ::getpid() == pid_; }
  bool ring_on() const { return ring_ns_ > 0; }

  void disable(const std::string& reason);
  void source_off(uint32_t bit, const std::string& why);
  void set_placement(int32_t world_size, int32_t local_rank, int32_t local_size, int32_t node_id);
  void set_job_start(int64_t wall_ns);
  void add_sync_point(const SyncPoint& point);
  // Closes the shard, once: from the thread that calls it first. A second
  // caller waits for that close, but the agent's own threads.
  bool finish();
  // From a signal handler too: the shard's end record is written.
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  void stop_after_fork() {
    capture_.store(0, std::memory_order_relaxed);
    writer_.release_after_fork();
  }
  // From a signal handler: only async-signal-safe work.
  void wake_flusher() { flusher_bell_.ring(); }
  // From a signal handler or _exit: the closer closes the shard; the flusher
  // leaves its loop when it next runs.
  void ask_close() {
    closer_bell_.ring();
    wake_flusher();
  }
  // From SIGUSR2's handler: the ring's window is cut at the signal's
  // arrival, which mpirun makes about the same instant on every rank.
  void ask_ring_dump() {
    static_assert(std::atomic<int64_t>::is_always_lock_free);
    ring_dump_asked_at_ns_.store(clock_.now_ns(), std::memory_order_relaxed);
    wake_flusher();
  }
  void note_name_dropped() { names_dropped_.fetch_add(1, std::memory_order_relaxed); }
  void add_gpu_uuid(std::string_view uuid);
  void call_at_close(void (*add_counters)()) { at_close_.store(add_counters, std::memory_order_release); }
  void say(const std::string& line) const { report(line); }
  void add_to_counter(std::string_view name, uint64_t value) {
    std::lock_guard lock(source_counters_mutex_);
    source_counters_.add(name, value);
  }

 private:
  bool open(std::string& why_not);
  void keep_earlier_run();
  void join_worker_list() const;
  void flusher_loop();
  void closer_loop();
  void flush_once(Flush how, int64_t dump_at_ns = INT64_MAX);
  bool write_open_state(int64_t now, bool with_sources);
  bool write_crash();
  void watch_for_hang();
  void steer_window();
  void read_triggers(int64_t start_wall_ns);
  void steer_by_triggers(int64_t now, const std::function<int64_t(int64_t)>& local);
  void steer_by_ranges();
  std::string range_windows_summary() const;
  void dump_ring(const char* asked_by, int64_t at_ns);
  bool write_steered_windows(int64_t now, bool final_flush);
  int64_t capture_started_ns() const {
    std::lock_guard lock(metadata_mutex_);
    return metadata_.start_local_ns;
  }
  bool hang_told() const;
  Counters counters() const;
  void report(const std::string& line) const {
    std::fprintf(stderr, "rankscope agent: rank %d: %s\n", rank_, line.c_str());
  }

  std::atomic<uint32_t> capture_{0};
  uint32_t requested_ = 0;
  int32_t rank_ = 0;
  int32_t clock_rank_ = 0;  // whose clock it reads: its own, or a torchrun worker's sidecar's
  bool torchrun_worker_ = false;
  pid_t pid_ = 0;
  uint64_t buffer_bytes_ = 0;
  int flush_ms_ = 200;
  clocksync::Clock clock_;
  std::string clock_base_;  // clock_'s base clock as text, for the MPI shim
  Recorder recorder_;
  RangeWindows range_windows_{recorder_};
  std::vector<CaptureSource*> started_sources_;

  // The flusher thread owns the writer and what it has written so far.
  ShardWriter writer_;
  std::string shard_path_;
  StringTable::Cursor strings_written_;
  uint32_t tracks_written_ = 0;
  uint32_t sync_points_written_ = 0;
  int64_t counters_written_at_ = 0;
  bool write_failed_ = false;
  std::vector<std::pair<uint32_t, std::string_view>> string_batch_;
  std::vector<Track> track_batch_;

  SyncPoint sync_points_[kMaxSyncPoints];
  std::atomic<uint32_t> sync_points_ready_{0};
  std::mutex sync_points_mutex_;  // between callers of add_sync_point, never on the hot path

  mutable std::mutex metadata_mutex_;
  RankMetadata metadata_;
  bool metadata_changed_ = false;

  std::atomic<uint64_t> events_unwritten_{0};
  std::atomic<uint64_t> names_dropped_{0};
  std::atomic<void (*)()> at_close_{nullptr};  // rankscope_agent_at_close
  mutable std::mutex source_counters_mutex_;
  Counters source_counters_;  // counted by the capture sources (rankscope_agent_add_counter)
  std::atomic<uint64_t> agent_errors_{0};
  // What capture costs this process (docs/agent.md, "What capture costs").
  std::chrono::steady_clock::time_point started_;
  uint64_t start_cost_ns_ = 0;
  uint64_t event_cost_ps_ = 0;
  std::atomic<uint64_t> flusher_cpu_ns_{0};
  uint64_t finish_cost_ns_ = 0;
  bool crash_written_ = false;
  uint64_t shard_write_errors_ = 0;
  std::atomic<uint64_t> sources_off_{0};

  // Hangs: the flusher's own, but for the settings.
  int64_t hang_timeout_ns_ = 0;  // 0: not watched
  bool hang_abort_ = false;
  std::string hang_file_;
  bool hang_dumped_ = false;
  std::vector<Event> gpu_tasks_;  // NCCL's collectives, sends and receives running now, looked at each wake
  int64_t end_rank_at_ns_ = 0;  // --hang-action abort: when this rank ends itself (0: not due)
  bool end_signalled_ = false;
  int64_t hang_file_checked_ns_ = 0;  // when the hang file was last looked for
  // What was written as incomplete, by (track, begin, op, seq, peer): a NCCL
  // group's send and receive share their communicator's track and may share a
  // channel's start stamp.
  std::vector<std::tuple<uint32_t, int64_t, CommOp, uint64_t, int32_t>> calls_written_;

  // The flight recorder: the flusher's, but for the setting.
  int64_t ring_ns_ = 0;  // 0: off
  Recorder::RingLosses ring_losses_;
  uint64_t ring_dumps_ = 0;
  int64_t signal_dumped_at_ns_ = INT64_MIN / 2;  // the last dump SIGUSR2 asked for
  std::atomic<int64_t> ring_dump_asked_at_ns_{0};  // SIGUSR2's latest, 0 once taken

  // Capture windows: the flusher's, but for the settings.
  int64_t delay_ns_ = -1;     // from the job's start (-1: no --delay)
  int64_t duration_ns_ = -1;  // from the delay's end (-1: to the end)
  bool triggered_ = false;       // a trigger has come: --delay and --duration no longer steer
  bool window_was_open_ = true;  // at the last wake
  uint64_t windows_opened_ = 0;  // at the start, or by time and triggers (range_windows_ counts its own)
  // What the shard says of them (write_steered_windows): once a window was
  // steered, every window since, and the one open when last written.
  bool steered_ = false;
  uint32_t windows_noted_ = 0;  // the recorder's past windows written
  uint64_t windows_unrecorded_ = 0;
  std::optional<int64_t> open_window_written_;
  std::optional<CaptureWindow> closed_window_written_;  // the current window, written closed
  bool windows_written_ = false;
  std::vector<CaptureWindow> window_batch_;
  std::string control_file_;
  int64_t control_checked_ns_ = 0;
  uint64_t trigger_serial_ = 0;    // the last trigger read
  std::vector<Trigger> triggers_;  // read, not yet due
  // Once triggered: where the window the triggers opened began (nothing:
  // none open), and where the last one was stopped.
  std::optional<int64_t> trigger_open_since_;
  int64_t trigger_closed_at_ = INT64_MAX;

  std::thread flusher_;
  Doorbell flusher_bell_;  // rung from signal handlers too, unlike a condition variable
  Doorbell closer_bell_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> flusher_busy_{false};  // between its wake and its next wait

  std::atomic<bool> finish_claimed_{false};
  std::atomic<bool> closed_{false};
  bool finish_result_ = false;
};

std::atomic<Agent*> g_agent{nullptr};

Agent* Agent::start_from_environment() {
  const char* dir = std::getenv(kEnvShardDir);
  if (!dir || !*dir) return nullptr;
  // Only the process `rankscope run` started (or execed into) captures, or
  // the workers of the torchrun it started; their children see the same
  // environment and stay quiet.
  const bool started_by_run = env_integer<long>(kEnvAgentPid, -1) == static_cast<long>(::getpid());
  // torchrun gives its workers alone TORCHELASTIC_RESTART_COUNT (and RANK).
  const bool torchrun_worker = env_integer<long>(kEnvWorkersOf, -1) == static_cast<long>(::getppid()) &&
                               env_integer<int32_t>("TORCHELASTIC_RESTART_COUNT", -1) >= 0 &&
                               env_integer<int32_t>("RANK", -1) >= 0;
  if (!started_by_run && !torchrun_worker) return nullptr;

  auto* agent = new Agent();
  agent->started_ = std::chrono::steady_clock::now();
  agent->pid_ = ::getpid();
  agent->clock_rank_ = env_integer<int32_t>(kEnvRank, 0);
  agent->rank_ = torchrun_worker ? env_integer<int32_t>("RANK", 0) : agent->clock_rank_;
  agent->torchrun_worker_ = torchrun_worker;
  const char* capture = std::getenv(kEnvCapture);
  agent->requested_ = parse_capture_list(capture ? capture : kDefaultCapture);
  agent->buffer_bytes_ = env_integer<uint64_t>(kEnvBufferMb, 64) << 20;
  agent->flush_ms_ = flush_interval_ms();
  agent->shard_path_ = dir;
  // Seconds in the environment, as ns; `unset` where the variable is not set.
  const auto seconds_ns = [](const char* name, int64_t unset) {
    const char* text = std::getenv(name);
    return text && *text ? static_cast<int64_t>(std::max(0.0, std::strtod(text, nullptr)) * 1e9) : unset;
  };
  agent->hang_timeout_ns_ = seconds_ns(kEnvHangTimeout, 0);
  agent->ring_ns_ = seconds_ns(kEnvRing, 0);
  agent->delay_ns_ = seconds_ns(kEnvDelay, -1);
  agent->duration_ns_ = seconds_ns(kEnvDuration, -1);
  agent->window_was_open_ = agent->delay_ns_ <= 0 && env_integer<int>(kEnvPaused, 0) == 0;
  agent->windows_opened_ = agent->window_was_open_ ? 1 : 0;
  if (!agent->window_was_open_) agent->recorder_.set_window(INT64_MAX, INT64_MAX);
  agent->control_file_ = std::string(dir) + "/" + kControlFileName;
  const char* action = std::getenv(kEnvHangAction);
  agent->hang_abort_ = action && std::string_view(action) == "abort";
  agent->hang_file_ = std::string(dir) + "/" + kHangFileName;
  std::string why_not;
  if (!agent->open(why_not)) {
    agent->report("capture disabled: " + why_not);
    delete agent;
    return nullptr;
  }
  agent->steer_by_ranges();
  return agent;
}

// --steps and --capture-range, once the string table is there: the range
// name to look for is interned, so that a range's id says whether it is one.
void Agent::steer_by_ranges() {
  const char* steps_text = std::getenv(kEnvSteps);
  const char* range_text = std::getenv(kEnvCaptureRange);
  if (steps_text && *steps_text) {
    const auto steps = parse_step_selection(steps_text);
    if (!steps) return report(std::string("capture window ignored: ") + kEnvSteps + "=" + steps_text + " is not " +
                              std::string(kStepSelectionForms));
    range_windows_.steer_by_steps(*steps, std::string("--steps ") + steps_text);
  } else if (range_text && *range_text) {
    CaptureRange range;
    const std::string option = std::string("--capture-range ") + range_text;
    if (!parse_capture_range(range_text, range)) {
      return report(std::string("capture window ignored: ") + kEnvCaptureRange + "=" + range_text + " is not one");
    }
    if (range.kind == CaptureRange::Kind::kCudaProfilerApi) {
      range_windows_.steer_by_profiler_api(option);
    } else {
      const uint32_t name_id = recorder_.strings().intern(range.name);
      if (name_id == kNoId) return report(option + " ignored: the string table is full");
      const uint64_t domain_key = range.domain.empty() ? RangeWindows::kAnyDomain
                                                       : uint64_t{recorder_.strings().intern(range.domain)} + 1;
      range_windows_.steer_by_range(name_id, domain_key, option);
    }
  } else {
    return;
  }
  // The window open from the start (--steps :B) is the ranges' first.
  const auto [from, until] = recorder_.window();
  window_was_open_ = from < until;
  windows_opened_ = 0;
}

bool Agent::open(std::string& why_not) {
  try {
    clock_ = clocksync::Clock::for_rank(clock_rank_);
  } catch (const Error& e) {
    why_not = e.what();
    return false;
  }
  clock_base_ = clock_.base().text();
  clocksync::set_process_clock(clock_);
  if (!recorder_.init(buffer_bytes_)) {
    why_not = "cannot map " + std::to_string(buffer_bytes_ >> 20) + " MiB of event buffers";
    return false;
  }
  if (!make_directories(shard_path_)) {
    why_not = "cannot create the shard folder " + shard_path_ + ": " + errno_text(errno);
    return false;
  }
  shard_path_ += "/" + shard_file_name(rank_);
  if (torchrun_worker_) keep_earlier_run();

  RankMetadata& m = metadata_;
  m.rank = rank_;
  // A torchrun worker is the rank torchrun made it, in torchrun's job.
  const auto placement = [&](const char* ours, const char* torchruns, int32_t fallback) {
    return env_integer<int32_t>(torchrun_worker_ ? torchruns : ours, fallback);
  };
  m.world_size = placement(kEnvWorldSize, "WORLD_SIZE", 1);
  m.local_rank = placement(kEnvLocalRank, "LOCAL_RANK", -1);
  m.local_size = placement(kEnvLocalSize, "LOCAL_WORLD_SIZE", 0);
  m.node_id = env_integer<int32_t>(kEnvNodeId, -1);
  m.pid = pid_;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  m.host = host;
  const char* launcher = std::getenv(kEnvLauncher);
  m.launcher = launcher ? launcher : "";
  m.agent_version = kRankscopeVersion;
  const char* capture = std::getenv(kEnvCapture);
  const char* mode = std::getenv(kEnvMode);
  m.capture = std::string(capture ? capture : kDefaultCapture) + " mode=" + (mode ? mode : "inprocess") +
              " buffer_mb=" + std::to_string(buffer_bytes_ >> 20);
  m.start_wall_ns = wall_now_ns();
  m.start_local_ns = clock_.now_ns();
  const char* job_id = std::getenv(kEnvJobId);
  m.job = {job_id ? job_id : "", env_integer<int64_t>(kEnvJobStart, 0)};
  if (!writer_.open(shard_path_, m, m.start_local_ns)) {
    why_not = writer_.error();
    return false;
  }
  if (torchrun_worker_) join_worker_list();
  return true;
}

// A worker torchrun restarted (TORCHELASTIC_RESTART_COUNT N > 0) finds the
// shard of its run before: that run's only record, moved to restart-(N-1)/
// for `rankscope merge`, never written over.
void Agent::keep_earlier_run() {
  const int32_t restarts = env_integer<int32_t>("TORCHELASTIC_RESTART_COUNT", 0);
  if (restarts <= 0 || ::access(shard_path_.c_str(), F_OK) != 0) return;
  const std::string folder = shard_path_.substr(0, shard_path_.rfind('/') + 1) + kRestartFolderPrefix +
                             std::to_string(restarts - 1);
  const std::string kept = folder + "/" + shard_file_name(rank_);
  if (!make_directories(folder) || ::rename(shard_path_.c_str(), kept.c_str()) != 0) {
    report("cannot keep the shard of its run before torchelastic restarted it (" + errno_text(errno) +
           "): this run writes over it");
    return;
  }
  add_to_counter(counter::kTorchelasticRestarts, static_cast<uint64_t>(restarts));
}

// The sidecar that started torchrun adds its measurements to the shards this list names.
void Agent::join_worker_list() const {
  const char* list = std::getenv(kEnvWorkerList);
  if (!list || !*list) return;
  const int fd = ::open(list, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    report(std::string("cannot add its shard to the list of torchrun's workers ") + list + ": " + errno_text(errno));
    return;
  }
  // One write of a short line: O_APPEND keeps the workers' lines whole.
  const std::string line = shard_file_name(rank_) + "\n";
  [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

void Agent::start_capture() {
  uint32_t capture_bits = requested_;
  uint32_t built = kCaptureMpi;  // the MPI shim's, when it is loaded
  for (CaptureSource* source : built_capture_sources()) built |= source->bit();
  if (const uint32_t missing = requested_ & ~built) {
    capture_bits &= built;
    sources_off_.fetch_add(1, std::memory_order_relaxed);
    report("this rankscope was built without " + std::string(missing & kCaptureNvtx ? "NVTX " : "") +
           (missing & kCaptureCuda ? "CUDA " : "") + (missing & kCaptureNccl ? "NCCL " : "") +
           "capture (configure with the CUDA toolkit present); capturing the rest");
  }
  for (CaptureSource* source : built_capture_sources()) {
    if (!(requested_ & source->bit())) continue;
    std::string source_why_not;
    if (source->start(source_why_not)) {
      started_sources_.push_back(source);
    } else {
      capture_bits &= ~source->bit();
      source_off(source->bit(), source_why_not);
    }
  }
  event_cost_ps_ = calibrate_event_cost_ps(clock_);
  capture_.store(capture_bits, std::memory_order_release);
  start_cost_ns_ = nanoseconds_since(started_);
  flusher_ = std::thread([this] { flusher_loop(); });
  // Waits in a read until the process ends; the agent is never freed.
  std::thread([this] { closer_loop(); }).detach();
}

void Agent::disable(const std::string& reason) {
  if (capture_.exchange(0) != 0) report("capture disabled: " + reason);
  agent_errors_.fetch_add(1, std::memory_order_relaxed);
}

// At start, or part way (CUDA capture leaving CUPTI to another tool): the
// source's bit goes off with one line saying why.
void Agent::source_off(uint32_t bit, const std::string& why) {
  capture_.fetch_and(~bit, std::memory_order_acq_rel);
  sources_off_.fetch_add(1, std::memory_order_relaxed);
  report(std::string(capture_source_label(bit)) + " capture is off: " + why);
}

void Agent::set_placement(int32_t world_size, int32_t local_rank, int32_t local_size, int32_t node_id) {
  std::lock_guard lock(metadata_mutex_);
  metadata_.world_size = world_size;
  metadata_.local_rank = local_rank;
  metadata_.local_size = local_size;
  metadata_.node_id = node_id;
  metadata_changed_ = true;
}

void Agent::set_job_start(int64_t wall_ns) {
  std::lock_guard lock(metadata_mutex_);
  metadata_.job.start_wall_ns = wall_ns;
  metadata_changed_ = true;
}

void Agent::add_sync_point(const SyncPoint& point) {
  std::lock_guard lock(sync_points_mutex_);
  const uint32_t n = sync_points_ready_.load(std::memory_order_relaxed);
  if (n == kMaxSyncPoints) return;  // the model has plenty; later ones add nothing it needs
  sync_points_[n] = point;
  sync_points_ready_.store(n + 1, std::memory_order_release);
}

void Agent::add_gpu_uuid(std::string_view uuid) {
  std::lock_guard lock(metadata_mutex_);
  std::string& list = metadata_.gpu_uuids;
  for (size_t begin = 0; begin < list.size();) {
    const size_t end = std::min(list.find(',', begin), list.size());
    if (std::string_view(list).substr(begin, end - begin) == uuid) return;
    begin = end + 1;
  }
  if (!list.empty()) list += ',';
  list += uuid;
  metadata_changed_ = true;
}

Counters Agent::counters() const {
  Counters c;
  {
    std::lock_guard lock(source_counters_mutex_);
    c = source_counters_;
  }
  c.set(counter::kEventsDropped, recorder_.dropped());
  c.set(counter::kAgentErrors, agent_errors_.load(std::memory_order_relaxed));
  c.set(counter::kShardWriteErrors, shard_write_errors_);
  c.set(counter::kEventsUnwritten, events_unwritten_.load(std::memory_order_relaxed));
  c.set(counter::kNamesDropped, names_dropped_.load(std::memory_order_relaxed));
  c.set(counter::kSourcesOff, sources_off_.load(std::memory_order_relaxed));
  c.set(counter::kTerminatedBySignal, static_cast<uint64_t>(g_terminating_signal.load(std::memory_order_acquire)));
  if (g_exit_called.load(std::memory_order_acquire) != 0) {
    c.set(counter::kEndedByExitCall, 1);
    c.set(counter::kExitStatus, static_cast<uint64_t>(g_exit_status.load(std::memory_order_relaxed) & 0xff));
  }
  if (const int crash = g_crash_signal.load(std::memory_order_acquire); crash != 0) {
    c.set(counter::kCrashSignal, static_cast<uint64_t>(crash));
    c.set(counter::kCrashSignalCode, static_cast<uint64_t>(g_crash_code.load(std::memory_order_relaxed)));
    c.set(counter::kCrashAddress, g_crash_address.load(std::memory_order_relaxed));
    c.set(counter::kCrashThread, static_cast<uint64_t>(g_crash_thread.load(std::memory_order_relaxed)));
    if (const int sender = g_crash_sender.load(std::memory_order_relaxed); sender != 0) {
      c.set(counter::kCrashSenderPid, static_cast<uint64_t>(sender));
    }
  }
  c.set(counter::kHangDumps, hang_dumped_ ? 1 : 0);
  const uint64_t windows = windows_opened_ + range_windows_.windows_opened();
  if (const uint64_t outside = recorder_.outside_window(); outside != 0 || windows != 1) {
    c.set(counter::kEventsOutsideWindow, outside);
    c.set(counter::kCaptureWindows, windows);
  }
  if (windows_unrecorded_ != 0) c.set(counter::kCaptureWindowsUnrecorded, windows_unrecorded_);
  if (writer_.reopened() != 0) c.set(counter::kShardReopened, writer_.reopened());
  if (ring_on()) {
    c.set(counter::kRingDumps, ring_dumps_);
    c.set(counter::kRingEventsAgedOut, ring_losses_.aged_out);
    c.set(counter::kRingEventsCrowdedOut, ring_losses_.crowded_out);
  }
  c.set(counter::kCostCaptureNs, static_cast<uint64_t>(clock_.now_ns() - metadata_.start_local_ns));
  c.set(counter::kCostStartNs, start_cost_ns_);
  c.set(counter::kCostFlusherCpuNs, flusher_cpu_ns_.load(std::memory_order_relaxed));
  c.set(counter::kCostFinishNs, finish_cost_ns_);
  c.set(counter::kCostEventPs, event_cost_ps_);
  c.set(counter::kCostBufferBytes, recorder_.buffer_bytes_used());
  // Each time counters are written (about once a second): a rank killed
  // outright keeps figures at most that old, until its launcher writes its own.
  if (rusage usage{}; ::getrusage(RUSAGE_SELF, &usage) == 0) set_usage_counters(c, usage);
  return c;
}

void Agent::flush_once(Flush how, int64_t dump_at_ns) {
  const bool final_flush = how == Flush::kFinal;
  const auto failed = [&] {
    ++shard_write_errors_;
    if (!write_failed_) {
      write_failed_ = true;
      report("writing the shard failed: " + writer_.error() +
             "; what was written before is kept, events from now on are dropped");
    }
  };
  // Names and tracks before the events, so that a write failing among the
  // events keeps the names of those written; and after them, for the names
  // interned while this batch was recorded.
  const auto write_names = [&] {
    const int64_t now = clock_.now_ns();
    string_batch_.clear();
    StringTable::Cursor strings_end = strings_written_;
    recorder_.strings().collect(strings_end, string_batch_);
    if (!string_batch_.empty() && !writer_.write_strings(string_batch_, now)) return false;
    strings_written_ = strings_end;
    track_batch_.clear();
    const uint32_t tracks_end = recorder_.tracks().collect(tracks_written_, track_batch_);
    if (!track_batch_.empty() && !writer_.write_tracks(track_batch_, now)) return false;
    tracks_written_ = tracks_end;
    return true;
  };
  if (!write_failed_ && !write_names()) failed();
  const auto write_events = [&](std::span<Event> events) {
    if (write_failed_ || !writer_.write_events(events)) {
      if (!write_failed_) failed();
      events_unwritten_.fetch_add(events.size(), std::memory_order_relaxed);
    }
  };
  if (!ring_on()) {
    recorder_.drain(write_events);
  } else if (how == Flush::kRoutine) {
    recorder_.keep(clock_.now_ns() - ring_ns_, ring_losses_);
  } else {
    const int64_t until = how == Flush::kFinal ? INT64_MAX : dump_at_ns;
    const int64_t cutoff = std::min(clock_.now_ns(), until) - ring_ns_;
    recorder_.drain_ring(cutoff, until, write_events, ring_losses_);
    ++ring_dumps_;
    const CaptureWindow dumped{std::max(cutoff, capture_started_ns()), std::min(until, clock_.now_ns())};
    if (!write_failed_ && !writer_.write_capture_windows({&dumped, 1}, WindowHolds::kEventsEnded, dumped.until_ns)) {
      failed();
    }
  }
  if (write_failed_) return;
  if (!write_names()) return failed();
  const int64_t now = clock_.now_ns();
  if (!write_steered_windows(now, final_flush)) return failed();

  const uint32_t sync_end = sync_points_ready_.load(std::memory_order_acquire);
  if (sync_end > sync_points_written_ &&
      !writer_.write_sync_points({sync_points_ + sync_points_written_, sync_end - sync_points_written_}, now)) {
    return failed();
  }
  sync_points_written_ = sync_end;

  {
    std::lock_guard lock(metadata_mutex_);
    if (metadata_changed_ && !writer_.write_metadata(metadata_, now)) return failed();
    metadata_changed_ = false;
  }
  // Counters now and then, so a rank that dies keeps most of them.
  if (!final_flush && now - counters_written_at_ > 1'000'000'000) {
    if (!writer_.write_counters(counters(), now)) return failed();
    counters_written_at_ = now;
  }
}

// Once the capture was steered (a window set, or closed, in any way): the
// windows closed since the last write, and the one open now, so that the
// report knows which steps the shard holds in full. Written when they
// change; at the end, the open one closed there.
bool Agent::write_steered_windows(int64_t now, bool final_flush) {
  const auto [from, until] = recorder_.window();
  steered_ = steered_ || from != INT64_MIN || until != INT64_MAX || recorder_.windows_closed() != 0;
  if (!steered_) return true;
  const int64_t start = capture_started_ns();
  window_batch_.clear();
  windows_unrecorded_ += recorder_.windows_closed_since(windows_noted_, window_batch_);
  // The current window as far as it has come: closed, open, or not begun.
  std::optional<int64_t> open_since;
  if (from <= now) {
    const CaptureWindow current{std::max(from, start), std::min(until, now)};
    if (until > now && !final_flush) {
      open_since = current.from_ns;
    } else if (!closed_window_written_ || closed_window_written_->from_ns != current.from_ns ||
               closed_window_written_->until_ns != current.until_ns) {
      window_batch_.push_back(current);
      closed_window_written_ = current;
    }
  }
  for (CaptureWindow& w : window_batch_) w = {std::max(w.from_ns, start), std::min(w.until_ns, now)};
  std::erase_if(window_batch_, [](const CaptureWindow& w) { return w.from_ns >= w.until_ns; });
  if (window_batch_.empty() && open_since == open_window_written_ && (windows_written_ || !final_flush)) return true;
  if (open_since) window_batch_.push_back({*open_since, kWindowStillOpen});
  if (!writer_.write_capture_windows(window_batch_, WindowHolds::kEventsBegun, now)) return false;
  open_window_written_ = open_since;
  windows_written_ = true;
  return true;
}

// A crash the handler caught, as an instant on the crashing thread's track
// at the instant it came: "crash: SIGSEGV in crash_app+0x12a4"
// (docs/format.md, "Crashes"). Before the final flush, which writes its
// name and track.
bool Agent::write_crash() {
  const int signal_number = g_crash_signal.load(std::memory_order_acquire);
  if (signal_number == 0 || crash_written_) return true;
  crash_written_ = true;
  const auto thread = static_cast<uint64_t>(g_crash_thread.load(std::memory_order_relaxed));
  char thread_name[64] = "thread";
  if (const int fd = ::open(printf_string("/proc/self/task/%llu/comm", static_cast<unsigned long long>(thread)).c_str(),
                            O_RDONLY | O_CLOEXEC);
      fd >= 0) {
    const ssize_t got = ::read(fd, thread_name, sizeof(thread_name) - 1);
    ::close(fd);
    if (got > 1) thread_name[got - 1] = '\0';  // without its newline
  }
  const uint32_t thread_name_id = recorder_.strings().intern(std::string(thread_name) + " " + std::to_string(thread));
  const uint32_t track = recorder_.tracks().find_or_add(TrackType::kThread, thread, -1,
                                                        thread_name_id == kNoId ? 0 : thread_name_id);
  const std::string where = code_location(g_crash_instruction.load(std::memory_order_relaxed));
  const uint32_t name_id = recorder_.strings().intern(std::string(kCrashInstantPrefix) + signal_name(signal_number) +
                                                      (where.empty() ? "" : std::string(kCrashInstantWhere) + where));
  if (track == kNoId || name_id == kNoId) return true;  // counted where the tables were full
  Event crash{};
  crash.kind = EventKind::kInstant;
  crash.begin_ns = crash.end_ns = g_crash_at_ns.load(std::memory_order_relaxed);
  crash.name_id = name_id;
  crash.track = static_cast<uint16_t>(track);
  crash.peer = kNoPeer;
  return write_failed_ || writer_.write_events(std::span<Event>(&crash, 1));
}

// The calls the application's threads are inside of now and, with
// `with_sources`, what the capture sources hold open (NVTX ranges), as
// incomplete events ending now; each once, however often this is called.
bool Agent::write_open_state(int64_t now, bool with_sources) {
  std::vector<Event> found, open;
  recorder_.for_each_call_in_progress([&](const Event& event) { found.push_back(event); });
  if (with_sources) {
    for (const CaptureSource* source : started_sources_) source->add_open_events(now, found);
  }
  for (Event& event : found) {
    const std::tuple key{uint32_t{event.track}, event.begin_ns, event.op, event.seq, event.peer};
    if (std::find(calls_written_.begin(), calls_written_.end(), key) != calls_written_.end()) continue;
    calls_written_.push_back(key);
    event.end_ns = std::max(now, event.begin_ns);
    event.flags |= kFlagIncomplete;
    open.push_back(event);
  }
  return open.empty() || write_failed_ || writer_.write_events(open);
}

// Whether another rank of this job left the hang file (one left by an
// earlier run in the same folder is older than this rank).
bool Agent::hang_told() const {
  struct stat told {};
  return ::stat(hang_file_.c_str(), &told) == 0 &&
         int64_t{told.st_mtim.tv_sec} * 1'000'000'000 + told.st_mtim.tv_nsec >= metadata_.start_wall_ns;
}

// Each time the flusher wakes: a call of this rank's past the timeout, or
// the file another rank left, makes this rank write out what it holds and
// the calls it is inside of, once; with --hang-action abort, the rank ends
// itself once the others have had the time to do the same.
void Agent::watch_for_hang() {
  if (hang_timeout_ns_ == 0) return;
  const int64_t now = clock_.now_ns();
  if (!hang_dumped_) {
    Event oldest{};
    // Collectives, and NCCL's sends and receives: a thread in MPI_Recv may
    // wait for work as long as it likes, but a NCCL kernel that waits holds
    // back all the work queued on its stream after it. MPI's are calls the
    // application's threads are inside of (or waits for them; a thread that
    // polls one may be at work between its polls); NCCL's run on the GPU,
    // after the call that enqueued them returned.
    const auto consider = [&](const Event& event) {
      const bool watched = is_collective_kind(event.kind) || event.kind == EventKind::kNcclP2pGpu;
      if (watched && !(event.flags & kFlagPolling) && now - event.begin_ns >= hang_timeout_ns_ &&
          (oldest.begin_ns == 0 || event.begin_ns < oldest.begin_ns)) {
        oldest = event;
      }
    };
    recorder_.for_each_call_in_progress(consider);
    gpu_tasks_.clear();
    for (const CaptureSource* source : started_sources_) {
      if (source->bit() == kCaptureNccl) source->add_open_events(now, gpu_tasks_);
    }
    for (const Event& event : gpu_tasks_) consider(event);
    // Once a second at most: on a shared file system every rank's look is a
    // request to its metadata server.
    if (oldest.begin_ns == 0) {
      if (now - hang_file_checked_ns_ < 1'000'000'000) return;
      hang_file_checked_ns_ = now;
      if (!hang_told()) return;
    }
    // Time for the others to look for the hang file (once a second) and write theirs.
    const int64_t grace_ns = 3'000'000'000 + int64_t{flush_ms_} * 5'000'000;
    if (oldest.begin_ns != 0) {
      const auto create = [&] { return ::open(hang_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); };
      int fd = create();
      if (fd < 0 && errno == EEXIST && !hang_told()) {
        ::unlink(hang_file_.c_str());
        fd = create();
      }
      if (fd >= 0) {
        // A send or receive names its peer by its rank in the communicator, as NCCL does.
        const std::string peer =
            oldest.kind != EventKind::kNcclP2pGpu ? std::string()
            : oldest.op == CommOp::kSend          ? printf_string(" to rank %d", oldest.peer)
                                                  : printf_string(" from rank %d", oldest.peer);
        const std::string line =
            printf_string("inside %s #%llu%s of communicator %016llx for %.1f s (--hang-timeout): every rank writes "
                          "out its state",
                          std::string(comm_op_name(oldest.op)).c_str(), static_cast<unsigned long long>(oldest.seq),
                          peer.c_str(), static_cast<unsigned long long>(oldest.comm_hash),
                          static_cast<double>(now - oldest.begin_ns) * 1e-9) +
            (hang_abort_ ? printf_string("; the job ends in %.1f s (--hang-action abort)", static_cast<double>(grace_ns) * 1e-9)
                         : std::string());
        [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
        ::close(fd);
        report(line);
      }
    }
    hang_dumped_ = true;
    flush_once(Flush::kDump, now);
    if (!write_open_state(now, true) || !writer_.write_counters(counters(), now)) ++shard_write_errors_;
    if (hang_abort_) end_rank_at_ns_ = now + grace_ns;
    return;
  }
  if (end_rank_at_ns_ == 0 || now < end_rank_at_ns_) return;
  if (!end_signalled_) {
    // As mpirun ends a rank: the termination handler closes the shard, and
    // mpirun then ends the ranks that are left.
    end_signalled_ = true;
    end_rank_at_ns_ = now + 5'000'000'000;
    ::kill(::getpid(), SIGTERM);
    return;
  }
  // The application handles SIGTERM its own way and did not end. Where
  // another thread is closing the shard, its close ends the flusher.
  if (!finish() && !closed()) return;
  ::kill(::getpid(), SIGKILL);
}

// Each time the flusher wakes: the window's edges, set ahead of their time
// so that each rank cuts at that instant of its clock. --delay and
// --duration count from the job's start on the wall clock (the same instant
// on every rank); the triggers of the control file, read once a second at
// most, are set one at a time, each at the wall-clock time it names.
void Agent::steer_window() {
  const int64_t wall = wall_now_ns(), now = clock_.now_ns();
  int64_t job_start = 0, start_wall = 0, start_local = 0;
  {
    std::lock_guard lock(metadata_mutex_);
    job_start = metadata_.job.start_wall_ns != 0 ? metadata_.job.start_wall_ns : metadata_.start_wall_ns;
    start_wall = metadata_.start_wall_ns;
    start_local = metadata_.start_local_ns;
  }
  const auto local = [&](int64_t wall_ns) { return wall_ns - start_wall + start_local; };
  if (!triggered_ && (delay_ns_ >= 0 || duration_ns_ >= 0)) {
    const int64_t from = local(job_start + std::max<int64_t>(delay_ns_, 0));
    recorder_.set_window(delay_ns_ > 0 ? from : INT64_MIN, duration_ns_ >= 0 ? from + duration_ns_ : INT64_MAX);
  }
  if (wall - control_checked_ns_ >= 1'000'000'000) {
    control_checked_ns_ = wall;
    read_triggers(start_wall);
  }
  if (!triggers_.empty() && !triggered_) {
    // The first trigger takes over from --delay and --duration, in the
    // state their window is in at its time.
    const int64_t at = local(triggers_.front().at_wall_ns);
    const auto [from, until] = recorder_.window();
    if (from <= at && at < until) trigger_open_since_ = from;
    trigger_closed_at_ = at;
    triggered_ = true;
  }
  if (triggered_) steer_by_triggers(now, local);
  // Ranges open and close windows between two wakes unseen: they count their
  // own; triggers count and say theirs as they are carried out.
  const auto [from, until] = recorder_.window();
  const bool open = from <= now && now < until;
  if (open != window_was_open_) {
    window_was_open_ = open;
    const bool by_ranges = range_windows_.steering();
    if (!by_ranges && !triggered_) windows_opened_ += open ? 1 : 0;
    const std::string by = by_ranges ? range_windows_.option() : open ? "--delay" : "--duration";
    if (rank_ == 0 && !triggered_) report(std::string(open ? "capture started (" : "capture paused (") + by + ")");
  }
}

// The control file holds the latest triggers, one a line, oldest first:
// those sent between two reads (a second apart) are all taken, in order.
void Agent::read_triggers(int64_t start_wall_ns) {
  const int fd = ::open(control_file_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[kControlFileMaxBytes];
  const ssize_t got = ::read(fd, text, sizeof(text));
  ::close(fd);
  if (got <= 0) return;
  std::string_view rest(text, static_cast<size_t>(got));
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    if (end == std::string_view::npos) break;  // a line cut short is no trigger
    Trigger trigger;
    // A trigger older than this rank is an earlier run's, left in the same folder.
    if (parse_trigger(rest.substr(0, end + 1), trigger) && trigger.serial > trigger_serial_ &&
        trigger.at_wall_ns >= start_wall_ns) {
      trigger_serial_ = trigger.serial;
      triggers_.push_back(trigger);
      range_windows_.stop_steering();
    }
    rest.remove_prefix(end + 1);
  }
}

// Carries out the triggers that are due, in order, then sets the window
// ahead to the next ones: open until the next stop, or from the next start
// to the stop after it, so that every rank cuts at the same instant and a
// window shorter than the flusher's wake is kept whole.
void Agent::steer_by_triggers(int64_t now, const std::function<int64_t(int64_t)>& local) {
  while (!triggers_.empty() && local(triggers_.front().at_wall_ns) <= now) {
    const Trigger trigger = triggers_.front();
    triggers_.erase(triggers_.begin());
    const int64_t at = local(trigger.at_wall_ns);
    if (trigger.action == TriggerAction::kStart && !trigger_open_since_) {
      trigger_open_since_ = at;
      ++windows_opened_;
      if (rank_ == 0) report("capture started (rankscope trigger " + std::to_string(trigger.serial) + ")");
    } else if (trigger.action == TriggerAction::kStop && trigger_open_since_) {
      trigger_open_since_.reset();
      trigger_closed_at_ = at;
      if (rank_ == 0) report("capture paused (rankscope trigger " + std::to_string(trigger.serial) + ")");
    } else if (trigger.action == TriggerAction::kDump) {
      dump_ring("rankscope trigger dump", at);
    }
  }
  std::optional<int64_t> from = trigger_open_since_;
  int64_t until = INT64_MAX;
  for (const Trigger& next : triggers_) {
    if (!from && next.action == TriggerAction::kStart) {
      from = local(next.at_wall_ns);
    } else if (from && next.action == TriggerAction::kStop) {
      until = local(next.at_wall_ns);
      break;
    }
  }
  const auto [was_from, was_until] = recorder_.window();
  if (from && *from == was_from) {
    recorder_.set_window(*from, until);
    return;
  }
  // Another window than the recorder's: the recorder's ends where the
  // triggers closed it, and stays among the past windows for late records.
  recorder_.set_window(was_from, std::min(was_until, trigger_closed_at_));
  recorder_.open_window(from.value_or(INT64_MAX), from ? until : INT64_MAX);
}

// Writes the flight recorder's window now, and the counters with it.
void Agent::dump_ring(const char* asked_by, int64_t at_ns) {
  if (!ring_on()) {
    if (rank_ == 0) report(std::string(asked_by) + ": this job has no --ring, and writes everything as it comes");
    return;
  }
  flush_once(Flush::kDump, at_ns);
  if (!writer_.write_counters(counters(), clock_.now_ns())) ++shard_write_errors_;
  report(printf_string("%s: wrote the last %.1f s of events (--ring)", asked_by, static_cast<double>(ring_ns_) * 1e-9));
}

void Agent::closer_loop() {
  pthread_setname_np(pthread_self(), "rankscope-close");
  t_own_thread = OwnThread::kCloser;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (g_end_asked.load(std::memory_order_acquire) == 0) closer_bell_.wait(-1);
  finish();
}

void Agent::flusher_loop() {
  pthread_setname_np(pthread_self(), "rankscope-flush");
  t_own_thread = OwnThread::kFlusher;
  // The lowest priority among the process's threads: where the application
  // has a core per rank, the flusher takes only what the application leaves
  // (its writes are short and few, and buffers cover the wait; on Linux a
  // thread's nice value is its own).
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  // Signals go to the application's threads: the termination handler waits
  // for this thread, so it must never run here.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  bool woken_before = false;
  for (;;) {
    flusher_bell_.wait(flush_ms_);
    if (!woken_before) {
      woken_before = true;
      place_crash_handlers_once();
    }
    // Busy before it looks at stopping_, which the closer sets before it
    // looks at busy (both sequentially consistent): either this thread sees
    // the close coming and does nothing more, or the closer waits for it.
    flusher_busy_.store(true);
    if (stopping_.load() || g_end_asked.load() != 0) {
      flusher_busy_.store(false);
      return;
    }
    // mpirun passes one SIGUSR2 on to some ranks twice: signals within a second of a dump are that dump's.
    const int64_t asked_at = ring_dump_asked_at_ns_.exchange(0, std::memory_order_relaxed);
    if (asked_at != 0 && asked_at - signal_dumped_at_ns_ >= 1'000'000'000) {
      signal_dumped_at_ns_ = asked_at;
      dump_ring("SIGUSR2", asked_at);
    } else {
      flush_once(Flush::kRoutine);
    }
    recorder_.strings().grow();
    watch_for_hang();
    steer_window();
    flusher_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
    flusher_busy_.store(false);
  }
}

std::string Agent::range_windows_summary() const {
  if (const uint64_t windows = range_windows_.windows_opened(); windows != 0) {
    return std::to_string(windows) + (windows == 1 ? " capture window" : " capture windows") + " recorded, " +
           std::to_string(recorder_.outside_window()) + " events outside counted on this rank";
  }
  const std::string nothing = "no capture window opened, so no event was recorded";
  if (!range_windows_.option().starts_with("--steps")) return nothing + " (no such range began on this rank)";
  const uint64_t highest = range_windows_.highest_step_seen();
  if (highest == RangeWindows::kNoStep) return nothing + " (no ProfilerStep#N range began on this rank)";
  return nothing + " (the highest step that began: ProfilerStep#" + std::to_string(highest) + ")";
}

// The signals that end a process as mpirun does; the agent closes the shard
// before they take effect.
constexpr int kTerminationSignals[] = {SIGTERM, SIGINT};

sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal_number : kTerminationSignals) sigaddset(&set, signal_number);
  return set;
}

// Waits until `done`, `seconds` at most; a signal cutting a pause short
// does not shorten the wait.
template <typename Done>
void wait_for(int64_t seconds, Done&& done) {
  const int64_t until = clocksync::raw_now_ns() + seconds * 1'000'000'000;
  const timespec pause{0, 10'000'000};
  while (!done() && clocksync::raw_now_ns() < until) ::nanosleep(&pause, nullptr);
}

// A crash on another thread: its handler ends the process once its shard is
// closed and the crash passed on, as the crash would have at once. A thread
// that would end the process otherwise (exit, _exit, a held termination
// signal) waits for it meanwhile; the crashing thread itself (a handler of
// the program's that exits once the agent's returned) does not.
void let_a_crash_end_the_process() {
  if (g_crash_claimed.load(std::memory_order_acquire) &&
      g_crash_thread.load(std::memory_order_acquire) != static_cast<int>(::gettid())) {
    wait_for(5, [] { return false; });
  }
}

// A termination signal that came while the shard was closing waits for the
// close (held back on the closing thread, or in its handler on another): the
// thread that closed it, or waited for the close, must not carry on to end
// the process normally, with another status, while the signal's handler
// finishes its wait. The process ends by the signal, as it would have on its
// arrival without the agent. Not on the agent's own threads, whose close was
// asked by the signal's handler, nor where _exit gives the status.
void end_by_held_signal() {
  if (t_own_thread != OwnThread::kNone || g_exit_called.load(std::memory_order_acquire) != 0) return;
  let_a_crash_end_the_process();
  if (const int signal_number = g_terminating_signal.load(std::memory_order_acquire); signal_number != 0) {
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
  }
}

bool Agent::finish() {
  if (finish_claimed_.exchange(true, std::memory_order_acq_rel)) {
    if (t_own_thread != OwnThread::kNone) return false;
    closed_.wait(false, std::memory_order_acquire);
    end_by_held_signal();
    return finish_result_;
  }
  // A termination signal handled on this thread now would wait for this
  // very close: held back until it is done, the signal finds it closed.
  const sigset_t termination = termination_signals();
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &termination, &before);
  [this] {
    const auto finish_began = std::chrono::steady_clock::now();
    capture_.store(0, std::memory_order_release);
    for (CaptureSource* source : started_sources_) source->stop();
    stopping_.store(true);
    if (t_own_thread == OwnThread::kNone) {
      wake_flusher();
      if (flusher_.joinable()) flusher_.join();
    } else if (t_own_thread == OwnThread::kCloser) {
      // The flusher, at nice 19, may wait long for a core: the closer waits
      // only for a write it is in the middle of, never for it to be scheduled.
      const timespec pause{0, 1'000'000};
      while (flusher_busy_.load()) ::nanosleep(&pause, nullptr);
    }
    if (const auto add_counters = at_close_.load(std::memory_order_acquire)) add_counters();
    if (!write_crash()) ++shard_write_errors_;
    flush_once(Flush::kFinal);
    // A window by ranges may open and close between two wakes of the
    // writer thread, unsaid: rank 0 sums up at the end.
    if (rank_ == 0 && range_windows_.steering()) report(range_windows_.option() + ": " + range_windows_summary());
    // A rank ended by a signal may be inside a call and ranges: they are
    // written as incomplete (at a normal end, ranges still open stay out:
    // the program may close them after MPI_Finalize).
    if (!write_open_state(clock_.now_ns(), g_end_asked.load(std::memory_order_acquire) != 0)) ++shard_write_errors_;
    finish_cost_ns_ = nanoseconds_since(finish_began);
    // Also after a failed write (a full disk): the end and the counters that
    // say what was lost go into the room the writer kept for them.
    const bool closed = writer_.close(counters(), clock_.now_ns());
    if (!closed) report("closing the shard failed: " + writer_.error());
    finish_result_ = closed && !write_failed_;
  }();
  closed_.store(true, std::memory_order_release);
  closed_.notify_all();
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  end_by_held_signal();
  return finish_result_;
}

Agent* agent() { return g_agent.load(std::memory_order_acquire); }

// Has the closer close the shard, and waits for it: only async-signal-safe
// work, as a signal handler and _exit need. A second end (another thread's
// signal, _exit in a handler) waits for the same close.
void close_before_end(Agent& agent) {
  if (g_end_asked.exchange(1, std::memory_order_acq_rel) == 0) agent.ask_close();
  wait_for(1, [&] { return agent.closed(); });
}

// mpirun ends the other ranks with SIGTERM when one rank dies. The agent
// has its closer close the shard first, then the signal does what it
// would have done: those ranks' shards are whole, and only the rank that
// really died shows as dead.
void on_terminate(int signal_number) {
  Agent* a = agent();
  if (a && a->in_this_process()) {
    int none = 0;
    g_terminating_signal.compare_exchange_strong(none, signal_number, std::memory_order_acq_rel);
    close_before_end(*a);
    // Another thread is in _exit, with the status the process is to end
    // with, or in a crash, which is to end it: it ends the process once the
    // shard is closed.
    if (g_exit_called.load(std::memory_order_acquire) != 0) wait_for(1, [] { return false; });
    let_a_crash_end_the_process();
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// _exit as the agent found it: the C library's, or another tool's.
using ExitFunction = void (*)(int);
ExitFunction g_next_exit = nullptr;

// Only where the application left the default in place: its own handler stays its own.
void handle_termination() {
  for (const int signal_number : kTerminationSignals) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction handler {};
    handler.sa_handler = on_terminate;
    sigemptyset(&handler.sa_mask);
    ::sigaction(signal_number, &handler, nullptr);
  }
}

// A crash (kCrashSignals) ends the process before the flusher's next
// write, and the events it loses are its last ones, which say what it was
// doing. The crash handler has the closer close the shard, as on_terminate
// does, then passes the signal on to the action the agent found there, so
// that the process ends as it would have: with Open MPI's backtrace, a core
// dump, the same status. Only where the program left the default in place
// once under way: a handler of its own (a runtime that recovers from faults,
// Rust's or a JVM's, Python's faulthandler) is left alone.
// Per signal, the action the agent found, written before its handler is
// put in place, and read only by that handler.
struct sigaction g_action_found[NSIG];
// Whether the handlers were put in place: a runtime that looks for the
// default at its start (Rust's standard library, a JVM, Open MPI's
// MPI_Init) must find it, so they go in once the program is under way, at
// the end of MPI_Init or at the flusher's first wake, whichever is first;
// MPI_Init reserves the choice while it runs, and waits for a placing under
// way, which would otherwise put handlers where Open MPI looks for the default.
enum class CrashHandlers : int { kNotYet, kPlacing, kPlaced, kMpiInitRunning };
std::atomic<CrashHandlers> g_crash_handlers{CrashHandlers::kNotYet};
void on_crash(int signal_number, siginfo_t* info, void* context);

bool crash_handler_in_place(int signal_number) {
  struct sigaction current {};
  return ::sigaction(signal_number, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
         current.sa_sigaction == on_crash;
}

void put_crash_handler(int signal_number, const struct sigaction& found) {
  g_action_found[signal_number] = found;
  struct sigaction handler {};
  handler.sa_sigaction = on_crash;
  // From the handler's first instruction (hold_termination_signals).
  handler.sa_mask = termination_signals();
  // On the alternate stack where the thread has one: a stack overflow is a crash too.
  handler.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigaction(signal_number, &handler, nullptr);
}

void place_crash_handlers() {
  for (const int signal_number : rankscope::kCrashSignals) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      put_crash_handler(signal_number, current);
    }
  }
}

// At the flusher's first wake.
void place_crash_handlers_once() {
  CrashHandlers not_yet = CrashHandlers::kNotYet;
  if (g_crash_handlers.compare_exchange_strong(not_yet, CrashHandlers::kPlacing)) {
    place_crash_handlers();
    g_crash_handlers.store(CrashHandlers::kPlaced, std::memory_order_release);
  }
}

#ifndef BUS_MCEERR_AO
#define BUS_MCEERR_AO 5
#endif
#ifndef SEGV_MTEAERR
#define SEGV_MTEAERR 8
#endif

// Whether the fault comes again as the instruction runs again: the kernel
// raised it for this instruction (not a memory error found later, or a
// tag check the hardware made after the fact).
bool fault_comes_again(int signal_number, const siginfo_t* info) {
  if (!info || info->si_code <= 0) return false;
  if (signal_number == SIGBUS && info->si_code == BUS_MCEERR_AO) return false;
  if (signal_number == SIGSEGV && info->si_code == SEGV_MTEAERR) return false;
  return signal_number != SIGABRT;
}

// The signal again, with its siginfo, queued to this thread: it comes as
// this handler returns, in the context the crash came in (no frame of the
// agent's in a backtrace), and before any signal sent to the process
// meanwhile, which waits for the process-wide queue. Whether the fault
// would come again as the instruction runs again no longer matters:
// another thread may have mapped the page since.
bool queue_to_this_thread(int signal_number, siginfo_t* info) {
  return info && ::syscall(SYS_rt_tgsigqueueinfo, ::getpid(), ::gettid(), signal_number, info) == 0;
}

// The action found there takes the signal, as it would have without the
// agent. Where the queue refuses (a seccomp filter), a fault the kernel
// raised comes again as the instruction runs again, and a signal sent
// (abort(), kill) is sent again. A handler put after the agent's that calls
// it as the action before it (chaining) is left in place: the agent does
// what the action it found would have done.
void pass_crash_on(int signal_number, siginfo_t* info, void* context) {
  if (crash_handler_in_place(signal_number)) {
    ::sigaction(signal_number, &g_action_found[signal_number], nullptr);
    if (!queue_to_this_thread(signal_number, info) && !fault_comes_again(signal_number, info)) ::raise(signal_number);
    return;
  }
  const struct sigaction found = g_action_found[signal_number];
  // As the kernel would, for the next time: that handler may return, and the fault come again.
  if (found.sa_flags & SA_RESETHAND) g_action_found[signal_number] = {};
  if (found.sa_handler == SIG_IGN) return;
  if (found.sa_handler == SIG_DFL) {
    // The default action, now: the signal is blocked in the handler that called this one.
    ::signal(signal_number, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal_number);
    ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(signal_number);
    return;
  }
  if (found.sa_flags & SA_SIGINFO) {
    found.sa_sigaction(signal_number, info, context);
  } else {
    found.sa_handler(signal_number);
  }
}

// The instruction a fault the kernel raised stopped the thread at.
uint64_t faulting_instruction(const void* context) {
  const auto* machine = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<uint64_t>(machine->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return machine->uc_mcontext.pc;
#else
  (void)machine;
  return 0;
#endif
}

// mpirun's SIGTERM, sent once another rank died, may come while the crash
// closes the shard, or as it goes on: held back on this thread, here (a
// handler that chains to the agent's brings no mask of the agent's) and in
// the context the crash goes on in (restored as the handler returns), it
// cannot end the process before the crash does, with another status and
// without the crash's core dump or Open MPI's backtrace.
void hold_termination_signals(void* context) {
  const sigset_t termination = termination_signals();
  ::pthread_sigmask(SIG_BLOCK, &termination, nullptr);
  if (context) {
    sigset_t& resumed = static_cast<ucontext_t*>(context)->uc_sigmask;
    for (const int signal_number : kTerminationSignals) sigaddset(&resumed, signal_number);
  }
}

void on_crash(int signal_number, siginfo_t* info, void* context) {
  const int errno_found = errno;
  Agent* a = agent();
  if (a && a->in_this_process() && t_own_thread == OwnThread::kNone) {
    hold_termination_signals(context);
    if (!g_crash_claimed.exchange(true, std::memory_order_acq_rel)) {
      g_crash_at_ns.store(a->now(), std::memory_order_relaxed);
      const bool by_kernel = info && info->si_code > 0;
      g_crash_code.store(by_kernel ? info->si_code : 0, std::memory_order_relaxed);
      // si_addr: the fault's address (SIGSEGV, SIGBUS) or instruction (SIGFPE, SIGILL).
      g_crash_address.store(by_kernel && signal_number != SIGABRT ? reinterpret_cast<uintptr_t>(info->si_addr) : 0,
                            std::memory_order_relaxed);
      g_crash_instruction.store(by_kernel && context ? faulting_instruction(context) : 0, std::memory_order_relaxed);
      g_crash_sender.store(!by_kernel && info ? static_cast<int>(info->si_pid) : 0, std::memory_order_relaxed);
      g_crash_thread.store(static_cast<int>(::gettid()), std::memory_order_relaxed);
      g_crash_signal.store(signal_number, std::memory_order_release);
    } else {
      // Another thread's crash, being recorded: the close must find it whole.
      for (int spins = 0; g_crash_signal.load(std::memory_order_acquire) == 0 && spins < 1'000'000; ++spins) {
      }
    }
    close_before_end(*a);
  }
  pass_crash_on(signal_number, info, context);
  errno = errno_found;
}

// The main thread's alternate signal stack, where it has none: the crash
// handler's only way to run when the stack itself overflowed. Below it a
// page no one may touch, so that overflowing it faults rather than writes
// over the mapping beneath. A program that sets its own replaces it.
void give_main_thread_a_signal_stack() {
  stack_t current {};
  if (::sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t size = std::max<size_t>(64 * 1024, static_cast<size_t>(::sysconf(_SC_SIGSTKSZ)) * 4);
  void* memory = ::mmap(nullptr, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) return;
  const stack_t stack{static_cast<char*>(memory) + page, 0, size};
  if (::mprotect(memory, page, PROT_NONE) != 0 || ::sigaltstack(&stack, nullptr) != 0) ::munmap(memory, page + size);
}

// With --ring, SIGUSR2 (mpirun passes it to every rank) writes what the
// ring holds; only where the application left the default in place, which
// would have ended the process.
void handle_ring_dump() {
  struct sigaction current {};
  if (::sigaction(SIGUSR2, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction handler {};
  handler.sa_handler = [](int) {
    if (Agent* a = agent(); a && a->in_this_process()) {
      a->ask_ring_dump();
    }
  };
  sigemptyset(&handler.sa_mask);
  handler.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &handler, nullptr);
}

__attribute__((constructor)) void start_agent() {
  g_next_exit = reinterpret_cast<ExitFunction>(::dlsym(RTLD_NEXT, "_exit"));
  Agent* started = Agent::start_from_environment();
  if (!started) return;
  g_agent.store(started, std::memory_order_release);
  started->start_capture();
  handle_termination();
  give_main_thread_a_signal_stack();
  if (started->ring_on()) handle_ring_dump();
  pthread_atfork(nullptr, nullptr, [] {
    // A forked child (a DataLoader worker) has no flusher and must not write
    // its parent's shard.
    if (Agent* a = agent()) a->stop_after_fork();
  });
  std::atexit([] {
    if (Agent* a = agent(); a && a->in_this_process()) a->finish();
  });
}

}  // namespace
}  // namespace rankscope::agent

using rankscope::agent::agent;

void rankscope_agent_range_edge(uint32_t name_id, uint64_t domain_key, int64_t at_ns, bool begins) {
  if (auto* a = agent()) a->range_windows().range_edge(name_id, domain_key, at_ns, begins);
}

void rankscope_agent_profiler_api(bool start, int64_t at_ns) {
  if (auto* a = agent()) a->range_windows().profiler_api(start, at_ns);
}

bool rankscope_agent_capturing(uint32_t source) {
  const auto* a = agent();
  return a && a->capturing(source);
}

const uint32_t* rankscope_agent_capture_bits() {
  static constexpr uint32_t kNone = 0;
  const auto* a = agent();
  return a ? a->capture_bits() : &kNone;
}

int32_t rankscope_agent_rank() {
  const auto* a = agent();
  return a ? a->rank() : -1;
}

int64_t rankscope_agent_now() {
  const auto* a = agent();
  return a ? a->now() : rankscope::clocksync::raw_now_ns();
}

void rankscope_agent_record(const rankscope::Event* event) {
  if (auto* a = agent()) a->recorder().record(*event);
}

uint32_t rankscope_agent_intern(const char* text, uint64_t length) {
  auto* a = agent();
  if (!a) return rankscope::agent::kNoName;
  const uint32_t id = a->recorder().strings().intern(std::string_view(text, length));
  if (id == rankscope::agent::kNoId) a->note_name_dropped();
  return id;
}

uint32_t rankscope_agent_thread_track() {
  auto* a = agent();
  return a ? a->recorder().thread_track() : rankscope::agent::kNoId;
}

rankscope::agent::CallInProgress* rankscope_agent_call_in_progress() {
  auto* a = agent();
  return a ? a->recorder().call_in_progress() : nullptr;
}

uint32_t rankscope_agent_track(rankscope::TrackType type, uint64_t os_id, int16_t device, const char* name) {
  auto* a = agent();
  if (!a) return rankscope::agent::kNoId;
  const uint32_t name_id = a->recorder().strings().intern(name);
  return a->recorder().tracks().find_or_add(type, os_id, device, name_id == rankscope::agent::kNoId ? 0 : name_id);
}

void rankscope_agent_set_placement(int32_t world_size, int32_t local_rank, int32_t local_size, int32_t node_id) {
  if (auto* a = agent()) a->set_placement(world_size, local_rank, local_size, node_id);
}

void rankscope_agent_set_job_start(int64_t wall_ns) {
  if (auto* a = agent()) a->set_job_start(wall_ns);
}

void rankscope_agent_add_sync_point(const rankscope::SyncPoint* point) {
  if (auto* a = agent()) a->add_sync_point(*point);
}

bool rankscope_agent_finish() {
  auto* a = agent();
  return a && a->in_this_process() && a->finish();
}

const char* rankscope_agent_shard_path() {
  const auto* a = agent();
  return a ? a->shard_path().c_str() : "";
}

void rankscope_agent_disable(const char* reason) {
  if (auto* a = agent()) a->disable(reason);
}

void rankscope_agent_source_off(uint32_t source, const char* why) {
  if (auto* a = agent(); a && why) a->source_off(source, why);
}

void rankscope_agent_add_gpu_uuid(const char* uuid) {
  if (auto* a = agent(); a && uuid) a->add_gpu_uuid(uuid);
}

void rankscope_agent_add_counter(const char* name, uint64_t value) {
  if (auto* a = agent(); a && name) a->add_to_counter(name, value);
}

void rankscope_agent_say(const char* line) {
  if (const auto* a = agent(); a && line) a->say(line);
}

void rankscope_agent_at_close(void (*add_counters)()) {
  if (auto* a = agent()) a->call_at_close(add_counters);
}

// Open MPI puts its own crash handlers (a backtrace) only where it finds the
// default action: the agent's step aside for PMPI_Init, or wait for it to
// be placed, and then pass a crash on to what it put there.
namespace rankscope::agent {
namespace {
struct sigaction g_action_before_mpi_init[NSIG];
}  // namespace
}  // namespace rankscope::agent

void rankscope_agent_before_mpi_init(int* aside) {
  namespace agent_ns = rankscope::agent;
  *aside = 0;
  // A process that does not capture keeps every action as it is.
  if (auto* a = agent(); !a || !a->in_this_process()) return;
  auto not_yet = agent_ns::CrashHandlers::kNotYet;
  if (!agent_ns::g_crash_handlers.compare_exchange_strong(not_yet, agent_ns::CrashHandlers::kMpiInitRunning)) {
    agent_ns::wait_for(1, [] { return agent_ns::g_crash_handlers.load() != agent_ns::CrashHandlers::kPlacing; });
  }
  for (const int signal_number : rankscope::kCrashSignals) {
    ::sigaction(signal_number, nullptr, &agent_ns::g_action_before_mpi_init[signal_number]);
    if (!agent_ns::crash_handler_in_place(signal_number)) continue;
    ::sigaction(signal_number, &agent_ns::g_action_found[signal_number], nullptr);
    *aside |= 1 << signal_number;
  }
}

void rankscope_agent_after_mpi_init(int aside) {
  namespace agent_ns = rankscope::agent;
  if (auto* a = agent(); !a || !a->in_this_process()) return;
  const bool placing_now = agent_ns::g_crash_handlers.load() == agent_ns::CrashHandlers::kMpiInitRunning;
  for (const int signal_number : rankscope::kCrashSignals) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0) continue;
    const struct sigaction& before = agent_ns::g_action_before_mpi_init[signal_number];
    // MPI's own, put where it found the default (what the agent stepped aside for, or the default itself).
    const bool put_by_mpi = current.sa_handler != before.sa_handler && before.sa_handler == SIG_DFL;
    if ((aside & (1 << signal_number)) || (placing_now && (current.sa_handler == SIG_DFL || put_by_mpi))) {
      agent_ns::put_crash_handler(signal_number, current);
    }
  }
  if (placing_now) agent_ns::g_crash_handlers.store(agent_ns::CrashHandlers::kPlaced);
}

const char* rankscope_agent_clock_base() {
  const auto* a = agent();
  return a ? a->clock_base().c_str() : "raw";  // what rankscope_agent_now() reads without an agent
}

// Open MPI ends a rank with _exit when MPI aborts it (an error under
// MPI_ERRORS_ARE_FATAL, a peer lost), as do programs that skip their exit
// handlers (Python's os._exit): no atexit runs. The shard is closed first,
// with the calls the rank was inside, and the status said.
namespace {
[[noreturn]] void exit_after_closing(int status) {
  namespace agent_ns = rankscope::agent;
  if (auto* a = agent(); a && a->in_this_process()) {
    // No signal handled on this thread may end the process meanwhile with another status.
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, nullptr);
    if (!a->closed()) {
      agent_ns::g_exit_status.store(status, std::memory_order_relaxed);
      agent_ns::g_exit_called.store(1, std::memory_order_release);
      agent_ns::close_before_end(*a);
    }
    agent_ns::let_a_crash_end_the_process();
  }
  if (agent_ns::g_next_exit) agent_ns::g_next_exit(status);
  for (;;) ::syscall(SYS_exit_group, status);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void _exit(int status) { exit_after_closing(status); }
extern "C" __attribute__((visibility("default"))) void _Exit(int status) { exit_after_closing(status); }
