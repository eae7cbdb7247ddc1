// What is slow in a step, on a GPU job small enough to work out by hand: one
// rank, one stream, two steps of 1 ms with a data loader, a sync, a tiny
// kernel, a pageable copy and an allocation (times in µs below).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "rankscope/analysis/bottlenecks.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/analysis/report.h"
#include "rankscope/model/shard.h"
#include "../support/shard_job_test.h"

namespace rankscope::analysis {
namespace {

constexpr uint16_t kThread = 0, kStream = 1, kMemoryTrack = 2;
enum Name : uint32_t {
  kStep0, kStep1, kLaunch, kStreamSync, kGemm, kPageableCopy, kCopyCall, kLoader, kMalloc, kDeviceMemory, kOptimizer,
  kNameCount
};

// ProfilerStep#2 and on, named kNameCount + N.
constexpr std::string_view kMoreSteps[] = {"", "", "ProfilerStep#2", "ProfilerStep#3",
                                          "ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"};

constexpr int64_t us(int64_t microseconds) { return microseconds * 1000; }

Event host(EventKind kind, uint32_t name, int64_t begin_us, int64_t end_us, uint64_t correlation = 0) {
  Event e = testing::host_event(kind, name, us(begin_us), us(end_us), kThread);
  e.correlation_id = correlation;
  return e;
}
Event launch(int64_t begin_us, int64_t end_us, uint64_t correlation) {
  return host(EventKind::kCudaApi, kLaunch, begin_us, end_us, correlation);
}
Event gpu(EventKind kind, uint32_t name, int64_t begin_us, int64_t end_us, uint64_t correlation, uint64_t bytes = 0) {
  Event e = testing::host_event(kind, name, us(begin_us), us(end_us), kStream);
  e.correlation_id = correlation;
  e.bytes = bytes;
  return e;
}
Event memory_sample(int64_t at_us, uint64_t bytes) {
  Event e = testing::host_event(EventKind::kCounter, kDeviceMemory, us(at_us), us(at_us), kMemoryTrack);
  e.bytes = bytes;
  return e;
}

class BottleneckTest : public testing::ShardJobTest {
 protected:
  void write_rank(std::vector<Event> events) {
    if (process_ != 0) return;
    RankMetadata metadata;
    metadata.rank = 0;
    metadata.world_size = 1;
    metadata.host = "node-0";
    ShardWriter writer;
    ASSERT_TRUE(writer.open((dir_ / "rank-0.shard").string(), metadata, 0));
    std::vector<std::pair<uint32_t, std::string_view>> names = {
        {kStep0, "ProfilerStep#0"},
        {kStep1, "ProfilerStep#1"},
        {kLaunch, "cudaLaunchKernel"},
        {kStreamSync, "cudaStreamSynchronize"},
        {kGemm, "gemm"},
        {kPageableCopy, "Memcpy HtoD (Pageable -> Device)"},
        {kCopyCall, "cudaMemcpyAsync"},
        {kLoader, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
        {kMalloc, "cudaMalloc"},
        {kDeviceMemory, "memory allocated (device 0)"},
        {kOptimizer, "optimizer"}};
    for (uint32_t s = 2; s < 8; ++s) names.emplace_back(kNameCount + s, kMoreSteps[s]);
    ASSERT_TRUE(writer.write_strings(names, 0));
    const Track tracks[] = {{7, kThread, 0, -1, TrackType::kThread, 0, 0},
                            {7, kStream, 0, 0, TrackType::kCudaStream, 0, 0},
                            {0, kMemoryTrack, kDeviceMemory, -1, TrackType::kCounter, 0, 0}};
    ASSERT_TRUE(writer.write_tracks(tracks, 0));
    std::sort(events.begin(), events.end(), event_time_order);
    ASSERT_TRUE(writer.write_events(events));
    ASSERT_TRUE(writer.close({}, 10'000));
  }

  // The job of the file's comment.
  std::vector<Event> two_steps() {
    return {
        host(EventKind::kNvtxRange, kStep0, 0, 1000),
        host(EventKind::kNvtxRange, kLoader, 0, 300),
        launch(300, 310, 1), gpu(EventKind::kGpuKernel, kGemm, 312, 500, 1),
        launch(320, 330, 2), gpu(EventKind::kGpuKernel, kGemm, 500, 505, 2),  // tiny: 5 µs for a 10 µs launch
        launch(340, 350, 3), gpu(EventKind::kGpuKernel, kGemm, 520, 600, 3),  // 15 µs after the last: kernel to kernel
        host(EventKind::kCudaApi, kStreamSync, 360, 602),
        launch(700, 710, 4), gpu(EventKind::kGpuKernel, kGemm, 712, 800, 4),  // after the sync: 112 µs stalled
        host(EventKind::kCudaApi, kCopyCall, 810, 820, 5),
        gpu(EventKind::kGpuMemcpy, kPageableCopy, 822, 900, 5, 1 << 20),       // 22 µs host-bound
        host(EventKind::kNvtxRange, kStep1, 1000, 2000),
        host(EventKind::kNvtxRange, kLoader, 1000, 1500),
        launch(1500, 1510, 6), gpu(EventKind::kGpuKernel, kGemm, 1512, 1600, 6),  // 612 µs: data loading
        launch(1610, 1620, 7), gpu(EventKind::kGpuKernel, kGemm, 1900, 1950, 7),  // 300 µs: host-bound
        host(EventKind::kCudaApi, kMalloc, 1960, 1990),
    };
  }

  Report report() {
    const std::string path = merged();
    return make_report(Timeline(path));
  }
};

TEST_F(BottleneckTest, BooksEachNanosecondOnceInTheTensorBoardOrder) {
  write_rank(two_steps());
  const Report r = report();
  const RankProfile& rank = r.profile.ranks.at(0);
  ASSERT_TRUE(rank.device.gpu);
  ASSERT_EQ(rank.steps.size(), 2u);
  const StepDeviceWork& step0 = rank.steps[0].device;
  const auto booked = [&](WorkCategory c) { return step0.work_ns[static_cast<size_t>(c)]; };
  EXPECT_EQ(booked(WorkCategory::kKernel), us(193 + 80 + 88));
  EXPECT_EQ(booked(WorkCategory::kMemcpy), us(78));
  EXPECT_EQ(booked(WorkCategory::kMemset), 0);
  EXPECT_EQ(booked(WorkCategory::kCommunication), 0);
  // Launches at 300 and 700, the copy's call at 810, the sync's 15 + 2 µs no kernel hid.
  EXPECT_EQ(booked(WorkCategory::kRuntime), us(10 + 10 + 10 + 17));
  EXPECT_EQ(booked(WorkCategory::kDataLoading), us(300));
  EXPECT_EQ(booked(WorkCategory::kCpuExec), 0);  // the step's own range is not the host's work
  int64_t sum = 0;
  for (const int64_t ns : step0.work_ns) sum += ns;
  EXPECT_EQ(sum, us(1000));
}

TEST_F(BottleneckTest, NamesTheCauseOfEveryIdleGap) {
  write_rank(two_steps());
  const Report r = report();
  const RankProfile& rank = r.profile.ranks.at(0);
  const auto idle = [](const StepDeviceWork& w, IdleCause c) { return w.idle_ns[static_cast<size_t>(c)]; };
  const StepDeviceWork& step0 = rank.steps[0].device;
  const StepDeviceWork& step1 = rank.steps[1].device;
  EXPECT_EQ(idle(step0, IdleCause::kKernelToKernel), us(15));
  EXPECT_EQ(idle(step0, IdleCause::kSyncStall), us(112));
  EXPECT_EQ(idle(step0, IdleCause::kHostBound), us(22));
  // The gap from 900 to 1512 is data loading's, each step its part.
  EXPECT_EQ(idle(step0, IdleCause::kDataLoading), us(100));
  EXPECT_EQ(idle(step1, IdleCause::kDataLoading), us(512));
  EXPECT_EQ(idle(step1, IdleCause::kHostBound), us(300));
  EXPECT_EQ(idle(step0, IdleCause::kOther) + idle(step1, IdleCause::kOther), 0);
  ASSERT_FALSE(rank.device.largest_gaps.empty());
  EXPECT_EQ(rank.device.largest_gaps[0].end_ns - rank.device.largest_gaps[0].begin_ns, us(612));
  EXPECT_EQ(rank.device.largest_gaps[0].cause, IdleCause::kDataLoading);
  EXPECT_EQ(rank.device.largest_gaps[0].step, 0);
  EXPECT_EQ(rank.device.idle_gaps[static_cast<size_t>(IdleCause::kHostBound)], 2u);
}

TEST_F(BottleneckTest, ASyncThatReturnedJustBeforeTheGpuRanDryStillStalledIt) {
  std::vector<Event> events = two_steps();
  for (Event& e : events) {
    if (e.name_id == kStreamSync) e.end_ns = us(595);  // the host's clock 5 µs behind the GPU's
  }
  write_rank(events);
  const Report r = report();
  const StepDeviceWork& step0 = r.profile.ranks.at(0).steps[0].device;
  EXPECT_EQ(step0.idle_ns[static_cast<size_t>(IdleCause::kSyncStall)], us(112));
  EXPECT_EQ(step0.idle_ns[static_cast<size_t>(IdleCause::kHostBound)], us(22));
}

TEST_F(BottleneckTest, ASyncIsToldByTheRangeItWasMadeIn) {
  std::vector<Event> events = two_steps();
  events.push_back(host(EventKind::kNvtxRange, kOptimizer, 1600, 1700));
  events.push_back(host(EventKind::kCudaApi, kStreamSync, 1620, 1650));
  write_rank(events);
  const Report r = report();
  const auto& syncs = r.profile.ranks.at(0).device.syncs;
  ASSERT_EQ(syncs.size(), 2u);
  EXPECT_EQ(syncs[0].range_id, -1);
  ASSERT_GE(syncs[1].range_id, 0);
  EXPECT_EQ(r.profile.name(static_cast<uint32_t>(syncs[1].range_id)), "optimizer");
  EXPECT_EQ(syncs[1].blocked_ns, us(30));
  EXPECT_NE(report_json(r).find("{\"call\":\"cudaStreamSynchronize\",\"range\":\"optimizer\",\"count\":1"),
            std::string::npos);
}

TEST_F(BottleneckTest, LinksLaunchesSyncsCopiesAndAllocations) {
  write_rank(two_steps());
  const Report r = report();
  const RankProfile& rank = r.profile.ranks.at(0);
  EXPECT_EQ(rank.device.launches.linked, 7u);
  EXPECT_EQ(rank.device.launches.unlinked, 0u);
  EXPECT_EQ(rank.device.launches.tiny_kernels, 1u);
  EXPECT_EQ(rank.device.launches.delay_ns, us(2 + 170 + 170 + 2 + 2 + 2 + 280));
  ASSERT_EQ(rank.device.syncs.size(), 1u);
  EXPECT_EQ(r.profile.name(rank.device.syncs[0].name_id), "cudaStreamSynchronize");
  EXPECT_EQ(rank.device.syncs[0].blocked_ns, us(242));
  const StepDeviceWork& step0 = rank.steps[0].device;
  EXPECT_EQ(step0.syncs, 1u);
  EXPECT_EQ(step0.copy_bytes[static_cast<size_t>(CopyDirection::kHostToDevice)], 1u << 20);
  EXPECT_EQ(step0.pageable_copies, 1u);
  EXPECT_EQ(rank.steps[1].device.allocations, 1u);
  EXPECT_EQ(rank.steps[1].device.allocation_ns, us(30));
  ASSERT_EQ(rank.device.kernels.size(), 1u);
  EXPECT_EQ(rank.device.kernels[0].count, 6u);
  EXPECT_EQ(rank.device.kernels[0].min_ns, us(5));
  EXPECT_EQ(rank.device.kernels[0].max_ns, us(188));
}

// A host that launches a step's 150,000 kernels before the GPU runs the
// first: every launch is held until its kernel comes, and linked to it.
TEST_F(BottleneckTest, LaunchesFarAheadOfTheirKernelsAreAllLinked) {
  constexpr int64_t kKernels = 150'000;
  std::vector<Event> events = {host(EventKind::kNvtxRange, kStep0, 0, 3 * kKernels)};
  for (int64_t i = 0; i < kKernels; ++i) {
    const uint64_t correlation = static_cast<uint64_t>(i) + 1;
    events.push_back(launch(i, i + 1, correlation));
    events.push_back(gpu(EventKind::kGpuKernel, kGemm, kKernels + 2 * i, kKernels + 2 * i + 1, correlation));
  }
  write_rank(events);
  const Report r = report();
  const RankProfile& rank = r.profile.ranks.at(0);
  EXPECT_EQ(rank.device.launches.linked, static_cast<uint64_t>(kKernels));
  EXPECT_EQ(rank.device.launches.unlinked, 0u);
}

TEST_F(BottleneckTest, RanksTheClassesByWhatTheyCostAStep) {
  write_rank(two_steps());
  const Report r = report();
  const auto& found = r.bottlenecks.found;
  ASSERT_EQ(found.size(), 3u) << (found.empty() ? "" : found.back().klass);
  EXPECT_EQ(found[0].klass, "data_loading");
  EXPECT_EQ(found[0].cost_ns_per_step, us(400));
  EXPECT_EQ(found[1].klass, "launch_overhead");
  EXPECT_EQ(found[1].cost_ns_per_step, us(22 + 300 + 15) / 2);
  EXPECT_EQ(found[2].klass, "sync_stall");
  EXPECT_EQ(found[2].cost_ns_per_step, us(112) / 2);
  EXPECT_NE(found[2].evidence.find("cudaStreamSynchronize 1 times"), std::string::npos) << found[2].evidence;
  for (const Bottleneck& b : found) {
    EXPECT_EQ(b.ranks, std::vector<int32_t>{0});
    EXPECT_FALSE(b.fix.empty());
  }
  // Not measurable on one rank without collectives: said, with why.
  const auto unmeasured = [&](const std::string& klass) {
    return std::any_of(r.bottlenecks.unmeasured.begin(), r.bottlenecks.unmeasured.end(),
                       [&](const auto& u) { return u.first == klass && !u.second.empty(); });
  };
  EXPECT_TRUE(unmeasured("communication"));
  EXPECT_TRUE(unmeasured("straggler"));
  EXPECT_FALSE(unmeasured("transfer"));  // measured, and under its threshold
  ASSERT_EQ(r.bottlenecks.top_by_time.size(), 1u);
  EXPECT_EQ(r.bottlenecks.top_by_time[0].total_ns, us(188 + 5 + 80 + 88 + 88 + 50));
  const std::string json = report_json(r);
  EXPECT_NE(json.find("\"bottlenecks\":[{\"class\":\"data_loading\",\"cost_ns_per_step\":400000"), std::string::npos);
}

TEST_F(BottleneckTest, AMemoryThatGrowsEveryStepIsALeak) {
  std::vector<Event> events;
  for (int s = 0; s < 8; ++s) {
    const int64_t begin = s * 1000;
    events.push_back(host(EventKind::kNvtxRange, s < 2 ? kStep0 + s : kNameCount + s, begin, begin + 1000));
    events.push_back(launch(begin + 10, begin + 20, 100 + s));
    events.push_back(gpu(EventKind::kGpuKernel, kGemm, begin + 20, begin + 990, 100 + s));
    events.push_back(memory_sample(begin + 995, (100 + 8 * s) << 20));
  }
  write_rank(events);
  const Report r = report();
  const RankProfile& rank = r.profile.ranks.at(0);
  ASSERT_TRUE(rank.device.device_memory_seen);
  EXPECT_EQ(rank.device.memory.peak_bytes, uint64_t{156} << 20);
  const auto memory = std::find_if(r.bottlenecks.found.begin(), r.bottlenecks.found.end(),
                                   [](const Bottleneck& b) { return b.klass == "memory"; });
  ASSERT_NE(memory, r.bottlenecks.found.end());
  EXPECT_NE(memory->evidence.find("grows 8 MiB a step"), std::string::npos) << memory->evidence;
}

TEST_F(BottleneckTest, ARankTheOomKillerEndedIsAMemoryBottleneckInItsStep) {
  write_rank(two_steps());
  const Report r = report();
  RankEnd end;
  end.rank = 0;
  end.status = RankStatus::kDead;
  end.oom_kills = 1;
  const BottleneckReport found = find_bottlenecks(r.profile, r.breakdown, r.stragglers, r.buckets, {end});
  const auto memory = std::find_if(found.found.begin(), found.found.end(),
                                   [](const Bottleneck& b) { return b.klass == "memory"; });
  ASSERT_NE(memory, found.found.end());
  EXPECT_NE(memory->evidence.find("rank 0 was killed by the OOM killer (1 kills in its memory cgroup) in step 1"),
            std::string::npos)
      << memory->evidence;
  // Without it, the allocation's 15 µs a step stays under the threshold.
  EXPECT_TRUE(std::none_of(r.bottlenecks.found.begin(), r.bottlenecks.found.end(),
                           [](const Bottleneck& b) { return b.klass == "memory"; }));
}

TEST_F(BottleneckTest, ACpuJobSaysWhyTheGpuClassesAreNotMeasured) {
  write_rank({host(EventKind::kNvtxRange, kStep0, 0, 1000), host(EventKind::kNvtxRange, kLoader, 0, 600),
              host(EventKind::kNvtxRange, kStep1, 1000, 2000), host(EventKind::kNvtxRange, kLoader, 1000, 1600)});
  const Report r = report();
  ASSERT_EQ(r.bottlenecks.found.size(), 1u);
  EXPECT_EQ(r.bottlenecks.found[0].klass, "data_loading");
  EXPECT_EQ(r.bottlenecks.found[0].cost_ns_per_step, us(600));
  for (const char* klass : {"launch_overhead", "sync_stall", "transfer", "memory", "gpu_idle"}) {
    const auto it = std::find_if(r.bottlenecks.unmeasured.begin(), r.bottlenecks.unmeasured.end(),
                                 [&](const auto& u) { return u.first == klass; });
    ASSERT_NE(it, r.bottlenecks.unmeasured.end()) << klass;
    EXPECT_NE(it->second.find("no GPU work"), std::string::npos) << it->second;
  }
  EXPECT_NE(report_json(r).find("\"top_kernels\":null,\"top_kernels_reason\":\"no GPU work"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::analysis
