#include "happens_before.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace rankscope {
namespace {

bool every_rank_needs_every_other(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
    case CommOp::kAllToAll:
    case CommOp::kBarrier:
      return true;
    default:
      return false;
  }
}

}  // namespace

void HappensBeforeCheck::add(int32_t rank, const Event& event) {
  if (event.kind != EventKind::kMpiCollective && event.kind != EventKind::kNcclCollectiveGpu) return;
  if (event.comm_hash == 0 || !every_rank_needs_every_other(event.op)) return;
  if (event.seq >= kMaxSequence) {
    ++unchecked_;
    return;
  }
  Instances& instances = by_key_[{event.comm_hash, static_cast<uint8_t>(event.op)}];
  if (instances.last_begin.size() <= event.seq) {
    instances.last_begin.resize(event.seq + 1, Slot{LONG_MIN, -1});
    instances.first_end.resize(event.seq + 1, Slot{LONG_MAX, -1});
  }
  Slot& begin = instances.last_begin[event.seq];
  Slot& end = instances.first_end[event.seq];
  if (event.begin_ns > begin.value) begin = {event.begin_ns, rank};
  if (event.end_ns < end.value) end = {event.end_ns, rank};
}

HappensBeforeCheck::Result HappensBeforeCheck::finish(MPI_Comm comm, const std::vector<int64_t>& bounds) {
  // Agree on the instances: every (communicator, op) any process saw, with the longest length.
  std::vector<uint64_t> local;
  for (const auto& [key, instances] : by_key_) {
    local.insert(local.end(), {key.first, key.second, instances.last_begin.size()});
  }
  int processes = 1;
  MPI_Comm_size(comm, &processes);
  int count = static_cast<int>(local.size());
  std::vector<int> counts(static_cast<size_t>(processes)), displs(static_cast<size_t>(processes));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  int total = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    displs[p] = total;
    total += counts[p];
  }
  std::vector<uint64_t> all(static_cast<size_t>(total));
  MPI_Allgatherv(local.data(), count, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T, comm);
  std::map<std::pair<uint64_t, uint8_t>, uint64_t> lengths;
  for (size_t i = 0; i + 2 < all.size(); i += 3) {
    uint64_t& length = lengths[{all[i], static_cast<uint8_t>(all[i + 1])}];
    length = std::max(length, all[i + 2]);
  }

  Result result;
  result.violations.assign(bounds.size(), 0);
  result.worst_ns.assign(bounds.size(), 0);
  uint64_t unchecked = unchecked_;
  MPI_Allreduce(&unchecked, &result.events_unchecked, 1, MPI_UINT64_T, MPI_SUM, comm);
  for (const auto& [key, length] : lengths) {
    Instances& mine = by_key_[key];
    mine.last_begin.resize(length, Slot{LONG_MIN, -1});
    mine.first_end.resize(length, Slot{LONG_MAX, -1});
    const int n = static_cast<int>(length);
    MPI_Allreduce(MPI_IN_PLACE, mine.last_begin.data(), n, MPI_LONG_INT, MPI_MAXLOC, comm);
    MPI_Allreduce(MPI_IN_PLACE, mine.first_end.data(), n, MPI_LONG_INT, MPI_MINLOC, comm);
    for (uint64_t seq = 0; seq < length; ++seq) {
      const Slot& last_in = mine.last_begin[seq];
      const Slot& first_out = mine.first_end[seq];
      if (last_in.rank < 0 || first_out.rank < 0 || last_in.rank == first_out.rank) continue;
      const auto in = static_cast<size_t>(last_in.rank), out = static_cast<size_t>(first_out.rank);
      if (in >= bounds.size() || out >= bounds.size() || bounds[in] < 0 || bounds[out] < 0) continue;
      ++result.instances_checked;
      const int64_t excess = (last_in.value - first_out.value) - (bounds[in] + bounds[out]);
      if (excess > 0) {
        ++result.violations[out];
        result.worst_ns[out] = std::max(result.worst_ns[out], excess);
      }
    }
  }
  by_key_.clear();
  return result;
}

}  // namespace rankscope
