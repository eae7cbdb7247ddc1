// A walked step replayed with one thing changed (critical_path.h,
// PathWhatIf): the critical path's what-ifs.
#pragma once

#include <string>
#include <vector>

#include "device_work_collector.h"
#include "rankscope/analysis/critical_path.h"

namespace rankscope::analysis {

// The what-ifs of one walked step: the rank with the most compute on its
// path at the other ranks' median compute (where it computed more: its
// own time on a CPU job, its kernels on a GPU job), and every collective's
// and message's transfer taking no time. Reads each rank's events of the
// step and the one before. Empty, with `unmeasured` set, where the step
// cannot be replayed.
std::vector<PathWhatIf> replay_step(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names,
                                    const StepPath& path, std::string& unmeasured);

}  // namespace rankscope::analysis
