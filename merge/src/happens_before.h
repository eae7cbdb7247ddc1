// The post-hoc check of the clock correction against causality:
//
// - in a collective where every rank needs every other's data (allreduce,
//   allgather, reduce-scatter, all-to-all, barrier), no rank can leave before
//   the last one has entered;
// - a point-to-point message cannot be received before it is sent: its
//   receive cannot complete before its send began.
//
// A rank that breaks either, by more than the two ranks' clock bounds
// together, shows a clock error the bounds do not explain.
//
// Events arrive per rank, at the merge process that owns the rank. A
// collective instance is combined over processes by reductions. The two
// halves of a message are usually at different processes: finish() sends each
// half to the process its message hashes to, which joins them. Within the
// memory budget, when there are too many messages, a sample of them is checked:
// the messages whose hash has its lowest `level` bits zero. The sample depends
// on the message alone, so both halves of a message are kept or left out
// together, wherever they are.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "rankscope/model/event.h"

namespace rankscope {

class HappensBeforeCheck {
 public:
  // Holds at most `memory_bytes`: collective instances (32 bytes each) and
  // message halves (40 bytes each), the halves in at most half of it so that
  // the halves finish() brings in fit in the other half. Collectives come
  // first: to make room for one, fewer messages are sampled. Events past the
  // budget are counted as unchecked rather than held.
  explicit HappensBeforeCheck(uint64_t memory_bytes) : budget_(memory_bytes) {}

  // Whether `event` is one of the collectives or messages the check looks at.
  static bool applies_to(const Event& event);

  // Notes one event of `rank`, already on the reference clock; other events
  // are ignored.
  void add(int32_t rank, const Event& event);

  // Rank `left` finished before rank `entered` began, by `excess_ns` beyond
  // their bounds: it left a collective before `entered` entered it, or it
  // completed the receive of a message that `entered` had not begun to send.
  // Either way the repair needs shift[left] - shift[entered] >= excess_ns.
  struct Violation {
    int32_t left;
    int32_t entered;
    int64_t excess_ns;
  };

  struct Result {
    std::vector<uint64_t> violations;          // per rank: instances it left before the last rank entered
    std::vector<uint64_t> message_violations;  // per rank: messages it received before their send began
    std::vector<int64_t> worst_ns;     // per rank: the largest gap beyond the bounds, collectives and messages
    std::vector<uint64_t> unchecked;   // per rank: events left out (memory budget, huge or missing sequence numbers)
    std::vector<uint64_t> unmatched;   // per rank: its sends and receives whose other half was not found
    std::vector<Violation> worst_by_pair;  // the largest excess of each (left, entered) pair, by pair
    uint64_t instances_checked = 0;
  };

  // Collective over `comm`: combines every process's events; every process
  // gets the same result. `bounds[r]` is rank r's clock bound, or -1 when its
  // clock was not corrected (its collectives and messages are not checked).
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

  // One side of a message. (comm_hash, sender, receiver, tag, seq) names the
  // message: both sides record the same.
  struct MessageHalf {
    uint64_t comm_hash;
    uint64_t seq;
    int64_t time_ns;  // a send's begin, a receive's end
    int32_t sender;
    int32_t receiver;
    uint32_t tag;
    uint32_t is_send;
  };
  static_assert(sizeof(MessageHalf) == 40, "the budget and the docs count 40 bytes per message half");
  using PairGaps = std::map<std::pair<int32_t, int32_t>, int64_t>;  // (left, entered) -> largest excess

  void add_collective(int32_t rank, const Event& event);
  void add_message(int32_t rank, const Event& event);
  bool room_for_one_more_message() const;
  // Keeps only the messages sampled at `level`, counting the others as unchecked.
  void sample_messages_at(unsigned level);
  void check_collectives(MPI_Comm comm, const std::vector<int64_t>& bounds, Result& result, PairGaps& worst_by_pair);
  void check_messages(MPI_Comm comm, const std::vector<int64_t>& bounds, Result& result, PairGaps& worst_by_pair);

  std::map<std::pair<uint64_t, uint8_t>, Instances> by_key_;  // (communicator, op)
  std::vector<MessageHalf> messages_;
  unsigned message_level_ = 0;  // messages_ holds the halves this sample keeps
  std::map<int32_t, uint64_t> unchecked_;                     // by rank
  uint64_t budget_;
  uint64_t instance_bytes_ = 0;
};

}  // namespace rankscope
