// Stragglers (docs/report-stragglers.md, "Stragglers"): the ranks the others wait for,
// each with how sure the analysis is, why it is slow and what it costs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analysis/critical_path.h"
#include "rankscope/analysis/profile.h"

namespace rankscope::analysis {

struct Straggler {
  int32_t rank = -1;
  double score = 0;        // 0..1: how sure, and how much it costs
  std::string cause;       // "slow compute", "slow link or node network", "workload imbalance", "rotating"
  std::string evidence;    // the figures that decided it, in one paragraph
  double last_arriver_rate = 0;    // share of its collectives it arrived last to
  double baseline_rate = 0;        // 1/n for its collectives
  int64_t blame_ns = 0;            // time others waited for it
  double blame_fraction = 0;       // blame over the job's total step time
  double compute_score_relative = 0;  // its compute per step against the fastest peer's (1 = as fast)
  double compute_score_individual = 0;  // against its own best step
  int64_t what_if_step_ns = 0;     // mean step time had it been as fast as the median rank
  int64_t actual_step_ns = 0;      // mean step time as measured
};
struct RankScores {
  int32_t rank = -1;
  double last_arriver_rate = 0;
  double baseline_rate = 0;
  int64_t blame_ns = 0;
  int64_t mean_wait_ns = 0;
  double compute_score_relative = 0;
  double compute_score_individual = 0;
  int64_t median_compute_ns = 0;   // per step
};
struct StragglerReport {
  std::vector<RankScores> ranks;
  std::vector<Straggler> stragglers;  // most likely first; empty when none
  std::string unmeasured;  // why no rank could be compared with another (fewer than two have data); else empty
};
StragglerReport find_stragglers(const JobProfile& job);

inline constexpr const char* kSlowComputeCause = "slow compute";

// The stragglers of slow compute: the ranks whose compute at the other
// ranks' median the critical path replays (critical_path.h).
std::vector<int32_t> slow_compute_ranks(const StragglerReport& report);

// Where the critical path replayed a straggler of slow compute on the
// walked steps, its what-if is the replay's, in place of the first-order
// one: the mean step less the mean time the replay took off a walked
// step; the evidence says so.
void take_replayed_what_if(StragglerReport& report, const CriticalPath& path);

}  // namespace rankscope::analysis
