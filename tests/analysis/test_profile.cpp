// The profile's bookkeeping on a job small enough to work out by hand: two
// ranks, two steps, a blocking allreduce, a nonblocking one with its Wait.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rankscope/analysis/breakdown.h"
#include "rankscope/analysis/buckets.h"
#include "rankscope/analysis/hta.h"
#include "rankscope/analysis/overlap.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/report.h"
#include "rankscope/analysis/stragglers.h"
#include "rankscope/merge/merge.h"
#include "rankscope/model/capture_windows.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/parallel.h"
#include "rankscope/model/shard.h"
#include "rankscope/mpi_exchange/gather.h"
#include "../support/shard_job_test.h"
#include "../support/synthetic_job.h"
#include "timeline_damage.h"

namespace rankscope::analysis {
namespace {

namespace fs = std::filesystem;

constexpr uint16_t kThreadTrack = 0, kCommTrack = 1;
// String ids of every shard below.
constexpr uint32_t kStep0 = 0, kStep1 = 1, kAllreduce = 2, kIallreduce = 3, kWait = 4;

Event range(uint32_t name, int64_t begin, int64_t end) {
  return testing::host_event(EventKind::kNvtxRange, name, begin, end, kThreadTrack);
}

Event collective(uint32_t name, uint64_t seq, int64_t begin, int64_t end, uint16_t track) {
  Event e = range(name, begin, end);
  e.kind = EventKind::kMpiCollective;
  e.op = CommOp::kAllReduce;
  e.comm_hash = 99;
  e.seq = seq;
  e.bytes = 4096;
  e.track = track;
  return e;
}

Event call(uint32_t name, int64_t begin, int64_t end) {
  Event e = range(name, begin, end);
  e.kind = EventKind::kMpiCall;
  return e;
}

class ProfileTest : public testing::ShardJobTest {
 protected:

  // Windows of a rank whose capture was windowed: steered ones, a ring's dumps.
  struct Windows {
    std::optional<std::vector<CaptureWindow>> steered, dumped;
  };

  void write_rank(int32_t rank, std::vector<Event> events, const Counters& counters = {},
                  const std::string& capture = "", const Windows& windows = {}) {
    RankMetadata metadata;
    metadata.rank = rank;
    metadata.world_size = 2;
    metadata.host = "node-0";
    metadata.capture = capture;
    ShardWriter writer;
    ASSERT_TRUE(writer.open((dir_ / ("rank-" + std::to_string(rank) + ".shard")).string(), metadata, 0));
    const std::pair<uint32_t, std::string_view> names[] = {
        {kStep0, "ProfilerStep#0"}, {kStep1, "ProfilerStep#1"}, {kAllreduce, "MPI_Allreduce"},
        {kIallreduce, "MPI_Iallreduce"}, {kWait, "MPI_Wait"}};
    ASSERT_TRUE(writer.write_strings(names, 0));
    const Track tracks[] = {{7, kThreadTrack, 0, -1, TrackType::kThread, 0, 0},
                            {99, kCommTrack, 0, -1, TrackType::kMpiComm, 0, 0}};
    ASSERT_TRUE(writer.write_tracks(tracks, 0));
    ASSERT_TRUE(writer.write_events(events));
    if (windows.steered) {
      ASSERT_TRUE(writer.write_capture_windows(*windows.steered, WindowHolds::kEventsBegun, 0));
    }
    if (windows.dumped) {
      ASSERT_TRUE(writer.write_capture_windows(*windows.dumped, WindowHolds::kEventsEnded, 0));
    }
    ASSERT_TRUE(writer.close(counters, 10'000));
  }

  JobProfile profile() { return build_profile(Timeline(merged())); }

  // Ranks 0 and 1 of a job of two, with these names and tracks, and each
  // rank's events; written by process 0, every process waiting for them.
  void write_two_ranks(std::span<const std::pair<uint32_t, std::string_view>> names, std::span<const Track> tracks,
                       const std::function<std::vector<Event>(int32_t rank)>& events_of) {
    if (process_ == 0) {
      for (const int32_t rank : {0, 1}) {
        RankMetadata metadata;
        metadata.rank = rank;
        metadata.world_size = 2;
        ShardWriter writer;
        ASSERT_TRUE(writer.open((dir_ / ("rank-" + std::to_string(rank) + ".shard")).string(), metadata, 0));
        ASSERT_TRUE(writer.write_strings(names, 0));
        ASSERT_TRUE(writer.write_tracks(tracks, 0));
        std::vector<Event> events = events_of(rank);
        std::sort(events.begin(), events.end(), event_time_order);
        ASSERT_TRUE(writer.write_events(events));
        ASSERT_TRUE(writer.close(Counters{}, 1000));
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  // No steps: rank 0 enters allreduce 0 at 100, rank 1 allreduce `rank_1_seq` at 150; both leave at 300.
  JobProfile one_allreduce_each(uint64_t rank_1_seq) {
    if (process_ == 0) {
      write_rank(0, {collective(kAllreduce, 0, 100, 300, kThreadTrack)});
      write_rank(1, {collective(kAllreduce, rank_1_seq, 150, 300, kThreadTrack)});
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return profile();
  }

  // One rank's GPU events, for the --hta-compat tests.
  void write_gpu_rank(std::span<const std::pair<uint32_t, std::string_view>> names, std::span<const Track> tracks,
                      std::vector<Event> events, int64_t end_ns) {
    RankMetadata metadata;
    metadata.rank = 0;
    metadata.world_size = 1;
    ShardWriter writer;
    ASSERT_TRUE(writer.open((dir_ / "rank-0.shard").string(), metadata, 0));
    ASSERT_TRUE(writer.write_strings(names, 0));
    ASSERT_TRUE(writer.write_tracks(tracks, 0));
    ASSERT_TRUE(writer.write_events(events));
    ASSERT_TRUE(writer.close(Counters{}, end_ns));
  }
};

// Step 0 (0..1000): rank 0 enters a blocking allreduce at 100, rank 1 at 200;
// both leave at 300. Step 1 (1000..2000): both post an allreduce at 1200 and
// wait for it from 1600 to 1700 (rank 1: from 1650).
TEST_F(ProfileTest, SplitsEachStepIntoComputeCommunicationWaitTransferAndIdle) {
  if (process_ == 0) {
    write_rank(0, {range(kStep0, 0, 1000), collective(kAllreduce, 0, 100, 300, kThreadTrack),
                   range(kStep1, 1000, 2000), call(kIallreduce, 1200, 1210),
                   collective(kIallreduce, 1, 1200, 1700, kCommTrack), call(kWait, 1600, 1700)});
    write_rank(1, {range(kStep0, 0, 1000), collective(kAllreduce, 0, 200, 300, kThreadTrack),
                   range(kStep1, 1000, 1900), call(kIallreduce, 1250, 1260),
                   collective(kIallreduce, 1, 1250, 1700, kCommTrack), call(kWait, 1650, 1700)});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const JobProfile job = profile();

  EXPECT_FALSE(job.gpu);
  ASSERT_EQ(job.step_numbers, (std::vector<uint64_t>{0, 1}));
  ASSERT_EQ(job.collectives.size(), 2u);

  const CollectiveInstance& blocking = job.collectives[0];
  EXPECT_FALSE(blocking.nonblocking);
  EXPECT_EQ(blocking.step, 0);
  EXPECT_EQ(blocking.last_arriver(), 1);
  EXPECT_EQ(blocking.ranks[1].arrival_ns - blocking.ranks[0].arrival_ns, 100);
  EXPECT_EQ(blocking.transfer_ns(), 100);
  EXPECT_EQ(blocking.ranks[0].wait_ns, 100);
  EXPECT_EQ(blocking.ranks[0].exposed_wait_ns, 100) << "blocked from its arrival to rank 1's";
  EXPECT_EQ(blocking.ranks[0].exposed_transfer_ns, 100);
  EXPECT_EQ(blocking.ranks[1].exposed_wait_ns, 0);

  const CollectiveInstance& nonblocking = job.collectives[1];
  EXPECT_TRUE(nonblocking.nonblocking);
  EXPECT_EQ(nonblocking.step, 1);
  EXPECT_EQ(nonblocking.ranks[0].wait_ns, 50);
  EXPECT_EQ(nonblocking.ranks[0].exposed_wait_ns, 10) << "its post; it computed for the rest of rank 1's delay";
  EXPECT_EQ(nonblocking.ranks[0].exposed_transfer_ns, 100) << "its Wait, 1600..1700";

  // Rank 0, step 0: blocked 100..300 in the allreduce.
  const RankStep& r0s0 = job.ranks[0].steps[0];
  EXPECT_EQ(r0s0.compute_ns, 800);
  EXPECT_EQ(r0s0.comm_ns, 200);
  EXPECT_EQ(r0s0.overlap_ns, 0);
  EXPECT_EQ(r0s0.exposed_wait_ns, 100);
  EXPECT_EQ(r0s0.exposed_transfer_ns, 100);
  EXPECT_EQ(r0s0.idle_ns, 0);
  // Rank 0, step 1: the allreduce in flight 1200..1700, blocked 1200..1210 and 1600..1700.
  const RankStep& r0s1 = job.ranks[0].steps[1];
  EXPECT_EQ(r0s1.compute_ns, 1000 - 10 - 100);
  EXPECT_EQ(r0s1.comm_ns, 500);
  EXPECT_EQ(r0s1.overlap_ns, 500 - 10 - 100);
  EXPECT_EQ(r0s1.exposed_comm_ns(), 110);
  EXPECT_EQ(r0s1.exposed_wait_ns, 10) << "its post, before rank 1 arrived";
  EXPECT_EQ(r0s1.exposed_transfer_ns, 100);
  // Rank 1, step 1 ends at 1900.
  const RankStep& r1s1 = job.ranks[1].steps[1];
  EXPECT_EQ(r1s1.times.duration(), 900);
  EXPECT_EQ(r1s1.comm_ns, 450);
  EXPECT_EQ(r1s1.compute_ns, 900 - 10 - 50);

  const std::vector<RankOverlap> overlap = overlap_by_rank(job);
  ASSERT_EQ(overlap.size(), 2u);
  EXPECT_NEAR(overlap[0].comm_comp_overlap_pct, 100.0 * 390 / 700, 1e-9);
  EXPECT_EQ(overlap[0].exposed_wait_ns, 110);
  // The shards carry no clock measurements: the split is booked, but the
  // arrivals it rests on are on clocks nobody aligned.
  EXPECT_FALSE(job.clock_corrected);
  EXPECT_EQ(overlap[0].wait_unmeasured, "the ranks' clocks were not aligned, so their arrival times cannot be compared");
}

// A gloo DDP step worked by hand, as the Python hook records it (times in ns):
// data loading 0..30, forward 30..50, backward 50..90, optimizer 95..100;
// a gradient allreduce in flight on the process group's track from the call
// (rank 0 at 60, rank 1 at 70) to its completion at 92, and the thread blocked
// in DDP's wait from 85 (rank 1: 88) to 92.
TEST_F(ProfileTest, AC10dStepIsBrokenDownByPhaseAndExposedCommunication) {
  enum Name : uint32_t { kStep, kData, kForward, kBackward, kOptimizer, kGloo, kDdpWait };
  const std::pair<uint32_t, std::string_view> names[] = {
      {kStep, "ProfilerStep#0"}, {kData, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
      {kForward, "forward"}, {kBackward, "backward"}, {kOptimizer, "Optimizer.step#SGD.step"},
      {kGloo, "gloo:allreduce"}, {kDdpWait, "DistributedDataParallel: wait for gradient buckets"}};
  constexpr uint16_t kGroupTrack = 1;
  const Track tracks[] = {{7, kThreadTrack, 0, -1, TrackType::kThread, 0, 0},
                          {42, kGroupTrack, 0, -1, TrackType::kProcessGroup, 0, 0}};
  const auto rank_events = [&](int64_t arrival, int64_t wait_from) {
    Event allreduce = testing::host_event(EventKind::kTorchCollective, kGloo, arrival, 92, kGroupTrack);
    allreduce.op = CommOp::kAllReduce;
    allreduce.comm_hash = 42;
    allreduce.bytes = 1 << 20;
    Event wait = testing::host_event(EventKind::kTorchWait, kDdpWait, wait_from, 92, kThreadTrack);
    wait.comm_hash = 42;
    return std::vector<Event>{range(kStep, 0, 100),      range(kData, 0, 30),          range(kForward, 30, 50),
                              range(kBackward, 50, 90),  allreduce,                    wait,
                              range(kOptimizer, 95, 100)};
  };
  write_two_ranks(names, tracks, [&](int32_t rank) { return rank_events(rank == 0 ? 60 : 70, rank == 0 ? 85 : 88); });
  const JobProfile job = profile();

  ASSERT_EQ(job.collectives.size(), 1u);
  const CollectiveInstance& allreduce = job.collectives[0];
  EXPECT_EQ(allreduce.source, CollectiveSource::kTorch);
  EXPECT_TRUE(allreduce.nonblocking) << "in flight on the group's track";
  EXPECT_EQ(allreduce.bytes, uint64_t{1} << 20) << "the hook counts the whole; nothing is multiplied";
  EXPECT_EQ(allreduce.last_arriver(), 1);
  EXPECT_EQ(allreduce.ranks[0].wait_ns, 10);

  const std::vector<RankBreakdown> breakdown = step_breakdown(job);
  ASSERT_EQ(breakdown.size(), 2u);
  const auto ns = [](const RankBreakdown& b, StepCategory c) { return b.total.ns[static_cast<size_t>(c)]; };
  // Rank 0: blocked 85..92, all of it after the last arrival (70): transfer.
  const RankBreakdown& r0 = breakdown[0];
  EXPECT_EQ(r0.total.total_ns, 100);
  EXPECT_EQ(r0.total.comm_wait_ns, 0) << "it computed while it waited for rank 1";
  EXPECT_EQ(r0.total.comm_transfer_ns, 7);
  EXPECT_EQ(ns(r0, StepCategory::kCommunication), 7);
  EXPECT_EQ(ns(r0, StepCategory::kDataLoading), 30);
  EXPECT_EQ(ns(r0, StepCategory::kForward), 20);
  EXPECT_EQ(ns(r0, StepCategory::kBackward), 35) << "50..85, before DDP's wait";
  EXPECT_EQ(ns(r0, StepCategory::kOptimizer), 5);
  EXPECT_EQ(ns(r0, StepCategory::kOther), 3) << "92..95";
  // Rank 1: blocked 88..92.
  const RankBreakdown& r1 = breakdown[1];
  EXPECT_EQ(r1.total.comm_transfer_ns, 4);
  EXPECT_EQ(ns(r1, StepCategory::kBackward), 38);
  for (const RankBreakdown& b : breakdown) {
    for (const std::string& unmeasured : b.category_unmeasured) EXPECT_TRUE(unmeasured.empty()) << unmeasured;
    EXPECT_EQ(b.split_unmeasured, kClocksNotAlignedReason) << "the shards carry no clock measurements";
  }
}

// Phases are the training thread's (the one its steps are on): a thread
// that fetches batches ahead of the loop loads data while the step computes,
// which is no time the step spent loading.
TEST_F(ProfileTest, PhasesOfAnotherThreadAreNotTheSteps) {
  enum Name : uint32_t { kStep, kData, kForward };
  const std::pair<uint32_t, std::string_view> names[] = {
      {kStep, "ProfilerStep#0"}, {kData, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"},
      {kForward, "forward"}};
  constexpr uint16_t kFetchTrack = 1;
  const Track tracks[] = {{7, kThreadTrack, 0, -1, TrackType::kThread, 0, 0},
                          {8, kFetchTrack, 0, -1, TrackType::kThread, 0, 0}};
  write_two_ranks(names, tracks, [&](int32_t) {
    return std::vector<Event>{range(kStep, 0, 100), range(kData, 0, 10), range(kForward, 10, 90),
                              testing::host_event(EventKind::kNvtxRange, kData, 20, 60, kFetchTrack)};
  });
  const std::vector<RankBreakdown> breakdown = step_breakdown(profile());
  ASSERT_EQ(breakdown.size(), 2u);
  for (const RankBreakdown& b : breakdown) {
    EXPECT_EQ(b.total.ns[static_cast<size_t>(StepCategory::kDataLoading)], 10) << "the fetch thread's 40 ns are not";
    EXPECT_EQ(b.total.ns[static_cast<size_t>(StepCategory::kForward)], 80);
    EXPECT_EQ(b.total.ns[static_cast<size_t>(StepCategory::kOther)], 10);
  }
}

// Ranges of no phase and no collective: those categories are n/a, with why, and their time is other.
TEST_F(ProfileTest, WhatWasNotSeenIsNotMeasured) {
  if (process_ == 0) {
    write_rank(0, {range(kStep0, 0, 1000)});
    write_rank(1, {range(kStep0, 0, 1000)});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const JobProfile job = profile();
  const std::vector<RankBreakdown> breakdown = step_breakdown(job);
  for (const RankBreakdown& b : breakdown) {
    for (int c = 0; c < kStepCategoryCount - 1; ++c) {
      EXPECT_FALSE(b.category_unmeasured[c].empty()) << step_category_key(static_cast<StepCategory>(c));
    }
    EXPECT_TRUE(b.category_unmeasured[kStepCategoryCount - 1].empty()) << "other is always measured";
    EXPECT_EQ(b.total.ns[static_cast<size_t>(StepCategory::kOther)], 1000);
  }
  EXPECT_EQ(breakdown[0].category_unmeasured[0], std::string(breakdown[0].split_unmeasured));
  EXPECT_EQ(find_stragglers(job).unmeasured, kNoCollectivesReason);
  EXPECT_EQ(analyze_buckets(job, overlap_by_rank(job)).unmeasured, kNoCollectivesReason);
}

// A run whose --capture left out every source of communication measured
// none: its communication, overlap, exposed time, stragglers and buckets are
// n/a with that reason, not zeros. An MPI call the shim records anyway
// (MPI_Init, MPI_Finalize) does not make it measured.
TEST_F(ProfileTest, CommunicationThatWasNotCapturedIsNotMeasuredAsZero) {
  if (process_ == 0) {
    for (const int32_t rank : {0, 1}) {
      write_rank(rank, {range(kStep0, 0, 1000), call(kWait, 10, 20)}, {}, "nvtx mode=inprocess buffer_mb=64");
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const JobProfile job = profile();
  const std::string reason =
      "communication was not captured: --capture nvtx leaves out mpi, nccl, cuda and python, which record it";
  for (const RankBreakdown& b : step_breakdown(job)) {
    EXPECT_EQ(b.category_unmeasured[static_cast<size_t>(StepCategory::kCommunication)], reason);
    EXPECT_EQ(b.split_unmeasured, reason);
  }
  for (const RankOverlap& o : overlap_by_rank(job)) EXPECT_EQ(o.comm_unmeasured, reason);
  EXPECT_EQ(find_stragglers(job).unmeasured, reason);
  EXPECT_EQ(analyze_buckets(job, overlap_by_rank(job)).unmeasured, reason);
  const std::string text = report_text(make_report(Timeline(merged())));
  EXPECT_EQ(text.find("exposed       0 ns"), std::string::npos) << text;
  EXPECT_NE(text.find("overlap and exposed communication n/a: " + reason), std::string::npos) << text;

  // Where the capture is not a list of sources (an imported trace), nothing is presumed.
  EXPECT_EQ(communication_uncaptured("synthetic"), "");
  EXPECT_EQ(communication_uncaptured("nvtx,cuda mode=sidecar"), "");
  EXPECT_EQ(communication_uncaptured(""), "");
}

// Rank 1 enters a collective rank 0 never does: neither instance is shared.
TEST_F(ProfileTest, WaitsOfCollectivesMatchedWithNoOtherRankCannotBeMeasured) {
  const std::vector<RankOverlap> overlap = overlap_by_rank(one_allreduce_each(1));
  for (const RankOverlap& o : overlap) {
    EXPECT_GT(o.comm_ns, 0);
    EXPECT_EQ(o.wait_unmeasured, "none of its collectives was matched with another rank's") << o.rank;
  }
}

TEST_F(ProfileTest, AJobWithoutStepsIsOneStepPerRank) {
  const JobProfile job = one_allreduce_each(0);
  ASSERT_EQ(job.step_numbers.size(), 1u);
  EXPECT_EQ(job.ranks[0].steps[0].times.duration(), 200);
  EXPECT_EQ(job.ranks[0].steps[0].comm_ns, 200);
  EXPECT_EQ(job.ranks[0].steps[0].exposed_wait_ns, 50);
}

// Rank 0's flight recorder kept [500, 2000): its step 0 (0..1000) began
// before, and what it did then aged out, so its figures are n/a, not half a
// step of compute; its step 1 is whole. Rank 1 recorded throughout. A step
// cut on every rank is no step of the job.
TEST_F(ProfileTest, StepsACaptureWindowCutAreLeftOutAndSaid) {
  if (process_ == 0) {
    write_rank(0, {range(kStep0, 0, 1000), range(kStep1, 1000, 2000), collective(kAllreduce, 0, 100, 300, kThreadTrack),
                   collective(kAllreduce, 1, 1100, 1300, kThreadTrack)},
               {}, "", {std::nullopt, std::vector<CaptureWindow>{{500, 2000}}});
    write_rank(1, {range(kStep0, 0, 1000), range(kStep1, 1000, 2000), collective(kAllreduce, 0, 200, 300, kThreadTrack),
                   collective(kAllreduce, 1, 1200, 1300, kThreadTrack)});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(merged());
  ASSERT_TRUE(timeline.ranks()[0].capture_windowed);
  EXPECT_EQ(timeline.ranks()[0].capture_windows, (std::vector<std::pair<int64_t, int64_t>>{{500, 2000}}));
  EXPECT_FALSE(timeline.ranks()[1].capture_windowed);
  const JobProfile job = build_profile(timeline);
  EXPECT_EQ(job.step_numbers, (std::vector<uint64_t>{0, 1}));
  EXPECT_FALSE(job.steps_are_windows);
  ASSERT_EQ(job.steps_cut.size(), 1u);
  EXPECT_EQ(job.steps_cut[0].step, 0u);
  EXPECT_EQ(job.steps_cut[0].ranks, std::vector<int32_t>{0});
  EXPECT_EQ(job.ranks[0].steps[0].times.begin_ns, kUnknown);
  EXPECT_EQ(job.ranks[0].steps[0].compute_ns, 0);
  EXPECT_EQ(job.ranks[0].steps[1].times.duration(), 1000);
  EXPECT_EQ(job.ranks[1].steps[0].times.duration(), 1000);
  const Report report = make_report(timeline);
  const std::string text = report_text(report);
  EXPECT_NE(text.find("2 steps, mean step"), std::string::npos) << text;
  EXPECT_NE(text.find("CUT BY CAPTURE WINDOWS: step 0 on rank 0: it lay partly outside"), std::string::npos) << text;
  const std::string json = report_json(report);
  EXPECT_NE(json.find(R"("windowed_ranks":[0],"cut":[{"step":0,"ranks":[0],"reason":")"), std::string::npos) << json;
  const std::string html = report_html(report);
  EXPECT_NE(html.find(R"(id="steps-cut">Cut by capture windows: step 0 on rank 0: it lay partly outside)"),
            std::string::npos);

  // Cut on both ranks, step 0 is none of the job's.
  if (process_ == 0) {
    write_rank(1, {range(kStep0, 0, 1000), range(kStep1, 1000, 2000)}, {}, "",
               {std::vector<CaptureWindow>{{900, kWindowStillOpen}}, std::nullopt});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const JobProfile both = profile();
  EXPECT_EQ(both.step_numbers, std::vector<uint64_t>{1});
  ASSERT_EQ(both.steps_cut.size(), 1u);
  EXPECT_EQ(both.steps_cut[0].ranks, (std::vector<int32_t>{0, 1}));
}

// No ProfilerStep range inside the windows (--capture-range on a backward
// pass, triggers, ring dumps of an MPI program): each window is a step, and
// the time between them, never recorded, is in none.
TEST_F(ProfileTest, WindowsWithoutStepsAreEachAStep) {
  if (process_ == 0) {
    for (const int32_t rank : {0, 1}) {
      write_rank(rank,
                 {collective(kAllreduce, 0, 150 + rank * 10, 300, kThreadTrack),
                  collective(kAllreduce, 1, 1100 + rank * 10, 1250, kThreadTrack)},
                 {}, "", {std::vector<CaptureWindow>{{100, 400}, {1000, kWindowStillOpen}}, std::nullopt});
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(merged());
  EXPECT_EQ(timeline.ranks()[1].capture_windows, (std::vector<std::pair<int64_t, int64_t>>{{100, 400}, {1000, 10'000}}));
  const JobProfile job = build_profile(timeline);
  EXPECT_TRUE(job.steps_are_windows);
  EXPECT_EQ(job.step_numbers, (std::vector<uint64_t>{1, 2}));
  for (const RankProfile& rank : job.ranks) {
    // Each window, within the rank's first and last event: recorded, idle or not.
    EXPECT_EQ(rank.steps[0].times.begin_ns, 150 + rank.rank * 10) << rank.rank;
    EXPECT_EQ(rank.steps[0].times.end_ns, 400) << rank.rank;
    EXPECT_EQ(rank.steps[1].times.begin_ns, 1000) << rank.rank;
    EXPECT_EQ(rank.steps[1].times.end_ns, 1250) << rank.rank;
  }
  EXPECT_EQ(job.collectives.size(), 2u);
  EXPECT_EQ(job.collectives[1].step, 1);
  const Report report = make_report(timeline);
  const std::string text = report_text(report);
  EXPECT_NE(text.find("2 capture windows taken as steps (no ProfilerStep#N range was captured), mean step"),
            std::string::npos)
      << text;
  EXPECT_NE(report_html(report).find("<dd>2 (capture windows: no ProfilerStep#N range was captured)</dd>"),
            std::string::npos);
}

// A damaged window row is left out and named: the steps inside it read as
// cut, never as whole, and a rank whose windows lie past the table's end
// has every step cut.
TEST_F(ProfileTest, DamagedCaptureWindowsCutTheirStepsAndAreNamed) {
  if (process_ == 0) {
    for (const int32_t rank : {0, 1}) {
      write_rank(rank, {range(kStep0, 0, 900), range(kStep1, 1000, 2000)}, {}, "",
                 {std::vector<CaptureWindow>{{0, 950}, {990, 2500}}, std::nullopt});
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string path = merged();
  if (process_ == 0) {
    testing::set_timeline_value(path, "/capture_windows", 0, "rank", 1);  // rank 0's first window holds rank 1
    testing::set_timeline_value(path, "/ranks", 1, "window_offset", 99);   // rank 1's windows past the end
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(path);
  EXPECT_EQ(timeline.ranks()[0].capture_windows, (std::vector<std::pair<int64_t, int64_t>>{{990, 2500}}));
  EXPECT_TRUE(timeline.ranks()[1].capture_windowed);
  EXPECT_TRUE(timeline.ranks()[1].capture_windows.empty());
  const std::string damage = timeline.damage().summary();
  EXPECT_NE(damage.find("/capture_windows"), std::string::npos) << damage;
  std::string findings;
  for (const auto& finding : timeline.damage().findings) findings += TimelineDamage::describe(finding) + "\n";
  EXPECT_NE(findings.find("/capture_windows row 0: holds rank 1"), std::string::npos) << findings;
  EXPECT_NE(findings.find("/ranks row 1 window_offset: points past the end of /capture_windows"), std::string::npos)
      << findings;
  const JobProfile job = build_profile(timeline);
  EXPECT_EQ(job.step_numbers, std::vector<uint64_t>{1});  // step 0 whole on no rank
  ASSERT_EQ(job.steps_cut.size(), 2u);
  EXPECT_EQ(job.steps_cut[0].ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(job.steps_cut[1].ranks, std::vector<int32_t>{1});
}

// Rank 0's agent dropped 7 events and CUPTI 3 records; rank 1 lost nothing,
// and events left out by choice (a paused capture) are no loss.
TEST_F(ProfileTest, EventsTheCaptureLostAreSaidAboveTheFigures) {
  if (process_ == 0) {
    Counters lost;
    lost.set(counter::kEventsDropped, 7);
    lost.set(counter::kCuptiRecordsDropped, 3);
    lost.set(counter::kEventsOutsideWindow, 50);
    Counters paused;
    paused.set(counter::kEventsOutsideWindow, 40);
    write_rank(0, {collective(kAllreduce, 0, 100, 300, kThreadTrack)}, lost);
    write_rank(1, {collective(kAllreduce, 0, 150, 300, kThreadTrack)}, paused);
  }
  const Report report = make_report(Timeline(merged()));
  ASSERT_EQ(report.losses.size(), 1u);
  EXPECT_EQ(report.losses[0].rank, 0);
  EXPECT_EQ(report.losses[0].events(), 10u);
  const std::string text = report_text(report);
  EXPECT_NE(text.find("\nINCOMPLETE: 10 events captured are not in the timeline (rank 0: 7 events_dropped, 3 "
                      "cupti_records_dropped); those ranks' figures leave them out"),
            std::string::npos)
      << text;
  EXPECT_NE(report_json(report).find(R"("lost_events":[{"rank":0,"events":10,"counters":{"events_dropped":7,)"
                                     R"("cupti_records_dropped":3}}])"),
            std::string::npos)
      << report_json(report);
  EXPECT_NE(report_html(report).find("Incomplete capture: 10 events captured are not in the timeline"),
            std::string::npos);
}

// Capture cost of a poll-heavy rank each way: rank 0's calibration gave a
// poll's cost, rank 1's could not tell it from MPI's own call. Rank 1's
// polls are then n/a with why, never counted at nothing.
TEST_F(ProfileTest, PollsWhoseCostWasNotCalibratedAreNotMeasured) {
  if (process_ == 0) {
    for (int32_t rank : {0, 1}) {
      Counters cost;
      cost.set(counter::kCostCaptureNs, 1'000'000'000);
      cost.set(counter::kCostEventPs, 50'000);
      cost.set(counter::kMpiPollsUnrecorded, 2'000'000);
      // Rank 1's agent wrote no cost: the counter says so, or, from agents
      // before it, a cost of 0.
      if (rank == 0) cost.set(counter::kCostPollPs, 12'500);
      else cost.set(counter::kCostPollUnresolved, 1);
      write_rank(rank, {collective(kAllreduce, 0, 100, 300, kThreadTrack)}, cost);
    }
  }
  const Report report = make_report(Timeline(merged()));
  ASSERT_EQ(report.capture_cost.size(), 2u);
  const CaptureCost& calibrated = report.capture_cost[0];
  EXPECT_EQ(calibrated.events_ns, 50) << "one allreduce at 50 ns";
  EXPECT_EQ(calibrated.polls_ns, 25'000'000) << "2 M polls at 12.5 ns";
  EXPECT_TRUE(calibrated.polls_unmeasured.empty());
  EXPECT_EQ(calibrated.total_ns(), 25'000'050);
  const CaptureCost& unresolved = report.capture_cost[1];
  EXPECT_EQ(unresolved.polls_counted, 2'000'000u);
  EXPECT_NE(unresolved.polls_unmeasured.find("could not tell a poll's cost"), std::string::npos);
  EXPECT_EQ(unresolved.total_ns(), 50) << "the total leaves the unknown polls out";
  const std::string json = report_json(report);
  EXPECT_NE(json.find(R"("polls_counted":2000000,"polls_ns":25000000,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("polls_counted":2000000,"polls_ns":null,"polls_ns_reason":"the calibration)"),
            std::string::npos)
      << json;
  const std::string text = report_text(report);
  EXPECT_NE(text.find("1 calls ~50 ns, 2000000 polls counted ~25 ms;"), std::string::npos) << text;
  EXPECT_NE(text.find("1 calls ~50 ns, 2000000 polls counted n/a (the calibration"), std::string::npos) << text;
  EXPECT_NE(report_html(report).find("2000000 × n/a <span class=\"note\">(the calibration"), std::string::npos);
}

TEST_F(ProfileTest, AJobWithNoLossSaysNothingOfIt) {
  const JobProfile job = one_allreduce_each(0);
  const Report report = make_report(Timeline(job.path));
  EXPECT_TRUE(report.losses.empty());
  EXPECT_EQ(report_text(report).find("INCOMPLETE"), std::string::npos);
  EXPECT_NE(report_json(report).find(R"("lost_events":[])"), std::string::npos);
}

// A hang's state: both ranks in allreduce 0, then rank 0 inside allreduce 1
// from 400 until its state was written at 900, which rank 1 never entered.
TEST_F(ProfileTest, TimeInsideAnUnfinishedCollectiveIsAWaitNotATransfer) {
  if (process_ == 0) {
    Event unfinished = collective(kAllreduce, 1, 400, 900, kThreadTrack);
    unfinished.flags |= kFlagIncomplete;
    write_rank(0, {range(kStep0, 0, 1000), collective(kAllreduce, 0, 100, 300, kThreadTrack), unfinished});
    write_rank(1, {range(kStep0, 0, 1000), collective(kAllreduce, 0, 200, 300, kThreadTrack)});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const JobProfile job = profile();
  ASSERT_EQ(job.collectives.size(), 1u) << "the unfinished allreduce is no instance";
  const RankStep& r0 = job.ranks[0].steps[0];
  EXPECT_EQ(r0.comm_ns, 200 + 500);
  EXPECT_EQ(r0.exposed_wait_ns, 100 + 500) << "its wait for rank 1 in allreduce 0, and all of allreduce 1";
  EXPECT_EQ(r0.exposed_transfer_ns, 100);
}

// HTA's figures on GPU events: two steps, so its window keeps the work
// launched before the second starts (at 10 µs); names decide the classes.
TEST_F(ProfileTest, HtaCompatFollowsHtasDefinitions) {
  if (process_ == 0) {
    const std::pair<uint32_t, std::string_view> names[] = {
        {0, "ProfilerStep#0"}, {1, "ProfilerStep#1"}, {2, "cudaLaunchKernel"}, {3, "ampere_sgemm_128x64"},
        {4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"}, {5, "Memcpy HtoD (Pageable -> Device)"},
        {6, "cudaStreamSynchronize"}};
    // HTA looks at what runs on CUDA streams.
    const Track tracks[] = {{1, 0, 0, -1, TrackType::kThread, 0, 0}, {7, 1, 0, 0, TrackType::kCudaStream, 0, 0}};
    auto gpu = [](EventKind kind, uint32_t name, uint64_t correlation, int64_t begin_ns, int64_t end_ns) {
      Event e = range(name, begin_ns, end_ns);
      e.kind = kind;
      e.correlation_id = correlation;
      e.track = kind == EventKind::kCudaApi ? 0 : 1;
      return e;
    };
    std::vector<Event> events = {
        range(0, 0, 10'000), range(1, 10'000, 20'000),
        gpu(EventKind::kCudaApi, 2, 1, 100, 200), gpu(EventKind::kCudaApi, 2, 2, 300, 400),
        gpu(EventKind::kCudaApi, 2, 3, 500, 600), gpu(EventKind::kCudaApi, 2, 4, 11'000, 11'100),
        // compute 1.0–5.0 µs, communication 3.2–8.7 µs (rounds to 4–8), a copy 9–9.5 µs (rounds to nothing)
        gpu(EventKind::kGpuKernel, 3, 1, 1'000, 5'000), gpu(EventKind::kGpuKernel, 4, 2, 3'200, 8'700),
        gpu(EventKind::kGpuMemcpy, 5, 3, 9'000, 9'900),
        // launched in the last step: outside HTA's window
        gpu(EventKind::kGpuKernel, 3, 4, 12'000, 15'000)};
    write_gpu_rank(names, tracks, events, 30'000);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(merged());
  const std::vector<std::optional<HtaFigures>> hta = hta_figures(timeline, build_profile(timeline));
  ASSERT_EQ(hta.size(), 1u);
  ASSERT_TRUE(hta[0].has_value());
  // Compute [1, 5) µs, communication [4, 8) µs: 1 µs of 4 overlapped.
  EXPECT_DOUBLE_EQ(hta[0]->comm_comp_overlap_pct, 25.0);
  // GPU time from 1 µs to 9 µs (the copy's end rounds down to 9); busy 1–8.
  EXPECT_EQ(hta[0]->kernel_time_ns, 8'000);
  EXPECT_DOUBLE_EQ(hta[0]->idle_pct, 12.5);
  EXPECT_DOUBLE_EQ(hta[0]->compute_pct, 50.0);
  EXPECT_DOUBLE_EQ(hta[0]->non_compute_pct, 37.5);
}

// A trace stamped in epoch µs (about 1.7e15): HTA reads each time as a
// float64, which steps by 0.25 µs there, and rounds those. Compute written
// as [T+0.9, T+10.9) µs reads as ts T+1, end T+11; communication
// [T+9.9, T+20.9) as ts T+10, end T+21. Rounding the exact times instead
// gives [T+1, T+10) and [T+10, T+20), which do not overlap at all.
TEST_F(ProfileTest, HtaCompatRoundsEpochTimestampsAsFloat64LikeHta) {
  constexpr int64_t kEpochUs = 1'712'345'678'901'234;
  if (process_ == 0) {
    const std::pair<uint32_t, std::string_view> names[] = {{0, "ampere_sgemm_128x64"},
                                                           {1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"}};
    const Track tracks[] = {{7, 0, 0, 0, TrackType::kCudaStream, 0, 0}};
    auto kernel = [](uint32_t name, int64_t begin_ns, int64_t end_ns) {
      Event e = range(name, kEpochUs * 1000 + begin_ns, kEpochUs * 1000 + end_ns);
      e.kind = EventKind::kGpuKernel;
      return e;
    };
    write_gpu_rank(names, tracks, {kernel(0, 900, 10'900), kernel(1, 9'900, 20'900)}, kEpochUs * 1000 + 30'000);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(merged());
  const std::vector<std::optional<HtaFigures>> hta = hta_figures(timeline, build_profile(timeline));
  ASSERT_EQ(hta.size(), 1u);
  ASSERT_TRUE(hta[0].has_value());
  // Compute [1, 11), communication [10, 21): 1 µs of 11 overlapped.
  EXPECT_DOUBLE_EQ(hta[0]->comm_comp_overlap_pct, 9.09);
  EXPECT_EQ(hta[0]->kernel_time_ns, 20'000);
}

// The ranks are read and swept on every CPU the process may use; the report
// must be the one a single CPU gives, byte for byte.
TEST_F(ProfileTest, TheReportIsTheSameOnOneCpuAndOnEvery) {
  if (process_ == 0) {
    testing::SyntheticJob job;
    job.world_size = 6;
    job.events_per_rank = 40'000;  // three checksum blocks a rank
    job.shared_collectives = true;
    job.gpu_kernel_names = 20;
    job.keep_truth = false;
    testing::write_synthetic_job(dir_.string(), job);
  }
  const Timeline timeline(merged());
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  ASSERT_EQ(usable_cpus(), 1u);
  const std::string alone = report_json(make_report(timeline));
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  const std::string together = report_json(make_report(timeline));
  EXPECT_GT(alone.size(), 10'000u);
  EXPECT_EQ(alone, together) << usable_cpus() << " CPUs";
}

// `mpirun -n K rankscope report`: each process reads and sweeps some of the
// ranks. Every process must hold the report one process alone builds, byte
// for byte, with the damage any of them found.
TEST_F(ProfileTest, EveryProcessHoldsTheReportOneProcessBuilds) {
  int processes = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  if (process_ == 0) {
    testing::SyntheticJob job;
    job.world_size = 7;  // blocks of ranks that do not divide evenly among the processes
    job.events_per_rank = 20'000;
    job.shared_collectives = true;
    job.messages = true;
    job.gpu_kernel_names = 12;
    job.keep_truth = false;
    testing::write_synthetic_job(dir_.string(), job);
  }
  const std::string path = merged();
  if (process_ == 0) {
    // Damaged rows in two ranks, which different processes read.
    std::vector<uint64_t> rows;
    {
      const Timeline timeline(path);
      for (const size_t rank : {1, 5}) rows.push_back(timeline.ranks()[rank].event_offset + 100 + rank);
    }
    for (const uint64_t row : rows) testing::set_timeline_value(path, "/events", row, "kind", 250);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto report_of = [&](const WorkShare& share) {
    const Timeline timeline(path);
    const Report report = make_report(timeline, {}, share);
    return report_json(report) + report_text(report);
  };
  const std::string alone = report_of({});
  const WorkShare share{process_, processes,
                        [](const std::string& local) { return allgather_strings(MPI_COMM_WORLD, {local}); }};
  const std::string shared = report_of(share);
  EXPECT_NE(alone.find("\"rows_left_out\""), std::string::npos) << alone.substr(0, 3000);
  EXPECT_GT(alone.size(), 10'000u);
  EXPECT_EQ(alone, shared) << processes << " processes";
  // What the report shows of the participations only through the buckets:
  // their exposed times, which merge stores in /collectives.
  const auto exposure_of = [&](const WorkShare& with) {
    const Timeline timeline(path);
    std::vector<int64_t> exposure;
    for (const CollectiveInstance& c : build_profile(timeline, with).collectives) {
      for (const Participation& p : c.ranks) exposure.insert(exposure.end(), {p.exposed_wait_ns, p.exposed_transfer_ns});
    }
    return exposure;
  };
  const std::vector<int64_t> exposure = exposure_of({});
  EXPECT_GT(std::count_if(exposure.begin(), exposure.end(), [](int64_t ns) { return ns > 0; }), 100);
  EXPECT_EQ(exposure, exposure_of(share));
}

// An error on one process is every process's: none waits for the others.
TEST_F(ProfileTest, AnErrorOnOneProcessIsThrownOnEvery) {
  int processes = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  const WorkShare share{process_, processes,
                        [](const std::string& local) { return allgather_strings(MPI_COMM_WORLD, {local}); }};
  const int failing = processes - 1;
  try {
    exchange(share, [&] {
      if (process_ == failing) throw Error("process " + std::to_string(failing) + " failed");
      return std::string("fine");
    });
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "process " + std::to_string(failing) + " failed");
  }
  const std::vector<std::string> all = exchange(share, [&] { return std::to_string(process_); });
  ASSERT_EQ(all.size(), static_cast<size_t>(processes));
  for (int p = 0; p < processes; ++p) EXPECT_EQ(all[static_cast<size_t>(p)], std::to_string(p));
}

}  // namespace
}  // namespace rankscope::analysis
