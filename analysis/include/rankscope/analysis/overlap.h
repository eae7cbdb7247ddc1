// Communication and compute per rank (docs/report-reference.md, "Overlap"): how much
// of its communication compute hid, and how the rest was spent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analysis/hta.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

struct RankOverlap {
  int32_t rank = -1;
  RankStatus status = RankStatus::kComplete;
  double comm_comp_overlap_pct = 0;  // 100 · |compute ∩ comm| / |comm|; NaN without communication
  int64_t compute_ns = 0, comm_ns = 0, overlap_ns = 0, exposed_wait_ns = 0, exposed_transfer_ns = 0, idle_ns = 0;
  // Why exposed wait and exposed transfer cannot be told apart (the rank
  // communicated, but its arrivals cannot be compared); empty when they can.
  std::string wait_unmeasured;
  // RankProfile::communication_uncaptured: communication, overlap and
  // exposed figures are then none of them measured.
  std::string comm_unmeasured;
  double idle_pct = 0;  // of the steps' time
  std::optional<HtaFigures> hta;  // with --hta-compat
};
std::vector<RankOverlap> overlap_by_rank(const JobProfile& job);

}  // namespace rankscope::analysis
