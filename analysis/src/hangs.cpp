// Hangs: collectives some ranks entered and never left, from the incomplete
// events a hang's dump writes (docs/windows-and-hangs.md, "Hangs"), and who never came;
// NCCL sends and receives whose kernels waited for their peer, likewise;
// and deadlocks, ranks each inside a call waiting for a message from (or to)
// the next, in a cycle.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "rankscope/analysis/hangs.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/model/counters.h"

namespace rankscope::analysis {

namespace {

bool is_call(EventKind kind) {
  return kind == EventKind::kMpiCall || kind == EventKind::kMpiCollective || kind == EventKind::kMpiP2p ||
         kind == EventKind::kNcclCollectiveEnqueue || kind == EventKind::kNcclP2pEnqueue;
}

// Only where some rank wrote a hang's state or ended otherwise than by
// closing its shard normally can a collective have been left unfinished.
bool may_hold_hangs(const Timeline& timeline) {
  for (const RankInfo& info : timeline.ranks()) {
    if (info.status != RankStatus::kComplete || info.counters.get(counter::kHangDumps) != 0) return true;
  }
  return false;
}

// Each NCCL communicator's members by their rank in it: the world rank
// whose track for it is named "... (rank K of N)" (-1 for a member with no
// such track). NCCL names a send's or a receive's peer by that rank.
class NcclRanks {
 public:
  explicit NcclRanks(const Timeline& timeline) {
    for (const RankInfo& info : timeline.ranks()) {
      for (const Track& track : info.tracks) {
        if (track.type != TrackType::kNcclComm) continue;
        const std::string name = timeline.string(track.name_id);
        const size_t open = name.rfind("(rank ");
        if (open == std::string::npos) continue;
        int rank = -1, size = 0;
        if (std::sscanf(name.c_str() + open, "(rank %d of %d)", &rank, &size) != 2 || rank < 0 || rank >= size ||
            size > timeline.world_size()) {
          continue;
        }
        std::vector<int32_t>& members = members_[track.os_id];
        if (members.size() < size_t(size)) members.resize(size_t(size), -1);
        members[size_t(rank)] = info.rank;
      }
    }
  }
  int32_t world_rank(uint64_t comm, int32_t comm_rank) const {
    const auto it = members_.find(comm);
    if (it == members_.end() || comm_rank < 0 || size_t(comm_rank) >= it->second.size()) return kNoPeer;
    return it->second[size_t(comm_rank)];
  }
  int32_t comm_rank(uint64_t comm, int32_t world_rank) const {
    const auto it = members_.find(comm);
    if (it == members_.end()) return kNoPeer;
    const auto found = std::find(it->second.begin(), it->second.end(), world_rank);
    return found == it->second.end() ? kNoPeer : int32_t(found - it->second.begin());
  }

 private:
  std::map<uint64_t, std::vector<int32_t>> members_;
};

struct RankState {
  std::vector<Event> unfinished;        // collectives it never left
  std::vector<Event> unfinished_other;  // other calls it never left (a receive), NCCL's sends and receives
  std::vector<Event> open_ranges;       // NVTX ranges open when it wrote its state
};

RankState read_unfinished(const Timeline& timeline, int32_t rank) {
  RankState state;
  timeline.for_each_event_block(rank, [&](const std::vector<Event>& events) {
    for (const Event& e : events) {
      if (!(e.flags & kFlagIncomplete)) continue;
      if (e.kind == EventKind::kNvtxRange) {
        state.open_ranges.push_back(e);
      } else if (e.kind == EventKind::kNcclP2pGpu) {
        state.unfinished_other.push_back(e);
      } else if (is_call(e.kind) || e.kind == EventKind::kNcclCollectiveGpu) {
        (is_collective_kind(e.kind) && e.comm_hash != 0 ? state.unfinished : state.unfinished_other).push_back(e);
      }
    }
  });
  return state;
}

// Whether `m`, a peer's event, is the kernel of the other half of a NCCL
// send or receive (comm, seq, op) made by the member `comm_rank` of comm
// (NCCL numbers its sends to each peer, and its receives from each, in turn).
bool is_other_half(const Event& m, uint64_t comm, uint64_t seq, CommOp op, int32_t comm_rank) {
  const CommOp other_half = op == CommOp::kSend ? CommOp::kRecv : CommOp::kSend;
  return m.kind == EventKind::kNcclP2pGpu && m.comm_hash == comm && m.seq == seq && m.op == other_half &&
         m.peer == comm_rank;
}

struct JobState {
  explicit JobState(const Timeline& timeline) : nccl(timeline) {
    for (int32_t r = 0; r < timeline.world_size(); ++r) ranks.push_back(read_unfinished(timeline, r));
  }
  // The world rank a message call names: NCCL names it by its rank in the communicator.
  int32_t peer_of(const Event& e) const {
    return e.kind == EventKind::kNcclP2pGpu ? nccl.world_rank(e.comm_hash, e.peer) : e.peer;
  }
  // The other half of `rank`'s NCCL send or receive `e` where its peer's
  // kernel for it had begun and not ended too (its latest copy), or null.
  const Event* matching_half(int32_t rank, const Event& e) const {
    const int32_t peer = peer_of(e);
    if (e.kind != EventKind::kNcclP2pGpu || peer < 0 || size_t(peer) >= ranks.size()) return nullptr;
    const int32_t comm_rank = nccl.comm_rank(e.comm_hash, rank);
    const Event* found = nullptr;
    for (const Event& m : ranks[size_t(peer)].unfinished_other) {
      if (is_other_half(m, e.comm_hash, e.seq, e.op, comm_rank) && (!found || m.end_ns > found->end_ns)) found = &m;
    }
    return found;
  }
  NcclRanks nccl;
  std::vector<RankState> ranks;
};

// The same NCCL send or receive, as each copy of its kernel's window shows it.
bool same_transfer(const Event& a, const Event& b) {
  return a.kind == b.kind && a.comm_hash == b.comm_hash && a.op == b.op && a.seq == b.seq && a.peer == b.peer;
}

// Whether `e`, an event of the rank `hang` waits for, is the call that
// rank had not entered: the same collective, or the kernel of the other
// half of the send or receive.
bool is_awaited_call(const Event& e, const Hang& hang, int32_t waiter_comm_rank) {
  if (hang.point_to_point) return is_other_half(e, hang.comm_hash, hang.seq, hang.op, waiter_comm_rank);
  return e.comm_hash == hang.comm_hash && e.seq == hang.seq && is_call(e.kind) && is_collective_kind(e.kind) &&
         e.op == hang.op;
}

// A missing rank's last call that ended before the others' state was
// written, and when it entered the hung call after all (a hang that
// resolved itself, under --hang-action report).
void read_missing(const Timeline& timeline, const Hang& hang, int32_t waiter_comm_rank, int64_t written_ns,
                  MissingRank& missing) {
  Event last{};
  bool has_last = false;
  timeline.for_each_event_block(missing.rank, [&](const std::vector<Event>& events) {
    for (const Event& e : events) {
      if (e.flags & kFlagIncomplete) continue;
      if (is_awaited_call(e, hang, waiter_comm_rank)) missing.entered_at_ns = e.begin_ns;
      if (!is_call(e.kind)) continue;
      if (e.end_ns <= written_ns && (!has_last || e.end_ns >= last.end_ns)) {
        last = e;
        has_last = true;
      }
    }
  });
  if (has_last) {
    missing.last_call = timeline.string(last.name_id);
    missing.last_call_end_ns = last.end_ns;
  }
}

// A communicator's members as the ranks' tracks show them: each rank that
// made it has a track for it, named with the communicator's size.
struct Members {
  std::string name;
  std::vector<int32_t> ranks;
  bool complete = false;
};

Members members_of(const Timeline& timeline, uint64_t comm_hash) {
  Members members;
  size_t expected = 0;
  for (const RankInfo& info : timeline.ranks()) {
    for (const Track& track : info.tracks) {
      if ((track.type != TrackType::kMpiComm && track.type != TrackType::kNcclComm) || track.os_id != comm_hash) continue;
      members.ranks.push_back(info.rank);
      if (members.name.empty()) members.name = timeline.string(track.name_id);
      break;
    }
  }
  // "NCCL dp (rank 2 of 8)" is one member's name for it: the communicator is "NCCL dp (8 ranks)".
  if (const size_t open = members.name.rfind("(rank "); open != std::string::npos) {
    if (const size_t of = members.name.find(" of ", open); of != std::string::npos && members.name.back() == ')') {
      members.name = members.name.substr(0, open) + "(" + members.name.substr(of + 4, members.name.size() - of - 5) +
                     " ranks)";
    }
  }
  if (members.name == "MPI_COMM_WORLD") {
    members.ranks.clear();
    for (int32_t r = 0; r < timeline.world_size(); ++r) members.ranks.push_back(r);
    members.complete = true;
    return members;
  }
  // "MPI comm 1234 (8 ranks)", "NCCL dp (8 ranks)"
  if (const size_t open = members.name.rfind('('); open != std::string::npos) {
    std::from_chars(members.name.c_str() + open + 1, members.name.c_str() + members.name.size(), expected);
  }
  members.complete = expected != 0 && members.ranks.size() == expected;
  return members;
}

std::string collective_text(const Timeline& timeline, const Event& e, const std::string& comm) {
  return timeline.string(e.name_id) + " #" + std::to_string(e.seq) + " of " + (comm.empty() ? "its communicator" : comm);
}

// A call that is not a collective; for a message, with its peer (by world
// rank) and tag: "MPI_Recv from rank 2, tag 7", "ncclSend to rank 3".
std::string call_text(const Timeline& timeline, const JobState& job, const Event& e) {
  std::string text = timeline.string(e.name_id);
  const bool sends = e.op == CommOp::kSend;
  if (e.kind == EventKind::kNcclP2pGpu) {
    const int32_t peer = job.peer_of(e);
    return text + (sends ? " to " : " from ") +
           (peer != kNoPeer ? "rank " + std::to_string(peer) : "a rank not in the timeline");
  }
  if (e.kind != EventKind::kMpiP2p) return text;
  text += e.peer != kNoPeer ? (sends ? " to rank " : " from rank ") + std::to_string(e.peer)
          : sends           ? " to a rank not in the communicator"
                            : " from any rank";
  // A p2p event's correlation id is its tag; a negative one is MPI_ANY_TAG.
  const auto tag = static_cast<int32_t>(e.correlation_id);
  text += tag >= 0 ? ", tag " + std::to_string(tag) : ", any tag";
  // Polled since its begin, with the thread's own work between the polls.
  return e.flags & kFlagPolling ? text + " (polling)" : text;
}

// A rank's wait for one peer: the message call it entered first among
// those it was inside of that name their peer. A NCCL send or receive whose
// peer's kernel for the other half had begun too waits for no rank: the
// transfer itself did not complete.
struct Wait {
  Event call;
  int32_t peer = kNoPeer;  // world rank
};

// The cycles of ranks' waits, each read from its lowest rank: (rank, its wait) in turn.
std::vector<std::vector<std::pair<int32_t, Wait>>> cycles_of_waits(const JobState& job) {
  const auto world = static_cast<int32_t>(job.ranks.size());
  std::vector<std::optional<Wait>> waits(static_cast<size_t>(world));
  for (int32_t r = 0; r < world; ++r) {
    for (const Event& e : job.ranks[static_cast<size_t>(r)].unfinished_other) {
      const int32_t peer = job.peer_of(e);
      if ((e.kind != EventKind::kMpiP2p && e.kind != EventKind::kNcclP2pGpu) || peer < 0 || peer >= world ||
          job.matching_half(r, e)) {
        continue;
      }
      std::optional<Wait>& wait = waits[static_cast<size_t>(r)];
      // The call entered first; of the same wait's copies, the longer.
      const bool earlier = !wait || e.begin_ns < wait->call.begin_ns ||
                           (e.begin_ns == wait->call.begin_ns && e.end_ns > wait->call.end_ns);
      if (earlier) wait = Wait{e, peer};
    }
  }
  // Each rank waits for one peer at most: following the waits from each rank
  // not yet seen either leaves them or comes back to a rank of this walk.
  std::vector<std::vector<std::pair<int32_t, Wait>>> cycles;
  std::vector<int32_t> walk_of(static_cast<size_t>(world), -1);
  for (int32_t start = 0; start < world; ++start) {
    int32_t r = start;
    while (r >= 0 && walk_of[static_cast<size_t>(r)] < 0 && waits[static_cast<size_t>(r)]) {
      walk_of[static_cast<size_t>(r)] = start;
      r = waits[static_cast<size_t>(r)]->peer;
    }
    if (r < 0 || walk_of[static_cast<size_t>(r)] != start || !waits[static_cast<size_t>(r)]) continue;
    // r is on a cycle found by this walk.
    std::vector<int32_t> members{r};
    for (int32_t next = waits[static_cast<size_t>(r)]->peer; next != r; next = waits[static_cast<size_t>(next)]->peer) {
      members.push_back(next);
    }
    std::rotate(members.begin(), std::min_element(members.begin(), members.end()), members.end());
    std::vector<std::pair<int32_t, Wait>>& cycle = cycles.emplace_back();
    for (const int32_t member : members) cycle.emplace_back(member, *waits[static_cast<size_t>(member)]);
  }
  return cycles;
}

std::vector<Deadlock> deadlocks_in(const Timeline& timeline, const JobState& job) {
  std::vector<Deadlock> deadlocks;
  for (const auto& cycle : cycles_of_waits(job)) {
    Deadlock& deadlock = deadlocks.emplace_back();
    for (const auto& [rank, wait] : cycle) {
      const Event& e = wait.call;
      deadlock.waits.push_back({rank, wait.peer, call_text(timeline, job, e), e.begin_ns, e.end_ns - e.begin_ns});
    }
  }
  const auto longest = [](const Deadlock& d) {
    int64_t most = 0;
    for (const MessageWait& w : d.waits) most = std::max(most, w.waited_ns);
    return most;
  };
  std::stable_sort(deadlocks.begin(), deadlocks.end(),
                   [&](const Deadlock& a, const Deadlock& b) { return longest(a) > longest(b); });
  return deadlocks;
}

// Where every member entered a collective, the ranks that entered only
// after all who came before them had written their state (after a wait of
// some length: NCCL's kernels cut at their begin as the rank ends waited
// none) were missing while those waited. A rank held by SIGSTOP and
// continued by mpirun's SIGCONT just before its SIGTERM comes in this way;
// so do several. They are taken out of `entered`; the earlier ranks' waits
// are the hang. Where some member never entered, that member is the hang's
// cause and the ranks that came late are left inside: a rank busy at the
// dump that entered after it waited with the others all the same.
std::vector<HangEntry> take_late_entries(Hang& hang, const Members& members) {
  if (hang.point_to_point || !members.complete || hang.entered.size() < 2) return {};
  const auto entered = [&](int32_t rank) {
    return std::any_of(hang.entered.begin(), hang.entered.end(), [&](const HangEntry& h) { return h.rank == rank; });
  };
  if (!std::all_of(members.ranks.begin(), members.ranks.end(), entered)) return {};
  std::vector<HangEntry> by_entry = hang.entered;
  std::stable_sort(by_entry.begin(), by_entry.end(),
                   [](const HangEntry& a, const HangEntry& b) { return a.since_ns < b.since_ns; });
  int64_t earlier_written_ns = INT64_MIN;
  bool earlier_waited = false;
  for (size_t first_late = 1; first_late < by_entry.size(); ++first_late) {
    const HangEntry& before = by_entry[first_late - 1];
    earlier_written_ns = std::max(earlier_written_ns, before.since_ns + before.waited_ns);
    earlier_waited |= before.waited_ns > 0;
    if (!earlier_waited || by_entry[first_late].since_ns < earlier_written_ns) continue;
    std::vector<HangEntry> late(by_entry.begin() + static_cast<std::ptrdiff_t>(first_late), by_entry.end());
    std::erase_if(hang.entered, [&](const HangEntry& h) {
      return std::any_of(late.begin(), late.end(), [&](const HangEntry& l) { return l.rank == h.rank; });
    });
    return late;
  }
  return {};
}

Hang hang_of(const Timeline& timeline, const Event& e) {
  Hang hang;
  hang.call = timeline.string(e.name_id);
  hang.op = e.op;
  hang.comm_hash = e.comm_hash;
  hang.seq = e.seq;
  return hang;
}

}  // namespace

std::vector<Hang> find_hangs(const Timeline& timeline) {
  std::vector<Hang> hangs;
  if (!may_hold_hangs(timeline)) return hangs;
  const JobState job(timeline);
  const std::vector<RankEnd> ends = rank_ends(timeline);

  std::map<std::tuple<uint64_t, uint8_t, uint64_t>, size_t> index;  // (comm, op, seq) -> hang
  for (int32_t r = 0; r < timeline.world_size(); ++r) {
    for (const Event& e : job.ranks[static_cast<size_t>(r)].unfinished) {
      auto [it, added] = index.try_emplace({e.comm_hash, static_cast<uint8_t>(e.op), e.seq}, hangs.size());
      if (added) hangs.push_back(hang_of(timeline, e));
      std::vector<HangEntry>& entered = hangs[it->second].entered;
      if (std::none_of(entered.begin(), entered.end(), [&](const HangEntry& h) { return h.rank == r; })) {
        entered.push_back({r, e.begin_ns, e.end_ns - e.begin_ns});
      }
    }
  }
  // A NCCL send or receive is one rank's, and its peer the one member it
  // waits for; one that closes a cycle of waits is told as the deadlock. A
  // transfer whose both halves' kernels had begun is one hang, the send's,
  // with both ranks inside.
  std::vector<std::pair<int32_t, Event>> deadlocked;  // (rank, its wait)
  for (const auto& cycle : cycles_of_waits(job)) {
    for (const auto& [rank, wait] : cycle) deadlocked.emplace_back(rank, wait.call);
  }
  const auto in_deadlock = [&](int32_t rank, const Event& e) {
    return std::any_of(deadlocked.begin(), deadlocked.end(),
                       [&](const auto& wait) { return wait.first == rank && same_transfer(wait.second, e); });
  };
  for (int32_t r = 0; r < timeline.world_size(); ++r) {
    // (comm, op, seq, peer in the communicator) -> hang: a kernel's window
    // recorded again as the rank ended, cut at its begin, is the same wait.
    std::map<std::tuple<uint64_t, uint8_t, uint64_t, int32_t>, size_t> own;
    for (const Event& e : job.ranks[static_cast<size_t>(r)].unfinished_other) {
      if (e.kind != EventKind::kNcclP2pGpu || in_deadlock(r, e)) continue;
      const Event* other_half = job.matching_half(r, e);
      if (other_half && e.op == CommOp::kRecv) continue;  // the send's hang
      const auto [it, added] = own.try_emplace({e.comm_hash, static_cast<uint8_t>(e.op), e.seq, e.peer}, hangs.size());
      if (!added) {
        HangEntry& entered = hangs[it->second].entered.front();
        entered.waited_ns = std::max(entered.waited_ns, e.end_ns - entered.since_ns);
        continue;
      }
      Hang hang = hang_of(timeline, e);
      hang.point_to_point = true;
      hang.peer = job.peer_of(e);
      hang.entered.push_back({r, e.begin_ns, e.end_ns - e.begin_ns});
      if (other_half) {
        hang.entered.push_back({hang.peer, other_half->begin_ns, other_half->end_ns - other_half->begin_ns});
      }
      hangs.push_back(std::move(hang));
    }
  }
  for (Hang& hang : hangs) {
    Members members = members_of(timeline, hang.comm_hash);
    hang.comm = members.name;
    int32_t waiter_comm_rank = kNoPeer;
    if (hang.point_to_point) {
      const int32_t waiter = hang.entered.front().rank;
      waiter_comm_rank = job.nccl.comm_rank(hang.comm_hash, waiter);
      members.ranks.clear();
      if (hang.peer != kNoPeer && hang.peer != waiter) members.ranks.push_back(hang.peer);
      members.complete = hang.peer != kNoPeer;
    }
    hang.members_known = members.complete;
    const std::vector<HangEntry> late = take_late_entries(hang, members);
    int64_t written_ns = 0;
    for (const HangEntry& e : hang.entered) written_ns = std::max(written_ns, e.since_ns + e.waited_ns);
    for (const int32_t r : members.ranks) {
      if (std::any_of(hang.entered.begin(), hang.entered.end(), [&](const HangEntry& h) { return h.rank == r; })) continue;
      const auto late_entry = std::find_if(late.begin(), late.end(), [&](const HangEntry& h) { return h.rank == r; });
      hang.missing_ranks.push_back(r);
      const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
      const RankState& state = job.ranks[static_cast<size_t>(r)];
      MissingRank missing;
      missing.rank = r;
      missing.status = rank_status_name(info.status);
      missing.killed = describe_fatal_signal(ends[static_cast<size_t>(r)]);
      // A rank writes the calls it is inside of on a hang, and when it ends by a signal, a crash or _exit.
      missing.wrote_state = info.counters.get(counter::kHangDumps) != 0 ||
                            (info.status != RankStatus::kDead && (info.counters.get(counter::kTerminatedBySignal) != 0 ||
                                                                  info.counters.get(counter::kCrashSignal) != 0 ||
                                                                  info.counters.get(counter::kEndedByExitCall) != 0));
      if (late_entry != late.end()) {
        missing.entered_at_ns = late_entry->since_ns;  // and was ended inside it, so it holds no other call
      } else if (!state.unfinished.empty()) {
        const Event& other = state.unfinished.front();
        missing.inside = collective_text(timeline, other, members_of(timeline, other.comm_hash).name);
      } else if (!state.unfinished_other.empty()) {
        missing.inside = call_text(timeline, job, state.unfinished_other.front());
      }
      for (const Event& range : state.open_ranges) missing.open_ranges.push_back(timeline.string(range.name_id));
      read_missing(timeline, hang, waiter_comm_rank, written_ns, missing);
      hang.missing.push_back(std::move(missing));
    }
  }
  const auto longest = [](const Hang& h) {
    int64_t most = 0;
    for (const HangEntry& e : h.entered) most = std::max(most, e.waited_ns);
    return most;
  };
  std::stable_sort(hangs.begin(), hangs.end(), [&](const Hang& a, const Hang& b) { return longest(a) > longest(b); });
  return hangs;
}

std::vector<Deadlock> find_deadlocks(const Timeline& timeline) {
  if (!may_hold_hangs(timeline)) return {};
  return deadlocks_in(timeline, JobState(timeline));
}

}  // namespace rankscope::analysis
