// Figures both the text and the JSON report show, worked out once so that
// the two agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analysis/profile.h"
#include "rankscope/model/event.h"

namespace rankscope::analysis {

// Each rank's step durations, over the steps it ran.
std::vector<int64_t> step_durations(const JobProfile& job);

// Collectives grouped by (source, operation, communicator).
struct CollectiveGroup {
  CollectiveSource source;
  CommOp op;
  uint64_t comm_hash;
  uint64_t count = 0;
  uint32_t ranks = 0;
  std::vector<int64_t> bytes, skew, transfer, wait;
};
// Most instances first.
std::vector<CollectiveGroup> collective_groups(const JobProfile& job);
// "MPI", "NCCL" or "c10d".
const char* source_name(CollectiveSource source);
// Why a group's arrival skew and waits are not measured; empty when they are.
std::string arrivals_unmeasured(const JobProfile& job, const CollectiveGroup& g);
// Why a group's transfer is not measured; empty when it is.
std::string transfer_unmeasured(const CollectiveGroup& g);

}  // namespace rankscope::analysis
