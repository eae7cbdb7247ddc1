// What the agent's parts share: the Agent, one per captured process, and
// the process-wide state that its end paths (signal handlers, _exit, a
// crash) read and write without locks.
#pragma once

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "capture_source.h"
#include "doorbell.h"
#include "range_windows.h"
#include "rankscope/clocksync/clock.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "rankscope/rank_agent/agent_settings.h"
#include "recorder.h"

namespace rankscope::agent {

using clocksync::wall_now_ns;

inline uint64_t nanoseconds_since(std::chrono::steady_clock::time_point then) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - then).count());
}

inline uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// A process may end off the agent's own paths (MPI_Finalize, exit): by a
// signal, or by _exit. Either asks the closer to close the shard and waits
// for it (close_before_end); these say which, for the shard's counters.
// Lock-free atomics: safe in a signal handler, and ordered across threads.
static_assert(std::atomic<int>::is_always_lock_free);
extern std::atomic<int> g_end_asked;
extern std::atomic<int> g_terminating_signal;
extern std::atomic<int> g_exit_called;
extern std::atomic<int> g_exit_status;
// A fatal signal the agent caught (docs/agent-reference.md, "How each rank ended"): a
// crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL) or abort() (an assert,
// std::terminate, a watchdog's abort), with what the kernel said of it.
extern std::atomic<int> g_crash_signal;
extern std::atomic<int> g_crash_code;  // si_code where the kernel raised it; 0 where a process sent it
extern std::atomic<uint64_t> g_crash_address;
extern std::atomic<int> g_crash_thread;
extern std::atomic<uint64_t> g_crash_instruction;  // where a fault the kernel raised happened; 0: not one
extern std::atomic<int64_t> g_crash_at_ns;          // on the rank's clock
extern std::atomic<int> g_crash_sender;             // the pid that sent it, where a process did
extern std::atomic<bool> g_crash_claimed;           // by the first thread to crash, whose crash the counters describe
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free);

// The agent's own threads: the flusher, which writes at nice 19, and the
// closer, which closes the shard at the application's priority when a
// signal or _exit ends the process (a close at nice 19 waits seconds for a
// core where every core runs a rank, past mpirun's SIGKILL). Neither waits
// for a close begun elsewhere (a close at a normal end joins the flusher),
// and neither ends the process.
enum class OwnThread : uint8_t { kNone, kFlusher, kCloser };
extern constinit thread_local OwnThread t_own_thread;

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
  const AgentSettings& settings() const { return settings_; }
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
  // What capture costs this process (docs/agent-reference.md, "What capture costs").
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

  // Read once, at the start; last, away from what every event touches.
  AgentSettings settings_;
};


// Hidden where declared, so that the entry points, in a file of their own,
// load it directly, as from the file that defines it.
extern std::atomic<Agent*> g_agent __attribute__((visibility("hidden")));
inline Agent* agent() { return g_agent.load(std::memory_order_acquire); }

// Waits until `done`, `seconds` at most; a signal cutting a pause short
// does not shorten the wait.
template <typename Done>
void wait_for(int64_t seconds, Done&& done) {
  const int64_t until = clocksync::raw_now_ns() + seconds * 1'000'000'000;
  const timespec pause{0, 10'000'000};
  while (!done() && clocksync::raw_now_ns() < until) ::nanosleep(&pause, nullptr);
}

// The end of a process, crash and signal path (process_end.cpp).
sigset_t termination_signals();
void handle_termination();
void give_main_thread_a_signal_stack();
void place_crash_handlers_once();
void let_a_crash_end_the_process();
void end_by_held_signal();
void close_before_end(Agent& agent);
// _exit as the agent found it: the C library's, or another tool's.
using ExitFunction = void (*)(int);
extern ExitFunction g_next_exit;

// Capture windows (capture_windows.cpp): SIGUSR2 writes the ring (--ring).
void handle_ring_dump();

}  // namespace rankscope::agent
