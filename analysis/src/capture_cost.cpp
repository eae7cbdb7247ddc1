// What capture cost each rank, from the counters its agent wrote when it
// closed the shard (docs/agent-reference.md, "What capture costs").
#include <algorithm>

#include "rankscope/analysis/capture_cost.h"
#include "rankscope/model/counters.h"

namespace rankscope::analysis {

namespace {

// The kinds an agent records on the application's own threads, each from one
// wrapped call or range; GPU activity arrives in CUPTI's buffers instead, on
// CUPTI's and the flusher's threads. The Python hook times itself, its
// recording included (python_hook_ns).
constexpr EventKind kHostKinds[] = {EventKind::kNvtxRange, EventKind::kNvtxMark, EventKind::kMpiCall,
                                    EventKind::kMpiCollective, EventKind::kMpiP2p,
                                    EventKind::kNcclCollectiveEnqueue, EventKind::kNcclP2pEnqueue};

int64_t as_ns(uint64_t value) { return static_cast<int64_t>(std::min<uint64_t>(value, INT64_MAX)); }

}  // namespace

std::vector<CaptureCost> capture_cost(const Timeline& timeline) {
  std::vector<CaptureCost> costs;
  for (const RankInfo& info : timeline.ranks()) {
    const Counters& c = info.counters;
    if (c.get(counter::kCostCaptureNs) == 0) continue;  // no agent measured it (an import, a shard cut short)
    CaptureCost cost;
    cost.rank = info.rank;
    cost.capture_ns = as_ns(c.get(counter::kCostCaptureNs));
    cost.start_ns = as_ns(c.get(counter::kCostStartNs));
    cost.mpi_init_ns = as_ns(c.get(counter::kCostMpiInitNs));
    cost.mpi_finalize_ns = as_ns(c.get(counter::kCostMpiFinalizeNs));
    cost.finish_ns = as_ns(c.get(counter::kCostFinishNs));
    cost.flusher_cpu_ns = as_ns(c.get(counter::kCostFlusherCpuNs));
    uint64_t host_events = c.get(counter::kMpiPollsTimed);  // timed like a recorded call, then only counted
    for (const EventKind kind : kHostKinds) {
      const size_t index = static_cast<size_t>(kind) - 1;
      if (index < info.events_by_kind.size()) host_events += info.events_by_kind[index];
    }
    cost.host_events = host_events;
    cost.polls_counted = c.get(counter::kMpiPollsUnrecorded);
    cost.events_ns = as_ns(host_events * c.get(counter::kCostEventPs) / 1000);
    cost.polls_ns = as_ns(cost.polls_counted * c.get(counter::kCostPollPs) / 1000);
    // No cost calibrated: agent_cost_poll_unresolved says so (agents before
    // it wrote the cost as 0, and none writes 0 now).
    if (cost.polls_counted > 0 && c.get(counter::kCostPollPs) == 0)
      cost.polls_unmeasured = "the calibration in MPI_Init could not tell a poll's cost from MPI's own call on this "
                              "machine (ranks outnumbering cores, mostly); the total leaves these polls out";
    cost.buffer_bytes = c.get(counter::kCostBufferBytes);
    cost.python_hook_ns = as_ns(c.get(counter::kCostPythonHookNs));
    costs.push_back(cost);
  }
  return costs;
}

const CaptureCost& largest_share(const std::vector<CaptureCost>& costs) {
  return *std::max_element(costs.begin(), costs.end(),
                           [](const CaptureCost& a, const CaptureCost& b) { return a.share_pct() < b.share_pct(); });
}

}  // namespace rankscope::analysis
