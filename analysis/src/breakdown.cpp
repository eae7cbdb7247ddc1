// The step breakdown: each rank's step time by what it was spent on
// (docs/report-reference.md, "Step breakdown"), from the sweep's figures per step.
#include <string>

#include "rankscope/analysis/breakdown.h"
#include "rankscope/model/host_phases.h"

namespace rankscope::analysis {
namespace {

constexpr const char* kKeys[kStepCategoryCount] = {"communication", "data_loading", "optimizer",
                                                   "backward",      "forward",      "other"};
constexpr const char* kLabels[kStepCategoryCount] = {"communication", "data loading", "optimizer",
                                                     "backward",      "forward",      "other"};

size_t index(StepCategory category) { return static_cast<size_t>(category); }

// Why a phase was not measured on a rank that marked none of its ranges.
const char* phase_unmeasured(HostPhase phase) {
  switch (phase) {
    case HostPhase::kDataLoading:
      return "no data-loading range: the Python hook records each DataLoader __next__; other programs can name "
             "a range \"data loading\" or enumerate(DataLoader)#...";
    case HostPhase::kForward:
      return "no forward range: the Python hook marks the forward of DistributedDataParallel and FSDP modules; "
             "other programs can name a range \"forward\"";
    case HostPhase::kBackward:
      return "no backward range: the Python hook marks torch.autograd.backward; other programs can name a range "
             "\"backward\"";
    case HostPhase::kOptimizer:
      return "no optimizer range: the Python hook marks torch.optim's steps; other programs can name a range "
             "\"optimizer\"";
    case HostPhase::kNone: break;
  }
  return "";
}

constexpr const char* kNoCommunication =
    "no collective was seen on this rank: no MPI, NCCL or torch.distributed collective (a gloo job's are "
    "captured by the Python hook, or read from torch.profiler traces)";

StepSplit split_of(const RankStep& step) {
  StepSplit split;
  split.total_ns = step.times.duration();
  split.comm_wait_ns = step.exposed_wait_ns;
  split.comm_transfer_ns = step.exposed_transfer_ns;
  split.ns[index(StepCategory::kCommunication)] = step.exposed_wait_ns + step.exposed_transfer_ns;
  split.ns[index(StepCategory::kDataLoading)] = step.data_loading_ns;
  split.ns[index(StepCategory::kOptimizer)] = step.optimizer_ns;
  split.ns[index(StepCategory::kBackward)] = step.backward_ns;
  split.ns[index(StepCategory::kForward)] = step.forward_ns;
  int64_t booked = 0;
  for (int c = 0; c < kStepCategoryCount; ++c) booked += split.ns[c];
  split.ns[index(StepCategory::kOther)] = split.total_ns - booked;
  return split;
}

void add(StepSplit& sum, const StepSplit& step) {
  for (int c = 0; c < kStepCategoryCount; ++c) sum.ns[c] += step.ns[c];
  sum.comm_wait_ns += step.comm_wait_ns;
  sum.comm_transfer_ns += step.comm_transfer_ns;
  sum.total_ns += step.total_ns;
}

}  // namespace

const char* step_category_key(StepCategory category) { return kKeys[index(category)]; }
const char* step_category_label(StepCategory category) { return kLabels[index(category)]; }

std::vector<RankBreakdown> step_breakdown(const JobProfile& job) {
  std::vector<RankBreakdown> out;
  for (const RankProfile& rank : job.ranks) {
    RankBreakdown b;
    b.rank = rank.rank;
    b.unmeasured = rank_unmeasured(rank);
    b.steps.resize(rank.steps.size());
    if (b.unmeasured.empty()) {
      for (const HostPhase phase :
           {HostPhase::kDataLoading, HostPhase::kOptimizer, HostPhase::kBackward, HostPhase::kForward}) {
        if (rank.phases_seen & (1u << static_cast<unsigned>(phase))) continue;
        const StepCategory category = phase == HostPhase::kDataLoading ? StepCategory::kDataLoading
                                      : phase == HostPhase::kOptimizer ? StepCategory::kOptimizer
                                      : phase == HostPhase::kBackward  ? StepCategory::kBackward
                                                                       : StepCategory::kForward;
        b.category_unmeasured[index(category)] = phase_unmeasured(phase);
      }
      const std::string no_communication =
          !rank.communication_uncaptured.empty() ? rank.communication_uncaptured
          : rank.communicated                    ? std::string()
                                                 : std::string(kNoCommunication);
      b.category_unmeasured[index(StepCategory::kCommunication)] = no_communication;
      b.split_unmeasured = no_communication.empty() ? rank.arrivals_unmeasured : no_communication;
      for (size_t s = 0; s < rank.steps.size(); ++s) {
        const RankStep& step = rank.steps[s];
        if (step.times.begin_ns == kUnknown || step.times.end_ns == kUnknown) continue;
        b.steps[s] = split_of(step);
        add(b.total, *b.steps[s]);
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace rankscope::analysis
