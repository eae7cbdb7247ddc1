#include <cmath>
#include <limits>

#include "rankscope/analysis/overlap.h"

namespace rankscope::analysis {

std::vector<RankOverlap> overlap_by_rank(const JobProfile& job) {
  std::vector<RankOverlap> out;
  for (const RankProfile& rank : job.ranks) {
    RankOverlap o;
    o.rank = rank.rank;
    o.status = rank.status;
    int64_t step_time = 0;
    for (const RankStep& s : rank.steps) {
      if (s.times.begin_ns == kUnknown) continue;
      step_time += s.times.duration();
      o.compute_ns += s.compute_ns;
      o.comm_ns += s.comm_ns;
      o.overlap_ns += s.overlap_ns;
      o.exposed_wait_ns += s.exposed_wait_ns;
      o.exposed_transfer_ns += s.exposed_transfer_ns;
      o.idle_ns += s.idle_ns;
    }
    // As HTA defines it: the share of communication time that compute hides.
    o.comm_comp_overlap_pct = o.comm_ns > 0 ? 100.0 * static_cast<double>(o.overlap_ns) / static_cast<double>(o.comm_ns)
                                            : std::numeric_limits<double>::quiet_NaN();
    if (o.comm_ns > 0) o.wait_unmeasured = rank.arrivals_unmeasured;
    o.comm_unmeasured = rank.communication_uncaptured;
    if (!o.comm_unmeasured.empty()) o.wait_unmeasured = o.comm_unmeasured;
    o.idle_pct = step_time > 0 ? 100.0 * static_cast<double>(o.idle_ns) / static_cast<double>(step_time) : 0;
    out.push_back(o);
  }
  return out;
}

}  // namespace rankscope::analysis
