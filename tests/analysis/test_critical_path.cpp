// The step's critical path on jobs small enough to work out by hand: a slow
// rank behind an allreduce, a slow rank two messages upstream, a wait for a
// nonblocking receive, and the jobs on which there is no path to follow
// (times in ns below).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/analysis/critical_path.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/model/shard.h"
#include "../support/shard_job_test.h"

namespace rankscope::analysis {
namespace {

constexpr uint16_t kThread = 0, kStream = 1, kComm = 2, kNcclStream = 3, kWorker = 4;
constexpr uint64_t kWorld = 5;
enum Name : uint32_t {
  kStep, kAllreduce, kSend, kRecv, kSlow, kRelay, kTail, kLoader, kLaunch, kSync, kGemm, kIsend, kIrecv, kWait,
  kStep1, kStep2, kStep3, kIallreduce, kDeviceSync, kCopy, kC10dWait
};

Event range(uint32_t name, int64_t begin, int64_t end) {
  return testing::host_event(EventKind::kNvtxRange, name, begin, end, kThread);
}
// The rank's `seq`-th allreduce on the world.
Event allreduce(int64_t begin, int64_t end, uint64_t seq = 0) {
  Event e = testing::host_event(EventKind::kMpiCollective, kAllreduce, begin, end, kThread);
  e.op = CommOp::kAllReduce;
  e.comm_hash = kWorld;
  e.seq = seq;
  return e;
}
// Message number `seq` of tag 7 between the two ranks, as the MPI shim numbers them.
Event message(CommOp op, int32_t peer, int64_t begin, int64_t end, uint64_t seq = 0) {
  Event e = testing::host_event(EventKind::kMpiP2p, op == CommOp::kSend ? kSend : kRecv, begin, end, kThread);
  e.op = op;
  e.peer = peer;
  e.comm_hash = kWorld;
  e.correlation_id = 7;
  e.seq = seq;
  return e;
}
// An MPI_Sendrecv: its two halves, from its begin to its end.
std::vector<Event> sendrecv(int32_t to, int32_t from, int64_t begin, int64_t end, uint64_t seq) {
  return {message(CommOp::kSend, to, begin, end, seq), message(CommOp::kRecv, from, begin, end, seq)};
}

// A nonblocking message's post on the thread (an MPI call), and its
// operation from post to completion on the communicator's track.
std::vector<Event> nonblocking(CommOp op, int32_t peer, int64_t posted, int64_t completed) {
  Event post = testing::host_event(EventKind::kMpiCall, op == CommOp::kSend ? kIsend : kIrecv, posted, posted + 5, kThread);
  Event operation = message(op, peer, posted, completed);
  operation.name_id = post.name_id;
  operation.track = kComm;
  return {post, operation};
}
std::vector<Event> joined(std::vector<Event> events, const std::vector<Event>& more) {
  events.insert(events.end(), more.begin(), more.end());
  return events;
}
// A nonblocking allreduce: its post on the thread, and its operation from
// post to completion on the communicator's track.
std::vector<Event> iallreduce(int64_t posted, int64_t completed) {
  Event post = testing::host_event(EventKind::kMpiCall, kIallreduce, posted, posted + 5, kThread);
  Event operation = allreduce(posted, completed);
  operation.name_id = kIallreduce;
  operation.track = kComm;
  return {post, operation};
}
Event wait(int64_t begin, int64_t end) { return testing::host_event(EventKind::kMpiCall, kWait, begin, end, kThread); }

Event cuda_call(uint32_t name, int64_t begin, int64_t end, uint64_t correlation) {
  Event e = testing::host_event(EventKind::kCudaApi, name, begin, end, kThread);
  e.correlation_id = correlation;
  return e;
}
Event kernel(int64_t begin, int64_t end, uint64_t correlation, uint16_t stream = kStream) {
  Event e = testing::host_event(EventKind::kGpuKernel, kGemm, begin, end, stream);
  e.correlation_id = correlation;
  return e;
}

Event nccl_allreduce(int64_t begin, int64_t end, uint16_t stream = kStream, uint64_t correlation = 0) {
  Event e = testing::host_event(EventKind::kNcclCollectiveGpu, kAllreduce, begin, end, stream);
  e.op = CommOp::kAllReduce;
  e.comm_hash = kWorld;
  e.correlation_id = correlation;
  return e;
}

class CriticalPathTest : public testing::ShardJobTest {
 protected:
  // One rank of `world_size`; `synced`: its clock measured against rank 0's within 10 ns.
  void write_rank(int32_t rank, int32_t world_size, std::vector<Event> events, bool synced = true) {
    if (process_ != 0) return;
    RankMetadata metadata;
    metadata.rank = rank;
    metadata.world_size = world_size;
    metadata.host = "node-" + std::to_string(rank);
    ShardWriter writer;
    ASSERT_TRUE(writer.open((dir_ / ("rank-" + std::to_string(rank) + ".shard")).string(), metadata, 0));
    const std::pair<uint32_t, std::string_view> names[] = {
        {kStep, "ProfilerStep#0"}, {kAllreduce, "MPI_Allreduce"}, {kSend, "MPI_Send"}, {kRecv, "MPI_Recv"},
        {kSlow, "slow layer"},     {kRelay, "relay"},             {kTail, "tail"},     {kLoader, "data loading"},
        {kLaunch, "cudaLaunchKernel"}, {kSync, "cudaStreamSynchronize"}, {kGemm, "gemm"},
        {kIsend, "MPI_Isend"}, {kIrecv, "MPI_Irecv"}, {kWait, "MPI_Wait"},
        {kStep1, "ProfilerStep#1"}, {kStep2, "ProfilerStep#2"}, {kStep3, "ProfilerStep#3"},
        {kIallreduce, "MPI_Iallreduce"}, {kDeviceSync, "cudaDeviceSynchronize"}, {kCopy, "Memcpy DtoH"},
        {kC10dWait, "c10d::wait"}};
    ASSERT_TRUE(writer.write_strings(names, 0));
    const Track tracks[] = {{7, kThread, 0, -1, TrackType::kThread, 0, 0},
                            {7, kStream, 0, 0, TrackType::kCudaStream, 0, 0},
                            {7, kNcclStream, 0, 0, TrackType::kCudaStream, 0, 0},
                            {kWorld, kComm, 0, -1, TrackType::kMpiComm, 0, 0},
                            {8, kWorker, 0, -1, TrackType::kThread, 0, 0}};
    ASSERT_TRUE(writer.write_tracks(tracks, 0));
    if (synced) {
      const SyncPoint points[2] = {{0, 0, 10}, {1'000'000'000, 0, 10}};
      ASSERT_TRUE(writer.write_sync_points(points, 0));
    }
    std::sort(events.begin(), events.end(), event_time_order);
    ASSERT_TRUE(writer.write_events(events));
    ASSERT_TRUE(writer.close({}, 10'000));
  }

  CriticalPath path(const std::vector<int32_t>& replayed_ranks = {}) {
    const Timeline timeline(merged());
    const JobProfile job = build_profile(timeline);
    strings_ = job.strings;
    return critical_path(timeline, job, replayed_ranks);
  }
  // A name on the path, as the job's string table holds it.
  std::string name(uint32_t id) const { return id < strings_->size() ? (*strings_)[id] : ""; }
  // The path of a message released at 700 by rank 1 (below): from rank 0's
  // wait (`wait_name`) it crosses to rank 1 there and on to its slow layer,
  // and rank 1 at the median ends the step at 641.
  void expect_released_at_700(const CriticalPath& p, const std::string& wait_name) const {
    ASSERT_EQ(p.unmeasured, "");
    ASSERT_EQ(p.steps.size(), 1u);
    const StepPath& step = p.steps[0];
    EXPECT_EQ(step.hops, 1);
    ASSERT_GE(step.segments.size(), 3u);
    EXPECT_EQ(name(step.segments[1].name_id), wait_name);
    EXPECT_EQ(step.segments[1].begin_ns, 700);
    EXPECT_EQ(step.segments[2].rank, 1);
    EXPECT_EQ(name(step.segments[2].name_id), "slow layer");
    ASSERT_EQ(p.what_if_unmeasured, "");
    ASSERT_EQ(p.rank_replays.size(), 1u);
    EXPECT_EQ(p.rank_replays[0].rank, 1);
    EXPECT_EQ(p.rank_replays[0].replayed_ns, 1000);
    EXPECT_EQ(p.rank_replays[0].predicted_ns, 641);
  }

  std::shared_ptr<const std::vector<std::string>> strings_;

  // Three ranks in one allreduce, rank 1 late to it by its slow layer, rank 0 ending last by its tail.
  void write_slow_allreduce_job() {
    write_rank(0, 3, {range(kStep, 0, 1000), range(kRelay, 0, 100), allreduce(100, 600), range(kTail, 600, 1000)});
    write_rank(1, 3, {range(kStep, 0, 900), range(kSlow, 0, 500), allreduce(500, 600), range(kRelay, 600, 900)});
    write_rank(2, 3, {range(kStep, 0, 900), range(kRelay, 0, 200), allreduce(200, 600), range(kRelay, 600, 900)});
  }

  // Rank 0 posts a receive at 50, computes to 300 and waits for it; rank 1
  // sends it at 650, after its slow layer.
  void write_wait_job() {
    write_rank(0, 2, joined({range(kStep, 0, 1000), range(kRelay, 55, 300), wait(300, 700), range(kTail, 700, 1000)},
                            nonblocking(CommOp::kRecv, 1, 50, 700)));
    write_rank(1, 2, joined({range(kStep, 0, 900), range(kSlow, 0, 650), range(kRelay, 660, 900)},
                            nonblocking(CommOp::kSend, 0, 650, 655)));
  }

  // Two ranks, four steps 1100 ns apart; in step k rank slow_rank(k)
  // computes 800 ns before the step's allreduce, the other 200. The other
  // ends each step last, 100 ns after: its path goes to the slow rank's
  // compute, 800 of the step's 1000 ns.
  template <typename SlowRank>
  void write_four_steps(SlowRank slow_rank) {
    std::vector<Event> events[2];
    const uint32_t steps[] = {kStep, kStep1, kStep2, kStep3};
    for (int k = 0; k < 4; ++k) {
      const int64_t b = 1100 * k;
      const int slow = slow_rank(k);
      events[slow].insert(events[slow].end(), {range(steps[k], b, b + 900), range(kSlow, b, b + 800),
                                               allreduce(b + 800, b + 850, k), range(kRelay, b + 850, b + 900)});
      events[1 - slow].insert(events[1 - slow].end(), {range(steps[k], b, b + 1000), range(kRelay, b, b + 200),
                                                       allreduce(b + 200, b + 850, k), range(kTail, b + 850, b + 1000)});
    }
    write_rank(0, 2, events[0]);
    write_rank(1, 2, events[1]);
  }

  static const PathShare* share_of(const CriticalPath& path, int32_t rank) {
    for (const PathShare& share : path.ranks) {
      if (share.rank == rank) return &share;
    }
    return nullptr;
  }

  static constexpr uint64_t kMiB = uint64_t{1} << 20;

  // DDP's buckets of `sizes` (in MiB) with predictions for `caps` (in MiB),
  // each allreduce fitted at `alpha_ns` plus 100 ns a MiB.
  static BucketReport ddp_buckets(std::initializer_list<uint64_t> sizes, std::initializer_list<uint64_t> caps,
                                  double alpha_ns = 100) {
    BucketReport buckets;
    buckets.ddp = true;
    for (const uint64_t size : sizes) buckets.buckets.push_back({.bytes = size * kMiB});
    buckets.fit = {.alpha_ns = alpha_ns, .ns_per_byte = 100.0 / static_cast<double>(kMiB), .r_squared = 1, .samples = 3};
    for (const uint64_t cap : caps) buckets.predictions.push_back({cap * kMiB, 0});
    return buckets;
  }

  // DDP over NCCL on two ranks alike: the host launches each bucket's
  // gradient kernel (on the default stream) and its allreduce (on NCCL's)
  // ahead of the GPU; buckets of 1, 2 and 1 MiB are ready as their
  // gradients end (300, 700, 900), and reduced at 300-500, 700-1000 and
  // 1000-1200, the last after the one before it. The optimizer's kernel,
  // launched at `optimizer_launch`, runs 200 ns from the later of the last
  // bucket's end and 10 ns after its launch; a sync waits for it and a tail
  // ends the step at 2000. With `host_end`, no sync: the step ends then on
  // the host. One step, named `step`, its times `at` later and its
  // collectives' and launches' numbers `first` on.
  static std::vector<Event> nccl_ddp_step(uint32_t step, int64_t at, uint64_t first, int64_t optimizer_launch,
                                          int64_t host_end) {
    const auto bucket = [&](int64_t begin, int64_t end, uint64_t bytes, uint64_t seq, uint64_t correlation) {
      Event e = nccl_allreduce(at + begin, at + end, kNcclStream, first + correlation);
      e.bytes = bytes;
      e.seq = first + seq;
      return e;
    };
    const auto launch = [&](int64_t begin, uint64_t correlation) {
      return cuda_call(kLaunch, at + begin, at + begin + 10, first + correlation);
    };
    const auto gradients = [&](int64_t begin, int64_t end, uint64_t correlation) {
      return kernel(at + begin, at + end, first + correlation);
    };
    const int64_t optimizer = std::max<int64_t>(1200, optimizer_launch + 10);
    std::vector<Event> tail = {cuda_call(kSync, at + optimizer_launch + 10, at + optimizer + 210, first + 8),
                               range(kTail, at + optimizer + 210, at + 2000)};
    if (host_end != 0) tail = {range(kTail, at + optimizer_launch + 10, at + host_end)};
    return joined({range(step, at, at + (host_end != 0 ? host_end : 2000)), launch(10, 1), gradients(100, 300, 1),
                   launch(20, 2), bucket(300, 500, kMiB, 0, 2), launch(30, 3), gradients(300, 700, 3),
                   launch(40, 4), bucket(700, 1000, 2 * kMiB, 1, 4), launch(50, 5), gradients(700, 900, 5),
                   launch(60, 6), bucket(1000, 1200, kMiB, 2, 6), launch(optimizer_launch, 7),
                   gradients(optimizer, optimizer + 200, 7)},
                  tail);
  }

  // The job's path with the buckets fitted at `alpha_ns` plus 100 ns a MiB,
  // predicted for caps of 1, 2 and 4 MiB.
  CriticalPath nccl_ddp_job_path(double alpha_ns = 100) {
    const Timeline timeline(merged());
    const JobProfile job = build_profile(timeline);
    const BucketReport buckets = ddp_buckets({1, 2, 1}, {1, 2, 4}, alpha_ns);
    return critical_path(timeline, job, {}, &buckets);
  }

  // One step of nccl_ddp_step on the first `captured` of two ranks: its path.
  CriticalPath nccl_ddp_path(int64_t optimizer_launch, int32_t captured = 2, int64_t host_end = 0,
                             double alpha_ns = 100) {
    for (int32_t rank = 0; rank < captured; ++rank) {
      write_rank(rank, 2, nccl_ddp_step(kStep, 0, 0, optimizer_launch, host_end));
    }
    return nccl_ddp_job_path(alpha_ns);
  }

  static int64_t on_rank(const CriticalPath& path, int32_t rank) {
    for (const PathShare& share : path.ranks) {
      if (share.rank == rank) return share.ns;
    }
    return 0;
  }
};

// Rank 1's slow layer holds the allreduce every rank waits in; rank 0 ends
// the step last: its tail, the allreduce's transfer after rank 1 came, then
// rank 1's slow layer.
TEST_F(CriticalPathTest, AnAllreduceHandsThePathToTheRankThatCameLast) {
  write_slow_allreduce_job();
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  const StepPath& step = p.steps[0];
  EXPECT_EQ(step.hops, 1);
  EXPECT_EQ(step.path_ns(), 1000);
  ASSERT_EQ(step.segments.size(), 3u);
  EXPECT_EQ(step.segments[0].rank, 0);
  EXPECT_EQ(name(step.segments[0].name_id), "tail");
  EXPECT_EQ(step.segments[1].category, PathCategory::kCommunicationTransfer);
  EXPECT_EQ(step.segments[1].begin_ns, 500);
  EXPECT_EQ(step.segments[2].rank, 1);
  EXPECT_EQ(name(step.segments[2].name_id), "slow layer");
  EXPECT_EQ(on_rank(p, 1), 500);
  EXPECT_EQ(on_rank(p, 2), 0);  // it waited: none of its time is on the path
  ASSERT_FALSE(p.items.empty());
  EXPECT_EQ(name(p.items[0].name_id), "slow layer");
  EXPECT_EQ(p.items[0].rank, 1);
}

// A pipeline: rank 0's slow layer, its send to rank 1, rank 1's relay, its
// send to rank 2, rank 2's tail. Each receive was posted long before its
// send: the path goes two hops upstream, to rank 0.
TEST_F(CriticalPathTest, AReceiveHandsThePathToItsSenderTwoHopsUpstream) {
  write_rank(0, 3, {range(kStep, 0, 950), range(kSlow, 0, 800), message(CommOp::kSend, 1, 800, 810)});
  write_rank(1, 3, {range(kStep, 0, 950), message(CommOp::kRecv, 0, 100, 820), range(kRelay, 820, 850),
                    message(CommOp::kSend, 2, 850, 860)});
  write_rank(2, 3, {range(kStep, 0, 1000), message(CommOp::kRecv, 1, 50, 870), range(kTail, 870, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].hops, 2);
  EXPECT_EQ(p.steps[0].path_ns(), 1000);
  EXPECT_EQ(on_rank(p, 0), 800);
  EXPECT_EQ(on_rank(p, 1), 30 + 20);  // its relay and the transfer of rank 0's message
  EXPECT_EQ(on_rank(p, 2), 130 + 20);
  ASSERT_FALSE(p.ranks.empty());
  EXPECT_EQ(p.ranks[0].rank, 0);
  EXPECT_TRUE(p.steps[0].undecided.empty());
}

// A ring of three ranks, each passing to the next by MPI_Sendrecv after
// its compute, twice: rank 0 computes 500 ns a round, the others 100.
// Rank 1's first exchange waits for rank 0's send at 500; its second
// round's send at 610 holds rank 2's second exchange, and rank 2's tail
// of 800 ends the step. The path goes two hops upstream: rank 2's tail
// and transfer (810), rank 1's compute and transfer (110), rank 0's first
// round (500).
TEST_F(CriticalPathTest, ARingHandsThePathTwoHopsUpstream) {
  write_rank(0, 3, joined(joined({range(kStep, 0, 1120), range(kSlow, 0, 500), range(kSlow, 510, 1010),
                                  range(kTail, 1020, 1120)},
                                 sendrecv(1, 2, 500, 510, 0)),
                          sendrecv(1, 2, 1010, 1020, 1)));
  write_rank(1, 3, joined(joined({range(kStep, 0, 1120), range(kRelay, 0, 100), range(kRelay, 510, 610),
                                  range(kTail, 1020, 1120)},
                                 sendrecv(2, 0, 100, 510, 0)),
                          sendrecv(2, 0, 610, 1020, 1)));
  write_rank(2, 3, joined(joined({range(kStep, 0, 1420), range(kRelay, 0, 100), range(kRelay, 110, 210),
                                  range(kTail, 620, 1420)},
                                 sendrecv(0, 1, 100, 110, 0)),
                          sendrecv(0, 1, 210, 620, 1)));
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].hops, 2);
  EXPECT_EQ(p.steps[0].path_ns(), 1420);
  EXPECT_EQ(on_rank(p, 2), 800 + 10);
  EXPECT_EQ(on_rank(p, 1), 100 + 10);
  EXPECT_EQ(on_rank(p, 0), 500);
}

// Two arrivals 15 ns apart, closer than the two clocks' bounds (10 ns each):
// the path follows the recorded order and says the edge is undecided.
TEST_F(CriticalPathTest, AnArrivalOrderTheClocksCannotTellIsSaid) {
  write_rank(0, 2, {range(kStep, 0, 1000), range(kRelay, 0, 500), allreduce(500, 600), range(kTail, 600, 1000)});
  write_rank(1, 2, {range(kStep, 0, 900), range(kSlow, 0, 515), allreduce(515, 600), range(kRelay, 600, 900)});
  const CriticalPath p = path();
  ASSERT_EQ(p.steps.size(), 1u);
  ASSERT_EQ(p.steps[0].undecided.size(), 1u);
  EXPECT_EQ(p.steps[0].undecided[0].from_rank, 1);
  EXPECT_EQ(p.steps[0].undecided[0].apart_ns, 15);
  EXPECT_EQ(p.steps[0].undecided[0].bound_ns, 20);
}

TEST_F(CriticalPathTest, WithoutStepsThereIsNoPathAndItSaysWhy) {
  write_rank(0, 2, {range(kRelay, 0, 500), allreduce(500, 600)});
  write_rank(1, 2, {range(kSlow, 0, 550), allreduce(550, 600)});
  const CriticalPath p = path();
  EXPECT_TRUE(p.steps.empty());
  EXPECT_NE(p.unmeasured.find("no step was marked"), std::string::npos) << p.unmeasured;
}

TEST_F(CriticalPathTest, OnClocksNotAlignedThereIsNoPathAndItSaysWhy) {
  write_rank(0, 2, {range(kStep, 0, 1000), allreduce(500, 600)}, false);
  write_rank(1, 2, {range(kStep, 0, 900), allreduce(550, 600)}, false);
  const CriticalPath p = path();
  EXPECT_TRUE(p.steps.empty());
  EXPECT_EQ(p.unmeasured, kClocksNotAlignedReason);
}

// A data loader's range on the path is booked as data loading.
TEST_F(CriticalPathTest, DataLoadingOnThePathIsBookedSo) {
  write_rank(0, 1, {range(kStep, 0, 1000), range(kLoader, 0, 700), range(kTail, 700, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].by_category[static_cast<size_t>(PathCategory::kDataLoading)], 700);
  EXPECT_EQ(p.ranks[0].by_category[static_cast<size_t>(PathCategory::kCompute)], 300);
}

// A GPU step: the host's tail, the sync that waited for the kernel, the
// kernel, the time from its launch's end to its start, the launch, and the
// host's time before it.
TEST_F(CriticalPathTest, ASyncHandsThePathToTheKernelAndTheKernelToItsLaunch) {
  write_rank(0, 1, {range(kStep, 0, 1000), cuda_call(kLaunch, 100, 110, 1), kernel(120, 600, 1),
                    cuda_call(kSync, 150, 610, 2), range(kTail, 610, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].path_ns(), 1000);
  ASSERT_EQ(p.ranks.size(), 1u);
  const auto booked = [&](PathCategory c) { return p.ranks[0].by_category[static_cast<size_t>(c)]; };
  EXPECT_EQ(booked(PathCategory::kCompute), 390 + 480 + 100);
  EXPECT_EQ(booked(PathCategory::kSync), 10);
  EXPECT_EQ(booked(PathCategory::kLaunch), 10 + 10);
  ASSERT_FALSE(p.items.empty());
  EXPECT_EQ(name(p.items[0].name_id), "gemm");
}

// NCCL's allreduce on the GPU: rank 0's kernel waited for rank 1's, which
// came after rank 1's gemm: the path crosses to rank 1's stream there.
TEST_F(CriticalPathTest, NcclsKernelHandsThePathToTheStreamThatCameLast) {
  write_rank(0, 2, {range(kStep, 0, 1000), nccl_allreduce(200, 700), cuda_call(kSync, 210, 710, 2),
                    range(kTail, 710, 1000)});
  write_rank(1, 2, {range(kStep, 0, 900), cuda_call(kLaunch, 50, 60, 1), kernel(100, 600, 1),
                    nccl_allreduce(600, 700), cuda_call(kSync, 70, 705, 3)});
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].hops, 1);
  EXPECT_EQ(p.steps[0].path_ns(), 1000);
  EXPECT_EQ(on_rank(p, 0), 290 + 10 + 100);
  EXPECT_EQ(on_rank(p, 1), 500 + 40 + 10 + 50);
}

// The first job again: rank 1 computes 800 ns of its 900 (its slow layer
// and a relay), the others 500. Replayed as recorded, the step takes its
// 1000 ns. With rank 1 at the others' median (x0.625), its slow layer ends
// at 313 (312.5 rounded), the allreduce's transfer (100 after the last
// arrival) at 413, and rank 0's tail of 400 ends the step at 813. Without
// transfers the allreduce ends at the last arrival, 500: 900 with the tail.
TEST_F(CriticalPathTest, TheStepReplayedWithTheSlowRankAtTheMedianAndWithoutTransfers) {
  write_slow_allreduce_job();
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_EQ(p.what_if.size(), 2u);
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 1);
  EXPECT_DOUBLE_EQ(median.factor, 0.625);
  EXPECT_TRUE(median.transfers);
  EXPECT_EQ(median.recorded_ns, 1000);
  EXPECT_EQ(median.replayed_ns, 1000);
  EXPECT_EQ(median.predicted_ns, 813);
  const PathWhatIf& free = p.what_if[1];
  EXPECT_EQ(free.rank, -1);
  EXPECT_FALSE(free.transfers);
  EXPECT_EQ(free.predicted_ns, 900);
}

// The stragglers' what-if: rank 1 at the median, as above, and rank 0,
// which computed no more than the others' median, as replayed.
TEST_F(CriticalPathTest, RanksAskedForAreReplayedAtTheMedianOnEveryWalkedStep) {
  write_slow_allreduce_job();
  const CriticalPath p = path({1, 0});
  ASSERT_EQ(p.rank_replays.size(), 2u);
  EXPECT_EQ(p.rank_replays[0].rank, 0);
  EXPECT_EQ(p.rank_replays[0].steps, 1u);
  EXPECT_EQ(p.rank_replays[0].predicted_ns, p.rank_replays[0].replayed_ns);
  EXPECT_EQ(p.rank_replays[1].rank, 1);
  EXPECT_EQ(p.rank_replays[1].replayed_ns, 1000);
  EXPECT_EQ(p.rank_replays[1].predicted_ns, 813);
  EXPECT_TRUE(path().rank_replays.empty());
}

// Two allreduces in a row, rank 1 slow before each. Rank 0 computes 500 of
// its 1100, rank 1 900 of its 1000: x5/9. Replayed, rank 1 arrives at the
// first at 222 (400 x 5/9), both leave it at 272 (its transfer of 50 after
// the last arrival); rank 0 arrives at the second at 472, rank 1 at 550
// (500 x 5/9 = 278 on), both leave at 600, and rank 0's tail of 100 ends
// the step at 700.
TEST_F(CriticalPathTest, AReplayCarriesEachCollectivesNewEndIntoTheNext) {
  write_rank(0, 2, {range(kStep, 0, 1100), range(kRelay, 0, 200), allreduce(200, 450), range(kRelay, 450, 650),
                    allreduce(650, 1000, 1), range(kTail, 1000, 1100)});
  write_rank(1, 2, {range(kStep, 0, 1000), range(kSlow, 0, 400), allreduce(400, 450), range(kSlow, 450, 950),
                    allreduce(950, 1000, 1)});
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 1);
  EXPECT_EQ(median.replayed_ns, 1100);
  EXPECT_NEAR(median.factor, 500.0 / 900.0, 1e-12);
  EXPECT_EQ(median.predicted_ns, 700);
}

// DDP's gradient buckets of 1, 2 and 1 MiB, posted by both ranks at 100,
// 500 and 700 (backward's pace: 200 ns a MiB), all completing in the wait
// from 750 to 1500; then 500 of tail. Regrouped, each bucket takes the fit's
// 100 ns plus 100 ns a MiB, one after another, and the wait ends when the
// last is reduced: the current buckets at 300, 800, 1000 (a step of 1500);
// buckets of 1 MiB, the second's last byte ready at 300 (a MiB before the
// post at 500), at 300, 500, 700, 900 (1400: predicted 2000 - 100); 1 and
// 3 MiB at 300 and 1100 (1600: predicted 2100).
TEST_F(CriticalPathTest, GradientBucketsRegroupedAreReplayedOneAfterAnother) {
  const auto bucket = [](int64_t posted, uint64_t bytes, uint64_t seq) {
    std::vector<Event> events = iallreduce(posted, 1500);
    events[1].bytes = bytes;
    events[1].seq = seq;
    return events;
  };
  for (int32_t rank = 0; rank < 2; ++rank) {
    // An MPI call after the last post that waits for nothing (a post of
    // its own) is not the wait for the gradients.
    std::vector<Event> events = {range(kStep, 0, 2000), testing::host_event(EventKind::kMpiCall, kIsend, 720, 725, kThread),
                                 wait(750, 1500), range(kTail, 1500, 2000)};
    uint64_t seq = 0;
    for (const auto& [posted, bytes] : {std::pair{100, kMiB}, {500, 2 * kMiB}, {700, kMiB}}) {
      events = joined(events, bucket(posted, bytes, seq++));
    }
    write_rank(rank, 2, events);
  }
  const Timeline timeline(merged());
  const JobProfile job = build_profile(timeline);
  BucketReport buckets = ddp_buckets({1, 2, 1}, {1, 2, 4});
  buckets.measured_step_ns = 2000;

  const CriticalPath p = critical_path(timeline, job, {}, &buckets);
  ASSERT_EQ(p.bucket_replays_unmeasured, "");
  ASSERT_EQ(p.bucket_replays.size(), 3u);
  const int64_t regrouped[] = {1400, 1500, 1600}, predicted[] = {1900, 2000, 2100};
  for (size_t k = 0; k < 3; ++k) {
    const BucketReplay& replay = p.bucket_replays[k];
    EXPECT_EQ(replay.bucket_bytes, buckets.predictions[k].bucket_bytes);
    EXPECT_EQ(replay.steps, 1u);
    EXPECT_EQ(replay.replayed_ns, 2000);
    EXPECT_EQ(replay.regrouped_ns, regrouped[k]) << k;
    EXPECT_EQ(replay.predicted_ns, predicted[k]) << k;
  }

  // The buckets' predictions become the replay's; its regrouping of the
  // current buckets, 500 off the step as replayed, is too far to recommend.
  take_replayed_predictions(buckets, p.bucket_replays, p.bucket_replays_unmeasured);
  EXPECT_EQ(buckets.predicted_by, "replay");
  EXPECT_EQ(buckets.replayed_steps, 1u);
  EXPECT_EQ(buckets.predictions[0].step_ns, 1900);
  EXPECT_EQ(buckets.predictions[2].step_ns, 2100);
  EXPECT_EQ(buckets.recommended_bucket_bytes, 0u);
  EXPECT_TRUE(buckets.recommendation.starts_with("No recommendation: replayed on 1 walked step")) << buckets.recommendation;

  // Without the buckets, nothing is regrouped; with buckets the step's
  // allreduces do not match, nothing either, and it says why.
  EXPECT_TRUE(critical_path(timeline, job).bucket_replays.empty());

  // With 1000 ns of latency a bucket, the current buckets are reduced at
  // 1200, 2400 and 3500 (4000), 1 and 3 MiB at 1200 and 2500 (3000): 1000
  // less would be a step of 1000, shorter than the 1250 with transfers
  // taking no time (the wait at its begin, 750, and the tail), so 1250.
  // Buckets of 1 MiB at 1200, 2300, 3400, 4500 (5000): 3000.
  buckets = ddp_buckets({1, 2, 1}, {1, 2, 4}, 1000);
  const CriticalPath slow_network = critical_path(timeline, job, {}, &buckets);
  ASSERT_EQ(slow_network.bucket_replays.size(), 3u);
  EXPECT_EQ(slow_network.bucket_replays[0].predicted_ns, 3000);
  EXPECT_EQ(slow_network.bucket_replays[2].regrouped_ns, 3000);
  EXPECT_EQ(slow_network.bucket_replays[2].predicted_ns, 1250);

  buckets.buckets[1].bytes = 3 * kMiB;
  const CriticalPath unmatched = critical_path(timeline, job, {}, &buckets);
  EXPECT_TRUE(unmatched.bucket_replays.empty());
  EXPECT_EQ(unmatched.bucket_replays_unmeasured, "the step's gradient allreduces are not laid out as the job's buckets");
}

// The current buckets come back at 500, 1000 and 1200: the step as
// replayed. In buckets of 1 MiB (the second ready at 500, 200 ns a MiB
// before the 2 MiB bucket holding it) the last is reduced at 1100, the
// step 100 shorter; in 1 and 3 MiB, at 900 + 400 = 1300, 100 longer.
TEST_F(CriticalPathTest, NcclsGradientBucketsRegroupedFollowTheirGradientsKernels) {
  const CriticalPath p = nccl_ddp_path(70);
  ASSERT_EQ(p.bucket_replays_unmeasured, "");
  ASSERT_EQ(p.bucket_replays.size(), 3u);
  const int64_t regrouped[] = {1900, 2000, 2100};
  for (size_t k = 0; k < 3; ++k) {
    const BucketReplay& replay = p.bucket_replays[k];
    EXPECT_EQ(replay.replayed_ns, 2000);
    EXPECT_EQ(replay.regrouped_ns, regrouped[k]) << k;
    EXPECT_EQ(replay.predicted_ns, regrouped[k]) << k;
  }
}

// One rank of the job captured (a torch.profiler trace of one rank, say):
// its gradient allreduces have one part each, and are regrouped as its
// gradients come.
TEST_F(CriticalPathTest, NcclsGradientBucketsOfOneCapturedRankAreRegrouped) {
  const CriticalPath p = nccl_ddp_path(70, 1);
  ASSERT_EQ(p.bucket_replays_unmeasured, "");
  ASSERT_EQ(p.bucket_replays.size(), 3u);
  const int64_t regrouped[] = {1900, 2000, 2100};
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(p.bucket_replays[k].regrouped_ns, regrouped[k]) << k;
}

// No sync: the host ends the step at 1250, before the optimizer's kernel
// (1200-1400), 150 ns after it. Regrouped into 1 and 3 MiB, the last bucket
// is reduced at 1300 and the optimizer ends 250 ns after the step: what
// that costs the next step is not replayed, so nothing is predicted, and
// it says why. (In buckets of 1 MiB it would end 50 ns after.) Fitted at
// 110 ns a bucket, the current buckets regrouped end it 170 ns after, 20
// more than recorded: what counts is more than they do (1 MiB: 90; 1 and
// 3 MiB: 260).
TEST_F(CriticalPathTest, NcclsBucketsReducedAfterTheStepsEndAreNotPredicted) {
  for (const double alpha_ns : {100.0, 110.0}) {
    const CriticalPath p = nccl_ddp_path(70, 2, 1250, alpha_ns);
    EXPECT_TRUE(p.bucket_replays.empty());
    EXPECT_EQ(p.bucket_replays_unmeasured,
              "regrouped into buckets of 4 MiB, the GPU's work ends later after the step's end, which no rank "
              "waited for: what that costs the next step is not replayed")
        << alpha_ns;
  }
}

// Two steps: the first as NcclsGpuWorkAfterBackwardWaitsForTheLastNewBucket's,
// replayed; the second as NcclsBucketsReducedAfterTheStepsEndAreNotPredicted's,
// not. The predictions stand on the first alone, and say so.
TEST_F(CriticalPathTest, NcclsStepsNotReplayedBesideStepsReplayedAreCountedWithTheirReason) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    write_rank(rank, 2, joined(nccl_ddp_step(kStep, 0, 0, 1210, 0), nccl_ddp_step(kStep1, 3000, 100, 70, 1250)));
  }
  const CriticalPath p = nccl_ddp_job_path();
  ASSERT_EQ(p.steps_walked, 2u);
  ASSERT_EQ(p.bucket_replays.size(), 3u);
  const int64_t regrouped[] = {2000, 2000, 2080};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(p.bucket_replays[k].steps, 1u);
    EXPECT_EQ(p.bucket_replays[k].regrouped_ns, regrouped[k]) << k;
  }
  EXPECT_EQ(p.bucket_replays_left_out, 1u);
  EXPECT_EQ(p.bucket_replays_unmeasured.rfind("regrouped into buckets of 4 MiB, the GPU's work ends later", 0), 0u)
      << p.bucket_replays_unmeasured;

  BucketReport buckets = ddp_buckets({1, 2, 1}, {1, 2, 4});
  buckets.measured_step_ns = 2000;
  take_replayed_predictions(buckets, p.bucket_replays, p.bucket_replays_unmeasured, p.bucket_replays_left_out);
  EXPECT_EQ(buckets.predicted_by, "replay");
  EXPECT_EQ(buckets.replayed_steps, 1u);
  EXPECT_EQ(buckets.replay_unmeasured, "");
  EXPECT_EQ(buckets.replay_left_out.rfind("1 of 2 walked steps not replayed, the first because regrouped into buckets "
                                          "of 4 MiB", 0),
            0u)
      << buckets.replay_left_out;
}

// The optimizer launched at 1210, after the last bucket was reduced: as
// recorded it waited for its launch alone (1220-1420), but DDP's end of
// backward made its stream wait for every bucket. Reduced at 1100 or 1200
// the buckets do not hold it; in 1 and 3 MiB, reduced at 1300, they hold
// it 80 ns.
TEST_F(CriticalPathTest, NcclsGpuWorkAfterBackwardWaitsForTheLastNewBucket) {
  const CriticalPath p = nccl_ddp_path(1210);
  ASSERT_EQ(p.bucket_replays_unmeasured, "");
  ASSERT_EQ(p.bucket_replays.size(), 3u);
  const int64_t regrouped[] = {2000, 2000, 2080};
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(p.bucket_replays[k].regrouped_ns, regrouped[k]) << k;
}


// Buckets of 1 MiB posted at 100, 200 and 500; a wait from 250 to 400 in
// which the first two completed, the wait for the gradients from 600 to
// 1000, a tail of 500. Regrouped into 1 and 2 MiB, the second bucket waits
// for the post at 500, after that first wait began: the wait keeps its own
// time (else it would wait for a post that waits for it). Both regroupings
// end the step at 1300 (the current buckets reduced at 300, 500 and 800,
// the first wait ending at 500; regrouped, at 300 and 800), so both predict
// the step as replayed.
TEST_F(CriticalPathTest, ACallBeforeThePostItsNewBucketWaitsForKeepsItsOwnTime) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    std::vector<Event> events = {range(kStep, 0, 1500), wait(250, 400), wait(600, 1000), range(kTail, 1000, 1500)};
    uint64_t seq = 0;
    for (const auto& [posted, completed] : {std::pair{100, 400}, {200, 400}, {500, 1000}}) {
      std::vector<Event> bucket = iallreduce(posted, completed);
      bucket[1].bytes = kMiB;
      bucket[1].seq = seq++;
      events = joined(events, bucket);
    }
    write_rank(rank, 2, events);
  }
  const Timeline timeline(merged());
  const JobProfile job = build_profile(timeline);
  const BucketReport buckets = ddp_buckets({1, 1, 1}, {1, 2});

  const CriticalPath p = critical_path(timeline, job, {}, &buckets);
  ASSERT_EQ(p.bucket_replays_unmeasured, "");
  ASSERT_EQ(p.bucket_replays.size(), 2u);
  for (const BucketReplay& replay : p.bucket_replays) {
    EXPECT_EQ(replay.replayed_ns, 1500);
    EXPECT_EQ(replay.regrouped_ns, 1300) << replay.bucket_bytes;
    EXPECT_EQ(replay.predicted_ns, 1500) << replay.bucket_bytes;
  }
}

// The wait job: from rank 0's tail the path goes through the wait, which
// the send held: transfer from the send (50), then rank 1's slow layer.
TEST_F(CriticalPathTest, AWaitHandsThePathToTheSenderOfTheMessageItCompleted) {
  write_wait_job();
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  const StepPath& step = p.steps[0];
  EXPECT_EQ(step.hops, 1);
  EXPECT_EQ(step.path_ns(), 1000);
  ASSERT_EQ(step.segments.size(), 3u);
  EXPECT_EQ(step.segments[1].category, PathCategory::kCommunicationTransfer);
  EXPECT_EQ(name(step.segments[1].name_id), "MPI_Wait");
  EXPECT_EQ(step.segments[1].begin_ns, 650);
  EXPECT_EQ(step.segments[2].rank, 1);
  EXPECT_EQ(name(step.segments[2].name_id), "slow layer");
  EXPECT_EQ(on_rank(p, 0), 300 + 50);
  EXPECT_EQ(on_rank(p, 1), 650);
}

// Rank 1 holds the path in every step: its 800 ns of compute of the 950
// that are not transfer (rank 0's tail, 150), against a fair share of
// half: above its fair share with no spread at all.
TEST_F(CriticalPathTest, ARankHoldingEveryStepIsAboveItsFairShare) {
  write_four_steps([](int) { return 1; });
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  EXPECT_EQ(p.steps_walked, 4u);
  EXPECT_EQ(p.fair_share_unmeasured, "");
  const PathShare* slow = share_of(p, 1);
  const PathShare* other = share_of(p, 0);
  ASSERT_TRUE(slow && other);
  EXPECT_NEAR(slow->excess_mean, 800.0 / 950.0 - 0.5, 1e-9);
  EXPECT_NEAR(slow->excess_error, 0, 1e-9);
  EXPECT_TRUE(slow->above_fair_share);
  EXPECT_FALSE(other->above_fair_share);
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.nodes[0].host, "node-1");
  EXPECT_EQ(p.nodes[0].ns, 4 * 800);
}

// The ranks take turns: each holds most of every other step and little
// of the rest, on average its fair share: neither is above it.
TEST_F(CriticalPathTest, RanksTakingTurnsAreNotAboveTheirFairShare) {
  write_four_steps([](int k) { return k % 2; });
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  EXPECT_EQ(p.steps_walked, 4u);
  for (int32_t rank : {0, 1}) {
    const PathShare* share = share_of(p, rank);
    ASSERT_TRUE(share);
    EXPECT_NEAR(share->excess_mean, 0, 1e-9);
    EXPECT_FALSE(share->above_fair_share) << "rank " << rank;
  }
}

// Both ranks end the step at 1000: which ended last is noise, and the
// shares are the two walks' in equal parts. From rank 0: all its own (it
// came last to the allreduce, at 400). From rank 1: its tail and the
// allreduce's transfer (600), then rank 0's relay (400). Rank 0: 700.
TEST_F(CriticalPathTest, RanksEndingTogetherShareThePathsFromEach) {
  write_rank(0, 2, {range(kStep, 0, 1000), range(kRelay, 0, 400), allreduce(400, 600), range(kTail, 600, 1000)});
  write_rank(1, 2, {range(kStep, 0, 1000), range(kRelay, 0, 300), allreduce(300, 600), range(kTail, 600, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  EXPECT_EQ(on_rank(p, 0), 700);
  EXPECT_EQ(on_rank(p, 1), 300);
  EXPECT_EQ(p.total_ns, 1000);
  EXPECT_NE(p.fair_share_unmeasured.find("1 step walked"), std::string::npos) << p.fair_share_unmeasured;
}

// Rank 0's send waits from 100 to 700 for rank 1 to post its receive at
// 650 (a message too large to go eagerly): the path goes from the send to
// the receiver's post, and on to rank 1's slow layer.
TEST_F(CriticalPathTest, ASendHeldByItsLateReceiverHandsThePathToIt) {
  write_rank(0, 2, {range(kStep, 0, 1000), message(CommOp::kSend, 1, 100, 700), range(kTail, 700, 1000)});
  write_rank(1, 2, {range(kStep, 0, 900), range(kSlow, 0, 650), message(CommOp::kRecv, 0, 650, 700),
                    range(kRelay, 700, 900)});
  const CriticalPath p = path();
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].hops, 1);
  EXPECT_EQ(p.steps[0].path_ns(), 1000);
  EXPECT_EQ(on_rank(p, 0), 300 + 50);
  EXPECT_EQ(on_rank(p, 1), 650);
}

// A send posted before the wait began did not hold it: the wait (100) is
// transfer on its own rank, as is the receive's post (5), and the path
// stays there.
TEST_F(CriticalPathTest, AMessageSentBeforeTheWaitBeganKeepsThePathOnTheReceiver) {
  write_rank(0, 2, joined({range(kStep, 0, 1000), range(kSlow, 55, 600), wait(600, 700), range(kTail, 700, 1000)},
                          nonblocking(CommOp::kRecv, 1, 50, 700)));
  write_rank(1, 2, joined({range(kStep, 0, 900), range(kRelay, 0, 300), range(kRelay, 305, 900)},
                          nonblocking(CommOp::kSend, 0, 300, 305)));
  const CriticalPath p = path();
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].hops, 0);
  EXPECT_EQ(on_rank(p, 1), 0);
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_EQ(p.ranks[0].by_category[static_cast<size_t>(PathCategory::kCommunicationTransfer)], 105);
}

// The pipeline of AReceiveHandsThePathToItsSenderTwoHopsUpstream, its
// first two ranks ending at 990, replayed. Rank 0 computes 980 ns of its 990 (all but its send), rank 1 260, rank 2
// 180: rank 0 at their median is x220/980. Its send moves from 800 to 180
// (179.6 rounded); rank 1's receive ends 20 after it (the transfer it
// recorded after the send), at 200; its relay sends at 230; rank 2's
// receive ends at 250 and its tail of 130 ends the step at 380. Without
// transfers: rank 1's receive ends at 800, its step at 970, rank 2's at
// 960; rank 0's send took 10 ns after its receive was posted: without it,
// rank 0's step ends at 980, and so does the step.
TEST_F(CriticalPathTest, APipelineOfMessagesIsReplayedSendBySend) {
  write_rank(0, 3, {range(kStep, 0, 990), range(kSlow, 0, 800), message(CommOp::kSend, 1, 800, 810)});
  write_rank(1, 3, {range(kStep, 0, 990), message(CommOp::kRecv, 0, 100, 820), range(kRelay, 820, 850),
                    message(CommOp::kSend, 2, 850, 860)});
  write_rank(2, 3, {range(kStep, 0, 1000), message(CommOp::kRecv, 1, 50, 870), range(kTail, 870, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_EQ(p.what_if.size(), 2u);
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 0);
  EXPECT_NEAR(median.factor, 220.0 / 980.0, 1e-12);
  EXPECT_EQ(median.replayed_ns, 1000);
  EXPECT_EQ(median.predicted_ns, 380);
  const PathWhatIf& free = p.what_if[1];
  EXPECT_FALSE(free.transfers);
  EXPECT_EQ(free.predicted_ns, 980);
}

// The wait job replayed: rank 1 computes 895 of its 900 (all but its
// post), rank 0 595 of its 1000 (all but its post and its wait): x595/895.
// Rank 1's send moves from 650 to 432 (432.1); rank 0's wait, begun at
// 300, ends 50 after it (its transfer after the send), at 482, and its
// tail of 300 ends the step at 782.
TEST_F(CriticalPathTest, AWaitIsReplayedUntilItsMessagesSend) {
  write_wait_job();
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 1);
  EXPECT_EQ(median.replayed_ns, 1000);
  EXPECT_NEAR(median.factor, 595.0 / 895.0, 1e-12);
  EXPECT_EQ(median.predicted_ns, 782);
}

// A message too large to go eagerly moves while its sender is inside MPI:
// rank 1 posts its send at 100 and computes to 700, and rank 0's wait,
// begun at 200, completes at 720, 20 after rank 1 came to its own wait at
// 700. The path goes from rank 0's tail through those 20 of transfer to
// rank 1's slow layer. Rank 1 computes 975 of its 990 (all but its post
// and its wait), rank 0 475: x475/975. Replayed so, rank 1 comes to its
// wait at 341.0 (700 x 475/975); rank 0's wait ends 20 after it, and its
// tail of 280 ends the step at 641. From the send's post alone the wait
// would keep its 520 after its begin, the path would stay on rank 0, and
// the step would keep its 1000.
TEST_F(CriticalPathTest, AMessageWaitsForItsSendersNextMpiCall) {
  write_rank(0, 2, joined({range(kStep, 0, 1000), range(kRelay, 55, 200), wait(200, 720), range(kTail, 720, 1000)},
                          nonblocking(CommOp::kRecv, 1, 50, 720)));
  write_rank(1, 2, joined({range(kStep, 0, 990), range(kSlow, 105, 700), wait(700, 710), range(kRelay, 710, 990)},
                          nonblocking(CommOp::kSend, 0, 100, 710)));
  expect_released_at_700(path({1}), "MPI_Wait");
}

// The same message where a communication thread makes every MPI call, as
// task runtimes have one, and the training thread waits in a wait of its
// own (c10d's here): rank 1's worker posts the send at 100 and comes to
// MPI_Wait at 700, after the training thread's slow layer; rank 0's worker
// posts the receive at 50. The worker's call released the message as
// above: the path crosses from rank 0's wait to rank 1 at 700, and on to
// its slow layer. From the send's post alone it would stay on rank 0.
// Replayed with rank 1 at the median, the release moves with rank 1's
// training thread (x475/975): as above.
TEST_F(CriticalPathTest, AMessageIsReleasedByItsSendersMpiCallOnAnyThread) {
  const auto on_worker = [](std::vector<Event> events) {
    for (Event& e : events) e.track = e.track == kThread ? kWorker : e.track;
    return events;
  };
  const Event c10d_wait = testing::host_event(EventKind::kTorchWait, kC10dWait, 200, 720, kThread);
  write_rank(0, 2, joined({range(kStep, 0, 1000), range(kRelay, 55, 200), c10d_wait, range(kTail, 720, 1000)},
                          on_worker(nonblocking(CommOp::kRecv, 1, 50, 720))));
  write_rank(1, 2, joined({range(kStep, 0, 990), range(kSlow, 105, 700), range(kRelay, 710, 990)},
                          on_worker(joined(nonblocking(CommOp::kSend, 0, 100, 710), {wait(700, 710)}))));
  expect_released_at_700(path({1}), "c10d::wait");
}

// A message cannot be moved by a call its sender began after its own side
// had completed: rank 1's blocking send goes eagerly (100-110), and its MPI
// call at 600 comes long after. Rank 0's wait, begun at 200, completes at
// 650 for its own reasons; the path stays on rank 0 (transfer from the
// wait's begin), and rank 1 at the median leaves rank 0's step as it was.
// Were the call at 600 taken for the release, the path would cross to rank
// 1's slow layer and the replay would end rank 0's wait earlier.
TEST_F(CriticalPathTest, ACallAfterTheSendersSideCompletedReleasesNothing) {
  write_rank(0, 2, joined({range(kStep, 0, 1000), range(kRelay, 55, 200), wait(200, 650), range(kTail, 650, 1000)},
                          nonblocking(CommOp::kRecv, 1, 50, 650)));
  write_rank(1, 2, {range(kStep, 0, 900), message(CommOp::kSend, 0, 100, 110), range(kSlow, 110, 600), wait(600, 610),
                    range(kRelay, 610, 900)});
  const CriticalPath p = path({1});
  ASSERT_EQ(p.unmeasured, "");
  ASSERT_EQ(p.steps.size(), 1u);
  const StepPath& step = p.steps[0];
  EXPECT_EQ(step.hops, 0);
  ASSERT_GE(step.segments.size(), 2u);
  EXPECT_EQ(name(step.segments[1].name_id), "MPI_Wait");
  EXPECT_EQ(step.segments[1].begin_ns, 200);
  ASSERT_EQ(p.rank_replays.size(), 1u);
  EXPECT_EQ(p.rank_replays[0].rank, 1);
  EXPECT_EQ(p.rank_replays[0].replayed_ns, 1000);
  EXPECT_EQ(p.rank_replays[0].predicted_ns, 1000);
}

// A nonblocking allreduce: rank 1 posts it last, at 400, after its slow
// layer; it completes on both ranks at 700, 300 after that arrival. Rank
// 0 came to its wait at 600, after the last arrival. The path is rank 0's
// own (its wait began after everyone had arrived): rank 0 at rank 1's
// compute (845 of its 900 against rank 0's 895 of 1000) posts at 94 and
// comes to its wait at 566, and the allreduce still completes at 700, 300
// after rank 1's post, on every rank: rank 0's tail (283) ends the step
// at 983.
TEST_F(CriticalPathTest, ACollectiveCompletesOnEveryRankAtOnceInTheReplay) {
  write_rank(0, 2, joined({range(kStep, 0, 1000), range(kRelay, 105, 600), wait(600, 700), range(kTail, 700, 1000)},
                          iallreduce(100, 700)));
  write_rank(1, 2, joined({range(kStep, 0, 900), range(kSlow, 0, 400), range(kRelay, 405, 650), wait(650, 700),
                           range(kRelay, 700, 900)},
                          iallreduce(400, 700)));
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 0);
  EXPECT_NEAR(median.factor, 845.0 / 895.0, 1e-12);
  EXPECT_EQ(median.replayed_ns, 1000);
  EXPECT_EQ(median.predicted_ns, 983);
}

// Two steps; rank 0 computes 800 before each step's allreduce, rank 1 200,
// and rank 1 begins step 1 at 850, right after the first allreduce, rank
// 0 at 1000. Step 1 (850 to 2000) is replayed from step 0: rank 0 at rank
// 1's compute (x200/950) arrives at the first allreduce at 168 and rank 1
// at 200; both leave it 50 later (as recorded after its last arrival), at
// 250. Rank 1 begins step 1 there, rank 0 32 later (its 150 of relay
// scaled); both arrive at the second at 450 and leave at 500; rank 0's
// relay ends the step at 532: 282 after rank 1 began it. Replayed from
// its own begins instead, it would take 400. Without transfers, unchanged:
// both leave the first at 800; rank 1 begins at 800, rank 0 at 950 and
// arrives at the second at 1750, which ends rank 1's step; rank 0's ends
// at 1900: 1100.
TEST_F(CriticalPathTest, AStepIsReplayedFromTheStepBefore) {
  write_rank(0, 2, {range(kStep, 0, 1000), range(kSlow, 0, 800), allreduce(800, 850, 0), range(kRelay, 850, 1000),
                    range(kStep1, 1000, 2000), range(kSlow, 1000, 1800), allreduce(1800, 1850, 1),
                    range(kRelay, 1850, 2000)});
  write_rank(1, 2, {range(kStep, 0, 850), range(kRelay, 0, 200), allreduce(200, 850, 0), range(kStep1, 850, 1850),
                    range(kRelay, 850, 1050), allreduce(1050, 1850, 1)});
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  std::vector<PathWhatIf> step1;
  for (const PathWhatIf& w : p.what_if) {
    if (w.step == 1) step1.push_back(w);
  }
  ASSERT_EQ(step1.size(), 2u);
  EXPECT_EQ(step1[0].rank, 0);
  EXPECT_NEAR(step1[0].factor, 200.0 / 950.0, 1e-12);
  EXPECT_EQ(step1[0].recorded_ns, 1150);
  EXPECT_EQ(step1[0].replayed_ns, 1150);
  EXPECT_EQ(step1[0].predicted_ns, 282);
  EXPECT_FALSE(step1[1].transfers);
  EXPECT_EQ(step1[1].predicted_ns, 1100);
}

// A kernel that started before its launch call returned (an idle stream)
// followed the call's begin: rank 1's second gemm (150-200, launched
// 140-160) stays after 140 when its first gemm (30-130) shrinks. At rank
// 0's compute (x50/150) the first ends at 63, the second starts at 150
// still and runs 17; the sync ends 10 after it, at 177, and the tail of
// 790 ends the step at 967.
TEST_F(CriticalPathTest, AKernelStartedBeforeItsLaunchReturnedFollowsTheLaunchsBegin) {
  write_rank(0, 2, {range(kStep, 0, 600), cuda_call(kLaunch, 10, 20, 1), kernel(30, 80, 1),
                    cuda_call(kSync, 90, 100, 2), range(kTail, 100, 600)});
  write_rank(1, 2, {range(kStep, 0, 1000), cuda_call(kLaunch, 10, 20, 1), kernel(30, 130, 1),
                    cuda_call(kLaunch, 140, 160, 2), kernel(150, 200, 2), cuda_call(kSync, 165, 210, 3),
                    range(kTail, 210, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  EXPECT_EQ(p.what_if[0].rank, 1);
  EXPECT_EQ(p.what_if[0].replayed_ns, 1000);
  EXPECT_EQ(p.what_if[0].predicted_ns, 967);
}

// cudaDeviceSynchronize waits for every stream: rank 1's gemm (100-490)
// halved ends at 295, but its copy on another stream still ends at 480,
// and the sync 10 after it: the tail of 500 ends the step at 990.
TEST_F(CriticalPathTest, ADeviceSynchronizeWaitsForEveryStreamInTheReplay) {
  Event copy = testing::host_event(EventKind::kGpuMemcpy, kCopy, 300, 480, kNcclStream);
  copy.correlation_id = 2;
  write_rank(0, 2, {range(kStep, 0, 600), cuda_call(kLaunch, 90, 95, 1), kernel(100, 295, 1),
                    cuda_call(kSync, 100, 300, 3), range(kTail, 300, 600)});
  write_rank(1, 2, {range(kStep, 0, 1000), cuda_call(kLaunch, 90, 95, 1), kernel(100, 490, 1), copy,
                    cuda_call(kDeviceSync, 100, 500, 3), range(kTail, 500, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  EXPECT_EQ(p.what_if[0].rank, 1);
  EXPECT_DOUBLE_EQ(p.what_if[0].factor, 0.5);
  EXPECT_EQ(p.what_if[0].predicted_ns, 990);
}

// Two operations of no length at the same instant on two streams: neither
// waited for the other, and the step is replayed.
TEST_F(CriticalPathTest, OperationsOfNoLengthAtOneInstantDoNotWaitOnEachOther) {
  write_rank(0, 1, {range(kStep, 0, 100), cuda_call(kLaunch, 1, 5, 1), kernel(10, 10, 1),
                    cuda_call(kLaunch, 5, 7, 2), kernel(10, 10, 2, kNcclStream), cuda_call(kSync, 8, 20, 3),
                    range(kTail, 20, 100)});
  const CriticalPath p = path();
  EXPECT_EQ(p.what_if_unmeasured, "");
  EXPECT_FALSE(p.what_if.empty());
}

// Rank 0's arrival at the allreduce is recorded on another thread (a
// worker's post at 150) inside its training thread's wait for it: the
// arrival moves with the wait's begin, not its end, which waits for it.
TEST_F(CriticalPathTest, AnArrivalOnAnotherThreadInsideTheWaitForItIsReplayed) {
  Event worker_post = testing::host_event(EventKind::kMpiCall, kIallreduce, 150, 155, kWorker);
  Event operation = allreduce(150, 400);
  operation.name_id = kIallreduce;
  operation.track = kComm;
  write_rank(0, 2, {range(kStep, 0, 500), range(kRelay, 0, 100), wait(100, 400), worker_post, operation,
                    range(kTail, 400, 500)});
  write_rank(1, 2, joined({range(kStep, 0, 500), range(kSlow, 0, 300), wait(310, 400), range(kTail, 400, 500)},
                          iallreduce(300, 400)));
  const CriticalPath p = path();
  EXPECT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  EXPECT_EQ(p.what_if[0].replayed_ns, 500);
}

// Clocks that disagree: rank 0 received rank 1's message at 200, before
// rank 1 sent it at 400, after a receive that waited for rank 0's send at
// 300. Each waits on the other: the step is not replayed, and it says why.
TEST_F(CriticalPathTest, WaitsInACircleAreNotReplayedAndItSaysWhy) {
  write_rank(0, 2, {range(kStep, 0, 1000), message(CommOp::kRecv, 1, 100, 200), message(CommOp::kSend, 1, 300, 310),
                    range(kTail, 310, 1000)});
  write_rank(1, 2, {range(kStep, 0, 900), message(CommOp::kRecv, 0, 50, 350), message(CommOp::kSend, 0, 400, 410),
                    range(kTail, 410, 900)});
  const CriticalPath p = path();
  ASSERT_EQ(p.unmeasured, "");
  EXPECT_TRUE(p.what_if.empty());
  EXPECT_NE(p.what_if_unmeasured.find("in a circle"), std::string::npos) << p.what_if_unmeasured;
}

// A GPU step of two ranks, DDP's shape: each launches its gemm at 10-20
// and NCCL's allreduce at 20-30 onto a stream of its own, which waits for
// the gemm (a stream wait: the allreduce starts when the gemm ends, long
// after its launch), and synchronises at 40 until 10 after the allreduce.
// Rank 1's gemm takes 800, rank 0's 200: rank 1's kernels at the median
// are x0.25. Its gemm then ends at 230, both allreduces start there and
// end 50 later (as recorded after the last arrival, 830), at 280; the
// syncs end at 290 and rank 0's tail of 110 ends the step at 400. Without
// transfers the allreduce ends at 830: rank 0's sync at 840, its end at 950.
TEST_F(CriticalPathTest, AGpuStepIsReplayedKernelByKernelAcrossNcclsAllreduce) {
  for (const int32_t rank : {0, 1}) {
    const int64_t gemm = rank == 0 ? 200 : 800;
    write_rank(rank, 2, {range(kStep, 0, rank == 0 ? 1000 : 990), cuda_call(kLaunch, 10, 20, 1), kernel(30, 30 + gemm, 1),
                         cuda_call(kLaunch, 20, 30, 2), nccl_allreduce(30 + gemm, 880, kNcclStream, 2),
                         cuda_call(kSync, 40, 890, 3), range(kTail, 890, rank == 0 ? 1000 : 990)});
  }
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_EQ(p.what_if.size(), 2u);
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 1);
  EXPECT_DOUBLE_EQ(median.factor, 0.25);
  EXPECT_NE(median.change.find("kernels"), std::string::npos) << median.change;
  EXPECT_EQ(median.recorded_ns, 1000);
  EXPECT_EQ(median.replayed_ns, 1000);
  EXPECT_EQ(median.predicted_ns, 400);
  const PathWhatIf& free = p.what_if[1];
  EXPECT_FALSE(free.transfers);
  EXPECT_EQ(free.predicted_ns, 950);
}

// A kernel the host launched late stays after its launch: rank 1's
// second gemm (310) waited for its launch at 500-510, not for its first
// gemm (300, ending at 330). At rank 0's compute (x200/610) the first gemm
// ends at 128, the second still starts at 520 (10 after its launch, as
// recorded) and ends at 622 (101.6); the sync ends 10 later and the tail
// of 160 ends the step at 792.
TEST_F(CriticalPathTest, AKernelLaunchedLateStartsAfterItsLaunchInTheReplay) {
  write_rank(0, 2, {range(kStep, 0, 600), cuda_call(kLaunch, 10, 20, 1), kernel(30, 230, 1),
                    cuda_call(kSync, 40, 240, 2), range(kTail, 240, 600)});
  write_rank(1, 2, {range(kStep, 0, 1000), cuda_call(kLaunch, 10, 20, 1), kernel(30, 330, 1), range(kSlow, 30, 500),
                    cuda_call(kLaunch, 500, 510, 2), kernel(520, 830, 2), cuda_call(kSync, 520, 840, 3),
                    range(kTail, 840, 1000)});
  const CriticalPath p = path();
  ASSERT_EQ(p.what_if_unmeasured, "");
  ASSERT_FALSE(p.what_if.empty());
  const PathWhatIf& median = p.what_if[0];
  EXPECT_EQ(median.rank, 1);
  EXPECT_NEAR(median.factor, 200.0 / 610.0, 1e-12);
  EXPECT_EQ(median.replayed_ns, 1000);
  EXPECT_EQ(median.predicted_ns, 792);
}

}  // namespace
}  // namespace rankscope::analysis
