// Measuring every rank's offset to rank 0's clock over MPI.
#pragma once

#include <mpi.h>

#include "rankscope/clocksync.h"

namespace rankscope::clocksync {

struct SyncOptions {
  int warmup_exchanges = 4;    // cold paths: discarded
  int max_exchanges = 32;
  int stable_exchanges = 8;    // stop once the best round trip has not improved for this many
};

// Relative drift the composition along the tree allows for between a parent's
// own measurement and its child's (both taken within microseconds).
inline constexpr double kMaxRelativeDriftPpm = 1000.0;

// Collective over `comm`: this rank's offset to the clock of rank 0 of
// `comm`, now. Ranks that share a physical clock (same node, no virtual
// clock) take their node leader's result; node leaders measure down a
// binomial tree, so a round costs O(log nodes) exchanges in sequence.
SyncPoint sync_round(MPI_Comm comm, const Clock& clock, const SyncOptions& options = {});

}  // namespace rankscope::clocksync
