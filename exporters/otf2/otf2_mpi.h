// What an OTF2 archive needs to know of MPI before its events are written
// (docs/export.md, "OTF2 archives"): the communicators, each with its
// members, since OTF2's records name ranks within a communicator; and which
// point-to-point messages have both their send and their receive in the
// selection, since a message record without its other side misleads
// Scalasca's analysis. Found by one read of the selected ranks' MPI events.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "export_plan.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::export_detail {

inline constexpr uint32_t kNoRank = UINT32_MAX;

class MpiLayout {
 public:
  MpiLayout(const Timeline& timeline, const Plan& plan);

  // The communicators, numbered in order of first use: their hashes, and
  // their members as positions in the plan's ranks (which are the archive's
  // MPI ranks), ascending.
  const std::vector<uint64_t>& communicator_hashes() const { return hashes_; }
  const std::vector<std::vector<uint32_t>>& members() const { return members_; }
  // kNoRank where the hash names no communicator of the selection.
  uint32_t communicator(uint64_t comm_hash) const;
  // The world rank's rank within the communicator; kNoRank when it is not a member.
  uint32_t rank_in(uint32_t communicator, int32_t world_rank) const;
  // Whether both sides of this point-to-point event's message are in the selection.
  bool message_matched(const Event& e, int32_t rank) const;
  uint64_t events_read() const { return events_read_; }

 private:
  struct Channel {  // messages of one (communicator, sender, receiver, tag): their seqs are consecutive
    uint64_t comm_hash, tag;
    int32_t sender, receiver;
    bool operator==(const Channel&) const = default;
  };
  struct ChannelHash {
    size_t operator()(const Channel& c) const;
  };
  struct SeqRanges {
    uint64_t sent_first = UINT64_MAX, sent_last = 0, received_first = UINT64_MAX, received_last = 0;
  };
  static Channel channel_of(const Event& e, int32_t rank);
  void add_member(uint64_t comm_hash, int32_t world_rank);

  std::vector<int32_t> positions_;  // world rank -> position in the plan's ranks, -1: not selected
  std::vector<uint64_t> hashes_;
  std::vector<std::vector<uint32_t>> members_;
  std::unordered_map<uint64_t, uint32_t> by_hash_;
  std::unordered_map<Channel, SeqRanges, ChannelHash> channels_;
  uint64_t events_read_ = 0;
};

}  // namespace rankscope::export_detail
