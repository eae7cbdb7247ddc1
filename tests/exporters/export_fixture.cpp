#include "export_fixture.h"

#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"

namespace rankscope::testing {
namespace {

constexpr uint64_t kMpiComm = 0x4d50495f574f524cull;
constexpr uint64_t kNcclComm = 0x6e63636c00000001ull;
constexpr uint64_t kNcclGroupBit = uint64_t{1} << 63;  // external ids of NCCL groups have it

enum TrackId : uint16_t { kThread, kStream, kNccl, kMpi, kNvtxDomain, kGpuMemory };

enum Name : uint32_t {
  kThreadName, kStreamName, kNcclName, kMpiName, kDomainName, kGpuMemoryName,
  kStep0, kStep1, kStep2, kStep3,
  kForward, kLaunch, kMemcpyCall, kNcclEnqueue, kIallreduceCall, kWaitall, kRecv, kGemm, kMemcpy, kNcclKernel,
  kAllReduce, kIbcast, kRegionA, kRegionB, kBucketReady, kStepBoundary, kMemoryUsed, kIallreduce,
};
const std::vector<std::string_view> kNames = {
    "main thread", "GPU 0 stream 7", "NCCL comm 1", "MPI_COMM_WORLD", "NVTX fixture start/end ranges", "GPU memory",
    "ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3",
    "forward", "cudaLaunchKernel", "cudaMemcpyAsync", "ncclAllReduce", "MPI_Iallreduce", "MPI_Waitall", "MPI_Recv",
    "gemm_kernel", "memcpy HtoD", "ncclDevKernel_AllReduce", "AllReduce", "MPI_Ibcast", "async region A",
    "async region B", "bucket ready", "step boundary", "GPU memory used", "MPI_Iallreduce"};

Event event(EventKind kind, TrackId track, Name name, int64_t begin, int64_t end) {
  Event e{};
  e.kind = kind;
  e.track = track;
  e.name_id = name;
  e.begin_ns = begin;
  e.end_ns = end;
  e.peer = kNoPeer;
  return e;
}

Event communication(EventKind kind, TrackId track, Name name, int64_t begin, int64_t end, uint64_t comm, CommOp op,
                    uint64_t seq, uint64_t bytes) {
  Event e = event(kind, track, name, begin, end);
  e.comm_hash = comm;
  e.op = op;
  e.seq = seq;
  e.bytes = bytes;
  e.datatype = DataType::kFloat32;
  return e;
}

std::vector<Event> rank_events(int32_t rank) {
  std::vector<Event> events;
  for (int k = 0; k < kFixtureSteps; ++k) {
    const int64_t b = kFixtureStart + k * kFixtureStepNs;
    const int64_t arrival = ((rank + k) % kFixtureRanks) * 300;  // each step another rank comes last
    const auto step = static_cast<uint64_t>(k);
    const uint64_t group = kNcclGroupBit | (step + 1);
    events.push_back(event(EventKind::kNvtxRange, kThread, static_cast<Name>(kStep0 + k), b, b + 99'000));
    events.push_back(event(EventKind::kInstant, kThread, kStepBoundary, b, b));
    events.push_back(event(EventKind::kNvtxRange, kThread, kForward, b + 1'000, b + 40'000));
    Event launch = event(EventKind::kCudaApi, kThread, kLaunch, b + 2'000, b + 2'500);
    launch.correlation_id = 1000 * step + 1;
    events.push_back(launch);
    Event copy_call = event(EventKind::kCudaApi, kThread, kMemcpyCall, b + 3'000, b + 3'400);
    copy_call.correlation_id = 1000 * step + 2;
    events.push_back(copy_call);
    Event enqueue = communication(EventKind::kNcclCollectiveEnqueue, kThread, kNcclEnqueue, b + 5'000, b + 5'600,
                                  kNcclComm, CommOp::kAllReduce, step, 4 << 20);
    enqueue.correlation_id = group;
    enqueue.flags = kFlagExternalCorrelation;
    events.push_back(enqueue);
    events.push_back(event(EventKind::kMpiCall, kThread, kIallreduceCall, b + 6'000 + arrival, b + 6'500 + arrival));
    Event unfinished = event(EventKind::kMpiCall, kThread, kRecv, b + 30'000, b + 80'000);
    unfinished.flags = kFlagIncomplete;  // its end overlaps "forward" without nesting in it
    events.push_back(unfinished);
    events.push_back(event(EventKind::kNvtxMark, kThread, kBucketReady, b + 41'000, b + 41'000));
    events.push_back(event(EventKind::kMpiCall, kThread, kWaitall, b + 45'000, b + 70'000));

    Event kernel = event(EventKind::kGpuKernel, kStream, kGemm, b + 4'000, b + 20'000);
    kernel.correlation_id = 1000 * step + 1;
    events.push_back(kernel);
    Event copy = event(EventKind::kGpuMemcpy, kStream, kMemcpy, b + 10'000, b + 12'000);
    copy.correlation_id = 1000 * step + 2;
    copy.bytes = 1 << 20;
    events.push_back(copy);
    Event nccl_kernel = event(EventKind::kGpuKernel, kStream, kNcclKernel, b + 21'000 + arrival, b + 30'000);
    nccl_kernel.correlation_id = group;
    nccl_kernel.flags = kFlagExternalCorrelation;
    events.push_back(nccl_kernel);

    Event nccl = communication(EventKind::kNcclCollectiveGpu, kNccl, kAllReduce, b + 21'000 + arrival, b + 30'000,
                               kNcclComm, CommOp::kAllReduce, step, 4 << 20);
    nccl.algorithm = Algorithm::kRing;
    nccl.protocol = Protocol::kSimple;
    nccl.correlation_id = step + 1;  // NCCL's task id: no host event carries it here
    events.push_back(nccl);

    events.push_back(communication(EventKind::kMpiCollective, kMpi, kIallreduce, b + 6'000 + arrival, b + 60'000,
                                   kMpiComm, CommOp::kAllReduce, 2 * step, 1 << 20));
    events.push_back(communication(EventKind::kMpiCollective, kMpi, kIallreduce, b + 7'000 + arrival, b + 50'000,
                                   kMpiComm, CommOp::kAllReduce, 2 * step + 1, 2 << 20));
    Event bcast = communication(EventKind::kMpiCollective, kMpi, kIbcast, b + 8'000 + arrival, b + 70'000, kMpiComm,
                                CommOp::kBroadcast, step, 4096);
    bcast.peer = 0;
    events.push_back(bcast);

    events.push_back(event(EventKind::kNvtxRange, kNvtxDomain, kRegionA, b + 1'500, b + 30'000));
    events.push_back(event(EventKind::kNvtxRange, kNvtxDomain, kRegionB, b + 20'000, b + 50'000));

    Event memory = event(EventKind::kCounter, kGpuMemory, kMemoryUsed, b + 500, b + 500);
    memory.bytes = 1'000'000'000 + step * 1'000'000 + static_cast<uint64_t>(rank);
    events.push_back(memory);
  }
  return events;
}

}  // namespace

void write_export_fixture(const std::string& dir) {
  for (int32_t rank = 0; rank < kFixtureRanks; ++rank) {
    RankMetadata metadata;
    metadata.rank = rank;
    metadata.world_size = kFixtureRanks;
    metadata.local_rank = rank % 2;
    metadata.local_size = 2;
    metadata.node_id = rank / 2;
    metadata.pid = 4242;  // the same pid on both hosts: the export must still give each rank its own process
    metadata.host = rank < 2 ? "host-a" : "host-b";
    metadata.launcher = "fixture";
    metadata.agent_version = "test";
    metadata.capture = "fixture";
    metadata.start_local_ns = kFixtureStart;
    metadata.job = {"fixture:7", 1'700'000'000'000'000'000};
    char name[32];
    std::snprintf(name, sizeof(name), "/rank-%05d.shard", rank);
    ShardWriter writer;
    if (!writer.open(dir + name, metadata, kFixtureStart)) throw Error(writer.error());
    std::vector<std::pair<uint32_t, std::string_view>> strings;
    for (uint32_t i = 0; i < kNames.size(); ++i) strings.emplace_back(i, kNames[i]);
    const std::vector<Track> tracks = {
        {static_cast<uint64_t>(100 + rank), kThread, kThreadName, -1, TrackType::kThread, 0, 0},
        {7, kStream, kStreamName, 0, TrackType::kCudaStream, 0, 0},
        {kNcclComm, kNccl, kNcclName, 0, TrackType::kNcclComm, 0, 0},
        {kMpiComm, kMpi, kMpiName, -1, TrackType::kMpiComm, 0, 0},
        {1, kNvtxDomain, kDomainName, -1, TrackType::kNvtxDomain, 0, 0},
        {0, kGpuMemory, kGpuMemoryName, 0, TrackType::kCounter, 0, 0},
    };
    std::vector<Event> events = rank_events(rank);
    const int64_t end = kFixtureStart + kFixtureSteps * kFixtureStepNs;
    if (!writer.write_strings(strings, kFixtureStart) || !writer.write_tracks(tracks, kFixtureStart) ||
        !writer.write_events(events) || !writer.close(Counters{}, end)) {
      throw Error(writer.error());
    }
  }
}

}  // namespace rankscope::testing
