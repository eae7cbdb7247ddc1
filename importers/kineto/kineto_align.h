// Matching the communication kernels of Kineto traces across ranks, and the
// clock offsets between ranks that the matches imply.
//
// torch.profiler stamps each rank with its own host clock and nothing ties
// the hosts together. Collectives do: every rank of one finishes it at nearly
// the same moment (the last data arrives everywhere together), and no rank
// can finish before the last one has started. For ranks r and s and a
// collective they share, with δ = clock_r - clock_s:
//
//   δ <= end_r - begin_s   and   δ >= begin_r - end_s        (causality)
//   δ ~= end_r - end_s                                        (finishing together)
//
// The estimate is the median of the end differences, kept inside the interval
// the causality bounds leave over all shared collectives; the stated bound is
// the distance from the estimate to the far end of that interval, so the true
// offset is within it whenever causality holds.
//
// Matching: by process group and Seq when the trace has them, by Comms Id
// otherwise; traces with neither (older PyTorch, sampled traces) are matched
// by time: the offset that makes the most ends of the same kind coincide
// wins, and each kernel pairs with the nearest one at that offset.
//
// A bound is stated only where the matches defend it: at least kMinPairs of
// them, every end difference within the bound of the estimate (kernels that
// finish together do; kernels paired by chance seldom), and an offset within
// kMaxClockApartNs. Otherwise the rank is not aligned, and `doubt` says why.
//
// Ranks of one host need none of this: torch.profiler stamps every process
// with the host's CLOCK_REALTIME (baseTimeNanoseconds plus ts), so a rank
// whose trace names the host of an aligned rank has that rank's offset and
// bound. Their collectives are still matched; should causality rule out a
// shared clock (hosts that share a name), the rank is aligned from its
// collectives instead, and `host_doubt` says why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/model/event.h"

namespace rankscope::kineto {

enum class MatchKey : uint8_t { kTime = 0, kSeq = 1, kCommsId = 2 };

// Fewer matched collectives defend no bound: two can agree by chance.
inline constexpr size_t kMinPairs = 3;
// One job's traces are recorded together (torch.profiler records the same
// steps on every rank) by hosts whose clocks agree far better than this:
// traces recorded further apart, or clocks further apart, are not one job's.
inline constexpr int64_t kMaxClockApartNs = 3600LL * 1'000'000'000;

// One communication kernel of one rank, times on that rank's own clock
// (baseTimeNanoseconds included).
struct CollectiveRecord {
  uint64_t group = 0;     // process group identity (hash of its name); 0 when unknown
  uint64_t id = 0;        // Seq or Comms Id, as `key` says
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  CommOp op = CommOp::kNone;
  MatchKey key = MatchKey::kTime;
};

struct RankCollectives {
  int32_t rank = -1;
  std::string host;  // the host whose clock stamped the trace (its host_name); empty when it does not say
  std::vector<CollectiveRecord> records;
};

struct RankAlignment {
  int32_t rank = -1;
  bool aligned = false;    // an offset could be estimated
  int64_t offset_ns = 0;   // this rank's clock minus the reference rank's
  int64_t bound_ns = 0;    // |true offset - offset_ns| <= bound_ns, if causality holds
  int32_t anchor = -1;     // the rank it was matched against (itself for the reference)
  uint64_t matched = 0;    // collectives shared with the anchor
  bool consistent = true;  // false: the causality interval was empty (drift, or mismatches)
  bool same_host = false;  // aligned as sharing its anchor's host clock, not from its collectives
  std::string doubt;       // when not aligned though collectives were matched: why they defend no bound
  std::string host_doubt;  // when its trace names an aligned rank's host but causality rules out one clock
};

struct Alignment {
  int32_t reference = -1;
  std::vector<RankAlignment> ranks;  // in the order of the input
  // Per input rank and record: an instance number, equal on every rank for
  // the same collective, unique for records matched to nothing.
  std::vector<std::vector<uint64_t>> instance;
  std::vector<uint64_t> unmatched;  // per input rank
};

// Pure: the same input gives the same answer on every process.
Alignment align_ranks(const std::vector<RankCollectives>& ranks);

}  // namespace rankscope::kineto
