// A walked step replayed with one thing changed (critical_path.h,
// PathWhatIf): the critical path's what-ifs, and the stragglers' where the
// graph exists.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device_work_collector.h"
#include "rankscope/analysis/critical_path.h"

namespace rankscope::analysis {

class StepGraph;

// One walked step as a graph of its instants, from the step before: read
// once (each rank's events of the two steps), replayed per change.
class StepReplay {
 public:
  // With `buckets`, its predicted caps can be replayed too (regrouped()).
  StepReplay(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names,
             const StepPath& path, const BucketReport* buckets = nullptr);
  ~StepReplay();

  // The path's what-ifs: the rank with the most compute on it at the other
  // ranks' median compute (where it computed more: its own time on a CPU
  // job, its kernels on a GPU job), and every collective's and message's
  // transfer taking no time. Empty, with `unmeasured` set, where the step
  // cannot be replayed.
  std::vector<PathWhatIf> what_ifs(std::string& unmeasured) const;

  // `rank` at the other ranks' median compute; predicted as replayed where
  // it computed no more than them. None where the step cannot be replayed.
  std::optional<PathWhatIf> at_median(int32_t rank) const;

  // The step's gradient allreduces regrouped into the buckets of each cap
  // that `buckets` predicted, one replay each (steps 1). Empty, with
  // `unmeasured` set, where they cannot be.
  std::vector<BucketReplay> regrouped(std::string& unmeasured) const;

 private:
  std::optional<PathWhatIf> base() const;

  const JobProfile& job_;
  const StepPath& path_;
  const BucketReport* buckets_;
  std::unique_ptr<StepGraph> graph_;
  std::optional<int64_t> replayed_;  // unchanged; none where it cannot be replayed
};

}  // namespace rankscope::analysis
