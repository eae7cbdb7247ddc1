#include "happens_before.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

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

// An unfinished call (a hang's state) ended when it was written, not when
// its peers let it go: its end orders nothing.
bool finished(const Event& event) { return !(event.flags & kFlagIncomplete); }

bool is_collective(const Event& event) {
  return (event.kind == EventKind::kMpiCollective || event.kind == EventKind::kNcclCollectiveGpu) &&
         event.comm_hash != 0 && every_rank_needs_every_other(event.op) && finished(event);
}

bool is_message(const Event& event) {
  return event.kind == EventKind::kMpiP2p && event.comm_hash != 0 &&
         (event.op == CommOp::kSend || event.op == CommOp::kRecv) && finished(event);
}

// The agent's sequence number for a message it could not number (its table
// of (communicator, sender, receiver, tag) was full).
constexpr uint64_t kUnnumbered = UINT64_MAX;
// A sample level that keeps no message.
constexpr unsigned kNoMessages = 64;

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9;
  x ^= x >> 27;
  x *= 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

// What names a message (for the check's MessageHalf, which is private to it);
// the field that differs most between messages comes first, so that
// comparisons end early.
auto message_key(const auto& half) {
  return std::tie(half.seq, half.sender, half.receiver, half.tag, half.comm_hash);
}

uint64_t message_hash(const auto& half) {
  const uint64_t pair = uint64_t{static_cast<uint32_t>(half.sender)} << 32 | static_cast<uint32_t>(half.receiver);
  return mix64(half.comm_hash ^ mix64(half.seq ^ mix64(pair ^ mix64(half.tag))));
}

bool sampled(uint64_t hash, unsigned level) {
  return level < kNoMessages && (hash & ((uint64_t{1} << level) - 1)) == 0;
}

// The process that joins a message's halves: from other bits of the hash
// than the sample's, so every process gets its share of any sample.
int joining_process(uint64_t hash, int processes) {
  return static_cast<int>((mix64(hash) >> 32) * static_cast<uint64_t>(processes) >> 32);
}

}  // namespace

bool HappensBeforeCheck::applies_to(const Event& event) { return is_collective(event) || is_message(event); }

void HappensBeforeCheck::add(int32_t rank, const Event& event) {
  if (is_collective(event)) {
    add_collective(rank, event);
  } else if (is_message(event)) {
    add_message(rank, event);
  }
}

void HappensBeforeCheck::add_collective(int32_t rank, const Event& event) {
  const auto found = by_key_.find({event.comm_hash, static_cast<uint8_t>(event.op)});
  const uint64_t held_for_key = found == by_key_.end() ? 0 : found->second.last_begin.size();
  const uint64_t growth = event.seq < held_for_key ? 0 : (event.seq + 1 - held_for_key) * 2 * sizeof(Slot);
  // Collectives come first: fewer messages are sampled to make room, if that is enough.
  if (event.seq < kMaxSequence && instance_bytes_ + growth <= budget_) {
    while (instance_bytes_ + growth + messages_.size() * sizeof(MessageHalf) > budget_) {
      sample_messages_at(message_level_ + 1);
    }
  }
  if (event.seq >= kMaxSequence || instance_bytes_ + growth > budget_) {
    ++unchecked_[rank];
    return;
  }
  Instances& instances = found == by_key_.end() ? by_key_[{event.comm_hash, static_cast<uint8_t>(event.op)}]
                                                : found->second;
  if (growth > 0) {
    instances.last_begin.resize(event.seq + 1, Slot{LONG_MIN, -1});
    instances.first_end.resize(event.seq + 1, Slot{LONG_MAX, -1});
    instance_bytes_ += growth;
  }
  Slot& begin = instances.last_begin[event.seq];
  Slot& end = instances.first_end[event.seq];
  if (event.begin_ns > begin.value) begin = {event.begin_ns, rank};
  if (event.end_ns < end.value) end = {event.end_ns, rank};
}

void HappensBeforeCheck::add_message(int32_t rank, const Event& event) {
  // A message to itself is timed by one clock on both sides: it says nothing about the correction.
  if (event.peer == rank) return;
  // No other half can be found for a message the agent could not number, one
  // without a peer, or one whose tag is wider than MPI's int.
  if (event.seq == kUnnumbered || event.peer < 0 || event.correlation_id > UINT32_MAX) {
    ++unchecked_[rank];
    return;
  }
  const bool is_send = event.op == CommOp::kSend;
  const MessageHalf half{event.comm_hash,
                         event.seq,
                         is_send ? event.begin_ns : event.end_ns,
                         is_send ? rank : event.peer,
                         is_send ? event.peer : rank,
                         static_cast<uint32_t>(event.correlation_id),
                         is_send};
  const uint64_t hash = message_hash(half);
  while (sampled(hash, message_level_) && !room_for_one_more_message()) sample_messages_at(message_level_ + 1);
  if (!sampled(hash, message_level_)) {
    ++unchecked_[rank];
    return;
  }
  if (messages_.size() == messages_.capacity()) {
    // Grown by hand so that the vector never reserves past the messages' share of the budget.
    const uint64_t share = budget_ / 2 / sizeof(MessageHalf);
    messages_.reserve(static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(messages_.size() * 2, 1024), share)));
  }
  messages_.push_back(half);
}

bool HappensBeforeCheck::room_for_one_more_message() const {
  const uint64_t bytes = (messages_.size() + 1) * sizeof(MessageHalf);
  return bytes <= budget_ / 2 && instance_bytes_ + bytes <= budget_;
}

void HappensBeforeCheck::sample_messages_at(unsigned level) {
  message_level_ = std::min(level, kNoMessages);
  std::erase_if(messages_, [&](const MessageHalf& half) {
    if (sampled(message_hash(half), message_level_)) return false;
    ++unchecked_[half.is_send ? half.sender : half.receiver];
    return true;
  });
}

HappensBeforeCheck::Result HappensBeforeCheck::finish(MPI_Comm comm, const std::vector<int64_t>& bounds) {
  Result result;
  result.violations.assign(bounds.size(), 0);
  result.message_violations.assign(bounds.size(), 0);
  result.worst_ns.assign(bounds.size(), 0);
  result.unchecked.assign(bounds.size(), 0);
  result.unmatched.assign(bounds.size(), 0);
  // Every process finds the same collective violations, and its own message ones.
  PairGaps worst_by_pair, message_pairs;
  check_collectives(comm, bounds, result, worst_by_pair);
  check_messages(comm, bounds, result, message_pairs);

  // Add up what each process found.
  for (const auto& [rank, n] : unchecked_) {
    if (rank >= 0 && static_cast<size_t>(rank) < bounds.size()) result.unchecked[static_cast<size_t>(rank)] = n;
  }
  const int ranks = static_cast<int>(bounds.size());
  MPI_Allreduce(MPI_IN_PLACE, result.unchecked.data(), ranks, MPI_UINT64_T, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, result.message_violations.data(), ranks, MPI_UINT64_T, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, result.unmatched.data(), ranks, MPI_UINT64_T, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, result.worst_ns.data(), ranks, MPI_INT64_T, MPI_MAX, comm);
  std::vector<Violation> local;
  for (const auto& [pair, excess] : message_pairs) local.push_back({pair.first, pair.second, excess});
  int processes = 1;
  MPI_Comm_size(comm, &processes);
  const int bytes = static_cast<int>(local.size() * sizeof(Violation));
  std::vector<int> counts(static_cast<size_t>(processes)), displs(static_cast<size_t>(processes));
  MPI_Allgather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<Violation> all(static_cast<size_t>(displs.back() + counts.back()) / sizeof(Violation));
  MPI_Allgatherv(local.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, comm);
  for (const Violation& v : all) {
    int64_t& worst = worst_by_pair[{v.left, v.entered}];
    worst = std::max(worst, v.excess_ns);
  }
  for (const auto& [pair, excess] : worst_by_pair) result.worst_by_pair.push_back({pair.first, pair.second, excess});
  unchecked_.clear();
  message_level_ = 0;
  return result;
}

void HappensBeforeCheck::check_collectives(MPI_Comm comm, const std::vector<int64_t>& bounds, Result& result,
                                           PairGaps& worst_by_pair) {
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

  // One (communicator, op) at a time, released as it goes: at most the budget
  // plus one communicator's instances are held.
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
  instance_bytes_ = 0;
}

void HappensBeforeCheck::check_messages(MPI_Comm comm, const std::vector<int64_t>& bounds, Result& result,
                                        PairGaps& worst_by_pair) {
  int processes = 1;
  MPI_Comm_size(comm, &processes);
  // One sample everywhere: the smallest any process kept.
  unsigned level = message_level_;
  MPI_Allreduce(MPI_IN_PLACE, &level, 1, MPI_UNSIGNED, MPI_MAX, comm);
  if (level != message_level_) sample_messages_at(level);

  // Each half goes to the process that joins its message. The halves a
  // process keeps and those it is sent must fit in the budget together (the
  // collectives' memory is released by now); until they do everywhere,
  // fewer messages are sampled.
  std::vector<int> send_counts(static_cast<size_t>(processes)), receive_counts(send_counts.size());
  uint64_t incoming = 0;
  while (true) {
    std::fill(send_counts.begin(), send_counts.end(), 0);
    for (const MessageHalf& half : messages_) {
      ++send_counts[static_cast<size_t>(joining_process(message_hash(half), processes))];
    }
    MPI_Alltoall(send_counts.data(), 1, MPI_INT, receive_counts.data(), 1, MPI_INT, comm);
    incoming = std::accumulate(receive_counts.begin(), receive_counts.end(), uint64_t{0});
    // MPI counts and displacements are ints.
    int fits = (messages_.size() + incoming) * sizeof(MessageHalf) <= budget_ && messages_.size() <= INT_MAX &&
               incoming <= INT_MAX;
    MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, comm);
    if (fits) break;
    sample_messages_at(message_level_ + 1);
  }
  std::vector<int> send_displs(send_counts.size()), receive_displs(send_counts.size());
  std::exclusive_scan(send_counts.begin(), send_counts.end(), send_displs.begin(), 0);
  // Ordered by process in place, each half swapped straight into its
  // process's part: a sort would hash in every comparison, and took seconds
  // for millions of halves.
  std::vector<size_t> next(send_displs.begin(), send_displs.end());
  for (size_t p = 0; p < next.size(); ++p) {
    const auto end = static_cast<size_t>(send_displs[p]) + static_cast<size_t>(send_counts[p]);
    while (next[p] < end) {
      const auto target = static_cast<size_t>(joining_process(message_hash(messages_[next[p]]), processes));
      if (target == p) {
        ++next[p];
      } else {
        std::swap(messages_[next[p]], messages_[next[target]++]);
      }
    }
  }
  std::exclusive_scan(receive_counts.begin(), receive_counts.end(), receive_displs.begin(), 0);
  std::vector<MessageHalf> joined(static_cast<size_t>(incoming));
  MPI_Datatype half_type;
  MPI_Type_contiguous(static_cast<int>(sizeof(MessageHalf)), MPI_BYTE, &half_type);
  MPI_Type_commit(&half_type);
  MPI_Alltoallv(messages_.data(), send_counts.data(), send_displs.data(), half_type, joined.data(),
                receive_counts.data(), receive_displs.data(), half_type, comm);
  MPI_Type_free(&half_type);
  std::vector<MessageHalf>().swap(messages_);

  // A message is its send and its receive, side by side once sorted; anything
  // else (a lone half, or a name used twice) cannot be paired.
  std::sort(joined.begin(), joined.end(), [](const MessageHalf& a, const MessageHalf& b) {
    return std::make_pair(message_key(a), a.is_send) < std::make_pair(message_key(b), b.is_send);
  });
  const auto owner = [](const MessageHalf& half) {
    return static_cast<size_t>(half.is_send ? half.sender : half.receiver);
  };
  for (size_t first = 0, end = 0; first < joined.size(); first = end) {
    end = first + 1;
    while (end < joined.size() && message_key(joined[end]) == message_key(joined[first])) ++end;
    const MessageHalf& receive = joined[first];
    const MessageHalf& send = joined[end - 1];
    if (end - first != 2 || receive.is_send || !send.is_send) {
      for (size_t i = first; i < end; ++i) {
        if (owner(joined[i]) < bounds.size()) ++result.unmatched[owner(joined[i])];
      }
      continue;
    }
    const auto s = static_cast<size_t>(send.sender), r = static_cast<size_t>(receive.receiver);
    if (s >= bounds.size() || r >= bounds.size() || bounds[s] < 0 || bounds[r] < 0) continue;
    const int64_t excess = (send.time_ns - receive.time_ns) - (bounds[s] + bounds[r]);
    if (excess > 0) {
      ++result.message_violations[r];
      result.worst_ns[r] = std::max(result.worst_ns[r], excess);
      int64_t& worst = worst_by_pair[{receive.receiver, send.sender}];
      worst = std::max(worst, excess);
    }
  }
}

}  // namespace rankscope
