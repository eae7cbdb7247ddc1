#include "otf2_mpi.h"

#include <algorithm>

#include "rankscope/timeline/event_stream.h"

namespace rankscope::export_detail {
namespace {

bool is_mpi_communication(EventKind kind) { return kind == EventKind::kMpiCollective || kind == EventKind::kMpiP2p; }

uint64_t mpi_events_of(const RankInfo& info) {
  uint64_t events = 0;
  for (const EventKind kind : {EventKind::kMpiCollective, EventKind::kMpiP2p}) {
    const size_t column = static_cast<size_t>(kind) - 1;
    if (column < info.events_by_kind.size()) events += info.events_by_kind[column];
  }
  return events;
}

}  // namespace

size_t MpiLayout::ChannelHash::operator()(const Channel& c) const {
  uint64_t h = c.comm_hash * 0x9E3779B97F4A7C15ull;
  h ^= (c.tag + (uint64_t{static_cast<uint32_t>(c.sender)} << 32 | static_cast<uint32_t>(c.receiver))) *
       0xC2B2AE3D27D4EB4Full;
  return static_cast<size_t>(h ^ (h >> 29));
}

MpiLayout::Channel MpiLayout::channel_of(const Event& e, int32_t rank) {
  const bool sends = e.op == CommOp::kSend;
  return {e.comm_hash, e.correlation_id, sends ? rank : e.peer, sends ? e.peer : rank};
}

MpiLayout::MpiLayout(const Timeline& timeline, const Plan& plan) {
  positions_.assign(static_cast<size_t>(timeline.world_size()), -1);
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    positions_[static_cast<size_t>(plan.ranks[i].rank)] = static_cast<int32_t>(i);
  }
  std::vector<int32_t> reads;
  for (const RankPlan& rank : plan.ranks) {
    if (mpi_events_of(timeline.ranks()[static_cast<size_t>(rank.rank)]) > 0) reads.push_back(rank.rank);
  }
  if (reads.empty()) return;
  const Selection& selection = plan.selection;
  EventStream stream(timeline, reads);
  for (const int32_t rank : reads) {
    events_read_ += stream.stream(rank, [&](const Event& e) {
      if (e.begin_ns > selection.end_ns) return false;
      if (!is_mpi_communication(e.kind) || e.comm_hash == 0 || !selection.contains(e)) return true;
      add_member(e.comm_hash, rank);
      if (e.peer >= 0) add_member(e.comm_hash, e.peer);
      const bool message = e.kind == EventKind::kMpiP2p && (e.op == CommOp::kSend || e.op == CommOp::kRecv);
      if (!message || (e.flags & kFlagIncomplete) != 0 || e.peer < 0) return true;
      SeqRanges& seqs = channels_[channel_of(e, rank)];
      uint64_t& first = e.op == CommOp::kSend ? seqs.sent_first : seqs.received_first;
      uint64_t& last = e.op == CommOp::kSend ? seqs.sent_last : seqs.received_last;
      first = std::min(first, e.seq);
      last = std::max(last, e.seq);
      return true;
    });
  }
  for (std::vector<uint32_t>& members : members_) {
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
  }
}

void MpiLayout::add_member(uint64_t comm_hash, int32_t world_rank) {
  if (world_rank >= static_cast<int32_t>(positions_.size()) || positions_[static_cast<size_t>(world_rank)] < 0) return;
  const auto [found, added] = by_hash_.try_emplace(comm_hash, static_cast<uint32_t>(hashes_.size()));
  if (added) {
    hashes_.push_back(comm_hash);
    members_.emplace_back();
  }
  std::vector<uint32_t>& members = members_[found->second];
  const auto position = static_cast<uint32_t>(positions_[static_cast<size_t>(world_rank)]);
  if (members.empty() || members.back() != position) members.push_back(position);  // sorted at the end
}

uint32_t MpiLayout::communicator(uint64_t comm_hash) const {
  const auto found = by_hash_.find(comm_hash);
  return found == by_hash_.end() ? kNoRank : found->second;
}

uint32_t MpiLayout::rank_in(uint32_t communicator, int32_t world_rank) const {
  if (communicator >= members_.size() || world_rank < 0 || world_rank >= static_cast<int32_t>(positions_.size()) ||
      positions_[static_cast<size_t>(world_rank)] < 0) {
    return kNoRank;
  }
  const std::vector<uint32_t>& members = members_[communicator];
  const auto position = static_cast<uint32_t>(positions_[static_cast<size_t>(world_rank)]);
  const auto found = std::lower_bound(members.begin(), members.end(), position);
  return found != members.end() && *found == position ? static_cast<uint32_t>(found - members.begin()) : kNoRank;
}

bool MpiLayout::message_matched(const Event& e, int32_t rank) const {
  const auto found = channels_.find(channel_of(e, rank));
  if (found == channels_.end()) return false;
  const SeqRanges& seqs = found->second;
  const uint64_t first = std::max(seqs.sent_first, seqs.received_first);
  const uint64_t last = std::min(seqs.sent_last, seqs.received_last);
  return e.seq >= first && e.seq <= last;
}

}  // namespace rankscope::export_detail
