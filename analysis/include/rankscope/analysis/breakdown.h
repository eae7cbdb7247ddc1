// Where each rank's step time went, category by category.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analysis/profile.h"

namespace rankscope::analysis {

// The step breakdown (docs/report-reference.md, "Step breakdown"): each rank's step
// time by what it was spent on, each ns booked once, in this order: exposed
// communication (waiting for the last rank, or transfer nothing hid), then
// the host's phases (data loading, optimizer, backward, forward: the ranges
// of model/host_phases.h), then other.
enum class StepCategory : uint8_t { kCommunication, kDataLoading, kOptimizer, kBackward, kForward, kOther };
inline constexpr int kStepCategoryCount = 6;
const char* step_category_key(StepCategory category);    // JSON: "communication", "data_loading", ...
const char* step_category_label(StepCategory category);  // text: "communication", "data loading", ...

struct StepSplit {
  int64_t ns[kStepCategoryCount] = {};
  int64_t comm_wait_ns = 0, comm_transfer_ns = 0;  // communication's two parts
  int64_t total_ns = 0;                            // the step time split
};
struct RankBreakdown {
  int32_t rank = -1;
  std::string unmeasured;  // why the rank has no figures at all (missing, no event); empty when it has
  // Why a category was not measured (its time is then in other); empty when it was.
  std::string category_unmeasured[kStepCategoryCount];
  std::string split_unmeasured;  // why communication's wait and transfer cannot be told apart
  StepSplit total;               // over the steps it ran
  std::vector<std::optional<StepSplit>> steps;  // by JobProfile step; nothing for a step it did not run
};
std::vector<RankBreakdown> step_breakdown(const JobProfile& job);

}  // namespace rankscope::analysis
