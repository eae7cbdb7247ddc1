// Whether Kineto traces can be one job's. torch.profiler records no job
// identity, but one job's traces agree on what distributedInfo says of the
// job, and were recorded at the same time (kMaxClockApartNs).
#pragma once

#include <string>
#include <vector>

#include "kineto_trace.h"

namespace rankscope::kineto {

// Why `traces` cannot be one job's, each reason naming two of the files:
// the first disagreement of each kind (world size, backend, a process group,
// when they were recorded). Empty when they can be.
std::vector<std::string> job_disagreements(const std::vector<TraceSummary>& traces);

}  // namespace rankscope::kineto
