// The exporter's first pass (docs/export.md): resolves the selection, finds
// the steps of --steps, matches every collective instance across the
// selected ranks, and counts what the second pass will write so its size can
// be estimated before anything is written. Memory: ranks × collectives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/exporters/export.h"
#include "rankscope/model/event.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::export_detail {

// The events written: those of the selected ranks that overlap the window
// (both ends included), so a range reaching into the window is written whole
// and nesting is kept.
struct Selection {
  std::vector<int32_t> ranks;
  int64_t begin_ns = INT64_MIN;
  int64_t end_ns = INT64_MAX;
  bool contains(const Event& e) const { return e.end_ns >= begin_ns && e.begin_ns <= end_ns; }
};

// An event without duration (begin == end, or an end before its begin) is an instant.
inline bool is_instant(const Event& e) { return e.end_ns <= e.begin_ns; }

inline bool is_communication(EventKind kind) {
  return kind == EventKind::kMpiCollective || kind == EventKind::kMpiP2p || kind == EventKind::kNcclCollectiveGpu ||
         kind == EventKind::kNcclP2pGpu;
}
inline bool is_gpu_work(EventKind kind) {
  return kind == EventKind::kGpuKernel || kind == EventKind::kGpuMemcpy || kind == EventKind::kGpuMemset ||
         kind == EventKind::kNcclCollectiveGpu || kind == EventKind::kNcclP2pGpu;
}
// What lies on a GPU's own timeline: its work and its synchronisations.
inline bool is_gpu_side(EventKind kind) { return is_gpu_work(kind) || kind == EventKind::kGpuSync; }

// A collective instance matched across the selected ranks by (kind,
// communicator, operation, sequence number). Its flows run from every other
// participant to the last to arrive (the latest begin; on a tie the higher
// rank, which is written later), so the arrows point at whom the others
// waited for. They are numbered first_flow, first_flow + 1, ...: the k-th
// participant in rank order other than the last arriver takes first_flow + k,
// so neither end needs the list of participants.
struct CollectiveMatch {
  int64_t last_begin_ns = INT64_MIN;
  int32_t last_rank = -1;
  uint32_t last_position = 0;  // the last arriver's place among the participants, in rank order
  uint32_t participants = 0;
  int32_t seen_by = -1;        // while matching: the latest rank found in it
  uint64_t first_flow = 0;
};

// A rank's part in a collective instance.
struct Participation {
  uint32_t instance;  // kNotMatched: a repeat of an instance on the same rank, which has no flows
  uint32_t position;  // its place among the instance's participants, in rank order
};
inline constexpr uint32_t kNotMatched = UINT32_MAX;

struct RankPlan {
  int32_t rank = -1;
  int32_t busiest_track = -1;  // takes the sequence's default track (saves bytes per event); -1: none
  std::vector<Participation> collectives;  // one per collective event, in time order
};

// What the second pass will write, for the size estimate.
struct PlannedCounts {
  uint64_t slices = 0, instants = 0, counter_events = 0, communication = 0, gpu_work = 0, flows = 0;
  uint64_t launch_candidates = 0;  // GPU work with a correlation id: at most one flow each
  uint64_t arguments = 0;          // argument values over all slices
};

struct Plan {
  Selection selection;
  int64_t job_begin_ns = 0;         // the first event of the job: where +offsets count from
  int64_t job_end_ns = 0;           // the latest end of the job
  std::vector<RankPlan> ranks;      // the selected ranks with events in the window, in rank order
  std::vector<CollectiveMatch> collectives;
  EventKind nccl_flow_kind = EventKind::kNcclCollectiveGpu;  // the enqueue when no GPU side was captured
  uint64_t launch_flow_base = 1;    // flow ids from here on link host launches to GPU work
  const Overlay* overlay = nullptr;  // ExportOptions::overlay
  uint64_t overlay_flow_base = 1;    // flow ids from here on join the overlay's stretches (past every launch's)
  PlannedCounts planned;
  uint64_t events_read = 0;
};

// Which collectives' flows an event takes part in: 1 MPI's, 2 NCCL's (on the
// side chosen by `nccl_flow_kind`), 0 none.
inline uint8_t collective_kind_class(const Event& e, EventKind nccl_flow_kind) {
  if (e.comm_hash == 0) return 0;
  if (e.kind == EventKind::kMpiCollective) return 1;
  if (e.kind == nccl_flow_kind) return 2;
  return 0;
}

// The flow ids of a participant's slice: one from it to the last arriver,
// or, on the last arriver's, one from each other participant.
inline std::pair<uint64_t, uint32_t> collective_flow_ids(const CollectiveMatch& match, const Participation& part) {
  if (match.participants < 2) return {0, 0};
  if (part.position == match.last_position) return {match.first_flow, match.participants - 1};
  return {match.first_flow + part.position - (part.position > match.last_position ? 1 : 0), 1};
}

// Throws Error naming the timeline for selections it cannot meet.
Plan make_plan(const Timeline& timeline, const ExportOptions& options);

// Bytes the output will take, from the planned counts (docs/export.md: how
// the per-item figures were measured).
uint64_t estimate_bytes(const Plan& plan, ExportFormat format);

// Throws Error naming the timeline and rank where a selected rank has events
// before time 0, which `format`'s unsigned timestamps cannot hold.
void require_times_from_zero(const Timeline& timeline, const Plan& plan, std::string_view format);

// The warning for an output estimated beyond `limit` bytes, with a smaller
// selection that fits: fewer ranks, or a shorter window.
std::string size_warning(const Plan& plan, ExportFormat format, uint64_t estimated, uint64_t limit);

}  // namespace rankscope::export_detail
