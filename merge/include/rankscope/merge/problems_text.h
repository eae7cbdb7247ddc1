// What went wrong in a merge, in the lines every command that merges prints
// (`merge`, `import-kineto`, `run`, `accept`): the warnings go to stderr, the
// ranks the timeline lacks to wherever the command reports the timeline.
#pragma once

#include <string>

#include "rankscope/merge/merge.h"

namespace rankscope {

// A line per problem: "rankscope COMMAND: warning: PROBLEM".
std::string merge_warnings_text(const MergeResult& result, const char* command);

// A line for the missing ranks and one for the dead, where there are any.
// `inputs` names what a missing rank has none of ("shard", "trace").
std::string missing_and_dead_ranks_text(const MergeResult& result, const char* inputs);

}  // namespace rankscope
