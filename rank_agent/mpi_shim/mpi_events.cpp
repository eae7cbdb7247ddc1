// Events of calls that complete where they are made: collectives with their
// sequence numbers, and messages with theirs, which a send and its receive share.
#include <memory>
#include <string>

#include "mpi_shim.h"

namespace rankscope::agent {

uint32_t g_call_names[static_cast<size_t>(Call::kCount)];
constinit thread_local CallInProgress* t_call = nullptr;

namespace {

constexpr const char* kCallNames[] = {
#define RANKSCOPE_CALL_NAME(name) "MPI_" #name,
    RANKSCOPE_MPI_CALLS(RANKSCOPE_CALL_NAME)
#undef RANKSCOPE_CALL_NAME
};

// Message order per (communicator, sender, receiver, tag): what a receive
// shares with its send.
class MessageCounters {
 public:
  static constexpr uint32_t kMaxKeys = 1 << 16;
  MessageCounters() : ids_(kMaxKeys * 2, kMaxKeys), keys_(new Key[kMaxKeys]), counts_(kMaxKeys) {}

  uint64_t next(uint64_t comm, int sender, int receiver, int tag) {
    const Key key{comm, sender, receiver, tag};
    const uint64_t hash = mix64(comm ^ mix64((uint64_t(uint32_t(sender)) << 32 | uint32_t(receiver)) ^ mix64(uint32_t(tag))));
    const uint32_t id = ids_.find_or_add(
        hash, [&](uint32_t i) { return keys_[i] == key; },
        [&](uint32_t i) {
          keys_[i] = key;
          return true;
        });
    return id == kNoId ? UINT64_MAX : counts_[id].fetch_add(1, std::memory_order_relaxed);
  }

 private:
  struct Key {
    uint64_t comm;
    int sender, receiver, tag;
    bool operator==(const Key&) const = default;
  };
  ConcurrentIdTable ids_;
  std::unique_ptr<Key[]> keys_;
  ZeroPages<std::atomic<uint64_t>> counts_;
};
MessageCounters* g_messages = nullptr;

}  // namespace

void intern_call_names() {
  for (size_t i = 0; i < static_cast<size_t>(Call::kCount); ++i) {
    g_call_names[i] = rankscope_agent_intern(kCallNames[i], std::char_traits<char>::length(kCallNames[i]));
  }
}

Event collective_event(Call call, int64_t begin, int64_t end, MPI_Comm comm, const CollectiveShape& shape) {
  CommInfo* info = info_for(comm);
  Event e = make_event(EventKind::kMpiCollective, call, begin, end);
  e.op = shape.op;
  e.comm_hash = info->hash;
  e.seq = next_collective_seq(*info, shape.op);
  e.bytes = shape.bytes;
  e.datatype = data_type_of(shape.type);
  e.peer = shape.root >= 0 ? info->world_rank(shape.root) : kNoPeer;
  return e;
}

void set_up_message_counters() { g_messages = new MessageCounters(); }

// The next message's ordinal between this rank and `peer` (communicator rank).
// MPI matches messages in the order they are posted, so this is taken at
// the post whenever the post names its peer and tag.
uint64_t message_seq(CommInfo* info, CommOp op, int peer, int tag) {
  const int peer_world = info->world_rank(peer);
  const bool sending = op == CommOp::kSend;
  return g_messages->next(info->hash, sending ? g_world_rank : peer_world, sending ? peer_world : g_world_rank, tag);
}

void record_received(Call call, int64_t begin, int64_t end, MPI_Comm comm, const MPI_Status& status, MPI_Datatype type) {
  if (status.MPI_SOURCE == MPI_PROC_NULL) return;
  int count = 0;
  PMPI_Get_count(&status, type, &count);
  const Event e = p2p_event(call, begin, end, info_for(comm), CommOp::kRecv, status.MPI_SOURCE, status.MPI_TAG,
                            count == MPI_UNDEFINED ? 0 : bytes_of(count, type), type, kSeqAtCompletion);
  rankscope_agent_record(&e);
}

}  // namespace rankscope::agent
