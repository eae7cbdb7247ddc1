// Hangs and deadlocks (docs/report.md, "Hangs"): the collectives some ranks
// entered and never left, and the cycles of ranks each waiting for the next
// one's message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/model/event.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// A collective some ranks entered and never left: what a hang's dump wrote
// (run --hang-timeout), or what ranks ended by a signal were inside of.
struct HangEntry {
  int32_t rank = -1;
  int64_t since_ns = 0;   // when it entered, on the timeline's clock
  int64_t waited_ns = 0;  // until its state was written
};
// What a rank that never entered was doing when last heard from.
struct MissingRank {
  int32_t rank = -1;
  std::string status;        // the rank's status ("complete", "terminated", "dead", ...)
  std::string killed;        // describe_fatal_signal of the rank, or ""
  std::string inside;        // the collective it was inside of instead ("MPI_Bcast #4 of MPI_COMM_WORLD"), or ""
  std::vector<std::string> open_ranges;  // NVTX ranges open in its written state, outermost first
  std::string last_call;     // its last call that ended before the state was written ("MPI_Barrier"), or ""
  int64_t last_call_end_ns = 0;
  bool wrote_state = false;  // it wrote out its state (hang_dumps); false: only what it had flushed
  int64_t entered_at_ns = 0;  // when it entered the collective after all (the hang resolved); 0: never
};
struct Hang {
  std::string call;          // "MPI_Allreduce"
  CommOp op = CommOp::kNone;
  uint64_t comm_hash = 0;
  std::string comm;          // the communicator's name ("MPI_COMM_WORLD", "NCCL dp (8 ranks)")
  uint64_t seq = 0;
  // A NCCL send or receive, not a collective: one rank's, waiting for one
  // member, `peer` (its world rank; kNoPeer where it is not in the timeline).
  // Where the peer's kernel for the other half had begun too, the transfer
  // itself did not complete: the send's rank is in `entered` first, the peer after it.
  bool point_to_point = false;
  int32_t peer = kNoPeer;
  std::vector<HangEntry> entered;  // by rank
  std::vector<int32_t> missing_ranks;
  std::vector<MissingRank> missing;  // one per missing rank
  bool members_known = true;  // false: some members of the communicator are not in the timeline
};
// Every unfinished collective, and every NCCL send or receive whose kernel
// waited for its peer, or with its peer's for the transfer (the send's
// alone), but is no part of a deadlock (find_deadlocks has those), the
// longest waited first. Reads events only of jobs where a rank
// wrote a hang's state or did not end normally.
std::vector<Hang> find_hangs(const Timeline& timeline);
// A hang in a few lines: "HANG: MPI_Allreduce #3 of MPI_COMM_WORLD: ...", then one line per missing rank.
std::string describe_hang(const Hang& hang);

// Ranks that ended, or wrote a hang's state, each inside a point-to-point
// call that waits for one peer (a receive from it, a send to it), in a
// cycle: none of them could go on. A hang with no collective in it.
struct MessageWait {
  int32_t rank = -1;
  int32_t peer = -1;      // the world rank it waited for
  std::string inside;     // "MPI_Recv from rank 1, tag 5"
  int64_t since_ns = 0;   // when it entered the call, on the timeline's clock
  int64_t waited_ns = 0;  // until its state was written
};
struct Deadlock {
  std::vector<MessageWait> waits;  // each waits for the next one's rank, the last for the first's; the lowest rank first
};
// Every such cycle, the one with the longest wait first. Reads events only
// of jobs where a rank wrote a hang's state or did not end normally.
std::vector<Deadlock> find_deadlocks(const Timeline& timeline);
// "DEADLOCK: ranks 0 > 1 > 2 > 0 each wait for the next: ...", then one line per rank.
std::string describe_deadlock(const Deadlock& deadlock);

}  // namespace rankscope::analysis
