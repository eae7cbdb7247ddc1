#include "step_events.h"

#include <algorithm>

#include "rankscope/timeline/schema.h"

namespace rankscope::analysis {

std::vector<Event> events_beginning_in(const Timeline& timeline, const RankInfo& info, int64_t from, int64_t until) {
  constexpr uint64_t kBlock = schema::kEventChecksumRows;
  const uint64_t blocks = (info.event_count + kBlock - 1) / kBlock;
  std::vector<Event> buffer, out;
  // One block is read whole anyway: no search.
  uint64_t low = 0, high = blocks > 1 ? blocks : 0;
  while (low < high) {
    const uint64_t middle = (low + high) / 2;
    timeline.read_events(info.rank, middle * kBlock, 1, buffer);
    // A damaged first row says nothing: the search goes on after it.
    if (buffer.empty() || buffer[0].begin_ns < from) low = middle + 1;
    else high = middle;
  }
  for (uint64_t block = low == 0 ? 0 : low - 1; block < blocks; ++block) {
    const uint64_t first = block * kBlock;
    timeline.read_events(info.rank, first, std::min(kBlock, info.event_count - first), buffer);
    for (const Event& e : buffer) {
      if (e.begin_ns >= from && e.begin_ns < until) out.push_back(e);
    }
    if (!buffer.empty() && buffer.back().begin_ns >= until) break;
  }
  return out;
}

int32_t training_thread(const RankInfo& info, const RankProfile& rank) {
  if (rank.step_track >= 0) return rank.step_track;
  for (const Track& track : info.tracks) {
    if (track.type == TrackType::kThread) return static_cast<int32_t>(track.id);
  }
  return -1;
}

bool is_communication(EventKind kind) {
  return kind == EventKind::kMpiCall || kind == EventKind::kMpiCollective || kind == EventKind::kMpiP2p ||
         kind == EventKind::kTorchCollective || kind == EventKind::kTorchWait || kind == EventKind::kNcclCollectiveGpu;
}

bool is_mpi(EventKind kind) {
  return kind == EventKind::kMpiCall || kind == EventKind::kMpiCollective || kind == EventKind::kMpiP2p;
}

bool is_gpu_operation(EventKind kind) {
  return kind == EventKind::kGpuKernel || kind == EventKind::kGpuMemcpy || kind == EventKind::kGpuMemset ||
         kind == EventKind::kNcclCollectiveGpu || kind == EventKind::kNcclP2pGpu;
}

NameTraits::Api cuda_api(const Event& e, const std::vector<NameTraits>& names) {
  return e.kind == EventKind::kCudaApi && e.name_id < names.size() ? names[e.name_id].api : NameTraits::Api::kNone;
}

int64_t message_released(const std::vector<int64_t>& mpi_calls, int64_t posted, int64_t waiting, int64_t until) {
  const auto after = std::lower_bound(mpi_calls.begin(), mpi_calls.end(), until);
  if (after == mpi_calls.begin()) return posted;
  const int64_t last = *std::prev(after);
  return last > std::max(posted, waiting) ? last : posted;
}

std::vector<int64_t> mpi_call_begins(const std::vector<Event>& events) {
  std::vector<int64_t> begins;
  for (const Event& e : events) {
    if (is_mpi(e.kind) && e.end_ns > e.begin_ns) begins.push_back(e.begin_ns);
  }
  std::sort(begins.begin(), begins.end());
  return begins;
}

std::optional<MessageKey> message_key(const Event& e, int32_t rank) {
  if (e.kind != EventKind::kMpiP2p || e.peer < 0 || e.peer == rank) return std::nullopt;
  if (e.op == CommOp::kSend) return MessageKey{e.comm_hash, e.seq, rank, e.peer, e.correlation_id};
  if (e.op == CommOp::kRecv) return MessageKey{e.comm_hash, e.seq, e.peer, rank, e.correlation_id};
  return std::nullopt;
}

StepCompletions step_completions(const JobProfile& job, size_t step) {
  StepCompletions completions(job.ranks.size());
  for (size_t i = 0; i < job.collectives.size(); ++i) {
    const CollectiveInstance& c = job.collectives[i];
    if (c.step != static_cast<int32_t>(step) || c.ranks.size() < 2) continue;
    for (const Participation& p : c.ranks) {
      if (static_cast<size_t>(p.rank) < completions.size() && p.end_ns != kUnknown) {
        completions[static_cast<size_t>(p.rank)].push_back({p.end_ns, i});
      }
    }
  }
  for (auto& list : completions) std::sort(list.begin(), list.end());
  return completions;
}

std::optional<size_t> collective_held(const JobProfile& job, const std::vector<std::pair<int64_t, size_t>>& completed,
                                      int64_t from, int64_t until) {
  return latest_arrival(completed, from, until, [&](size_t i) { return job.collectives[i].last_arrival_ns(); });
}

}  // namespace rankscope::analysis
