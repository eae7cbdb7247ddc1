// The rank agent as its capture sources see it. The capture library
// (librankscope_capture.so) is preloaded into every rank by `rankscope run`;
// it reads its settings from the environment, writes the rank's shard, and
// serves the capture sources: NVTX, CUPTI and NCCL inside it, MPI from the
// separate MPI shim (librankscope_mpi.so), which calls these functions.
//
// Everything on the hot path (capturing, now, record, intern, track) takes no
// lock, allocates nothing and makes no system call. Nothing here throws.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string_view>

#include "rankscope/model/capture_sources.h"
#include "rankscope/model/event.h"
#include "rankscope/model/metadata.h"

#define RANKSCOPE_AGENT_API extern "C" __attribute__((visibility("default")))

namespace rankscope::agent {

struct AgentSettings;  // agent_settings.h

// The environment `rankscope run` sets for the agent (docs/agent-reference.md,
// "The environment it uses").
inline constexpr const char* kEnvShardDir = "RANKSCOPE_SHARD_DIR";   // where rank-NNNNN.shard goes
inline constexpr const char* kEnvAgentPid = "RANKSCOPE_AGENT_PID";   // only this process captures
inline constexpr const char* kEnvCapture = "RANKSCOPE_CAPTURE";      // e.g. "mpi,nvtx"
inline constexpr const char* kEnvBufferMb = "RANKSCOPE_BUFFER_MB";
inline constexpr const char* kEnvFlushMs = "RANKSCOPE_FLUSH_MS";
inline constexpr const char* kEnvRank = "RANKSCOPE_RANK";
inline constexpr const char* kEnvWorldSize = "RANKSCOPE_WORLD_SIZE";
inline constexpr const char* kEnvLocalRank = "RANKSCOPE_LOCAL_RANK";
inline constexpr const char* kEnvLocalSize = "RANKSCOPE_LOCAL_SIZE";
inline constexpr const char* kEnvNodeId = "RANKSCOPE_NODE_ID";
inline constexpr const char* kEnvLauncher = "RANKSCOPE_LAUNCHER";
inline constexpr const char* kEnvMode = "RANKSCOPE_MODE";            // inprocess or sidecar
inline constexpr const char* kEnvJobId = "RANKSCOPE_JOB_ID";         // the launcher's name for the job
// torchrun under `rankscope run` (docs/pytorch.md, "torchrun"): the processes
// torchrun starts as its workers, children of the process WORKERS_OF names,
// capture instead of it, each as the rank torchrun gives it (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE), on the clock of the sidecar that started
// torchrun (RANKSCOPE_RANK); each adds its shard's name to WORKER_LIST.
inline constexpr const char* kEnvWorkersOf = "RANKSCOPE_WORKERS_OF";
inline constexpr const char* kEnvWorkerList = "RANKSCOPE_WORKER_LIST";
// A worker torchrun restarted finds its earlier run's shard and moves it to
// the shard folder's kRestartFolderPrefix + N/ (N: the run it was, from 0).
inline constexpr const char* kRestartFolderPrefix = "restart-";
// Hangs (docs/windows-and-hangs.md, "Hangs"): a thread inside one collective this many
// seconds (0: never) makes every rank write out its state; with the action
// "abort", each rank then ends itself. The first rank to find one leaves the
// file kHangFileName in the shard folder, which tells the others.
inline constexpr const char* kEnvHangTimeout = "RANKSCOPE_HANG_TIMEOUT_S";
inline constexpr const char* kEnvHangAction = "RANKSCOPE_HANG_ACTION";  // report or abort
inline constexpr const char* kHangFileName = "hang";
// Clock sync rounds while the program runs (docs/clocksync.md, "Rounds
// during the run"): every SYNC_INTERVAL_S seconds. In in-process mode they
// run on a thread of the agent's own where the program's MPI runs with
// MPI_THREAD_MULTIPLE; CLOCK_THREAD is auto (then), always (MPI_Init asks
// MPI for MPI_THREAD_MULTIPLE so that they can) or never.
inline constexpr const char* kEnvSyncInterval = "RANKSCOPE_SYNC_INTERVAL_S";
inline constexpr const char* kEnvClockThread = "RANKSCOPE_CLOCK_THREAD";
// The flight recorder (docs/windows-and-hangs.md, "Flight recorder"): the last this many
// seconds of events are kept in memory (0: everything is written as it comes)
// and written when the rank ends, on a hang, or on SIGUSR2.
inline constexpr const char* kEnvRing = "RANKSCOPE_RING_S";
// Capture windows (docs/windows-and-hangs.md, "Capture windows"): events are recorded
// from DELAY seconds after the job started, for DURATION seconds (unset:
// from the start, to the end); PAUSED=1 starts with capture paused until a
// `rankscope trigger JOB start`. Triggers reach every rank through the file
// kControlFileName in the shard folder, each rank looking once a second.
inline constexpr const char* kEnvDelay = "RANKSCOPE_DELAY_S";
inline constexpr const char* kEnvDuration = "RANKSCOPE_DURATION_S";
inline constexpr const char* kEnvPaused = "RANKSCOPE_PAUSED";
inline constexpr const char* kControlFileName = "control";
// The control file keeps the latest triggers, one a line (parse_trigger),
// so that triggers sent between two of a rank's reads all reach it; a rank
// reads at most kControlFileMaxBytes (lines are at most 46 bytes).
inline constexpr size_t kControlFileTriggers = 32;
inline constexpr size_t kControlFileMaxBytes = 4096;
// Windows the program's own ranges steer (docs/windows-and-hangs.md, "Capture
// windows"): STEPS="A:B[/PERIOD]" records ProfilerStep#A to #B (again every
// PERIOD steps); CAPTURE_RANGE="nvtx:NAME[@DOMAIN]" records while a range
// named NAME is open, "cudaProfilerApi" from cudaProfilerStart to
// cudaProfilerStop.
inline constexpr const char* kEnvSteps = "RANKSCOPE_STEPS";
inline constexpr const char* kEnvCaptureRange = "RANKSCOPE_CAPTURE_RANGE";

struct CaptureRange {
  enum class Kind { kNvtx, kCudaProfilerApi } kind = Kind::kNvtx;
  std::string_view name;    // kNvtx: the range's name
  std::string_view domain;  // kNvtx: its NVTX domain; empty: any
};
inline constexpr std::string_view kCudaProfilerApi = "cudaProfilerApi";
// The capture range of --capture-range; false when `text` is none.
inline bool parse_capture_range(std::string_view text, CaptureRange& out) {
  if (text == kCudaProfilerApi) {
    out = {CaptureRange::Kind::kCudaProfilerApi, {}, {}};
    return true;
  }
  constexpr std::string_view kNvtxPrefix = "nvtx:";
  if (text.substr(0, kNvtxPrefix.size()) != kNvtxPrefix) return false;
  text.remove_prefix(kNvtxPrefix.size());
  const size_t at = text.rfind('@');
  out = {CaptureRange::Kind::kNvtx, text.substr(0, at), at == std::string_view::npos ? "" : text.substr(at + 1)};
  return !out.name.empty() && (at == std::string_view::npos || !out.domain.empty());
}

// One trigger, as the control file holds it: "SERIAL ACTION AT_WALL_NS\n".
// A larger serial than the last one read is a new command; every rank
// carries it out when its wall clock reaches AT, so that all carry it out
// at once.
enum class TriggerAction { kStart, kStop, kDump };
inline constexpr std::string_view kTriggerActionNames[] = {"start", "stop", "dump"};
struct Trigger {
  uint64_t serial = 0;
  TriggerAction action = TriggerAction::kStart;
  int64_t at_wall_ns = 0;
};
// The trigger of one control file line; false when it is not one.
inline bool parse_trigger(std::string_view line, Trigger& out) {
  const auto number = [&](uint64_t& value) {
    value = 0;
    size_t digits = 0;
    while (!line.empty() && line.front() >= '0' && line.front() <= '9' && digits < 19) {
      value = value * 10 + static_cast<uint64_t>(line.front() - '0');
      line.remove_prefix(1), ++digits;
    }
    return digits > 0;
  };
  uint64_t serial = 0, at = 0;
  if (!number(serial) || line.empty() || line.front() != ' ') return false;
  line.remove_prefix(1);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return false;
  const std::string_view action = line.substr(0, space);
  line.remove_prefix(space + 1);
  if (!number(at) || !(line.empty() || line == "\n")) return false;
  for (size_t i = 0; i < std::size(kTriggerActionNames); ++i) {
    if (kTriggerActionNames[i] == action) {
      out = {serial, static_cast<TriggerAction>(i), static_cast<int64_t>(at)};
      return true;
    }
  }
  return false;
}
// Where CUPTI is, when not where CUDA keeps it; and which clock times NCCL's
// work on the GPU (docs/gpu-capture.md, "NCCL capture").
inline constexpr const char* kEnvCuptiPath = "RANKSCOPE_CUPTI_PATH";
inline constexpr const char* kEnvNcclGpuTime = "RANKSCOPE_NCCL_GPU_TIME";
// Sidecar mode: when the job started (ns since the epoch), as the sidecars
// agreed on it; in-process mode learns it at MPI_Init.
inline constexpr const char* kEnvJobStart = "RANKSCOPE_JOB_START_NS";
// In-process mode: the MPI shim leaves SHARD_DIR/rank-NNNNN.finalized in
// MPI_Finalize once every rank's shard is complete, for `rankscope run` to merge them.
inline constexpr const char* kFinalizedSuffix = ".finalized";

// The capture sources (rankscope/model/capture_sources.h), by the names the
// agent's code has always used.
using rankscope::capture_source_label;
using rankscope::CaptureBit;
using rankscope::kCaptureCuda;
using rankscope::kCaptureMpi;
using rankscope::kCaptureNccl;
using rankscope::kCaptureNvtx;
using rankscope::kCapturePython;
using rankscope::kCaptureSourceNames;
using rankscope::kDefaultCapture;
using rankscope::kKnownCaptureSources;
using rankscope::parse_capture_list;

// Data one thread writes and another reads whole, with no lock: the writer
// brackets its (relaxed atomic) stores with write(); read(copy) repeats the
// copy until no write overlapped it. The version is odd while a write runs.
class SequenceLock {
 public:
  template <typename Store>
  void write(Store&& store) {
    const uint32_t version = version_.load(std::memory_order_relaxed);
    version_.store(version + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    store();
    version_.store(version + 2, std::memory_order_release);
  }
  template <typename Copy>
  void read(Copy&& copy) const {
    for (;;) {
      const uint32_t before = version_.load(std::memory_order_acquire);
      if (before & 1) continue;
      copy();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (version_.load(std::memory_order_relaxed) == before) return;
    }
  }

 private:
  std::atomic<uint32_t> version_{0};
};

// The call a thread is inside of right now (a blocking collective), for the
// state a hang writes out (docs/design/hang-watch.md): the event the call will
// be, its end not yet known. Its thread writes it, the flusher reads it. On
// the hot path: a few stores, no lock, no system call.
class CallInProgress {
 public:
  void enter(const Event& event) {
    uint64_t copy[kWords];
    std::memcpy(copy, &event, sizeof(event));
    lock_.write([&] {
      for (size_t i = 0; i < kWords; ++i) words_[i].store(copy[i], std::memory_order_relaxed);
    });
  }
  // Only begin_ns, which says whether there is a call.
  void leave() {
    lock_.write([&] { words_[0].store(0, std::memory_order_relaxed); });
  }
  // The call in progress, if any (begin_ns 0 means none).
  bool read(Event& out) const {
    uint64_t copy[kWords];
    lock_.read([&] {
      for (size_t i = 0; i < kWords; ++i) copy[i] = words_[i].load(std::memory_order_relaxed);
    });
    std::memcpy(&out, copy, sizeof(out));
    return out.begin_ns != 0;
  }

  // The thread's calls that are not MPI's (a NCCL collective, send or
  // receive enqueued): two MPI polls with one between are no polls in a
  // row, as with a blocking MPI call between. Only the thread reads it.
  void count_other_call() { ++other_calls_; }
  uint32_t other_calls() const { return other_calls_; }

 private:
  static constexpr size_t kWords = sizeof(Event) / sizeof(uint64_t);
  static_assert(offsetof(Event, begin_ns) == 0);
  SequenceLock lock_;
  std::atomic<uint64_t> words_[kWords] = {};
  uint32_t other_calls_ = 0;
};

// Track value meaning "the calling thread's track" in record().
inline constexpr uint16_t kThreadTrack = UINT16_MAX;
inline constexpr uint32_t kNoName = UINT32_MAX;

}  // namespace rankscope::agent

// Whether this process captures `source` (a CaptureBit) right now.
RANKSCOPE_AGENT_API bool rankscope_agent_capturing(uint32_t source);
// The CaptureBits that rankscope_agent_capturing tests, for a source that
// polls them millions of times a second (the MPI shim) to read with one
// relaxed atomic load instead of a call: valid for the life of the process,
// zero when this process does not capture.
RANKSCOPE_AGENT_API const uint32_t* rankscope_agent_capture_bits();
// The event clock: the rank's clock (virtual under RANKSCOPE_FAKE_CLOCK).
RANKSCOPE_AGENT_API int64_t rankscope_agent_now();
// The rank this process captures as (its shard's); -1 where it captures nothing.
RANKSCOPE_AGENT_API int32_t rankscope_agent_rank();
RANKSCOPE_AGENT_API void rankscope_agent_record(const rankscope::Event* event);
// Capture windows steered by ranges (kEnvSteps, kEnvCaptureRange): the NVTX
// source tells of each range that begins or ends, at the instant it
// records; `domain_key` is as in its events' comm_hash (the domain's name
// id + 1; 0: the default domain). The CUDA source tells of
// cudaProfilerStart and cudaProfilerStop.
RANKSCOPE_AGENT_API void rankscope_agent_range_edge(uint32_t name_id, uint64_t domain_key, int64_t at_ns, bool begins);
RANKSCOPE_AGENT_API void rankscope_agent_profiler_api(bool start, int64_t at_ns);
// A name's id in the rank's string table; kNoName when the table is full.
RANKSCOPE_AGENT_API uint32_t rankscope_agent_intern(const char* text, uint64_t length);
// The track of (type, os_id, device), created with `name` on first use.
RANKSCOPE_AGENT_API uint32_t rankscope_agent_track(rankscope::TrackType type, uint64_t os_id, int16_t device,
                                                   const char* name);

// The calling thread's CallInProgress, the same for the thread's life;
// nullptr when this process does not capture (or has no slot left for the thread).
RANKSCOPE_AGENT_API rankscope::agent::CallInProgress* rankscope_agent_call_in_progress();

// The calling thread's track (kNoId without a slot), for a source that
// writes the thread's events later from another thread.
RANKSCOPE_AGENT_API uint32_t rankscope_agent_thread_track();

// Off the hot path: what MPI learns after MPI_Init (node id, world size).
RANKSCOPE_AGENT_API void rankscope_agent_set_placement(int32_t world_size, int32_t local_rank, int32_t local_size,
                                                       int32_t node_id);
// Off the hot path: when the job started, the same on every rank (clocksync::job_start_wall_ns).
RANKSCOPE_AGENT_API void rankscope_agent_set_job_start(int64_t wall_ns);
// A clock measurement of this rank against rank 0, written to the shard.
RANKSCOPE_AGENT_API void rankscope_agent_add_sync_point(const rankscope::SyncPoint* point);
// Stops capture, writes everything held, closes the shard with its end
// record. Returns false (with the reason on stderr) if the shard is not
// complete. Later calls do nothing and return the first result.
RANKSCOPE_AGENT_API bool rankscope_agent_finish();
// The shard's path, or "" when this process does not capture.
RANKSCOPE_AGENT_API const char* rankscope_agent_shard_path();
// Disables capture on this rank with one line on stderr naming the reason.
RANKSCOPE_AGENT_API void rankscope_agent_disable(const char* reason);
// Turns one capture source (a CaptureBit) off part way, the others capturing
// on, with one line on stderr naming the source and why (as at start).
RANKSCOPE_AGENT_API void rankscope_agent_source_off(uint32_t source, const char* why);
// Off the hot path (a capture source learning about the rank's hardware or
// its own losses; both are written with the next flush).
// A GPU the rank uses, for the metadata's `gpu_uuids` (once, however often given).
RANKSCOPE_AGENT_API void rankscope_agent_add_gpu_uuid(const char* uuid);
// Adds `value` to the data-quality counter `name` (e.g. cupti_records_dropped).
RANKSCOPE_AGENT_API void rankscope_agent_add_counter(const char* name, uint64_t value);
// One line on stderr from a capture source: "rankscope agent: rank N: LINE".
RANKSCOPE_AGENT_API void rankscope_agent_say(const char* line);
// What the MPI shim counted instead of recording (polls, untracked
// requests): `add_counters` is called once, as the shard closes, however
// the rank ends (MPI_Finalize, MPI_Abort, _exit, a signal).
RANKSCOPE_AGENT_API void rankscope_agent_at_close(void (*add_counters)());
// Around PMPI_Init and PMPI_Init_thread: the agent's crash handlers step
// aside, so that the MPI library finds the actions the agent found (Open
// MPI puts its backtrace handler only where it finds the default), and come
// back in front of whatever it put there. `aside` says which stepped aside.
RANKSCOPE_AGENT_API void rankscope_agent_before_mpi_init(int* aside);
RANKSCOPE_AGENT_API void rankscope_agent_after_mpi_init(int aside);
// The base clock under rankscope_agent_now(), as clocksync::BaseClock::text()
// writes it: the MPI shim has its own copy of the clock library, and builds
// the clock it measures clock sync with from this, so that it measures
// exactly the clock events are stamped with. "raw" in a process that does not capture.
RANKSCOPE_AGENT_API const char* rankscope_agent_clock_base();
// The settings the agent started with (rankscope/rank_agent/agent_settings.h),
// for the MPI shim; nothing without an agent.
RANKSCOPE_AGENT_API const rankscope::agent::AgentSettings* rankscope_agent_settings();
