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

bool HappensBeforeCheck::applies_to(const Event& event) {
  return (event.kind == EventKind::kMpiCollective || event.kind == EventKind::kNcclCollectiveGpu) &&
         event.comm_hash != 0 && every_rank_needs_every_other(event.op);
}

void HappensBeforeCheck::add(int32_t rank, const Event& event) {
  if (!applies_to(event)) return;
  const auto found = by_key_.find({event.comm_hash, static_cast<uint8_t>(event.op)});
  const uint64_t held_for_key = found == by_key_.end() ? 0 : found->second.last_begin.size();
  const uint64_t growth = event.seq < held_for_key ? 0 : (event.seq + 1 - held_for_key) * 2 * sizeof(Slot);
  if (event.seq >= kMaxSequence || held_ + growth > budget_) {
    ++unchecked_[rank];
    return;
  }
  Instances& instances = found == by_key_.end() ? by_key_[{event.comm_hash, static_cast<uint8_t>(event.op)}]
                                                : found->second;
  if (growth > 0) {
    instances.last_begin.resize(event.seq + 1, Slot{LONG_MIN, -1});
    instances.first_end.resize(event.seq + 1, Slot{LONG_MAX, -1});
    held_ += growth;
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
  result.unchecked.assign(bounds.size(), 0);
  for (const auto& [rank, n] : unchecked_) {
    if (rank >= 0 && static_cast<size_t>(rank) < bounds.size()) result.unchecked[static_cast<size_t>(rank)] = n;
  }
  MPI_Allreduce(MPI_IN_PLACE, result.unchecked.data(), static_cast<int>(bounds.size()), MPI_UINT64_T, MPI_SUM, comm);
  // One (communicator, op) at a time, released as it goes: at most the budget
  // plus one communicator's instances are held.
  std::map<std::pair<int32_t, int32_t>, int64_t> worst_by_pair;
  for (const auto& [key, length] : lengths) {
    Instances mine;
    if (const auto found = by_key_.find(key); found != by_key_.end()) {
      mine = std::move(found->second);
      by_key_.erase(found);
    }
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
        int64_t& worst = worst_by_pair[{first_out.rank, last_in.rank}];
        worst = std::max(worst, excess);
      }
    }
  }
  for (const auto& [pair, excess] : worst_by_pair) result.worst_by_pair.push_back({pair.first, pair.second, excess});
  unchecked_.clear();
  held_ = 0;
  return result;
}

}  // namespace rankscope
