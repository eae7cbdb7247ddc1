// The post-hoc check of the clock correction: in a collective where every
// rank needs every other's data (allreduce, allgather, reduce-scatter,
// all-to-all, barrier), no rank can leave before the last one has entered.
// A rank that does, by more than the two ranks' clock bounds together, shows
// a clock error the bounds do not explain.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "rankscope/event.h"

namespace rankscope {

class HappensBeforeCheck {
 public:
  // Holds at most `memory_bytes` of instances (32 bytes each); events past
  // that are counted as unchecked rather than held.
  explicit HappensBeforeCheck(uint64_t memory_bytes) : budget_(memory_bytes) {}

  // Whether `event` is one of the collectives the check looks at.
  static bool applies_to(const Event& event);

  // Notes one event of `rank`, already on the reference clock; events that
  // are not such collectives are ignored.
  void add(int32_t rank, const Event& event);

  // Rank `left` left an instance before rank `entered` entered it, by
  // `excess_ns` beyond their bounds.
  struct Violation {
    int32_t left;
    int32_t entered;
    int64_t excess_ns;
  };

  struct Result {
    std::vector<uint64_t> violations;   // per rank: instances it left before the last rank entered
    std::vector<int64_t> worst_ns;      // per rank: the largest such gap beyond the bounds
    std::vector<uint64_t> unchecked;    // per rank: events left out (memory budget, huge sequence numbers)
    std::vector<Violation> worst_by_pair;  // the largest excess of each (left, entered) pair, by pair
    uint64_t instances_checked = 0;
  };

  // Collective over `comm`: combines every process's events; every process
  // gets the same result. `bounds[r]` is rank r's clock bound, or -1 when its
  // clock was not corrected (its instances are not checked).
  Result finish(MPI_Comm comm, const std::vector<int64_t>& bounds);

 private:
  struct Slot {  // the layout of MPI_LONG_INT
    long value;
    int rank;
  };
  struct Instances {
    std::vector<Slot> last_begin;  // per sequence number: the latest entry and who
    std::vector<Slot> first_end;   // per sequence number: the earliest exit and who
  };
  static constexpr uint64_t kMaxSequence = 1u << 22;

  std::map<std::pair<uint64_t, uint8_t>, Instances> by_key_;  // (communicator, op)
  std::map<int32_t, uint64_t> unchecked_;                     // by rank
  uint64_t budget_;
  uint64_t held_ = 0;
};

}  // namespace rankscope
