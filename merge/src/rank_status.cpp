#include "rankscope/merge/rank_status.h"

#include "rankscope/model/counters.h"

namespace rankscope {

RankStatus shard_rank_status(const ShardScan& scan) {
  const Counters& c = scan.counters;
  const bool aborted =
      c.get(counter::kMpiAborted) != 0 || (c.get(counter::kEndedByExitCall) != 0 && c.get(counter::kExitStatus) != 0);
  return !scan.ended                                   ? RankStatus::kDead
         : c.get(counter::kCrashSignal) != 0        ? RankStatus::kCrashed
         : aborted                                  ? RankStatus::kAborted
         : c.get(counter::kTerminatedBySignal) != 0 ? RankStatus::kTerminated
         : c.get(counter::kMpiNotFinalized) != 0    ? RankStatus::kExited
                                                    : RankStatus::kComplete;
}

}  // namespace rankscope
