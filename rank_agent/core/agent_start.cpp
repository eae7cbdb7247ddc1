// The agent's life: it starts when loaded into the process that `rankscope
// run` names, opens the rank's shard and starts the capture sources, and
// finishes at MPI_Finalize (through the MPI shim) or at exit.

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent_parts.h"
#include "rankscope/model/error.h"
#include "rankscope/model/process_usage.h"
#include "rankscope/model/steps.h"
#include "rankscope/model/text.h"
#include "rankscope/model/version.h"

namespace rankscope::agent {

std::atomic<Agent*> g_agent{nullptr};

namespace {

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

// Seconds of the settings as ns; -1 stays -1 (unset).
int64_t ns_of(double seconds) { return seconds < 0 ? -1 : static_cast<int64_t>(seconds * 1e9); }

}  // namespace

Agent* Agent::start_from_environment() {
  AgentSettings settings = AgentSettings::from_environment();
  if (settings.shard_dir.empty()) return nullptr;
  // Only the process `rankscope run` started (or execed into) captures, or
  // the workers of the torchrun it started; their children see the same
  // environment and stay quiet.
  const bool started_by_run = settings.agent_pid == static_cast<int64_t>(::getpid());
  // torchrun gives its workers alone TORCHELASTIC_RESTART_COUNT (and RANK).
  const bool torchrun_worker = settings.workers_of == static_cast<int64_t>(::getppid()) &&
                               settings.torchrun.restart_count.value_or(-1) >= 0 &&
                               settings.torchrun.rank.value_or(-1) >= 0;
  if (!started_by_run && !torchrun_worker) return nullptr;

  auto* agent = new Agent();
  agent->settings_ = std::move(settings);
  const AgentSettings& s = agent->settings_;
  agent->started_ = std::chrono::steady_clock::now();
  agent->pid_ = ::getpid();
  agent->clock_rank_ = s.rank;
  agent->rank_ = torchrun_worker ? *s.torchrun.rank : agent->clock_rank_;
  agent->torchrun_worker_ = torchrun_worker;
  agent->requested_ = parse_capture_list(s.capture);
  agent->buffer_bytes_ = s.buffer_mb << 20;
  agent->flush_ms_ = s.flush_ms;
  agent->shard_path_ = s.shard_dir;
  agent->hang_timeout_ns_ = ns_of(s.hang_timeout_s);
  agent->ring_ns_ = ns_of(s.ring_s);
  agent->delay_ns_ = ns_of(s.delay_s);
  agent->duration_ns_ = ns_of(s.duration_s);
  agent->window_was_open_ = agent->delay_ns_ <= 0 && !s.paused;
  agent->windows_opened_ = agent->window_was_open_ ? 1 : 0;
  if (!agent->window_was_open_) agent->recorder_.set_window(INT64_MAX, INT64_MAX);
  agent->control_file_ = s.shard_dir + "/" + kControlFileName;
  agent->hang_abort_ = s.hang_action == "abort";
  agent->hang_file_ = s.shard_dir + "/" + kHangFileName;
  std::string why_not;
  if (!agent->open(why_not)) {
    agent->report("capture disabled: " + why_not);
    delete agent;
    return nullptr;
  }
  agent->steer_by_ranges();
  return agent;
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
  const auto placement = [&](int32_t ours, std::optional<int32_t> torchruns, int32_t fallback) {
    return torchrun_worker_ ? torchruns.value_or(fallback) : ours;
  };
  m.world_size = placement(settings_.world_size, settings_.torchrun.world_size, 1);
  m.local_rank = placement(settings_.local_rank, settings_.torchrun.local_rank, -1);
  m.local_size = placement(settings_.local_size, settings_.torchrun.local_world_size, 0);
  m.node_id = settings_.node_id;
  m.pid = pid_;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  m.host = host;
  m.launcher = settings_.launcher;
  m.agent_version = kRankscopeVersion;
  m.capture = settings_.capture + " mode=" + settings_.mode +
              " buffer_mb=" + std::to_string(buffer_bytes_ >> 20);
  m.start_wall_ns = wall_now_ns();
  m.start_local_ns = clock_.now_ns();
  m.job = {settings_.job_id, settings_.job_start_wall_ns};
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
  const int32_t restarts = settings_.torchrun.restart_count.value_or(0);
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
  const std::string& list = settings_.worker_list;
  if (list.empty()) return;
  const int fd = ::open(list.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
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
    if (source->start(settings_, source_why_not)) {
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


}  // namespace rankscope::agent
