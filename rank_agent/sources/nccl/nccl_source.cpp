// NCCL capture: the capture library is NCCL's profiler plugin. NCCL opens the
// library that NCCL_PROFILER_PLUGIN names (`rankscope run --capture nccl`
// sets it to the capture library, which it also preloads, so NCCL gets this
// very instance) and uses the newest table it knows: ncclProfiler_v5 (NCCL
// 2.28) or ncclProfiler_v4 (NCCL 2.27). Layouts: nccl_profiler_abi.h.
//
// Events (docs/gpu-capture.md, "NCCL capture"): for each collective, the host
// enqueue window (kNcclCollectiveEnqueue, Coll start to stop, on the calling
// thread's track) and its GPU execution (kNcclCollectiveGpu, the earliest
// KernelCh start to the latest KernelCh stop over its channels, on the
// communicator's track); for each send and receive, kNcclP2pEnqueue and
// kNcclP2pGpu likewise.
//
// Every event callback runs on NCCL's critical path (user threads, host
// callbacks, proxy threads): no lock, no allocation, no system call besides
// the clock read, a NULL handle when there is no room, and always success.
// Tasks live in a fixed ring of slots; the handles NCCL holds point at uint64
// tags in fixed rings of their own, which the callbacks dispatch on, and a
// pointer NCCL passes as a parent is followed only once it is known to lie in
// one of those rings.
#include <dlfcn.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "capture_source.h"
#include "cuda_correlation.h"
#include "nccl_profiler_abi.h"
#include "rankscope/model/counters.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::agent {
namespace {

namespace abi = nccl_profiler;

// Where a collective's GPU time comes from (RANKSCOPE_NCCL_GPU_TIME).
enum class GpuTiming {
  kKernelCh,  // NCCL's KernelCh events: per-channel %globaltimer stamps (the default)
  kCupti,     // the kernel's CUPTI record, which carries the collective's id as external correlation
  kBoth,      // both, to compare them
};

GpuTiming g_gpu_timing = GpuTiming::kKernelCh;  // set by start(), before any communicator exists
int g_activation_mask = 0;

int activation_mask(GpuTiming timing) {
  constexpr int kTasks = abi::kProfileColl | abi::kProfileP2p;
  // The launch is bracketed by KernelLaunch, whose parent is the group; the
  // collective reaches its group through its API event.
  constexpr int kCorrelation =
      abi::kProfileGroupApi | abi::kProfileCollApi | abi::kProfileP2pApi | abi::kProfileKernelLaunch;
  switch (timing) {
    case GpuTiming::kKernelCh: return kTasks | abi::kProfileKernelCh;
    case GpuTiming::kCupti: return kTasks | kCorrelation;
    case GpuTiming::kBoth: return kTasks | abi::kProfileKernelCh | kCorrelation;
  }
  return 0;
}

bool capturing() { return rankscope_agent_capturing(kCaptureNccl); }

// ------------------------------------------------------------ counters ---

// Data-quality counters, written with the shard's counters at the end.
struct Counts {
  std::atomic<uint64_t> handles_exhausted{0};        // tasks not recorded: every ring slot tried was being enqueued
  std::atomic<uint64_t> events_without_context{0};   // tasks of a communicator whose init gave no context
  std::atomic<uint64_t> channels_unparented{0};      // KernelCh events whose parent is not a recorded task
  std::atomic<uint64_t> channels_late{0};            // KernelCh starts or stops after their task's slot went to another
  std::atomic<uint64_t> channels_unexpected{0};      // KernelCh stops beyond the task's nChannels
  std::atomic<uint64_t> gpu_windows_partial{0};      // GPU events recorded without the last of nChannels
  std::atomic<uint64_t> gpu_time_after_callback{0};  // GPU stops that mapped later than their callback
};
Counts g_counts;

void count(std::atomic<uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

// ------------------------------------------------- names from NCCL ---

template <typename Value, size_t N>
Value find(const char* text, const std::pair<const char*, Value> (&table)[N], Value otherwise) {
  for (const auto& [name, value] : table) {
    if (std::strcmp(text, name) == 0) return value;
  }
  return otherwise;
}

CommOp parse_func(const char* func) {
  static constexpr std::pair<const char*, CommOp> kFuncs[] = {
      {"AllReduce", CommOp::kAllReduce}, {"AllGather", CommOp::kAllGather},
      {"ReduceScatter", CommOp::kReduceScatter}, {"Broadcast", CommOp::kBroadcast},
      {"Reduce", CommOp::kReduce},       {"AlltoAll", CommOp::kAllToAll},
      {"Gather", CommOp::kGather},       {"Scatter", CommOp::kScatter},
      {"Send", CommOp::kSend},           {"Recv", CommOp::kRecv},
      {"SendRecv", CommOp::kSendRecv},
  };
  return find(func, kFuncs, CommOp::kNone);
}

DataType parse_datatype(const char* name) {
  static constexpr std::pair<const char*, DataType> kTypes[] = {
      {"ncclInt8", DataType::kInt8},         {"ncclUint8", DataType::kUint8},
      // NCCL 2.28.9 has no name for ncclUint8 and reports it as "Unknown";
      // every other type it has is named.
      {"Unknown", DataType::kUint8},         {"ncclInt32", DataType::kInt32},
      {"ncclUint32", DataType::kUint32},     {"ncclInt64", DataType::kInt64},
      {"ncclUint64", DataType::kUint64},     {"ncclFloat16", DataType::kFloat16},
      {"ncclBfloat16", DataType::kBfloat16}, {"ncclFloat32", DataType::kFloat32},
      {"ncclFloat64", DataType::kFloat64},   {"ncclFloat8e4m3", DataType::kFloat8E4M3},
      {"ncclFloat8e5m2", DataType::kFloat8E5M2},
  };
  return find(name, kTypes, DataType::kOther);
}

Algorithm parse_algorithm(const char* name) {
  static constexpr std::pair<const char*, Algorithm> kAlgorithms[] = {
      {"TREE", Algorithm::kTree},         {"RING", Algorithm::kRing},
      {"COLLNET_DIRECT", Algorithm::kCollnetDirect}, {"COLLNET_CHAIN", Algorithm::kCollnetChain},
      {"NVLS", Algorithm::kNvls},         {"NVLS_TREE", Algorithm::kNvlsTree},
      {"PAT", Algorithm::kPat},
  };
  return find(name, kAlgorithms, Algorithm::kNone);
}

Protocol parse_protocol(const char* name) {
  static constexpr std::pair<const char*, Protocol> kProtocols[] = {
      {"LL", Protocol::kLL}, {"LL128", Protocol::kLL128}, {"SIMPLE", Protocol::kSimple}};
  return find(name, kProtocols, Protocol::kNone);
}

// NCCL names functions, datatypes, algorithms and protocols with static
// literals: each pointer is parsed once, then found by its address. Address
// and value share one word, so a reader never pairs one literal with
// another's value.
template <typename Value, Value (*parse)(const char*)>
class LiteralCache {
 public:
  Value operator()(const char* text) {
    if (!text) return Value{};
    const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(text));
    std::atomic<uint64_t>& slot = slots_[(address ^ (address >> 7)) % kSlots];
    const uint64_t seen = slot.load(std::memory_order_relaxed);
    if (seen >> 8 == address) return static_cast<Value>(seen & 0xff);
    const Value value = parse(text);
    if (address >> 56 == 0) slot.store(address << 8 | static_cast<uint8_t>(value), std::memory_order_relaxed);
    return value;
  }

 private:
  static constexpr size_t kSlots = 64;
  std::atomic<uint64_t> slots_[kSlots] = {};
};

LiteralCache<CommOp, parse_func> g_funcs;
LiteralCache<DataType, parse_datatype> g_datatypes;
LiteralCache<Algorithm, parse_algorithm> g_algorithms;
LiteralCache<Protocol, parse_protocol> g_protocols;

// Event names are NCCL's API names ("ncclAllReduce"), interned the first
// time each operation is seen; ids are kept + 1, so 0 means not yet.
std::atomic<uint32_t> g_op_name_ids[kCommOpCount] = {};

uint32_t op_name_id(CommOp op, const char* func) {
  std::atomic<uint32_t>& known = g_op_name_ids[static_cast<size_t>(op)];
  if (op != CommOp::kNone) {
    if (const uint32_t id_plus_one = known.load(std::memory_order_relaxed)) return id_plus_one - 1;
  }
  char name[64] = "nccl";
  const size_t length = func ? std::min(std::strlen(func), sizeof(name) - 5) : 0;
  std::memcpy(name + 4, func, length);
  const uint32_t id = rankscope_agent_intern(name, 4 + length);
  if (id == kNoName) return 0;
  if (op != CommOp::kNone) known.store(id + 1, std::memory_order_relaxed);
  return id;
}

bool rooted(CommOp op) {
  return op == CommOp::kBroadcast || op == CommOp::kReduce || op == CommOp::kGather || op == CommOp::kScatter;
}

// -------------------------------------------------------- communicators ---

struct Communicator {
  uint64_t id = 0;  // commId (v5) or commHash (v4): equal on every rank
  int32_t rank = 0;
  int32_t nranks = 0;
  uint16_t track = kThreadTrack;
  int64_t initial_gpu_offset_ns = 0;
  // %globaltimer minus the agent clock: read at init, raised whenever a GPU
  // stamp would otherwise map after the callback that reported it.
  std::atomic<int64_t> gpu_offset_ns{0};
  // Sends to peer p so far at [2p], receives from p at [2p + 1]: NCCL numbers
  // no point-to-point operation, and a send and its receive get the same ordinal.
  std::unique_ptr<std::atomic<uint64_t>[]> p2p_ordinals;
};

// init and finalize, which NCCL calls for many communicators, concurrently.
std::mutex g_communicators_mutex;
// Kept until the process ends: a task's slot points at its communicator, and
// its GPU window may be recorded after the communicator is finalized. Never
// destroyed: the agent finishes in an exit handler, which may run after this
// file's static destructors.
std::vector<std::unique_ptr<Communicator>>& g_communicators = *new std::vector<std::unique_ptr<Communicator>>();

// %globaltimer starts from the host's CLOCK_REALTIME when the device attaches
// and ticks at the same rate, so its offset to the agent clock is
// CLOCK_REALTIME's: read between two agent clock reads, the narrowest of a few.
int64_t gpu_timer_minus_agent_clock() {
  int64_t narrowest = INT64_MAX;
  int64_t offset = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int64_t before = rankscope_agent_now();
    timespec realtime{};
    ::clock_gettime(CLOCK_REALTIME, &realtime);
    const int64_t after = rankscope_agent_now();
    if (after - before < narrowest) {
      narrowest = after - before;
      offset = int64_t{realtime.tv_sec} * 1'000'000'000 + realtime.tv_nsec - (before + narrowest / 2);
    }
  }
  return offset;
}

// Called with g_communicators_mutex held; nullptr when memory is short.
Communicator* add_communicator(uint64_t id, const char* name, int nranks, int rank) {
  try {
    auto comm = std::make_unique<Communicator>();
    comm->id = id;
    comm->rank = rank;
    comm->nranks = std::max(nranks, 0);
    if (comm->nranks > 0) comm->p2p_ordinals = std::make_unique<std::atomic<uint64_t>[]>(2 * size_t(comm->nranks));
    comm->initial_gpu_offset_ns = gpu_timer_minus_agent_clock();
    comm->gpu_offset_ns.store(comm->initial_gpu_offset_ns, std::memory_order_relaxed);
    // NCCL's name has no guaranteed lifetime: only this copy is kept.
    char hash[24];
    std::snprintf(hash, sizeof(hash), "%016" PRIx64, id);
    const std::string label = "NCCL " + std::string(name && *name ? name : hash) + " (rank " + std::to_string(rank) +
                              " of " + std::to_string(nranks) + ")";
    const uint32_t track = rankscope_agent_track(TrackType::kNcclComm, id, -1, label.c_str());
    comm->track = track == kNoName ? kThreadTrack : static_cast<uint16_t>(track);
    g_communicators.push_back(std::move(comm));
    return g_communicators.back().get();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

uint64_t next_p2p_ordinal(Communicator& comm, int peer, bool receive) {
  if (peer < 0 || peer >= comm.nranks || !comm.p2p_ordinals) return 0;
  return comm.p2p_ordinals[2 * size_t(peer) + (receive ? 1 : 0)].fetch_add(1, std::memory_order_relaxed);
}

// A channel's stop stamp was written by the GPU before the proxy thread read
// it and called back, so on the agent clock it cannot be later than this
// callback. If it maps later, the offset is too small by at least the
// difference: raise it that far. Stamps mapped before the raise keep the old
// offset, and stamps mapped too early are not detectable here.
void keep_causal(Communicator& comm, uint64_t gpu_ns) {
  const int64_t least_offset = static_cast<int64_t>(gpu_ns) - rankscope_agent_now();
  int64_t offset = comm.gpu_offset_ns.load(std::memory_order_relaxed);
  if (least_offset <= offset) return;
  count(g_counts.gpu_time_after_callback);
  while (offset < least_offset &&
         !comm.gpu_offset_ns.compare_exchange_weak(offset, least_offset, std::memory_order_relaxed)) {
  }
}

// ------------------------------------------------------------- handles ---

constexpr uint64_t kTaskTag = 0x5253'4e43'434c'5441;          // "RSNCCLTA": a Coll or P2p event
constexpr uint64_t kChannelTag = 0x5253'4e43'434c'4348;       // "RSNCCLCH": a KernelCh event of that task
constexpr uint64_t kGroupTag = 0x5253'4e43'434c'4752;         // "RSNCCLGR": a GroupApi event (and its API children)
constexpr uint64_t kKernelLaunchTag = 0x5253'4e43'434c'4b4c;  // "RSNCCLKL": a launch that pushed a correlation id

constexpr uint64_t kNoGpuTime = UINT64_MAX;

enum TaskState : uint32_t {
  kEnqueueOpen = 1,  // started, not yet stopped: the slot is taken
  kChannelSeen = 2,  // a KernelCh event attached to the task
  kGpuRecorded = 4,  // its GPU event is recorded
};

// A Coll or P2p task. Its KernelCh events report after it stopped (stop
// means enqueued), so the slot keeps the task until the ring comes round
// again; a task whose channels had not all reported by then gets its GPU
// window recorded with what came.
struct alignas(64) TaskSlot {
  std::atomic<uint64_t> claim;  // the task it holds, by its position in the ring
  std::atomic<uint32_t> state;
  uint32_t channels_expected;  // nChannels; 0 when NCCL did not say
  // (claim << 16) | channels stopped: a stop that was on its way when the
  // slot went to another task fails the claim check instead of counting there.
  std::atomic<uint64_t> channels_stopped;
  Communicator* comm;
  std::atomic<uint64_t> gpu_begin;  // earliest channel start, raw GPU ns
  std::atomic<uint64_t> gpu_end;    // latest channel stop
  Event event;  // the enqueue event, begin and identity filled at start
};

// What NCCL holds: the address of `task_tag` is the task's handle, that of
// `channel_tag` the handle of each of its KernelCh events. Cells outnumber
// slots eight to one, so a handle still names its own task, by `claim`, after
// the task's slot went to another one: a KernelCh event that comes that late
// is known for what it is and dropped, instead of landing in another task's
// window. (Only a handle eight rings old would name a newer task.)
struct HandleCell {
  uint64_t task_tag;
  uint64_t channel_tag;
  uint64_t claim;
};

// Zero-initialised, so the rings cost no space in the library file.
constexpr uint32_t kTaskSlots = 8192;
constexpr uint32_t kHandleCells = 8 * kTaskSlots;
TaskSlot g_tasks[kTaskSlots];
HandleCell g_handles[kHandleCells];
std::atomic<uint64_t> g_task_claims{0};
// Slots tried before a task goes without one: the slot of a task still being
// enqueued (by a preempted thread, say) is stepped over.
constexpr int kClaimAttempts = 4;

// Each thread takes ring positions a block at a time, so that threads
// enqueueing at once do not pass the counter's cache line back and forth on
// every task. A block left unused while the ring moved on is dropped: slots
// are reused in the order they were taken, a ring's length apart.
constexpr uint64_t kClaimBlock = 32;
constexpr uint64_t kStaleBlock = kTaskSlots / 4;
thread_local uint64_t t_next_claim = 0;
thread_local uint64_t t_claims_left = 0;

uint64_t next_claim() {
  if (t_claims_left == 0 || g_task_claims.load(std::memory_order_relaxed) - t_next_claim > kStaleBlock) {
    t_next_claim = g_task_claims.fetch_add(kClaimBlock, std::memory_order_relaxed);
    t_claims_left = kClaimBlock;
  }
  --t_claims_left;
  return t_next_claim++;
}

// v5's API events only carry the group's correlation id to the tasks and
// launches under it; CollApi and P2pApi get their group's handle as theirs.
struct GroupSlot {
  uint64_t tag;
  uint64_t correlation_id;
};
constexpr uint32_t kGroupSlots = 4096;
GroupSlot g_groups[kGroupSlots];
std::atomic<uint64_t> g_group_claims{0};
// Group ids have the top bit set, task ids not: one id never names both.
constexpr uint64_t kGroupIdBit = uint64_t{1} << 63;

// The handle of a KernelLaunch that pushed an id: its stop pops it.
uint64_t g_pushed_launch = kKernelLaunchTag;

template <typename Slot, size_t N>
Slot* slot_containing(Slot (&ring)[N], const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  const auto base = reinterpret_cast<uintptr_t>(ring);
  if (address < base || address >= base + sizeof(ring)) return nullptr;
  return &ring[(address - base) / sizeof(Slot)];
}

// The cell whose `tag` field `pointer` is, or nullptr: a pointer from NCCL
// is followed only once it is known to be one of ours.
HandleCell* cell_of(const void* pointer, uint64_t tag) {
  HandleCell* cell = slot_containing(g_handles, pointer);
  if (!cell) return nullptr;
  const uint64_t* field = tag == kTaskTag ? &cell->task_tag : &cell->channel_tag;
  return pointer == field && *field == tag ? cell : nullptr;
}

// The slot of the cell's task, while it still holds that task.
TaskSlot* slot_holding(const HandleCell& cell) {
  TaskSlot& slot = g_tasks[cell.claim % kTaskSlots];
  return slot.claim.load(std::memory_order_acquire) == cell.claim ? &slot : nullptr;
}

TaskSlot* task_of(const void* handle, uint64_t tag) {
  const HandleCell* cell = cell_of(handle, tag);
  return cell ? slot_holding(*cell) : nullptr;
}

const GroupSlot* group_of(const void* parent) {
  const GroupSlot* slot = slot_containing(g_groups, parent);
  return slot && parent == &slot->tag && slot->tag == kGroupTag ? slot : nullptr;
}

// The task's GPU event: its channels' window on the agent clock, on the
// communicator's track; nothing when no channel reported a start.
std::optional<Event> gpu_event(const TaskSlot& slot) {
  const uint64_t begin = slot.gpu_begin.load(std::memory_order_relaxed);
  const uint64_t end = slot.gpu_end.load(std::memory_order_relaxed);
  if (begin == kNoGpuTime) return std::nullopt;
  const Communicator& comm = *slot.comm;
  const int64_t offset = comm.gpu_offset_ns.load(std::memory_order_relaxed);
  Event e = slot.event;
  e.kind = e.kind == EventKind::kNcclCollectiveEnqueue ? EventKind::kNcclCollectiveGpu : EventKind::kNcclP2pGpu;
  e.track = comm.track;
  e.begin_ns = static_cast<int64_t>(begin) - offset;
  if (end >= begin) {
    e.end_ns = static_cast<int64_t>(end) - offset;
  } else {
    e.end_ns = e.begin_ns;
    e.flags |= kFlagIncomplete;
  }
  return e;
}

// Records the task's GPU event unless it is recorded already; true if this
// call recorded it. The fields are read before the state is claimed: a slot
// taken over meanwhile changes the state, and what was read is dropped.
bool record_gpu_once(TaskSlot& slot) {
  uint32_t state = slot.state.load(std::memory_order_acquire);
  while ((state & kChannelSeen) && !(state & kGpuRecorded)) {
    const std::optional<Event> gpu = gpu_event(slot);
    if (slot.state.compare_exchange_weak(state, state | kGpuRecorded, std::memory_order_acq_rel)) {
      if (gpu) rankscope_agent_record(&*gpu);
      return gpu.has_value();
    }
  }
  return false;
}

// Takes a slot of the ring for a new task and returns the task's handle
// cell; nullptr (counted) when the slots tried are all still being enqueued.
HandleCell* claim_task() {
  for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
    const uint64_t claim = next_claim();
    TaskSlot& slot = g_tasks[claim % kTaskSlots];
    uint32_t previous = slot.state.load(std::memory_order_acquire);
    if ((previous & kEnqueueOpen) ||
        !slot.state.compare_exchange_strong(previous, kEnqueueOpen, std::memory_order_acquire)) {
      continue;
    }
    if ((previous & kChannelSeen) && !(previous & kGpuRecorded)) {
      if (const std::optional<Event> gpu = gpu_event(slot)) {
        rankscope_agent_record(&*gpu);
        count(g_counts.gpu_windows_partial);
      }
    }
    // From here on the previous task's handles no longer name this slot.
    slot.claim.store(claim, std::memory_order_release);
    slot.channels_stopped.store(claim << 16, std::memory_order_relaxed);
    slot.gpu_begin.store(kNoGpuTime, std::memory_order_relaxed);
    slot.gpu_end.store(0, std::memory_order_relaxed);
    HandleCell& cell = g_handles[claim % kHandleCells];
    cell.task_tag = kTaskTag;
    cell.channel_tag = kChannelTag;
    cell.claim = claim;
    return &cell;
  }
  count(g_counts.handles_exhausted);
  return nullptr;
}

// Ties the task's events together. With CUPTI timing, by its group's id,
// which the kernel launch pushed as CUPTI's external correlation id, so the
// kernel's record carries it too; otherwise by the task's own id.
void correlate(Event& e, uint64_t claim, const void* parent) {
  if (g_gpu_timing != GpuTiming::kKernelCh) {
    if (const GroupSlot* group = group_of(parent)) {
      e.correlation_id = group->correlation_id;
      e.flags |= kFlagExternalCorrelation;
      return;
    }
  }
  e.correlation_id = claim + 1;
}

// Takes a slot and fills what both of the task's events share; the task's
// handle cell, or nullptr when there is no slot.
HandleCell* start_task(Communicator& comm, EventKind kind, const char* func, const char* datatype, size_t task_count,
                       uint8_t channels, const void* parent) {
  // On the thread that made the NCCL call: MPI polls either side of it are no polls in a row.
  if (CallInProgress* call = rankscope_agent_call_in_progress()) call->count_other_call();
  HandleCell* cell = claim_task();
  if (!cell) return nullptr;
  TaskSlot& slot = g_tasks[cell->claim % kTaskSlots];
  slot.comm = &comm;
  slot.channels_expected = channels;
  Event& e = slot.event;
  e = Event{};
  e.kind = kind;
  e.track = kThreadTrack;
  e.comm_hash = comm.id;
  e.op = g_funcs(func);
  e.name_id = op_name_id(e.op, func);
  e.datatype = g_datatypes(datatype);
  // The task's count: for AllGather and Broadcast NCCL has already turned it
  // into bytes (datatype int8), so count × size is bytes for every function.
  e.bytes = uint64_t{task_count} * data_type_size(e.datatype);
  e.peer = kNoPeer;
  correlate(e, cell->claim, parent);
  return cell;
}

template <typename Coll>
void* start_collective(Communicator& comm, const Coll& coll, const void* parent) {
  HandleCell* cell = start_task(comm, EventKind::kNcclCollectiveEnqueue, coll.func, coll.datatype, coll.count,
                                coll.nChannels, parent);
  if (!cell) return nullptr;
  Event& e = g_tasks[cell->claim % kTaskSlots].event;
  e.seq = coll.seqNumber;
  e.algorithm = g_algorithms(coll.algo);
  e.protocol = g_protocols(coll.proto);
  if (rooted(e.op)) e.peer = coll.root;
  e.begin_ns = rankscope_agent_now();
  return &cell->task_tag;
}

template <typename P2p>
void* start_p2p(Communicator& comm, const P2p& p2p, const void* parent) {
  HandleCell* cell =
      start_task(comm, EventKind::kNcclP2pEnqueue, p2p.func, p2p.datatype, p2p.count, p2p.nChannels, parent);
  if (!cell) return nullptr;
  Event& e = g_tasks[cell->claim % kTaskSlots].event;
  e.peer = p2p.peer;
  e.seq = next_p2p_ordinal(comm, p2p.peer, e.op == CommOp::kRecv);
  e.begin_ns = rankscope_agent_now();
  return &cell->task_tag;
}

void stop_task(TaskSlot& slot) {
  if (!(slot.state.load(std::memory_order_relaxed) & kEnqueueOpen)) return;  // a second stop of one handle
  Event enqueue = slot.event;
  enqueue.end_ns = rankscope_agent_now();
  rankscope_agent_record(&enqueue);
  slot.state.fetch_and(~uint32_t{kEnqueueOpen}, std::memory_order_release);
}

void* start_channel(const void* parent, uint64_t gpu_start) {
  HandleCell* cell = cell_of(parent, kTaskTag);
  if (!cell) {
    count(g_counts.channels_unparented);
    return nullptr;
  }
  TaskSlot* slot = slot_holding(*cell);
  if (!slot) {
    count(g_counts.channels_late);
    return nullptr;
  }
  if (gpu_start != 0) {
    uint64_t earliest = slot->gpu_begin.load(std::memory_order_relaxed);
    while (gpu_start < earliest &&
           !slot->gpu_begin.compare_exchange_weak(earliest, gpu_start, std::memory_order_relaxed)) {
    }
  }
  slot->state.fetch_or(kChannelSeen, std::memory_order_acq_rel);
  return &cell->channel_tag;
}

void channel_stopped_at(TaskSlot& slot, uint64_t gpu_stop) {
  if (gpu_stop == 0) return;
  uint64_t latest = slot.gpu_end.load(std::memory_order_relaxed);
  while (gpu_stop > latest && !slot.gpu_end.compare_exchange_weak(latest, gpu_stop, std::memory_order_relaxed)) {
  }
  keep_causal(*slot.comm, gpu_stop);
}

// The last of nChannels records the task's GPU event. With nChannels 0 the
// count is unknown: the window is recorded when the slot is reused or at the end.
void stop_channel(const HandleCell& cell) {
  TaskSlot& slot = g_tasks[cell.claim % kTaskSlots];
  uint64_t seen = slot.channels_stopped.load(std::memory_order_relaxed);
  do {
    if (seen >> 16 != (cell.claim << 16) >> 16) {
      count(g_counts.channels_late);
      return;
    }
  } while (!slot.channels_stopped.compare_exchange_weak(seen, seen + 1, std::memory_order_acq_rel));
  const uint32_t stopped = static_cast<uint32_t>(seen & 0xffff) + 1;
  const uint32_t expected = slot.channels_expected;
  if (expected == 0 || stopped < expected) return;
  if (stopped > expected) {
    count(g_counts.channels_unexpected);
    return;
  }
  record_gpu_once(slot);
}

void* start_group() {
  const uint64_t claim = g_group_claims.fetch_add(1, std::memory_order_relaxed);
  GroupSlot& slot = g_groups[claim % kGroupSlots];
  slot.tag = kGroupTag;
  slot.correlation_id = kGroupIdBit | (claim + 1);
  return &slot.tag;
}

void* start_kernel_launch(const void* parent) {
  const GroupSlot* group = group_of(parent);
  if (!group || !push_external_correlation(group->correlation_id)) return nullptr;
  return &g_pushed_launch;
}

void* start_api_event(const abi::EventDescrV5& descr) {
  switch (descr.type) {
    case abi::kProfileGroupApi: return g_gpu_timing == GpuTiming::kKernelCh ? nullptr : start_group();
    case abi::kProfileCollApi:
    case abi::kProfileP2pApi: {
      const GroupSlot* group = group_of(descr.parentObj);
      return group ? const_cast<uint64_t*>(&group->tag) : nullptr;
    }
    case abi::kProfileKernelLaunch: return start_kernel_launch(descr.parentObj);
    default: return nullptr;
  }
}

// ------------------------------------------------------ the callbacks ---

abi::Result init_communicator(void** context, uint64_t comm_id, int* activation_mask_out, const char* comm_name,
                              int nranks, int rank, abi::Logger log) {
  if (context) *context = nullptr;
  std::lock_guard lock(g_communicators_mutex);
  if (!context || !capturing()) {
    // One int for every communicator of the process: nothing is wanted now.
    if (activation_mask_out) __atomic_store_n(activation_mask_out, 0, __ATOMIC_RELAXED);
    return abi::kSuccess;
  }
  Communicator* comm = add_communicator(comm_id, comm_name, nranks, rank);
  if (!comm) {
    if (log) {
      log(abi::kLogWarn, 0, __FILE__, __LINE__, "rankscope: out of memory, communicator %016" PRIx64 " is not profiled",
          comm_id);
    }
    return abi::kSuccess;
  }
  *context = comm;
  if (activation_mask_out) __atomic_store_n(activation_mask_out, g_activation_mask, __ATOMIC_RELAXED);
  return abi::kSuccess;
}

abi::Result init_v5(void** context, uint64_t comm_id, int* activation_mask_out, const char* comm_name, int,
                    int nranks, int rank, abi::Logger log) {
  return init_communicator(context, comm_id, activation_mask_out, comm_name, nranks, rank, log);
}

abi::Result init_v4(void** context, int* activation_mask_out, const char* comm_name, uint64_t comm_hash, int,
                    int nranks, int rank, abi::Logger log) {
  return init_communicator(context, comm_hash, activation_mask_out, comm_name, nranks, rank, log);
}

template <typename Descr>
abi::Result start_event(void* context, void** handle, Descr* descr) {
  if (!handle) return abi::kSuccess;
  *handle = nullptr;
  if (!descr || !capturing()) return abi::kSuccess;
  auto* comm = static_cast<Communicator*>(context);
  switch (descr->type) {
    case abi::kProfileColl:
    case abi::kProfileP2p:
      if (!comm) {
        count(g_counts.events_without_context);
      } else if (descr->type == abi::kProfileColl) {
        *handle = start_collective(*comm, descr->coll, descr->parentObj);
      } else {
        *handle = start_p2p(*comm, descr->p2p, descr->parentObj);
      }
      break;
    case abi::kProfileKernelCh: *handle = start_channel(descr->parentObj, descr->kernelCh.pTimer); break;
    default:
      // ProxyOp, ProxyStep, ProxyCtrl and NetPlugin events are not asked
      // for; should one come, nothing of it is read: a ProxyOp's parent may
      // belong to another process's proxy (PXN).
      if constexpr (std::is_same_v<Descr, abi::EventDescrV5>) *handle = start_api_event(*descr);
      break;
  }
  return abi::kSuccess;
}

abi::Result stop_event(void* handle) {
  if (!handle) return abi::kSuccess;
  const uint64_t tag = *static_cast<const uint64_t*>(handle);
  switch (tag) {
    case kTaskTag:
      if (TaskSlot* task = task_of(handle, tag)) stop_task(*task);
      break;
    case kChannelTag:
      if (const HandleCell* cell = cell_of(handle, tag)) stop_channel(*cell);
      break;
    case kKernelLaunchTag: pop_external_correlation(); break;
    default: break;  // a group: nothing to close
  }
  return abi::kSuccess;
}

template <typename StateArgs>
abi::Result record_event_state(void* handle, abi::EventState state, StateArgs* args) {
  if (!handle || !args || state != abi::kStateKernelChStop) return abi::kSuccess;
  if (TaskSlot* task = task_of(handle, kChannelTag)) channel_stopped_at(*task, args->kernelCh.pTimer);
  return abi::kSuccess;
}

abi::Result finalize(void* context) {
  if (!context) return abi::kSuccess;
  std::lock_guard lock(g_communicators_mutex);
  // The communicator's events are over; its identity stays for GPU windows still to be recorded.
  static_cast<Communicator*>(context)->p2p_ordinals.reset();
  return abi::kSuccess;
}

// ------------------------------------------------------------ the source ---

bool parse_gpu_timing(std::string_view text, GpuTiming& timing) {
  if (text.empty() || text == "kernelch") timing = GpuTiming::kKernelCh;
  else if (text == "cupti") timing = GpuTiming::kCupti;
  else if (text == "both") timing = GpuTiming::kBoth;
  else return false;
  return true;
}

// NCCL loads what NCCL_PROFILER_PLUGIN names: this library only if it names
// it by absolute path, or says STATIC_PLUGIN while it is preloaded.
bool plugin_names_this_library(const std::string& plugin, const char* self, std::string& why_not) {
  constexpr const char* kVariable = "NCCL_PROFILER_PLUGIN";
  const std::string remedy = std::string(" (rankscope run --capture nccl sets it to ") + self + ")";
  if (plugin.empty()) {
    why_not = std::string(kVariable) + " is not set, so NCCL does not load the capture library" + remedy;
    return false;
  }
  if (plugin == "STATIC_PLUGIN") {
    if (dlsym(RTLD_DEFAULT, "ncclProfiler_v5") == &ncclProfiler_v5) return true;
    why_not = std::string(kVariable) + "=STATIC_PLUGIN, but the capture library is not preloaded";
    return false;
  }
  struct stat named {}, own {};
  if (plugin[0] == '/' && ::stat(plugin.c_str(), &named) == 0 && ::stat(self, &own) == 0 && named.st_dev == own.st_dev &&
      named.st_ino == own.st_ino) {
    return true;
  }
  why_not = std::string(kVariable) + "=" + plugin + " does not name the capture library by its absolute path" + remedy;
  return false;
}

class NcclSource final : public CaptureSource {
 public:
  uint32_t bit() const override { return kCaptureNccl; }

  bool start(const AgentSettings& settings, std::string& why_not) override {
    if (!parse_gpu_timing(settings.nccl_gpu_timing, g_gpu_timing)) {
      why_not = std::string(kEnvNcclGpuTime) + "=" + settings.nccl_gpu_timing + ": expected kernelch, cupti or both";
      return false;
    }
    g_activation_mask = activation_mask(g_gpu_timing);
    // A function's address, not the table's: a program that refers to the
    // table gets its own copy of it (a copy relocation), outside this library.
    Dl_info self{};
    if (!dladdr(reinterpret_cast<void*>(&init_communicator), &self) || !self.dli_fname) {
      why_not = "the capture library cannot find its own path";
      return false;
    }
    if (!plugin_names_this_library(settings.nccl_profiler_plugin, self.dli_fname, why_not)) return false;
    // NCCL unloads its profiler plugin after its last communicator; this
    // library also holds the agent and its flusher thread, so it stays.
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return true;
  }

  // Collectives, sends and receives running on the GPU now: a channel
  // began and not every channel ended (stop means enqueued; a hung task's
  // kernel spins until its peers come). Scans the ring's last turn, on the
  // writer thread.
  void add_open_events(int64_t now, std::vector<Event>& out) const override {
    const uint64_t claims = g_task_claims.load(std::memory_order_relaxed);
    for (uint64_t claim = claims > kTaskSlots ? claims - kTaskSlots : 0; claim < claims; ++claim) {
      const TaskSlot& slot = g_tasks[claim % kTaskSlots];
      if (slot.claim.load(std::memory_order_acquire) != claim) continue;
      const uint32_t state = slot.state.load(std::memory_order_acquire);
      if (!(state & kChannelSeen) || (state & kGpuRecorded)) continue;
      const uint32_t stopped = static_cast<uint32_t>(slot.channels_stopped.load(std::memory_order_relaxed) & 0xffff);
      if (slot.channels_expected != 0 && stopped >= slot.channels_expected) continue;
      std::optional<Event> gpu = gpu_event(slot);
      // A slot taken over while it was read is dropped.
      if (!gpu || slot.claim.load(std::memory_order_acquire) != claim) continue;
      gpu->end_ns = std::max(now, gpu->begin_ns);
      gpu->flags |= kFlagIncomplete;
      out.push_back(*gpu);
    }
  }

  // Windows of tasks whose channels had not all reported are recorded with
  // what came; then the counters.
  void stop() override {
    for (TaskSlot& slot : g_tasks) {
      if (record_gpu_once(slot)) count(g_counts.gpu_windows_partial);
    }
    int64_t largest_raise = 0;
    {
      std::lock_guard lock(g_communicators_mutex);
      for (const auto& comm : g_communicators) {
        largest_raise = std::max(largest_raise,
                                 comm->gpu_offset_ns.load(std::memory_order_relaxed) - comm->initial_gpu_offset_ns);
      }
    }
    const auto set = [](const char* name, const std::atomic<uint64_t>& value) {
      rankscope_agent_add_counter(name, value.load(std::memory_order_relaxed));
    };
    set(counter::kNcclHandlesExhausted.data(), g_counts.handles_exhausted);
    set(counter::kNcclEventsWithoutContext.data(), g_counts.events_without_context);
    set(counter::kNcclChannelsUnparented.data(), g_counts.channels_unparented);
    set(counter::kNcclChannelsLate.data(), g_counts.channels_late);
    set(counter::kNcclChannelsUnexpected.data(), g_counts.channels_unexpected);
    set(counter::kNcclGpuWindowsPartial.data(), g_counts.gpu_windows_partial);
    set(counter::kNcclGpuTimeAfterCallback.data(), g_counts.gpu_time_after_callback);
    rankscope_agent_add_counter(counter::kNcclGpuOffsetRaisedMaxNs.data(), static_cast<uint64_t>(largest_raise));
  }
};

}  // namespace

CaptureSource& nccl_capture_source() {
  static NcclSource source;
  return source;
}

}  // namespace rankscope::agent

// The tables NCCL looks up; v4 for NCCL 2.27, whose descriptors have the
// same offsets, so both share every callback but init.
using namespace rankscope::nccl_profiler;
using rankscope::agent::init_v4, rankscope::agent::init_v5, rankscope::agent::start_event,
    rankscope::agent::stop_event, rankscope::agent::record_event_state, rankscope::agent::finalize;

ProfilerV5 ncclProfiler_v5 = {
    "rankscope", init_v5, start_event<EventDescrV5>, stop_event, record_event_state<StateArgsV5>, finalize,
};

ProfilerV4 ncclProfiler_v4 = {
    "rankscope", init_v4, start_event<EventDescrV4>, stop_event, record_event_state<StateArgsV4>, finalize,
};
