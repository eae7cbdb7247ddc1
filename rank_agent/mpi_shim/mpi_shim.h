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
//
// What the shim's files share. The wrappers (mpi_wrap_*.cpp) run on every
// MPI call the application makes, so what they use on each call (the capture
// check, the communicator cache, an event's making, the poll timer, the
// request table's look-ups) is defined here to be inlined into them; the rest
// lives in mpi_comms.cpp, mpi_events.cpp, mpi_requests.cpp, mpi_polls.cpp and
// mpi_lifecycle.cpp.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "id_table.h"
#include "rankscope/rank_agent/agent.h"

// Declared hidden, as they are defined: the wrappers reach the shared state
// directly, not through the GOT.
#pragma GCC visibility push(hidden)

namespace rankscope::agent {

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

// Each call's name in the agent's string table, once set up after MPI_Init.
extern uint32_t g_call_names[static_cast<size_t>(Call::kCount)];
void intern_call_names();

// The agent's own MPI calls (clock sync, the merge, HDF5's MPI-IO) are not the application's.
// initial-exec (the shim is always preloaded): one instruction to reach, not a call to __tls_get_addr.
// constinit, here and on every thread-local below: the files that only
// declare it know it needs no initialising, so they reach it without a call.
[[gnu::tls_model("initial-exec")]] extern constinit thread_local bool t_in_agent;
class AgentScope {
 public:
  AgentScope() : was_(t_in_agent) { t_in_agent = true; }
  ~AgentScope() { t_in_agent = was_; }

 private:
  bool was_;
};

// Found once the capture library has started (its constructor runs before the
// shim's); nothing is captured before.
extern const uint32_t* g_capture_bits;

inline bool capturing() {
  return !t_in_agent && (__atomic_load_n(g_capture_bits, __ATOMIC_RELAXED) & kCaptureMpi) != 0;
}
inline int64_t now() { return rankscope_agent_now(); }

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

extern CommInfo* g_world;
extern int g_world_rank;

// MPI_COMM_WORLD's identity, this rank's place in it, and the attribute that
// carries every other communicator's; set up after MPI_Init, freed at MPI_Finalize.
void set_up_comms();
void tear_down_comms();

// The world ranks of a communicator's members, and a hash of them that is the
// same on every member.
uint64_t membership(MPI_Comm comm, std::vector<int>& world_ranks);
CommInfo* register_comm(MPI_Comm comm, uint64_t hash, std::vector<int> world_ranks);
CommInfo* look_up_comm(MPI_Comm comm);

// Communicators whose CommInfo was deleted so far. A thread's cached lookup
// (info_for) holds only while this has not moved: MPI may hand a freed
// communicator's handle to the next one it makes.
extern std::atomic<uint64_t> g_comms_deleted;

// The communicator this thread looked up last: a program calls on one
// communicator many times in a row, and MPI's attribute lookup costs ~11 ns.
struct LastCommLookup {
  MPI_Comm comm;
  CommInfo* info;
  uint64_t comms_deleted;  // g_comms_deleted when it was looked up
};
[[gnu::tls_model("initial-exec")]] extern constinit thread_local LastCommLookup t_last_comm;

inline CommInfo* info_for(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) return g_world;
  LastCommLookup& last = t_last_comm;
  // Read before looking up: a deletion during the lookup then misses next time.
  const uint64_t comms_deleted = g_comms_deleted.load(std::memory_order_relaxed);
  if (last.comm == comm && last.info != nullptr && last.comms_deleted == comms_deleted) return last.info;
  last = {comm, look_up_comm(comm), comms_deleted};
  return last.info;
}

void note_new_comm(MPI_Comm parent, MPI_Comm made, uint64_t discriminator);

// ---------------------------------------------------------- datatypes ---

DataType data_type_of(MPI_Datatype type);

inline uint64_t bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS || count < 0) return 0;
  return uint64_t(count) * uint64_t(size);
}

uint64_t total_bytes(const int counts[], MPI_Comm comm, MPI_Datatype type);

inline int comm_size(MPI_Comm comm) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  return size;
}

// ------------------------------------------------------------- events ---

inline Event make_event(EventKind kind, Call call, int64_t begin, int64_t end) {
  Event e{};
  e.begin_ns = begin;
  e.end_ns = end;
  e.kind = kind;
  e.name_id = g_call_names[static_cast<size_t>(call)];
  e.track = kThreadTrack;
  e.peer = kNoPeer;
  return e;
}

// The calling thread's call in progress (agent.h), found once per thread.
[[gnu::tls_model("initial-exec")]] extern constinit thread_local CallInProgress* t_call;
inline CallInProgress* thread_call() { return t_call ? t_call : (t_call = rankscope_agent_call_in_progress()); }
inline void forget_polling();  // "polls", below

// Shows `event` as the thread's call in progress while in scope: a blocking
// call that may wait on other ranks, for a hang's dump to name.
class InProgress {
 public:
  InProgress() = default;  // nothing shown until show()
  explicit InProgress(const Event& event) { show(event); }
  void show(const Event& event) {
    call_ = thread_call();
    if (!call_) return;
    forget_polling();
    call_->enter(event);
  }
  ~InProgress() {
    if (call_) call_->leave();
  }
  InProgress(const InProgress&) = delete;
  InProgress& operator=(const InProgress&) = delete;

 private:
  CallInProgress* call_ = nullptr;
};

inline void record_call(Call call, int64_t begin) {
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
inline uint64_t next_collective_seq(CommInfo& info, CommOp op) {
  std::atomic<uint64_t>& counter = info.sequence[static_cast<size_t>(op)];
  const uint64_t seq = counter.load(std::memory_order_relaxed);
  counter.store(seq + 1, std::memory_order_relaxed);
  return seq;
}

Event collective_event(Call call, int64_t begin, int64_t end, MPI_Comm comm, const CollectiveShape& shape);

void set_up_message_counters();
uint64_t message_seq(CommInfo* info, CommOp op, int peer, int tag);

constexpr uint64_t kSeqAtCompletion = UINT64_MAX - 1;

// A point-to-point message between this rank and `peer` (communicator rank).
inline Event p2p_event(Call call, int64_t begin, int64_t end, CommInfo* info, CommOp op, int peer, int tag,
                       uint64_t bytes, MPI_Datatype type, uint64_t seq) {
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

// A probe waits for a message as a receive does: the receive it shows, from now.
inline Event probe_event(Call call, int source, int tag, MPI_Comm comm) {
  return p2p_event(call, now(), 0, info_for(comm), CommOp::kRecv, source, tag, 0, MPI_DATATYPE_NULL, 0);
}

void record_received(Call call, int64_t begin, int64_t end, MPI_Comm comm, const MPI_Status& status, MPI_Datatype type);

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
extern RequestTable* g_requests;    // nonblocking operations in flight, and messages probed with Mprobe
extern RequestTable* g_persistent;  // what each persistent request does at every start

void post(Call call, int64_t begin, MPI_Request request, CommInfo* info, CommOp op, int peer, int tag, uint64_t bytes,
          MPI_Datatype type);
void post_collective(Call call, int64_t begin, MPI_Request* request, MPI_Comm comm, const CollectiveShape& shape);
void record_completed(const Pending& p, const MPI_Status* status, int64_t end);

// The event of a pending nonblocking collective, from `begin` to `end`.
inline Event pending_collective_event(const Pending& p, int64_t begin, int64_t end) {
  Event e = make_event(EventKind::kMpiCollective, p.call, begin, end);
  e.op = p.op;
  e.comm_hash = p.comm->hash;
  e.seq = p.seq;
  e.bytes = p.bytes;
  e.datatype = data_type_of(p.type);
  e.peer = p.peer >= 0 ? p.comm->world_rank(p.peer) : kNoPeer;
  return e;
}

// Whether waits are shown as calls in progress: only when the agent watches
// for hangs (RANKSCOPE_HANG_TIMEOUT_S), as finding what a request is costs a
// look-up in the request table on every wait. Set after MPI_Init.
extern bool g_show_waits;

// What a Wait waits for, shown as its thread's call in progress: the first of
// `requests` that is a collective, as that collective begun at `begin` (a
// rank waiting for it is inside it); else the first receive, then the first
// send, as the `wait` call with that message's peer and tag (a receive is
// what waits for another rank; an eager send completes on its own).
inline bool waited_operation(Call wait, int count, const MPI_Request requests[], int64_t begin, Event& out) {
  if (!g_show_waits) return false;
  Pending message{};
  bool found_message = false;
  for (int i = 0; i < count; ++i) {
    Pending p;
    if (requests[i] == MPI_REQUEST_NULL || !g_requests->find(key_of(requests[i]), p)) continue;
    if (p.kind == EventKind::kMpiCollective) {
      out = pending_collective_event(p, begin, 0);
      return true;
    }
    if (p.kind == EventKind::kMpiP2p && (!found_message || (message.op == CommOp::kSend && p.op == CommOp::kRecv))) {
      message = p;
      found_message = true;
    }
  }
  if (found_message) {
    out = p2p_event(wait, begin, 0, message.comm, message.op, message.peer, message.tag, message.bytes, message.type, 0);
  }
  return found_message;
}

// The operation behind `request` is complete at `end`.
inline void complete(MPI_Request request, const MPI_Status* status, int64_t end) {
  Pending p;
  if (request != MPI_REQUEST_NULL && g_requests->take(key_of(request), p)) record_completed(p, status, end);
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

struct PollThread {
  PollCounts* counts = nullptr;
  bool shared = false;
  uint8_t unanswered_polls = 0;  // in a row; kPollsBeforeShown once shown (polling_to_show())
  uint32_t other_calls_at_poll = 0;  // CallInProgress::other_calls() at the last of them
  uint32_t until_timed = 0;
  uint32_t quick_polls = 0;  // left of those granted (allow_quick_polls())
  uint32_t quick_granted = 0;  // less those answered: the quick polls counted at the next grant
};
[[gnu::tls_model("initial-exec")]] extern constinit thread_local PollThread t_poll;

// Quick polls. Between memory-bound work (HPCC's MPIRandomAccess) what a
// wrapper does around MPI's call costs a poll many times what it costs in a
// tight loop: the core overlaps less of the work's outstanding memory
// accesses (bench/results/capture-cost.md, "Quick polls"). So a poll of one
// request or none that needs nothing when MPI answers it with nothing (this
// thread's timing sample is not due, its counts are its own and, under the
// hang watch, its polling is shown already) is a quick one: its handle
// kept, MPI's call, one test.
// The polls until the next timed one are granted at once, after a poll that
// was not quick, and counted at the next grant or where the thread's
// polling changes (stop_quick_polls()); a thread that ends between the two
// leaves fewer than kPollSampleEvery of them uncounted.
[[gnu::always_inline]] inline bool poll_quickly() {
  uint32_t& quick = t_poll.quick_polls;
  if (quick == 0) return false;
  --quick;
  return true;
}
// The polls taken since the last grant, less those answered, into the thread's counts.
inline void count_quick_polls(PollThread& thread) {
  if (const uint32_t taken = thread.quick_granted - thread.quick_polls; taken != 0) {
    std::atomic<uint64_t>& unrecorded = thread.counts->unrecorded;
    unrecorded.store(unrecorded.load(std::memory_order_relaxed) + taken, std::memory_order_relaxed);
  }
  thread.quick_granted = thread.quick_polls;
}
// A quick poll's request handle, kept before MPI overwrites it, and its
// status, the caller's or its own: what the poll needs if MPI answers it.
struct QuickPoll {
  MPI_Request handle;
  MPI_Status own;
  MPI_Status* status;
  QuickPoll(const MPI_Request* request, MPI_Status* given)
      : handle(*request), status(given == MPI_STATUS_IGNORE ? &own : given) {}
};
// The polls until the next timed one may be quick.
inline void allow_quick_polls() {
  PollThread& thread = t_poll;
  if (!thread.counts || thread.shared) return;
  count_quick_polls(thread);
  thread.quick_polls += thread.until_timed;
  thread.quick_granted = thread.quick_polls;
  thread.until_timed = 0;
}
inline void stop_quick_polls() {
  PollThread& thread = t_poll;
  if (thread.quick_granted == 0) return;
  count_quick_polls(thread);
  thread.until_timed += thread.quick_polls;
  thread.quick_polls = thread.quick_granted = 0;
}

// A blocking call shows its own call in progress over the polling shown, and clears it when it returns.
inline void forget_polling() {
  t_poll.unanswered_polls = 0;
  stop_quick_polls();
}

void claim_poll_counts(PollThread& thread);

class PollTimer {
 public:
  // kAlways for the blocking calls that share the completion code; kQuick
  // for a quick poll that MPI answered: it is recorded or counted here, not
  // at the next grant.
  enum class Timing { kSampled, kAlways, kQuick };
  explicit PollTimer(Timing timing = Timing::kSampled)
      : timed_(timing == Timing::kAlways || (timing == Timing::kSampled && sampled())) {
    if (timing == Timing::kQuick) --t_poll.quick_granted;
    if (timed_) begin_ = now();
  }
  static PollTimer quick_answer() { return PollTimer(Timing::kQuick); }
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
  // One poll in kPollSampleEvery is timed, quick or not: a poll that is
  // not quick takes its turn from the thread's quick polls while any are
  // left, and is counted or recorded as its own, not at the next grant.
  static bool sampled() {
    PollThread& thread = t_poll;
    if (thread.quick_polls > 0) {
      --thread.quick_polls;
      --thread.quick_granted;
      return false;
    }
    uint32_t& until = thread.until_timed;
    if (until == 0) return true;
    --until;
    return false;
  }

  static void add(std::atomic<uint64_t>& counter, uint64_t value, bool shared) {
    if (shared) counter.fetch_add(value, std::memory_order_relaxed);
    else counter.store(counter.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
  }

  bool timed_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
};

// Polls in a row that complete nothing, with no blocking call and no NCCL
// call between them, before the thread is shown polling: one check now and
// then between other calls (a pre-posted receive for a stop message, tested
// once a step) is no wait.
constexpr uint8_t kPollsBeforeShown = 2;
// Counts a poll that completed nothing, not yet shown, into the thread's
// run of them: whether it is the kPollsBeforeShown-th in a row.
bool poll_completes_run();

// A poll or a wait of the thread completed something, or had nothing left
// to complete: it polls no more.
inline void end_polling() {
  PollThread& thread = t_poll;
  if (thread.unanswered_polls == 0) return;
  const bool shown = thread.unanswered_polls == kPollsBeforeShown;
  thread.unanswered_polls = 0;
  stop_quick_polls();
  // Outside blocking calls, the thread's call in progress is its polling or nothing.
  if (CallInProgress* call = t_call; call && shown) call->leave();
}

// Under the hang watch (g_show_waits), polls that complete nothing, from the
// kPollsBeforeShown-th in a row on, show what they poll for as the thread's
// call in progress, flagged kFlagPolling and begun at that poll, until a
// poll or wait of the thread completes something or a blocking call shows
// its own. A rank that spins on MPI_Test for a message that never comes
// waits for it as surely as one inside MPI_Wait, though it spends most of
// that time between polls. Whether this poll is to show it: the caller then
// does, out of line (show_polled, show_probing), and every poll looks again
// until something to show is found; the polls after that are quick.
[[gnu::always_inline]] inline bool polling_to_show(bool completed) {
  if (!g_show_waits) {  // nor is anything shown without it
    allow_quick_polls();
    return false;
  }
  uint8_t& unanswered = t_poll.unanswered_polls;
  if (completed) {
    end_polling();
    return false;
  }
  if (unanswered == kPollsBeforeShown) {  // shown
    allow_quick_polls();
    return false;
  }
  return poll_completes_run();
}
// A Test of `requests`, shown as waited_operation() finds it.
[[gnu::cold]] void show_polled(Call call, int count, const MPI_Request requests[]);
// An Iprobe or Improbe, shown as a receive from `source` with `tag`.
[[gnu::cold]] void show_probing(Call call, int source, int tag, MPI_Comm comm);

inline void record_poll(Call call, const PollTimer& poll) {
  const Event e = make_event(EventKind::kMpiCall, call, poll.begin(), poll.end());
  rankscope_agent_record(&e);
}

// None where the pairs of batches could not tell it from MPI's own call.
std::optional<uint64_t> calibrate_poll_cost_ps(MPI_Comm comm);

struct PollTotals {
  uint64_t unrecorded = 0;
  uint64_t timed = 0;
  uint64_t timed_ns = 0;
  uint64_t estimated_ns() const {
    return timed == 0 ? 0 : static_cast<uint64_t>(static_cast<double>(timed_ns) / static_cast<double>(timed) *
                                                  static_cast<double>(unrecorded));
  }
};
PollTotals poll_totals();

// ---------------------------------------------------------- lifecycle ---

// Clock sync rounds during the run (mpi_clock_rounds.cpp), as `rankscope run` set them.
struct ClockRoundSettings {
  double interval_s;  // AgentSettings::sync_interval_s
  enum class Thread { kAuto, kAlways, kNever } thread = Thread::kAuto;
};
ClockRoundSettings clock_round_settings();
// Collective over `agent_comm`: starts a thread that calls `measure` in a
// round every interval on every rank, where every rank's MPI allows it;
// false where it does not.
bool start_clock_rounds(MPI_Comm agent_comm, void (*measure)());
// Ends the rounds (collective: rank 0's thread says the end once its
// application reached here), its thread joined.
void stop_clock_rounds();

// What MPI_Init and MPI_Init_thread add once the application's MPI is up.
void start_after_init(Call call, int64_t call_began);
// What MPI_Finalize does before the application's MPI goes.
void stop_before_finalize();
// What MPI_Abort leaves of the rank before the job is killed.
void stop_at_abort(int errorcode);

}  // namespace rankscope::agent

#pragma GCC visibility pop

// ------------------------------------------------------------ wrappers ---

#define RANKSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

#define RANKSCOPE_PASS_THROUGH(call) \
  if (!capturing()) return call

namespace rankscope::agent {

// The entry of a wrapper that a spinning program calls millions of times a
// second (the Test family, Iprobe): without capture, a jump to MPI's own
// before any frame is set up; with it, `captured` (not inlined) does the
// work. A frame set up before the check, as a large wrapper's is, cost a
// poll between memory-bound updates about 20 ns with capture off
// (bench/poll_cost.sh).
template <auto pmpi, auto captured, typename... Args>
[[gnu::always_inline]] inline int pass_through_or(Args... args) {
  if (!capturing()) return pmpi(args...);
  return captured(args...);
}

}  // namespace rankscope::agent
