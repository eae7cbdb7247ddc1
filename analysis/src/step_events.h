// A rank's events of one step, read without reading the rest of the rank:
// what the critical path's walk and the step's replay read.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "rankscope/analysis/profile.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// The rank's events that begin in [from, until): the first block found by a
// binary search on the blocks' first events, then block after block.
std::vector<Event> events_beginning_in(const Timeline& timeline, const RankInfo& info, int64_t from, int64_t until);

// The track of the rank's training thread: its steps', else its first thread's; -1: none.
int32_t training_thread(const RankInfo& info, const RankProfile& rank);

// A call or operation in which collectives may complete: MPI calls and
// collectives, c10d's collectives and waits, NCCL's kernels.
bool is_communication(EventKind kind);

// Per rank, the step's collectives of more than one rank by when they
// completed there: (end, index into JobProfile::collectives), in time order.
using StepCompletions = std::vector<std::vector<std::pair<int64_t, size_t>>>;
StepCompletions step_completions(const JobProfile& job, size_t step);

// Of the collectives that completed on a rank in [from, until], the one
// whose last rank arrived latest: what held a call there. None without any.
std::optional<size_t> collective_held(const JobProfile& job, const std::vector<std::pair<int64_t, size_t>>& completed,
                                      int64_t from, int64_t until);

}  // namespace rankscope::analysis
