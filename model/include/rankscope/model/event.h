// The event model shared by the agent, the merge and every analysis: one
// fixed-size record per event, plus per-rank tracks, strings and metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rankscope {

enum class EventKind : uint8_t {
  kNvtxRange = 1,         // host range from NVTX push/pop or start/end
  kNvtxMark = 2,          // instantaneous NVTX mark
  kMpiCall = 3,           // MPI call that moves no data (init, wait, comm split, ...)
  kMpiCollective = 4,     // MPI collective, blocking or the post of a nonblocking one
  kMpiP2p = 5,            // MPI point-to-point
  kCudaApi = 6,           // CUDA runtime or driver call
  kGpuKernel = 7,
  kGpuMemcpy = 8,
  kGpuMemset = 9,
  kGpuSync = 10,          // synchronisation seen by CUPTI
  kNcclCollectiveEnqueue = 11,  // host side: the collective is enqueued
  kNcclCollectiveGpu = 12,      // GPU side: the collective executes
  kNcclP2pEnqueue = 13,
  kNcclP2pGpu = 14,
  kInstant = 15,          // marker without duration (step boundary, agent notice)
  kCounter = 16,          // sample of a counter track; the value is in `bytes`
  // torch.distributed (c10d), of any backend (gloo, NCCL, MPI), as the
  // Python hook or a torch.profiler trace sees it: a collective from the
  // call (its arrival) to its completion, on its process group's track;
  // and a thread blocked until c10d work completed (Work.wait, DDP's wait
  // for its gradient buckets at the end of backward), on the thread's track.
  kTorchCollective = 17,
  kTorchWait = 18,
};
inline constexpr int kEventKindCount = 18;
// Timelines written before the torch kinds count events by these kinds only.
inline constexpr int kEventKindCountBeforeTorch = 16;

// The kInstant the agent writes on a crashing thread's track, at the crash:
// "crash: SIGSEGV in crash_app+0x12a4 (write_through_null+0x8)", the place
// left out where the loader knows none or a process sent the signal.
inline constexpr std::string_view kCrashInstantPrefix = "crash: ";
inline constexpr std::string_view kCrashInstantWhere = " in ";

// Collective and point-to-point operations, shared by MPI and NCCL.
enum class CommOp : uint8_t {
  kNone = 0,
  kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll,
  kGather, kScatter, kBarrier, kScan, kExscan, kSend, kRecv, kSendRecv,
};
inline constexpr int kCommOpCount = 15;

enum class DataType : uint8_t {
  kNone = 0,
  kInt8, kUint8, kInt32, kUint32, kInt64, kUint64,
  kFloat16, kBfloat16, kFloat32, kFloat64, kFloat8E4M3, kFloat8E5M2, kOther,
};
inline constexpr int kDataTypeCount = 14;

enum class Algorithm : uint8_t {
  kNone = 0, kTree, kRing, kCollnetDirect, kCollnetChain, kNvls, kNvlsTree, kPat,
};
inline constexpr int kAlgorithmCount = 8;

enum class Protocol : uint8_t { kNone = 0, kLL, kLL128, kSimple };
inline constexpr int kProtocolCount = 4;

enum EventFlags : uint8_t {
  kFlagClockOutsideModel = 1 << 0,  // timestamp beyond the clock model's measured span
  kFlagClockRepaired = 1 << 1,      // shifted by the post-hoc happens-before repair
  kFlagIncomplete = 1 << 2,         // begin seen, end never recorded (end = last time heard)
  kFlagExternalCorrelation = 1 << 3,  // correlation_id is an external id (a NCCL collective's), not CUDA's
  kFlagPolling = 1 << 4,  // a call in progress that is a thread's polling (MPI_Test, MPI_Iprobe) since begin, between polls too
};

inline constexpr int32_t kNoPeer = -1;

// 64 bytes, no padding: the same layout in memory, in shards and in the HDF5
// compound type, so neither side converts anything.
struct Event {
  int64_t begin_ns;         // on the rank's local clock in shards; on rank 0's clock in a timeline
  int64_t end_ns;           // equal to begin_ns for instants and counters
  uint64_t correlation_id;  // CUDA correlation id, or the agent's id tying host to GPU
  uint64_t comm_hash;       // communicator identity, equal on every rank
  uint64_t seq;             // per communicator and op sequence number
  uint64_t bytes;           // bytes moved; the sample value for counters
  uint32_t name_id;         // into the rank's (in a timeline: the job's) string table
  uint16_t track;           // into the rank's track table
  EventKind kind;
  CommOp op;
  int32_t peer;             // peer for p2p, root for rooted collectives, kNoPeer otherwise
  DataType datatype;
  Algorithm algorithm;
  Protocol protocol;
  uint8_t flags;            // EventFlags
};
static_assert(sizeof(Event) == 64, "Event layout is part of the file formats");

// The order of a rank's events in shards and timelines: by begin, and an
// enclosing range before the ranges it encloses.
struct EventTimeOrder {
  bool operator()(const Event& a, const Event& b) const {
    return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
  }
};
inline constexpr EventTimeOrder event_time_order;

enum class TrackType : uint8_t {
  kThread = 1,       // os_id = tid
  kCudaStream = 2,   // os_id = stream id, device = GPU ordinal
  kNcclComm = 3,     // os_id = communicator hash
  kCounter = 4,
  kMpiComm = 5,      // os_id = communicator hash, equal on every rank
  kNvtxDomain = 6,   // NVTX start/end ranges of one domain; os_id = domain index
  kProcessGroup = 7,  // a torch.distributed process group; os_id = its hash, equal on every rank
};
inline constexpr TrackType kLastTrackType = TrackType::kProcessGroup;

struct Track {
  uint64_t os_id;
  uint32_t id;
  uint32_t name_id;
  int16_t device;    // -1 for host tracks
  TrackType type;
  uint8_t reserved;
  uint32_t reserved2;
};
static_assert(sizeof(Track) == 24, "Track layout is part of the file formats");

// One instance of a collective on each member rank: MPI's, NCCL's enqueue or its GPU work, c10d's.
constexpr bool is_collective_kind(EventKind kind) {
  return kind == EventKind::kMpiCollective || kind == EventKind::kNcclCollectiveEnqueue ||
         kind == EventKind::kNcclCollectiveGpu || kind == EventKind::kTorchCollective;
}

std::string_view event_kind_name(EventKind kind);
std::optional<EventKind> event_kind_from_name(std::string_view name);
std::string_view comm_op_name(CommOp op);
std::string_view data_type_name(DataType type);
std::string_view algorithm_name(Algorithm algorithm);
std::string_view protocol_name(Protocol protocol);
std::string_view track_type_name(TrackType type);

// Bytes per element; 0 for kNone and kOther.
uint32_t data_type_size(DataType type);

}  // namespace rankscope
