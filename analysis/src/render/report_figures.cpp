#include "report_figures.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace rankscope::analysis {

std::vector<int64_t> step_durations(const JobProfile& job) {
  std::vector<int64_t> out;
  for (const RankProfile& rank : job.ranks) {
    for (const RankStep& s : rank.steps) {
      if (s.times.begin_ns != kUnknown) out.push_back(s.times.duration());
    }
  }
  return out;
}

std::vector<CollectiveGroup> collective_groups(const JobProfile& job) {
  // Arrivals are compared only on one clock (arrivals_unmeasured): without
  // it the skews and waits are not shown, and not gathered.
  const bool arrivals = job.clock_corrected;
  std::map<std::tuple<int, int, uint64_t>, CollectiveGroup> groups;
  for (const CollectiveInstance& c : job.collectives) {
    auto& g = groups[{static_cast<int>(c.source), static_cast<int>(c.op), c.comm_hash}];
    g.source = c.source;
    g.op = c.op;
    g.comm_hash = c.comm_hash;
    ++g.count;
    g.ranks = std::max(g.ranks, static_cast<uint32_t>(c.ranks.size()));
    g.bytes.push_back(static_cast<int64_t>(c.bytes));
    // One pass over the participations: at thousands of ranks they are the
    // job's largest table, each pass a read of all of it from memory.
    int64_t first = INT64_MAX, last = INT64_MIN, shortest = kUnknown;
    for (const Participation& p : c.ranks) {
      shortest = shorter_execution(shortest, p);
      if (!arrivals) continue;
      first = std::min(first, p.arrival_ns);
      last = std::max(last, p.arrival_ns);
      g.wait.push_back(p.wait_ns);
    }
    if (arrivals) g.skew.push_back(c.ranks.empty() ? 0 : last - first);
    if (shortest != kUnknown) g.transfer.push_back(shortest);
  }
  std::vector<CollectiveGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const CollectiveGroup& a, const CollectiveGroup& b) { return a.count > b.count; });
  return out;
}

const char* source_name(CollectiveSource source) {
  switch (source) {
    case CollectiveSource::kNccl: return "NCCL";
    case CollectiveSource::kTorch: return "c10d";
    case CollectiveSource::kMpi: break;
  }
  return "MPI";
}

std::string arrivals_unmeasured(const JobProfile& job, const CollectiveGroup& g) {
  if (g.ranks < 2) return "its instances were matched with no other rank";
  return job.clock_corrected ? "" : kClocksNotAlignedReason;
}

std::string transfer_unmeasured(const CollectiveGroup& g) {
  return g.transfer.empty() ? "no instance's execution time is known" : "";
}

}  // namespace rankscope::analysis
