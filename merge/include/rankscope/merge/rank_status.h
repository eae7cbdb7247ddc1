// How a rank ended, as its shard says it (the status the merge writes in
// /ranks, and `rankscope run` reads before there is a timeline).
#pragma once

#include "rankscope/model/shard.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope {

// kDead without the end record; otherwise by the counters the agent (and
// the rank's `rankscope run`) wrote: crashed, aborted, terminated, exited
// without MPI_Finalize, or complete.
RankStatus shard_rank_status(const ShardScan& scan);

}  // namespace rankscope
