// A walked step replayed with one thing changed (critical_path.h,
// PathWhatIf): the critical path's what-ifs.
#pragma once

#include <string>
#include <vector>

#include "rankscope/analysis/critical_path.h"

namespace rankscope::analysis {

// The what-ifs of one walked step: the rank with the most compute on its
// path at the other ranks' median compute (where it computed more), and
// every collective's transfer taking no time. Reads each rank's training
// thread in the step. Empty, with `unmeasured` set, where the step cannot
// be replayed.
std::vector<PathWhatIf> replay_step(const Timeline& timeline, const JobProfile& job, const StepPath& path,
                                    std::string& unmeasured);

}  // namespace rankscope::analysis
