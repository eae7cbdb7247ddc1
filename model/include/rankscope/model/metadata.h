// Per-rank facts (who, where, with what settings) and named counters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rankscope {

// One measurement of a rank's clock against the reference (rank 0's) clock.
struct SyncPoint {
  int64_t local_ns;   // the rank's clock when it was taken
  int64_t offset_ns;  // local clock minus reference clock at that moment
  int64_t bound_ns;   // |true offset - offset_ns| <= bound_ns
};
static_assert(sizeof(SyncPoint) == 24, "SyncPoint layout is part of the shard format");

struct RankMetadata {
  int32_t rank = -1;
  int32_t world_size = 0;
  int32_t local_rank = -1;
  int32_t local_size = 0;
  int32_t node_id = -1;
  int64_t pid = 0;
  std::string host;
  std::string gpu_uuids;      // comma-separated
  std::string launcher;       // e.g. "openmpi"
  std::string agent_version;
  std::string capture;        // capture settings, e.g. "mpi,nvtx buffer_mb=64"
  int64_t start_wall_ns = 0;  // CLOCK_REALTIME when capture started
  int64_t start_local_ns = 0; // the local event clock at the same moment

  // One "key=value" line per field; unknown keys are ignored on decode so
  // newer writers stay readable.
  std::string encode() const;
  static RankMetadata decode(std::string_view text);
};

// Named data-quality counters; the names below are the ones `rankscope info`
// explains. A name appears at most once.
class Counters {
 public:
  void set(std::string_view name, uint64_t value);
  void add(std::string_view name, uint64_t value);
  uint64_t get(std::string_view name) const;  // 0 when absent
  const std::vector<std::pair<std::string, uint64_t>>& entries() const { return entries_; }

  std::string encode() const;
  static Counters decode(std::string_view text);

 private:
  std::vector<std::pair<std::string, uint64_t>> entries_;
};

namespace counter {
inline constexpr std::string_view kEventsDropped = "events_dropped";        // agent buffers were full
inline constexpr std::string_view kAgentErrors = "agent_errors";            // internal failures in the agent
inline constexpr std::string_view kShardWriteErrors = "shard_write_errors"; // chunks the agent could not write
inline constexpr std::string_view kChunksCorrupt = "shard_chunks_corrupt";  // checksum failures found by merge
inline constexpr std::string_view kEventsLost = "shard_events_lost";        // events in corrupt or cut chunks
inline constexpr std::string_view kBytesSkipped = "shard_bytes_skipped";    // unreadable bytes skipped by merge
inline constexpr std::string_view kTruncatedBytes = "shard_truncated_bytes";// bytes of a chunk cut short at the end
inline constexpr std::string_view kEventsUnwritten = "events_unwritten";    // captured, but the shard write failed
inline constexpr std::string_view kNamesDropped = "names_dropped";          // the agent's string table was full
inline constexpr std::string_view kSourcesOff = "capture_sources_off";      // requested sources that could not start
inline constexpr std::string_view kTerminatedBySignal = "terminated_by_signal";  // the signal that ended the process
inline constexpr std::string_view kNothingCaptured = "nothing_captured";  // 1: the shard holds no event at all
inline constexpr std::string_view kMpiAborted = "mpi_aborted";            // 1: the application called MPI_Abort
inline constexpr std::string_view kMpiAbortCode = "mpi_abort_code";      // the errorcode it gave MPI_Abort
// What capture cost the rank (docs/agent.md, "What capture costs"); "agent_" names are costs, not problems:
inline constexpr std::string_view kCostPrefix = "agent_cost_";
inline constexpr std::string_view kCostCaptureNs = "agent_cost_capture_ns";    // agent start to shard close
inline constexpr std::string_view kCostStartNs = "agent_cost_start_ns";        // starting the agent in the process
inline constexpr std::string_view kCostMpiInitNs = "agent_cost_mpi_init_ns";   // the shim's work in MPI_Init
inline constexpr std::string_view kCostMpiFinalizeNs = "agent_cost_mpi_finalize_ns";  // ... in MPI_Finalize
inline constexpr std::string_view kCostFinishNs = "agent_cost_finish_ns";      // the last flush, before the close
inline constexpr std::string_view kCostFlusherCpuNs = "agent_cost_flusher_cpu_ns";  // the flusher thread's CPU
inline constexpr std::string_view kCostEventPs = "agent_cost_event_ps";        // one recorded call, calibrated
inline constexpr std::string_view kCostPollPs = "agent_cost_poll_ps";          // one poll only counted, calibrated
inline constexpr std::string_view kCostBufferBytes = "agent_cost_buffer_bytes";  // event buffer memory used
// torch.profiler traces read by `rankscope import-kineto`:
inline constexpr std::string_view kKinetoMalformed = "kineto_events_malformed";       // not JSON, or brackets unbalanced
inline constexpr std::string_view kKinetoMissingFields = "kineto_events_missing_fields";  // no ph, ts or dur
inline constexpr std::string_view kKinetoBadTimes = "kineto_events_bad_times";        // negative or absurd ts or dur
inline constexpr std::string_view kKinetoIdsOutOfRange = "kineto_ids_out_of_range";   // ids beyond INT64_MAX, dropped
inline constexpr std::string_view kKinetoUnsupported = "kineto_events_unsupported";   // phases not imported (B/E, async)
inline constexpr std::string_view kKinetoTruncated = "kineto_file_truncated";         // 1: the trace ends early or is cut
inline constexpr std::string_view kKinetoBytesSkipped = "kineto_bytes_skipped";       // skipped to get past damage
inline constexpr std::string_view kKinetoUnmatched = "kineto_collectives_unmatched";  // kernels matched to no other rank
inline constexpr std::string_view kKinetoUnaligned = "kineto_clock_unaligned";        // 1: no offset could be estimated
inline constexpr std::string_view kKinetoInconsistent = "kineto_clock_inconsistent";  // 1: causality bounds contradict
}  // namespace counter

}  // namespace rankscope
