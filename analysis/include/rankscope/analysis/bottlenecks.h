// What is slow in a step: the job's bottlenecks by class, the kernels that
// take the most time across ranks, and the longest GPU idle gaps.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/analysis/breakdown.h"
#include "rankscope/analysis/buckets.h"
#include "rankscope/analysis/device_work.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/analysis/stragglers.h"

namespace rankscope::analysis {

// The job's bottlenecks (docs/report-reference.md, "What is slow in a step"): each
// class's cost is the step time it took on the rank it cost most, per step
// on average, which fixing it would give back; ranked by that cost.
inline constexpr const char* kBottleneckClasses[] = {"data_loading", "launch_overhead", "sync_stall", "communication",
                                                     "transfer",     "memory",          "gpu_idle",   "straggler"};
struct Bottleneck {
  std::string klass;           // one of kBottleneckClasses
  int64_t cost_ns_per_step = 0;
  double step_share = 0;       // of the median step time of the rank it cost most
  std::vector<int32_t> ranks;  // the ranks where it costs at least its threshold
  std::string evidence;        // the figures that decided it
  std::string fix;             // what to change, from the decision workflow
};
struct KernelAcrossRanks {
  uint32_t name_id = 0;
  uint64_t count = 0;          // launches on every rank
  int64_t total_ns = 0;        // their time on every rank
  int32_t ranks = 0;           // ranks that ran it
  int64_t min_ns = 0, max_ns = 0;  // one launch's shortest and longest
  int64_t rank_min_ns = 0, rank_median_ns = 0, rank_max_ns = 0;  // its time on each rank that ran it
  int32_t rank_min = -1, rank_max = -1;
  std::array<uint64_t, KernelTotals::kBuckets> histogram{};  // launches by duration (device_work.h)
};
struct RankIdleGap {
  int32_t rank = -1;
  IdleGap gap;
};
struct BottleneckReport {
  std::vector<Bottleneck> found;  // ranked by cost, largest first; empty when none reached its threshold
  // Classes that could not be measured, with why (no GPU events, no data-loading ranges, ...).
  std::vector<std::pair<std::string, std::string>> unmeasured;
  std::vector<KernelAcrossRanks> top_by_time, top_by_count;  // kTopKernels each
  static constexpr size_t kTopKernels = 10;
  std::vector<RankIdleGap> largest_gaps;  // over every rank, longest first
};
// `ends`: a rank the OOM killer ended makes the memory class, with its step.
BottleneckReport find_bottlenecks(const JobProfile& job, const std::vector<RankBreakdown>& breakdown,
                                  const StragglerReport& stragglers, const BucketReport& buckets,
                                  const std::vector<RankEnd>& ends);

}  // namespace rankscope::analysis
