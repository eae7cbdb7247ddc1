// A rank's events of one step, read without reading the rest of the rank:
// what the critical path's walk and the step's replay read.
#pragma once

#include <cstdint>
#include <vector>

#include "rankscope/analysis/profile.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// The rank's events that begin in [from, until): the first block found by a
// binary search on the blocks' first events, then block after block.
std::vector<Event> events_beginning_in(const Timeline& timeline, const RankInfo& info, int64_t from, int64_t until);

// The track of the rank's training thread: its steps', else its first thread's; -1: none.
int32_t training_thread(const RankInfo& info, const RankProfile& rank);

}  // namespace rankscope::analysis
