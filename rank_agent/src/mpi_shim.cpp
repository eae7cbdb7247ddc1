// The MPI shim: PMPI wrappers that record the application's MPI calls into
// the rank agent, and clock synchronisation inside MPI_Init and MPI_Finalize.
// It links nothing but the agent, its clock and the application's own MPI
// library: the timeline is written by `rankscope run` after the application.
//
// Events (docs/format.md, "MPI events"):
// - blocking collectives: kMpiCollective on the calling thread's track, with
//   the communicator's hash, a sequence number per (communicator, operation),
//   the collective's size in bytes as nccl-tests counts it, and the root's
//   world rank;
// - blocking point-to-point: kMpiP2p with the peer's world rank, the tag in
//   `correlation_id`, and a sequence number per (communicator, sender,
//   receiver, tag), so a send and its receive share (comm, seq);
// - nonblocking operations: the post as a kMpiCall, and the operation from its
//   post to the Wait or Test that completed it as a kMpiCollective or kMpiP2p
//   on the communicator's track;
// - other calls (Wait and Test families that complete something, Probe,
//   communicator management, Init, Finalize): kMpiCall.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "id_table.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/error.h"
#include "rankscope/model/hash.h"

namespace rankscope::agent {
namespace {

// ------------------------------------------------------------- names ---

#define RANKSCOPE_MPI_CALLS(X)                                                                          \
  X(Init) X(Init_thread) X(Finalize) X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Gather) X(Gatherv)  \
  X(Allgather) X(Allgatherv) X(Scatter) X(Scatterv) X(Alltoall) X(Alltoallv) X(Alltoallw)             \
  X(Reduce_scatter) X(Reduce_scatter_block) X(Scan) X(Exscan) X(Ibarrier) X(Ibcast) X(Ireduce)         \
  X(Iallreduce) X(Igather) X(Iallgather) X(Iscatter) X(Ialltoall) X(Ireduce_scatter_block) X(Send)     \
  X(Ssend) X(Bsend) X(Rsend) X(Recv) X(Sendrecv) X(Sendrecv_replace) X(Isend) X(Issend) X(Ibsend)      \
  X(Irsend) X(Irecv) X(Probe) X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany)  \
  X(Testsome) X(Comm_dup) X(Comm_split) X(Comm_split_type) X(Comm_create) X(Comm_create_group)         \
  X(Comm_free) X(Iprobe) X(Mprobe) X(Improbe) X(Mrecv) X(Imrecv) X(Send_init) X(Ssend_init) X(Bsend_init)  \
  X(Rsend_init) X(Recv_init) X(Start) X(Startall) X(Request_free) X(File_open) X(File_close) X(File_read)  \
  X(File_read_all) X(File_read_at) X(File_read_at_all) X(File_write) X(File_write_all) X(File_write_at)     \
  X(File_write_at_all) X(Put) X(Get) X(Accumulate) X(Win_fence) X(Win_lock) X(Win_unlock) X(Abort)

enum class Call : uint16_t {
#define RANKSCOPE_CALL_ENUM(name) k##name,
  RANKSCOPE_MPI_CALLS(RANKSCOPE_CALL_ENUM)
#undef RANKSCOPE_CALL_ENUM
  kCount
};

constexpr const char* kCallNames[] = {
#define RANKSCOPE_CALL_NAME(name) "MPI_" #name,
    RANKSCOPE_MPI_CALLS(RANKSCOPE_CALL_NAME)
#undef RANKSCOPE_CALL_NAME
};

uint32_t g_call_names[static_cast<size_t>(Call::kCount)];

// The agent's own MPI calls (clock sync, the merge, HDF5's MPI-IO) are not the application's.
// initial-exec (the shim is always preloaded): one instruction to reach, not a call to __tls_get_addr.
[[gnu::tls_model("initial-exec")]] thread_local bool t_in_agent = false;
class AgentScope {
 public:
  AgentScope() : was_(t_in_agent) { t_in_agent = true; }
  ~AgentScope() { t_in_agent = was_; }

 private:
  bool was_;
};

// Found once the capture library has started (its constructor runs before the
// shim's); nothing is captured before.
constexpr uint32_t kNoCaptureBits = 0;
const uint32_t* g_capture_bits = &kNoCaptureBits;
[[gnu::constructor]] void find_capture_bits() { g_capture_bits = rankscope_agent_capture_bits(); }

bool capturing() { return !t_in_agent && (__atomic_load_n(g_capture_bits, __ATOMIC_RELAXED) & kCaptureMpi) != 0; }
int64_t now() { return rankscope_agent_now(); }

// ----------------------------------------------------- communicators ---

struct CommInfo {
  uint64_t hash = 0;
  uint32_t track = 0;
  std::vector<int> world_ranks;  // communicator (remote group for intercommunicators) rank -> world rank
  std::atomic<uint64_t> sequence[kCommOpCount] = {};
  std::atomic<uint64_t> children{0};  // communicators made from this one so far

  int world_rank(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < world_ranks.size() ? world_ranks[static_cast<size_t>(rank)] : kNoPeer;
  }
};

int g_keyval = MPI_KEYVAL_INVALID;
CommInfo* g_world = nullptr;
MPI_Group g_world_group = MPI_GROUP_NULL;
MPI_Comm g_agent_comm = MPI_COMM_NULL;
int g_world_rank = 0;

// Communicators whose CommInfo was deleted so far. A thread's cached lookup
// (info_for) holds only while this has not moved: MPI may hand a freed
// communicator's handle to the next one it makes.
std::atomic<uint64_t> g_comms_deleted{0};

int delete_comm_info(MPI_Comm, int, void* value, void*) {
  g_comms_deleted.fetch_add(1, std::memory_order_relaxed);
  delete static_cast<CommInfo*>(value);
  return MPI_SUCCESS;
}

// The world ranks of a communicator's members, and a hash of them that is the
// same on every member.
uint64_t membership(MPI_Comm comm, std::vector<int>& world_ranks) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  MPI_Group group;
  if (inter) PMPI_Comm_remote_group(comm, &group);
  else PMPI_Comm_group(comm, &group);
  int size = 0;
  PMPI_Group_size(group, &size);
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) ranks[static_cast<size_t>(i)] = i;
  world_ranks.assign(static_cast<size_t>(size), kNoPeer);
  PMPI_Group_translate_ranks(group, size, ranks.data(), g_world_group, world_ranks.data());
  PMPI_Group_free(&group);
  return hash_bytes(reinterpret_cast<const char*>(world_ranks.data()), world_ranks.size() * sizeof(int));
}

CommInfo* register_comm(MPI_Comm comm, uint64_t hash, std::vector<int> world_ranks) {
  auto* info = new CommInfo();
  info->hash = hash;
  info->world_ranks = std::move(world_ranks);
  const std::string name = comm == MPI_COMM_WORLD ? std::string("MPI_COMM_WORLD")
                                                  : "MPI comm " + std::to_string(hash & 0xFFFFFF) + " (" +
                                                        std::to_string(info->world_ranks.size()) + " ranks)";
  info->track = rankscope_agent_track(TrackType::kMpiComm, hash, -1, name.c_str());
  if (comm != MPI_COMM_WORLD) PMPI_Comm_set_attr(comm, g_keyval, info);
  return info;
}

// Communicators the shim did not see made (from calls it does not wrap) are
// known by their members: equal on every member, shared by communicators
// with the same members.
CommInfo* look_up_comm(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  if (found) return static_cast<CommInfo*>(value);
  // Once per communicator; two threads meeting a new one together must not
  // both register it (the second registration would free the first's).
  static std::mutex registering;
  std::lock_guard lock(registering);
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  if (found) return static_cast<CommInfo*>(value);
  std::vector<int> world_ranks;
  const uint64_t hash = membership(comm, world_ranks);
  return register_comm(comm, mix64(hash), std::move(world_ranks));
}

// The communicator this thread looked up last: a program calls on one
// communicator many times in a row, and MPI's attribute lookup costs ~11 ns.
struct LastCommLookup {
  MPI_Comm comm;
  CommInfo* info;
  uint64_t comms_deleted;  // g_comms_deleted when it was looked up
};
[[gnu::tls_model("initial-exec")]] thread_local LastCommLookup t_last_comm{};

CommInfo* info_for(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) return g_world;
  LastCommLookup& last = t_last_comm;
  // Read before looking up: a deletion during the lookup then misses next time.
  const uint64_t comms_deleted = g_comms_deleted.load(std::memory_order_relaxed);
  if (last.comm == comm && last.info != nullptr && last.comms_deleted == comms_deleted) return last.info;
  last = {comm, look_up_comm(comm), comms_deleted};
  return last.info;
}

// A communicator made from `parent`: its identity mixes the parent's, how
// many the parent had made before (the same on every rank, as creation is
// collective), and its members (which tell apart the pieces of one split).
void note_new_comm(MPI_Comm parent, MPI_Comm made, uint64_t discriminator) {
  CommInfo* parent_info = info_for(parent);
  const uint64_t ordinal = parent_info->children.fetch_add(1, std::memory_order_relaxed);
  if (made == MPI_COMM_NULL) return;
  std::vector<int> world_ranks;
  const uint64_t members = membership(made, world_ranks);
  register_comm(made, mix64(parent_info->hash ^ mix64(ordinal * 0x9E3779B97F4A7C15ull + discriminator) ^ members),
                std::move(world_ranks));
}

// ---------------------------------------------------------- datatypes ---

DataType data_type_of(MPI_Datatype type) {
  if (type == MPI_FLOAT) return DataType::kFloat32;
  if (type == MPI_DOUBLE) return DataType::kFloat64;
  if (type == MPI_INT || type == MPI_INT32_T) return DataType::kInt32;
  if (type == MPI_UNSIGNED || type == MPI_UINT32_T) return DataType::kUint32;
  if (type == MPI_LONG || type == MPI_LONG_LONG || type == MPI_INT64_T) return DataType::kInt64;
  if (type == MPI_UNSIGNED_LONG || type == MPI_UNSIGNED_LONG_LONG || type == MPI_UINT64_T) return DataType::kUint64;
  if (type == MPI_CHAR || type == MPI_SIGNED_CHAR || type == MPI_INT8_T) return DataType::kInt8;
  if (type == MPI_BYTE || type == MPI_UNSIGNED_CHAR || type == MPI_UINT8_T) return DataType::kUint8;
  return DataType::kOther;
}

uint64_t bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS || count < 0) return 0;
  return uint64_t(count) * uint64_t(size);
}

uint64_t total_bytes(const int counts[], MPI_Comm comm, MPI_Datatype type) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  int64_t total = 0;
  for (int i = 0; i < size; ++i) total += counts[i];
  return bytes_of(1, type) * static_cast<uint64_t>(total);
}

int comm_size(MPI_Comm comm) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  return size;
}

// ------------------------------------------------------------- events ---

Event make_event(EventKind kind, Call call, int64_t begin, int64_t end) {
  Event e{};
  e.begin_ns = begin;
  e.end_ns = end;
  e.kind = kind;
  e.name_id = g_call_names[static_cast<size_t>(call)];
  e.track = kThreadTrack;
  e.peer = kNoPeer;
  return e;
}

void record_call(Call call, int64_t begin) {
  const Event e = make_event(EventKind::kMpiCall, call, begin, now());
  rankscope_agent_record(&e);
}

struct CollectiveShape {
  CommOp op;
  uint64_t bytes;
  MPI_Datatype type;
  int root;  // in the communicator; -1 for none
};

// MPI forbids two threads to call collectives on one communicator at once
// (every rank must issue them in one order), so the next number needs no
// locked increment. Atomic still, so that an erroneous program that does
// races on nothing worse than a repeated number.
uint64_t next_collective_seq(CommInfo& info, CommOp op) {
  std::atomic<uint64_t>& counter = info.sequence[static_cast<size_t>(op)];
  const uint64_t seq = counter.load(std::memory_order_relaxed);
  counter.store(seq + 1, std::memory_order_relaxed);
  return seq;
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

// The next message's ordinal between this rank and `peer` (communicator rank).
// MPI matches messages in the order they are posted, so this is taken at
// the post whenever the post names its peer and tag.
uint64_t message_seq(CommInfo* info, CommOp op, int peer, int tag) {
  const int peer_world = info->world_rank(peer);
  const bool sending = op == CommOp::kSend;
  return g_messages->next(info->hash, sending ? g_world_rank : peer_world, sending ? peer_world : g_world_rank, tag);
}

constexpr uint64_t kSeqAtCompletion = UINT64_MAX - 1;

// A point-to-point message between this rank and `peer` (communicator rank).
Event p2p_event(Call call, int64_t begin, int64_t end, CommInfo* info, CommOp op, int peer, int tag, uint64_t bytes,
                MPI_Datatype type, uint64_t seq) {
  Event e = make_event(EventKind::kMpiP2p, call, begin, end);
  e.op = op;
  e.comm_hash = info->hash;
  e.peer = info->world_rank(peer);
  e.correlation_id = static_cast<uint32_t>(tag);
  e.bytes = bytes;
  e.datatype = data_type_of(type);
  e.seq = seq == kSeqAtCompletion ? message_seq(info, op, peer, tag) : seq;
  return e;
}

void record_received(Call call, int64_t begin, int64_t end, MPI_Comm comm, const MPI_Status& status, MPI_Datatype type) {
  if (status.MPI_SOURCE == MPI_PROC_NULL) return;
  int count = 0;
  PMPI_Get_count(&status, type, &count);
  const Event e = p2p_event(call, begin, end, info_for(comm), CommOp::kRecv, status.MPI_SOURCE, status.MPI_TAG,
                            count == MPI_UNDEFINED ? 0 : bytes_of(count, type), type, kSeqAtCompletion);
  rankscope_agent_record(&e);
}

// ----------------------------------------------- requests in flight ---

// What a nonblocking post left for the Wait or Test that completes it.
struct Pending {
  int64_t begin;
  CommInfo* comm;
  Call call;
  EventKind kind;
  CommOp op;
  int peer;  // communicator rank; MPI_ANY_SOURCE for receives until completion
  int tag;
  uint64_t bytes;
  uint64_t seq;  // collectives: taken at the post, where the order is
  MPI_Datatype type;
};

// A handle (request or message) as a table key.
template <typename Handle>
uintptr_t key_of(Handle handle) {
  return reinterpret_cast<uintptr_t>(handle);
}

// Open addressing keyed by a request or message handle; a completed entry
// becomes a tombstone that a later post may take. Posts and completions of one
// request are ordered by the application, which hands the handle from one to the other.
class RequestTable {
 public:
  static constexpr uint32_t kSlots = 1 << 15;
  static constexpr uint32_t kMaxProbes = 64;

  void put(uintptr_t key, const Pending& pending) {
    for (uint32_t probe = 0; probe < kMaxProbes; ++probe) {
      Slot& slot = slots_[(mix64(key) + probe) & (kSlots - 1)];
      uintptr_t seen = slot.key.load(std::memory_order_acquire);
      if ((seen == kEmpty || seen == kTombstone) &&
          slot.key.compare_exchange_strong(seen, kBusy, std::memory_order_acq_rel)) {
        slot.pending = pending;
        slot.key.store(key, std::memory_order_release);
        return;
      }
    }
    untracked_.fetch_add(1, std::memory_order_relaxed);
  }

  bool take(uintptr_t key, Pending& out) {
    Slot* slot = find_slot(key);
    if (!slot) return false;
    out = slot->pending;
    slot->key.store(kTombstone, std::memory_order_release);
    return true;
  }

  // Persistent requests' templates stay for every start.
  bool find(uintptr_t key, Pending& out) {
    const Slot* slot = find_slot(key);
    if (slot) out = slot->pending;
    return slot != nullptr;
  }

  uint64_t untracked() const { return untracked_.load(std::memory_order_relaxed); }

 private:
  static constexpr uintptr_t kEmpty = 0, kTombstone = 1, kBusy = 2;
  struct Slot {
    std::atomic<uintptr_t> key{kEmpty};
    Pending pending;
  };

  Slot* find_slot(uintptr_t key) {
    for (uint32_t probe = 0; probe < kMaxProbes; ++probe) {
      Slot& slot = slots_[(mix64(key) + probe) & (kSlots - 1)];
      const uintptr_t seen = slot.key.load(std::memory_order_acquire);
      if (seen == kEmpty) return nullptr;
      if (seen == key) return &slot;
    }
    return nullptr;
  }

  ZeroPages<Slot> slots_{kSlots};  // all empty: kEmpty is 0
  std::atomic<uint64_t> untracked_{0};
};
RequestTable* g_requests = nullptr;    // nonblocking operations in flight, and messages probed with Mprobe
RequestTable* g_persistent = nullptr;  // what each persistent request does at every start

// A nonblocking send or receive: the post now, the message at completion.
void post(Call call, int64_t begin, MPI_Request request, CommInfo* info, CommOp op, int peer, int tag, uint64_t bytes,
          MPI_Datatype type) {
  record_call(call, begin);
  const bool named = peer != MPI_ANY_SOURCE && tag != MPI_ANY_TAG;
  const uint64_t seq = named ? message_seq(info, op, peer, tag) : kSeqAtCompletion;
  g_requests->put(key_of(request), Pending{begin, info, call, EventKind::kMpiP2p, op, peer, tag, bytes, seq, type});
}

void post_collective(Call call, int64_t begin, MPI_Request* request, MPI_Comm comm, const CollectiveShape& shape) {
  CommInfo* info = info_for(comm);
  record_call(call, begin);
  Pending pending{begin, info, call, EventKind::kMpiCollective, shape.op, shape.root, 0, shape.bytes, 0, shape.type};
  pending.seq = next_collective_seq(*info, shape.op);
  g_requests->put(key_of(*request), pending);
}

// A nonblocking operation, complete at `end`; `status` is null where none was kept.
void record_completed(const Pending& p, const MPI_Status* status, int64_t end) {
  Event e;
  if (p.kind == EventKind::kMpiCollective) {
    e = make_event(EventKind::kMpiCollective, p.call, p.begin, end);
    e.op = p.op;
    e.comm_hash = p.comm->hash;
    e.seq = p.seq;
    e.bytes = p.bytes;
    e.datatype = data_type_of(p.type);
    e.peer = p.peer >= 0 ? p.comm->world_rank(p.peer) : kNoPeer;
  } else {
    int peer = p.peer, tag = p.tag;
    uint64_t bytes = p.bytes;
    if (p.op == CommOp::kRecv && status) {
      if (status->MPI_SOURCE == MPI_PROC_NULL) return;
      peer = status->MPI_SOURCE;
      tag = status->MPI_TAG;
      int count = 0;
      PMPI_Get_count(status, p.type, &count);
      if (count != MPI_UNDEFINED) bytes = bytes_of(count, p.type);
    }
    if (peer < 0) return;  // a receive from any source whose status was not kept
    e = p2p_event(p.call, p.begin, end, p.comm, p.op, peer, tag, bytes, p.type, p.seq);
  }
  e.track = static_cast<uint16_t>(p.comm->track);
  rankscope_agent_record(&e);
}

// The operation behind `request` is complete at `end`.
void complete(MPI_Request request, const MPI_Status* status, int64_t end) {
  Pending p;
  if (request != MPI_REQUEST_NULL && g_requests->take(key_of(request), p)) record_completed(p, status, end);
}

// Request handles and statuses copied before a Wait or Test overwrites them;
// thread-local and grown only when a call passes more than ever before.
struct CompletionScratch {
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  void keep(int count, const MPI_Request* array) {
    if (requests.size() < static_cast<size_t>(count)) {
      requests.resize(static_cast<size_t>(count));
      statuses.resize(static_cast<size_t>(count));
    }
    // Polls pass one request or a few: a call to memmove would cost more than copying them here.
    MPI_Request* kept = requests.data();
    if (count <= 2) {
      if (count > 0) kept[0] = array[0];
      if (count > 1) kept[1] = array[1];
    } else {
      std::copy(array, array + count, kept);
    }
  }
};
// Reached through a plain pointer: a thread_local with a constructor would
// cost every call a __tls_get_addr for its guard.
[[gnu::tls_model("initial-exec")]] thread_local CompletionScratch* t_scratch = nullptr;
CompletionScratch& completion_scratch() {
  if (CompletionScratch* scratch = t_scratch) return *scratch;
  thread_local CompletionScratch owned;  // freed when the thread exits
  t_scratch = &owned;
  return owned;
}

// -------------------------------------------------------------- polls ---

// A Test or Iprobe that finds nothing is polling. A spin loop polls millions
// of times, each poll shorter than the two clock reads that would time it,
// so one poll in kPollSampleEvery per thread is timed and the others only
// counted: the time spent polling is estimated from the timed ones (counters
// mpi_polls_unrecorded, mpi_poll_ns_unrecorded, mpi_polls_timed). A timed
// poll that took long enough to be progress work worth seeing is recorded,
// and so is every poll that completes something; one that was not timed is
// recorded at its end, with no duration.
constexpr uint32_t kPollSampleEvery = 256;
constexpr int64_t kLongPollNs = 10'000;

// Each thread's counts are written by that thread alone: a shared counter's
// locked add would cost a spinning rank more than the poll itself.
struct PollCounts {
  std::atomic<uint64_t> unrecorded{0};
  std::atomic<uint64_t> timed{0};
  std::atomic<uint64_t> timed_ns{0};
};
constexpr uint32_t kPollCountSlots = 256;
PollCounts g_poll_counts[kPollCountSlots];
std::atomic<uint32_t> g_poll_slots_taken{0};
PollCounts g_poll_counts_shared;  // for threads beyond the slots, with locked adds

struct PollThread {
  PollCounts* counts = nullptr;
  bool shared = false;
  uint32_t until_timed = 0;
};
[[gnu::tls_model("initial-exec")]] thread_local PollThread t_poll{};

void claim_poll_counts(PollThread& thread) {
  const uint32_t slot = g_poll_slots_taken.fetch_add(1, std::memory_order_relaxed);
  thread.shared = slot >= kPollCountSlots;
  thread.counts = thread.shared ? &g_poll_counts_shared : &g_poll_counts[slot];
}

void add(std::atomic<uint64_t>& counter, uint64_t value, bool shared) {
  if (shared) counter.fetch_add(value, std::memory_order_relaxed);
  else counter.store(counter.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

class PollTimer {
 public:
  // `always_timed` for the blocking calls that share the completion code.
  explicit PollTimer(bool always_timed = false) : timed_(always_timed || sampled()) {
    if (timed_) begin_ = now();
  }
  // After the call: whether it is worth recording; counts it otherwise.
  [[gnu::always_inline]] bool finish(bool completed) {
    if (completed || timed_) end_ = now();
    if (!timed_) begin_ = end_;
    if (completed) return true;
    PollThread& thread = t_poll;
    if (!thread.counts) claim_poll_counts(thread);
    if (timed_) {
      if (end_ - begin_ >= kLongPollNs) return true;
      thread.until_timed = kPollSampleEvery - 1;
      add(thread.counts->timed, 1, thread.shared);
      add(thread.counts->timed_ns, static_cast<uint64_t>(end_ - begin_), thread.shared);
    }
    add(thread.counts->unrecorded, 1, thread.shared);
    return false;
  }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 private:
  // The countdown starts again only once a timed poll is counted, so that
  // every run of counted polls has a timed one to estimate its time from.
  static bool sampled() {
    uint32_t& until = t_poll.until_timed;
    if (until == 0) return true;
    --until;
    return false;
  }

  bool timed_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
};

void record_poll(Call call, const PollTimer& poll) {
  const Event e = make_event(EventKind::kMpiCall, call, poll.begin(), poll.end());
  rankscope_agent_record(&e);
}

// What a poll that is only counted adds to the application's, in
// picoseconds: the wrapper's test and count, timed here in a few batches
// (what they count is taken back), so that the figure is this machine's; the
// fastest batch counts, as one the scheduler interrupted says nothing of the poll.
uint64_t calibrate_poll_cost_ps() {
  constexpr int kBatches = 8, kRounds = 512;
  PollThread& thread = t_poll;
  if (!thread.counts) claim_poll_counts(thread);
  if (thread.shared) return 0;  // its counts could not be taken back
  PollCounts& counts = *thread.counts;
  const uint64_t unrecorded = counts.unrecorded.load(std::memory_order_relaxed);
  const uint64_t timed = counts.timed.load(std::memory_order_relaxed);
  const uint64_t timed_ns = counts.timed_ns.load(std::memory_order_relaxed);
  const uint32_t until_timed = thread.until_timed;
  int64_t fastest = INT64_MAX;
  for (int batch = 0; batch < kBatches; ++batch) {
    const int64_t began = now();
    for (int i = 0; i < kRounds; ++i) {
      PollTimer poll;
      poll.finish(__atomic_load_n(g_capture_bits, __ATOMIC_RELAXED) == ~0u);  // never true, unknown to the compiler
    }
    fastest = std::min(fastest, now() - began);
  }
  counts.unrecorded.store(unrecorded, std::memory_order_relaxed);
  counts.timed.store(timed, std::memory_order_relaxed);
  counts.timed_ns.store(timed_ns, std::memory_order_relaxed);
  thread.until_timed = until_timed;
  return static_cast<uint64_t>(fastest) * 1000 / kRounds;
}

struct PollTotals {
  uint64_t unrecorded = 0;
  uint64_t timed = 0;
  uint64_t timed_ns = 0;
  uint64_t estimated_ns() const {
    return timed == 0 ? 0 : static_cast<uint64_t>(static_cast<double>(timed_ns) / static_cast<double>(timed) *
                                                  static_cast<double>(unrecorded));
  }
};

PollTotals poll_totals() {
  PollTotals totals;
  const uint32_t taken = std::min(g_poll_slots_taken.load(std::memory_order_relaxed), kPollCountSlots);
  const auto sum = [&](const PollCounts& counts) {
    totals.unrecorded += counts.unrecorded.load(std::memory_order_relaxed);
    totals.timed += counts.timed.load(std::memory_order_relaxed);
    totals.timed_ns += counts.timed_ns.load(std::memory_order_relaxed);
  };
  for (uint32_t slot = 0; slot < taken; ++slot) sum(g_poll_counts[slot]);
  sum(g_poll_counts_shared);
  return totals;
}

// ------------------------------------------------------------- set-up ---

bool g_started = false;

void set_up_after_init() {
  if (!rankscope_agent_capturing(kCaptureMpi) && rankscope_agent_shard_path()[0] == '\0') return;
  AgentScope agent_calls;
  for (size_t i = 0; i < static_cast<size_t>(Call::kCount); ++i) {
    g_call_names[i] = rankscope_agent_intern(kCallNames[i], std::char_traits<char>::length(kCallNames[i]));
  }
  PMPI_Comm_dup(MPI_COMM_WORLD, &g_agent_comm);
  PMPI_Comm_set_errhandler(g_agent_comm, MPI_ERRORS_RETURN);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm_info, &g_keyval, nullptr);
  g_messages = new MessageCounters();
  g_requests = new RequestTable();
  g_persistent = new RequestTable();
  std::vector<int> world_ranks;
  membership(MPI_COMM_WORLD, world_ranks);
  g_world = register_comm(MPI_COMM_WORLD, mix64(0x776f726c64ull), std::move(world_ranks));

  const clocksync::Placement where = clocksync::placement(g_agent_comm);
  rankscope_agent_set_placement(where.world_size, where.local_rank, where.local_size, where.node_id);
  g_started = true;
}

clocksync::ClockSynchronizer* g_sync = nullptr;

void measure_clock() {
  AgentScope agent_calls;
  try {
    if (!g_sync) {
      // The agent's base clock, not one of this library's own: a calibration
      // of the TSC made here would be another clock than the events'.
      const auto base = clocksync::BaseClock::parse(rankscope_agent_clock_base());
      g_sync = new clocksync::ClockSynchronizer(g_agent_comm, clocksync::Clock::for_rank(g_world_rank, base));
    }
    if (const auto point = g_sync->round()) rankscope_agent_add_sync_point(&*point);
    else std::fprintf(stderr, "rankscope agent: rank %d: clock sync round failed: %s\n", g_world_rank, g_sync->error().c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "rankscope agent: rank %d: clock sync failed: %s\n", g_world_rank, e.what());
  }
}

void add_cost(std::string_view counter, int64_t since) {
  rankscope_agent_add_counter(counter.data(), static_cast<uint64_t>(now() - since));  // the names are literals
}

// What MPI_Init and MPI_Init_thread add once the application's MPI is up.
void start_after_init(Call call, int64_t call_began) {
  const int64_t own_work = now();
  set_up_after_init();
  if (!g_started) return;
  measure_clock();
  rankscope_agent_add_counter(counter::kCostPollPs.data(), calibrate_poll_cost_ps());
  record_call(call, call_began);
  add_cost(counter::kCostMpiInitNs, own_work);
}

// What the wrappers counted instead of recording, into the shard's counters.
void add_counters() {
  const PollTotals polls = poll_totals();
  rankscope_agent_add_counter(counter::kMpiPollsUnrecorded.data(), polls.unrecorded);
  rankscope_agent_add_counter(counter::kMpiPollNsUnrecorded.data(), polls.estimated_ns());
  rankscope_agent_add_counter(counter::kMpiPollsTimed.data(), polls.timed);
  rankscope_agent_add_counter(counter::kMpiRequestsUntracked.data(), g_requests->untracked() + g_persistent->untracked());
}

// Every rank closes its shard; once all are complete, each leaves the mark
// `rankscope run` merges them on (the merge runs outside the application).
void close_shard(int64_t own_work) {
  AgentScope agent_calls;
  add_counters();
  add_cost(counter::kCostMpiFinalizeNs, own_work);
  int complete = rankscope_agent_finish() ? 1 : 0, all_complete = 0;
  PMPI_Allreduce(&complete, &all_complete, 1, MPI_INT, MPI_MIN, g_agent_comm);
  const char* shard_dir = std::getenv(kEnvShardDir);
  if (!all_complete || !shard_dir) return;
  const std::string mark = std::string(shard_dir) + "/" + shard_file_name(g_world_rank, kFinalizedSuffix);
  if (std::FILE* file = std::fopen(mark.c_str(), "w")) std::fclose(file);
}

}  // namespace
}  // namespace rankscope::agent

// ------------------------------------------------------------ wrappers ---

using namespace rankscope;
using namespace rankscope::agent;

#define RANKSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

RANKSCOPE_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int64_t begin = now();
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) start_after_init(Call::kInit, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int64_t begin = now();
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) start_after_init(Call::kInit_thread, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Finalize() {
  if (g_started) {
    const int64_t begin = now();
    {
      AgentScope agent_calls;
      PMPI_Barrier(g_agent_comm);  // the application's last calls end before the last measurement
    }
    record_call(Call::kFinalize, begin);
    const int64_t own_work = now();
    measure_clock();
    close_shard(own_work);
    AgentScope agent_calls;
    delete g_sync;
    g_sync = nullptr;
    PMPI_Comm_free(&g_agent_comm);
    PMPI_Group_free(&g_world_group);
    g_started = false;
  }
  return PMPI_Finalize();
}

namespace {

// A blocking collective: time it, then record it with its shape.
template <typename Run>
int blocking(Call call, MPI_Comm comm, Run&& run, const CollectiveShape& shape) {
  const int64_t begin = now();
  const int rc = run();
  const Event e = collective_event(call, begin, now(), comm, shape);
  rankscope_agent_record(&e);
  return rc;
}

template <typename Run>
int nonblocking(Call call, MPI_Comm comm, MPI_Request* request, Run&& run, const CollectiveShape& shape) {
  const int64_t begin = now();
  const int rc = run();
  if (rc == MPI_SUCCESS) post_collective(call, begin, request, comm, shape);
  return rc;
}

}  // namespace

#define RANKSCOPE_PASS_THROUGH(call) \
  if (!capturing()) return call

RANKSCOPE_EXPORT int MPI_Barrier(MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Barrier(comm));
  return blocking(Call::kBarrier, comm, [&] { return PMPI_Barrier(comm); }, {CommOp::kBarrier, 0, MPI_DATATYPE_NULL, -1});
}

RANKSCOPE_EXPORT int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Bcast(buffer, count, type, root, comm));
  return blocking(Call::kBcast, comm, [&] { return PMPI_Bcast(buffer, count, type, root, comm); },
                  {CommOp::kBroadcast, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                                MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Reduce(send, recv, count, type, op, root, comm));
  return blocking(Call::kReduce, comm, [&] { return PMPI_Reduce(send, recv, count, type, op, root, comm); },
                  {CommOp::kReduce, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                                   MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Allreduce(send, recv, count, type, op, comm));
  return blocking(Call::kAllreduce, comm, [&] { return PMPI_Allreduce(send, recv, count, type, op, comm); },
                  {CommOp::kAllReduce, bytes_of(count, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Gather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                                MPI_Datatype recv_type, int root, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm));
  return blocking(Call::kGather, comm,
                  [&] { return PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm); },
                  {CommOp::kGather, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, root});
}

RANKSCOPE_EXPORT int MPI_Gatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                 const int recv_counts[], const int displs[], MPI_Datatype recv_type, int root,
                                 MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm));
  return blocking(Call::kGatherv, comm,
                  [&] { return PMPI_Gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm); },
                  {CommOp::kGather, bytes_of(send_count, send_type), send_type, root});
}

RANKSCOPE_EXPORT int MPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                   int recv_count, MPI_Datatype recv_type, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm));
  return blocking(Call::kAllgather, comm,
                  [&] { return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm); },
                  {CommOp::kAllGather, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, -1});
}

RANKSCOPE_EXPORT int MPI_Allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                    const int recv_counts[], const int displs[], MPI_Datatype recv_type,
                                    MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm));
  return blocking(Call::kAllgatherv, comm,
                  [&] { return PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm); },
                  {CommOp::kAllGather, total_bytes(recv_counts, comm, recv_type), recv_type, -1});
}

RANKSCOPE_EXPORT int MPI_Scatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                                 MPI_Datatype recv_type, int root, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm));
  return blocking(Call::kScatter, comm,
                  [&] { return PMPI_Scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm); },
                  {CommOp::kScatter, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, root});
}

RANKSCOPE_EXPORT int MPI_Scatterv(const void* send, const int send_counts[], const int displs[],
                                  MPI_Datatype send_type, void* recv, int recv_count, MPI_Datatype recv_type, int root,
                                  MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm));
  return blocking(Call::kScatterv, comm,
                  [&] { return PMPI_Scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm); },
                  {CommOp::kScatter, bytes_of(recv_count, recv_type), recv_type, root});
}

RANKSCOPE_EXPORT int MPI_Alltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                  int recv_count, MPI_Datatype recv_type, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm));
  return blocking(Call::kAlltoall, comm,
                  [&] { return PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm); },
                  {CommOp::kAllToAll, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, -1});
}

RANKSCOPE_EXPORT int MPI_Alltoallv(const void* send, const int send_counts[], const int send_displs[],
                                   MPI_Datatype send_type, void* recv, const int recv_counts[],
                                   const int recv_displs[], MPI_Datatype recv_type, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs,
                                        recv_type, comm));
  return blocking(Call::kAlltoallv, comm,
                  [&] {
                    return PMPI_Alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs,
                                          recv_type, comm);
                  },
                  {CommOp::kAllToAll, total_bytes(send_counts, comm, send_type), send_type, -1});
}

RANKSCOPE_EXPORT int MPI_Alltoallw(const void* send, const int send_counts[], const int send_displs[],
                                   const MPI_Datatype send_types[], void* recv, const int recv_counts[],
                                   const int recv_displs[], const MPI_Datatype recv_types[], MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Alltoallw(send, send_counts, send_displs, send_types, recv, recv_counts, recv_displs,
                                        recv_types, comm));
  uint64_t bytes = 0;
  for (int i = 0, n = comm_size(comm); i < n; ++i) bytes += bytes_of(send_counts[i], send_types[i]);
  return blocking(Call::kAlltoallw, comm,
                  [&] {
                    return PMPI_Alltoallw(send, send_counts, send_displs, send_types, recv, recv_counts, recv_displs,
                                          recv_types, comm);
                  },
                  {CommOp::kAllToAll, bytes, MPI_DATATYPE_NULL, -1});
}

RANKSCOPE_EXPORT int MPI_Reduce_scatter(const void* send, void* recv, const int recv_counts[], MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Reduce_scatter(send, recv, recv_counts, type, op, comm));
  return blocking(Call::kReduce_scatter, comm, [&] { return PMPI_Reduce_scatter(send, recv, recv_counts, type, op, comm); },
                  {CommOp::kReduceScatter, total_bytes(recv_counts, comm, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Reduce_scatter_block(const void* send, void* recv, int recv_count, MPI_Datatype type,
                                              MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Reduce_scatter_block(send, recv, recv_count, type, op, comm));
  return blocking(Call::kReduce_scatter_block, comm,
                  [&] { return PMPI_Reduce_scatter_block(send, recv, recv_count, type, op, comm); },
                  {CommOp::kReduceScatter, bytes_of(recv_count, type) * uint64_t(comm_size(comm)), type, -1});
}

RANKSCOPE_EXPORT int MPI_Scan(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Scan(send, recv, count, type, op, comm));
  return blocking(Call::kScan, comm, [&] { return PMPI_Scan(send, recv, count, type, op, comm); },
                  {CommOp::kScan, bytes_of(count, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Exscan(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Exscan(send, recv, count, type, op, comm));
  return blocking(Call::kExscan, comm, [&] { return PMPI_Exscan(send, recv, count, type, op, comm); },
                  {CommOp::kExscan, bytes_of(count, type), type, -1});
}

// ------------------------------------------- nonblocking collectives ---

RANKSCOPE_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ibarrier(comm, request));
  return nonblocking(Call::kIbarrier, comm, request, [&] { return PMPI_Ibarrier(comm, request); },
                     {CommOp::kBarrier, 0, MPI_DATATYPE_NULL, -1});
}

RANKSCOPE_EXPORT int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ibcast(buffer, count, type, root, comm, request));
  return nonblocking(Call::kIbcast, comm, request, [&] { return PMPI_Ibcast(buffer, count, type, root, comm, request); },
                     {CommOp::kBroadcast, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                                 MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ireduce(send, recv, count, type, op, root, comm, request));
  return nonblocking(Call::kIreduce, comm, request,
                     [&] { return PMPI_Ireduce(send, recv, count, type, op, root, comm, request); },
                     {CommOp::kReduce, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                                    MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iallreduce(send, recv, count, type, op, comm, request));
  return nonblocking(Call::kIallreduce, comm, request,
                     [&] { return PMPI_Iallreduce(send, recv, count, type, op, comm, request); },
                     {CommOp::kAllReduce, bytes_of(count, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Igather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                                 MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request));
  return nonblocking(
      Call::kIgather, comm, request,
      [&] { return PMPI_Igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request); },
      {CommOp::kGather, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, root});
}

RANKSCOPE_EXPORT int MPI_Iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                    int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, request));
  return nonblocking(
      Call::kIallgather, comm, request,
      [&] { return PMPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, request); },
      {CommOp::kAllGather, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, -1});
}

RANKSCOPE_EXPORT int MPI_Iscatter(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm,
                                  MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iscatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request));
  return nonblocking(
      Call::kIscatter, comm, request,
      [&] { return PMPI_Iscatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request); },
      {CommOp::kScatter, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, root});
}

RANKSCOPE_EXPORT int MPI_Ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                   int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ialltoall(send, send_count, send_type, recv, recv_count, recv_type, comm, request));
  return nonblocking(
      Call::kIalltoall, comm, request,
      [&] { return PMPI_Ialltoall(send, send_count, send_type, recv, recv_count, recv_type, comm, request); },
      {CommOp::kAllToAll, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, -1});
}

RANKSCOPE_EXPORT int MPI_Ireduce_scatter_block(const void* send, void* recv, int recv_count, MPI_Datatype type,
                                               MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ireduce_scatter_block(send, recv, recv_count, type, op, comm, request));
  return nonblocking(Call::kIreduce_scatter_block, comm, request,
                     [&] { return PMPI_Ireduce_scatter_block(send, recv, recv_count, type, op, comm, request); },
                     {CommOp::kReduceScatter, bytes_of(recv_count, type) * uint64_t(comm_size(comm)), type, -1});
}

// ----------------------------------------------------- point-to-point ---

namespace {

template <typename Run>
int blocking_send(Call call, int dest, int tag, int count, MPI_Datatype type, MPI_Comm comm, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  if (dest != MPI_PROC_NULL) {
    const Event e =
        p2p_event(call, begin, now(), info_for(comm), CommOp::kSend, dest, tag, bytes_of(count, type), type, kSeqAtCompletion);
    rankscope_agent_record(&e);
  }
  return rc;
}

template <typename Run>
int nonblocking_send(Call call, int dest, int tag, int count, MPI_Datatype type, MPI_Comm comm, MPI_Request* request,
                     Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL) {
    post(call, begin, *request, info_for(comm), CommOp::kSend, dest, tag, bytes_of(count, type), type);
  }
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Send(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kSend, dest, tag, count, type, comm, [&] { return PMPI_Send(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ssend(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kSsend, dest, tag, count, type, comm, [&] { return PMPI_Ssend(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Bsend(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kBsend, dest, tag, count, type, comm, [&] { return PMPI_Bsend(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Rsend(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kRsend, dest, tag, count, type, comm, [&] { return PMPI_Rsend(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                               MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Isend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIsend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Isend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Issend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIssend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Issend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ibsend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIbsend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Ibsend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Irsend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIrsend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Irsend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                              MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Recv(buf, count, type, source, tag, comm, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Recv(buf, count, type, source, tag, comm, kept);
  if (rc == MPI_SUCCESS) record_received(Call::kRecv, begin, now(), comm, *kept, type);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                               MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Irecv(buf, count, type, source, tag, comm, request));
  const int64_t begin = now();
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) {
    post(Call::kIrecv, begin, *request, info_for(comm), CommOp::kRecv, source, tag,
         bytes_of(count, type), type);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Sendrecv(const void* send, int send_count, MPI_Datatype send_type, int dest, int send_tag,
                                  void* recv, int recv_count, MPI_Datatype recv_type, int source, int recv_tag,
                                  MPI_Comm comm, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Sendrecv(send, send_count, send_type, dest, send_tag, recv, recv_count, recv_type, source,
                                       recv_tag, comm, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Sendrecv(send, send_count, send_type, dest, send_tag, recv, recv_count, recv_type, source,
                               recv_tag, comm, kept);
  const int64_t end = now();
  if (rc == MPI_SUCCESS) {
    if (dest != MPI_PROC_NULL) {
      const Event e = p2p_event(Call::kSendrecv, begin, end, info_for(comm), CommOp::kSend, dest, send_tag,
                                bytes_of(send_count, send_type), send_type, kSeqAtCompletion);
      rankscope_agent_record(&e);
    }
    record_received(Call::kSendrecv, begin, end, comm, *kept, recv_type);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int send_tag, int source,
                                          int recv_tag, MPI_Comm comm, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Sendrecv_replace(buf, count, type, dest, send_tag, source, recv_tag, comm, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Sendrecv_replace(buf, count, type, dest, send_tag, source, recv_tag, comm, kept);
  const int64_t end = now();
  if (rc == MPI_SUCCESS) {
    if (dest != MPI_PROC_NULL) {
      const Event e = p2p_event(Call::kSendrecv_replace, begin, end, info_for(comm), CommOp::kSend, dest, send_tag,
                                bytes_of(count, type), type, kSeqAtCompletion);
      rankscope_agent_record(&e);
    }
    record_received(Call::kSendrecv_replace, begin, end, comm, *kept, type);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Probe(source, tag, comm, status));
  const int64_t begin = now();
  const int rc = PMPI_Probe(source, tag, comm, status);
  record_call(Call::kProbe, begin);
  return rc;
}

// ---------------------------------------------------- Wait and Test ---

RANKSCOPE_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Wait(request, status));
  const MPI_Request handle = *request;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Wait(request, kept);
  const int64_t end = now();
  record_call(Call::kWait, begin);
  complete(handle, kept, end);
  return rc;
}

namespace {

}  // namespace

RANKSCOPE_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Test(request, flag, status));
  const MPI_Request handle = *request;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  PollTimer poll;
  const int rc = PMPI_Test(request, flag, kept);
  if (poll.finish(*flag)) record_poll(Call::kTest, poll);
  if (*flag) complete(handle, kept, poll.end());
  return rc;
}

namespace {

// Waitall and Testall: every request completes together, when the call says so.
template <typename Run>
int all(Call call, int count, MPI_Request requests[], MPI_Status statuses[], Run&& run) {
  CompletionScratch& scratch = completion_scratch();
  scratch.keep(count, requests);
  MPI_Status* kept = statuses == MPI_STATUSES_IGNORE ? scratch.statuses.data() : statuses;
  PollTimer poll(call == Call::kWaitall);
  int done = 1;
  const int rc = run(kept, &done);
  if (poll.finish(done)) record_poll(call, poll);
  if (done) {
    for (int i = 0; i < count; ++i) complete(scratch.requests[static_cast<size_t>(i)], &kept[i], poll.end());
  }
  return rc;
}

// Waitany, Testany, Waitsome, Testsome: the call names the completed indices.
template <typename Run>
int some(Call call, int count, MPI_Request requests[], int* completed, int indices[], MPI_Status statuses[], Run&& run) {
  CompletionScratch& scratch = completion_scratch();
  scratch.keep(count, requests);
  MPI_Status* kept = statuses == MPI_STATUSES_IGNORE ? scratch.statuses.data() : statuses;
  PollTimer poll(call == Call::kWaitany || call == Call::kWaitsome);
  const int rc = run(kept);
  const bool done = *completed > 0 && *completed != MPI_UNDEFINED;
  if (poll.finish(done)) record_poll(call, poll);
  if (done) {
    for (int i = 0; i < *completed; ++i) {
      const int index = indices ? indices[i] : *completed;
      complete(scratch.requests[static_cast<size_t>(index)], &kept[i], poll.end());
    }
  }
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Waitall(count, requests, statuses));
  return all(Call::kWaitall, count, requests, statuses,
             [&](MPI_Status* kept, int*) { return PMPI_Waitall(count, requests, kept); });
}

RANKSCOPE_EXPORT int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Testall(count, requests, flag, statuses));
  return all(Call::kTestall, count, requests, statuses, [&](MPI_Status* kept, int* done) {
    const int rc = PMPI_Testall(count, requests, flag, kept);
    *done = *flag;
    return rc;
  });
}

RANKSCOPE_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Waitany(count, requests, index, status));
  int completed = 0;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  return some(Call::kWaitany, count, requests, &completed, index, kept, [&](MPI_Status* s) {
    const int rc = PMPI_Waitany(count, requests, index, s);
    completed = *index == MPI_UNDEFINED ? 0 : 1;
    return rc;
  });
}

RANKSCOPE_EXPORT int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Testany(count, requests, index, flag, status));
  int completed = 0;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  return some(Call::kTestany, count, requests, &completed, index, kept, [&](MPI_Status* s) {
    const int rc = PMPI_Testany(count, requests, index, flag, s);
    completed = *flag && *index != MPI_UNDEFINED ? 1 : 0;
    return rc;
  });
}

RANKSCOPE_EXPORT int MPI_Waitsome(int count, MPI_Request requests[], int* outcount, int indices[],
                                  MPI_Status statuses[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Waitsome(count, requests, outcount, indices, statuses));
  return some(Call::kWaitsome, count, requests, outcount, indices, statuses,
              [&](MPI_Status* kept) { return PMPI_Waitsome(count, requests, outcount, indices, kept); });
}

RANKSCOPE_EXPORT int MPI_Testsome(int count, MPI_Request requests[], int* outcount, int indices[],
                                  MPI_Status statuses[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Testsome(count, requests, outcount, indices, statuses));
  return some(Call::kTestsome, count, requests, outcount, indices, statuses,
              [&](MPI_Status* kept) { return PMPI_Testsome(count, requests, outcount, indices, kept); });
}

// ------------------------------------------------------ communicators ---

namespace {

constexpr uint64_t kDup = 0x6475700000000000ull;

template <typename Run>
int make_comm(Call call, MPI_Comm parent, MPI_Comm* made, uint64_t discriminator, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  if (rc == MPI_SUCCESS) {
    AgentScope agent_calls;
    note_new_comm(parent, *made, discriminator);
  }
  record_call(call, begin);
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_dup(comm, made));
  return make_comm(Call::kComm_dup, comm, made, kDup, [&] { return PMPI_Comm_dup(comm, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_split(comm, color, key, made));
  return make_comm(Call::kComm_split, comm, made, uint32_t(color), [&] { return PMPI_Comm_split(comm, color, key, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_split_type(comm, type, key, info, made));
  return make_comm(Call::kComm_split_type, comm, made, uint32_t(type),
                   [&] { return PMPI_Comm_split_type(comm, type, key, info, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_create(comm, group, made));
  return make_comm(Call::kComm_create, comm, made, 0, [&] { return PMPI_Comm_create(comm, group, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_create_group(comm, group, tag, made));
  // Only the group's members call this, so the parent's count of children
  // differs between ranks: the tag and the members identify it instead.
  const int64_t begin = now();
  const int rc = PMPI_Comm_create_group(comm, group, tag, made);
  if (rc == MPI_SUCCESS && *made != MPI_COMM_NULL) {
    AgentScope agent_calls;
    std::vector<int> world_ranks;
    const uint64_t members = membership(*made, world_ranks);
    register_comm(*made, mix64(info_for(comm)->hash ^ mix64(uint32_t(tag)) ^ members), std::move(world_ranks));
  }
  record_call(Call::kComm_create_group, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Comm_free(MPI_Comm* comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_free(comm));
  const int64_t begin = now();
  const int rc = PMPI_Comm_free(comm);
  record_call(Call::kComm_free, begin);
  return rc;
}

// ------------------------------------------------------------- probes ---

RANKSCOPE_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iprobe(source, tag, comm, flag, status));
  PollTimer poll;
  const int rc = PMPI_Iprobe(source, tag, comm, flag, status);
  if (poll.finish(rc == MPI_SUCCESS && *flag)) record_poll(Call::kIprobe, poll);
  return rc;
}

namespace {

// A message matched by Mprobe or Improbe, for the Mrecv or Imrecv that
// receives it: MPI does not say which communicator a message came on.
void note_matched(MPI_Message message, MPI_Comm comm, const MPI_Status& status, int64_t begin) {
  if (message == MPI_MESSAGE_NULL || message == MPI_MESSAGE_NO_PROC) return;
  g_requests->put(key_of(message), Pending{begin, info_for(comm), Call::kMrecv, EventKind::kMpiP2p, CommOp::kRecv,
                                           status.MPI_SOURCE, status.MPI_TAG, 0, kSeqAtCompletion, MPI_DATATYPE_NULL});
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Mprobe(source, tag, comm, message, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Mprobe(source, tag, comm, message, kept);
  record_call(Call::kMprobe, begin);
  if (rc == MPI_SUCCESS) note_matched(*message, comm, *kept, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                                 MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Improbe(source, tag, comm, flag, message, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  PollTimer poll;
  const int rc = PMPI_Improbe(source, tag, comm, flag, message, kept);
  const bool matched = rc == MPI_SUCCESS && *flag;
  if (poll.finish(matched)) record_poll(Call::kImprobe, poll);
  if (matched) note_matched(*message, comm, *kept, poll.begin());
  return rc;
}

RANKSCOPE_EXPORT int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Mrecv(buf, count, type, message, status));
  const MPI_Message handle = *message;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Mrecv(buf, count, type, message, kept);
  const int64_t end = now();
  Pending matched;
  if (rc == MPI_SUCCESS && g_requests->take(key_of(handle), matched)) {
    int received = 0;
    PMPI_Get_count(kept, type, &received);
    const Event e = p2p_event(Call::kMrecv, begin, end, matched.comm, CommOp::kRecv, kept->MPI_SOURCE, kept->MPI_TAG,
                              received == MPI_UNDEFINED ? 0 : bytes_of(received, type), type, kSeqAtCompletion);
    rankscope_agent_record(&e);
  } else {
    record_call(Call::kMrecv, begin);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Imrecv(buf, count, type, message, request));
  const MPI_Message handle = *message;
  const int64_t begin = now();
  const int rc = PMPI_Imrecv(buf, count, type, message, request);
  Pending matched;
  if (rc == MPI_SUCCESS && g_requests->take(key_of(handle), matched)) {
    post(Call::kImrecv, begin, *request, matched.comm, CommOp::kRecv, matched.peer, matched.tag, bytes_of(count, type),
         type);
  } else {
    record_call(Call::kImrecv, begin);
  }
  return rc;
}

// --------------------------------------------------- persistent requests ---

namespace {

// Remembers what a persistent request does; each MPI_Start posts it anew.
template <typename Run>
int persistent_init(Call call, CommOp op, int peer, int tag, int count, MPI_Datatype type, MPI_Comm comm,
                    MPI_Request* request, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  record_call(call, begin);
  if (rc == MPI_SUCCESS && peer != MPI_PROC_NULL) {
    Pending stale;
    g_persistent->take(key_of(*request), stale);
    g_persistent->put(key_of(*request), Pending{0, info_for(comm), call, EventKind::kMpiP2p, op, peer, tag,
                                                bytes_of(count, type), 0, type});
  }
  return rc;
}

void start_persistent(MPI_Request request, int64_t begin) {
  Pending p;
  if (request == MPI_REQUEST_NULL || !g_persistent->find(key_of(request), p)) return;
  const bool named = p.peer != MPI_ANY_SOURCE && p.tag != MPI_ANY_TAG;
  p.begin = begin;
  p.seq = named ? message_seq(p.comm, p.op, p.peer, p.tag) : kSeqAtCompletion;
  g_requests->put(key_of(request), p);
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                   MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Send_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kSend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Send_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ssend_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kSsend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Ssend_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Bsend_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kBsend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Bsend_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Rsend_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kRsend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Rsend_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                   MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Recv_init(buf, count, type, source, tag, comm, request));
  return persistent_init(Call::kRecv_init, CommOp::kRecv, source, tag, count, type, comm, request,
                         [&] { return PMPI_Recv_init(buf, count, type, source, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Start(MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Start(request));
  const int64_t begin = now();
  const int rc = PMPI_Start(request);
  record_call(Call::kStart, begin);
  if (rc == MPI_SUCCESS) start_persistent(*request, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Startall(int count, MPI_Request requests[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Startall(count, requests));
  const int64_t begin = now();
  const int rc = PMPI_Startall(count, requests);
  record_call(Call::kStartall, begin);
  if (rc == MPI_SUCCESS) {
    for (int i = 0; i < count; ++i) start_persistent(requests[i], begin);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Request_free(MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Request_free(request));
  // A freed handle may come back for the next request: what it did must go.
  const uintptr_t key = key_of(*request);
  const int64_t begin = now();
  const int rc = PMPI_Request_free(request);
  record_call(Call::kRequest_free, begin);
  // An active send freed before it completes (posted and forgotten) is
  // still a message: it is recorded as ending here.
  Pending active;
  if (g_requests->take(key, active)) record_completed(active, nullptr, now());
  g_persistent->take(key, active);
  return rc;
}

// --------------------------------------------------------------- MPI-IO ---

namespace {

void record_io(Call call, int64_t begin, uint64_t bytes) {
  Event e = make_event(EventKind::kMpiCall, call, begin, now());
  e.bytes = bytes;
  rankscope_agent_record(&e);
}

// The bytes a read or write moved, as its status says.
template <typename Run>
int file_access(Call call, MPI_Status* status, MPI_Datatype type, Run&& run) {
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = run(kept);
  int count = 0;
  if (rc != MPI_SUCCESS || PMPI_Get_count(kept, type, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) count = 0;
  record_io(call, begin, bytes_of(count, type));
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_File_open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  RANKSCOPE_PASS_THROUGH(PMPI_File_open(comm, filename, amode, info, fh));
  const int64_t begin = now();
  int rc;
  {
    // MPI-IO's own collectives are not the application's.
    AgentScope library_calls;
    rc = PMPI_File_open(comm, filename, amode, info, fh);
  }
  record_call(Call::kFile_open, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_File_close(MPI_File* fh) {
  RANKSCOPE_PASS_THROUGH(PMPI_File_close(fh));
  const int64_t begin = now();
  int rc;
  {
    AgentScope library_calls;
    rc = PMPI_File_close(fh);
  }
  record_call(Call::kFile_close, begin);
  return rc;
}

#define RANKSCOPE_FILE_ACCESS(Name, Buffer, ...)                                                                  \
  RANKSCOPE_EXPORT int MPI_##Name(MPI_File fh, __VA_ARGS__ Buffer buf, int count, MPI_Datatype type,             \
                                  MPI_Status* status) {                                                          \
    RANKSCOPE_PASS_THROUGH(PMPI_##Name(fh, RANKSCOPE_OFFSET_ARG buf, count, type, status));                      \
    return file_access(Call::k##Name, status, type, [&](MPI_Status* kept) {                                      \
      AgentScope library_calls;                                                                                  \
      return PMPI_##Name(fh, RANKSCOPE_OFFSET_ARG buf, count, type, kept);                                       \
    });                                                                                                          \
  }

#define RANKSCOPE_OFFSET_ARG
RANKSCOPE_FILE_ACCESS(File_read, void*, )
RANKSCOPE_FILE_ACCESS(File_read_all, void*, )
RANKSCOPE_FILE_ACCESS(File_write, const void*, )
RANKSCOPE_FILE_ACCESS(File_write_all, const void*, )
#undef RANKSCOPE_OFFSET_ARG
#define RANKSCOPE_OFFSET_ARG offset,
RANKSCOPE_FILE_ACCESS(File_read_at, void*, MPI_Offset offset, )
RANKSCOPE_FILE_ACCESS(File_read_at_all, void*, MPI_Offset offset, )
RANKSCOPE_FILE_ACCESS(File_write_at, const void*, MPI_Offset offset, )
RANKSCOPE_FILE_ACCESS(File_write_at_all, const void*, MPI_Offset offset, )
#undef RANKSCOPE_OFFSET_ARG
#undef RANKSCOPE_FILE_ACCESS

// ------------------------------------------------------------ one-sided ---

namespace {

// Put, Get and Accumulate: the bytes of the origin buffer.
template <typename Run>
int one_sided(Call call, int origin_count, MPI_Datatype origin_type, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  record_io(call, begin, bytes_of(origin_count, origin_type));
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Put(const void* origin, int origin_count, MPI_Datatype origin_type, int target,
                             MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Put(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win));
  return one_sided(Call::kPut, origin_count, origin_type, [&] {
    return PMPI_Put(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win);
  });
}

RANKSCOPE_EXPORT int MPI_Get(void* origin, int origin_count, MPI_Datatype origin_type, int target,
                             MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Get(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win));
  return one_sided(Call::kGet, origin_count, origin_type, [&] {
    return PMPI_Get(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win);
  });
}

RANKSCOPE_EXPORT int MPI_Accumulate(const void* origin, int origin_count, MPI_Datatype origin_type, int target,
                                    MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Op op,
                                    MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(
      PMPI_Accumulate(origin, origin_count, origin_type, target, target_disp, target_count, target_type, op, win));
  return one_sided(Call::kAccumulate, origin_count, origin_type, [&] {
    return PMPI_Accumulate(origin, origin_count, origin_type, target, target_disp, target_count, target_type, op, win);
  });
}

RANKSCOPE_EXPORT int MPI_Win_fence(int assertion, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Win_fence(assertion, win));
  const int64_t begin = now();
  const int rc = PMPI_Win_fence(assertion, win);
  record_call(Call::kWin_fence, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Win_lock(int lock_type, int target, int assertion, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Win_lock(lock_type, target, assertion, win));
  const int64_t begin = now();
  const int rc = PMPI_Win_lock(lock_type, target, assertion, win);
  record_call(Call::kWin_lock, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Win_unlock(int target, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Win_unlock(target, win));
  const int64_t begin = now();
  const int rc = PMPI_Win_unlock(target, win);
  record_call(Call::kWin_unlock, begin);
  return rc;
}

// ---------------------------------------------------------------- abort ---

// The rank shows as aborted with its code, and its shard is whole: MPI_Abort
// does not return, and mpirun then kills every rank.
RANKSCOPE_EXPORT int MPI_Abort(MPI_Comm comm, int errorcode) {
  if (g_started) {
    record_call(Call::kAbort, now());
    AgentScope agent_calls;
    add_counters();
    rankscope_agent_add_counter(counter::kMpiAborted.data(), 1);
    rankscope_agent_add_counter(counter::kMpiAbortCode.data(), static_cast<uint32_t>(errorcode));
    rankscope_agent_finish();
  }
  return PMPI_Abort(comm, errorcode);
}
