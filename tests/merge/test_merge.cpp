// Collective tests of the merge: run as one process and under mpiexec -n 4.
#include "rankscope/merge/merge.h"
#include "rankscope/model/counters.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/timeline/schema.h"
#include "rankscope/timeline/timeline.h"
#include "synthetic_job.h"
// The repair's solver is internal to the merge; its cases are tested directly.
#include "clock_repair.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

int process_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// A folder every process agrees on, made by the first.
fs::path shared_temp_dir(const std::string& name) {
  char path[256] = {};
  if (process_rank() == 0) {
    std::snprintf(path, sizeof(path), "%s/rankscope-%s-%d", fs::temp_directory_path().c_str(), name.c_str(),
                  static_cast<int>(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

enum class MountKind { kNone, kReadOnly, kTiny, kOneMiB };

// Makes `folder` on the first process, as a 64 KiB tmpfs (read-only or not)
// or a 1 MiB one when asked; false on every process when the mount is not
// allowed here.
bool make_test_folder(const fs::path& folder, MountKind kind) {
  int made = 1;
  if (process_rank() == 0) {
    fs::create_directories(folder);
    if (kind != MountKind::kNone) {
      const unsigned long flags = kind == MountKind::kReadOnly ? MS_RDONLY : 0;
      made = ::mount("rankscope-test", folder.c_str(), "tmpfs", flags,
                     kind == MountKind::kOneMiB ? "size=1m" : "size=64k") == 0;
    }
  }
  MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return made != 0;
}

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = shared_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (process_rank() == 0) fs::remove_all(dir_);
  }

  // Writes the job's shards on the first process only; every process gets the truth.
  std::vector<testing::SyntheticRank> write_job(testing::SyntheticJob job) {
    std::vector<testing::SyntheticRank> ranks;
    if (process_rank() == 0) testing::write_synthetic_job(dir_.string(), job);
    MPI_Barrier(MPI_COMM_WORLD);
    // The generator is deterministic: every process can rebuild the truth elsewhere.
    const fs::path truth_dir = fs::temp_directory_path() / ("rankscope-truth-" + std::to_string(::getpid()));
    fs::create_directories(truth_dir);
    ranks = testing::write_synthetic_job(truth_dir.string(), job);
    fs::remove_all(truth_dir);
    return ranks;
  }

  MergeResult merge(const std::vector<std::string>& inputs, const std::string& output,
                    uint64_t check_memory_bytes = MergeOptions{}.check_memory_bytes, bool repair_clock = false) {
    MergeOptions options;
    options.inputs = inputs;
    options.output = output;
    options.block_events = 1000;  // many writes per rank
    options.check_memory_bytes = check_memory_bytes;
    options.repair_clock = repair_clock;
    return merge_shards(MPI_COMM_WORLD, options);
  }

  MergeResult merge_repairing_clocks(const std::string& output) {
    return merge({dir_.string()}, output, MergeOptions{}.check_memory_bytes, true);
  }

  fs::path dir_;
};

TEST_F(MergeTest, RoundTripKeepsEveryEventInTimeOrder) {
  testing::SyntheticJob job;
  job.world_size = 6;
  job.events_per_rank = 20000;
  job.chunk_events = 700;
  const auto truth = write_job(job);
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge({dir_.string()}, output);
  EXPECT_EQ(result.world_size, 6);
  EXPECT_EQ(result.events, 6u * 20000u);
  EXPECT_TRUE(result.missing_ranks.empty());
  EXPECT_TRUE(result.dead_ranks.empty());
  EXPECT_TRUE(result.problems.empty());
  EXPECT_FALSE(fs::exists(output + ".partial"));

  const Timeline timeline(output);
  ASSERT_EQ(timeline.world_size(), 6);
  EXPECT_EQ(timeline.event_count(), 120000u);
  for (int r = 0; r < 6; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    EXPECT_EQ(info.rank, r);
    EXPECT_EQ(info.status, RankStatus::kComplete);
    EXPECT_EQ(info.host, "node-" + std::to_string(r / 4));
    EXPECT_EQ(info.pid, 10000 + r);
    EXPECT_EQ(info.tracks.size(), 3u);
    EXPECT_EQ(timeline.string(info.tracks[0].name_id), "forward");  // the synthetic tracks name id 0
    ASSERT_EQ(info.event_count, 20000u);

    std::vector<Event> expected = truth[static_cast<size_t>(r)].events;
    std::stable_sort(expected.begin(), expected.end(), event_time_order);
    std::vector<Event> got;
    timeline.for_each_event_block(r, [&](const std::vector<Event>& block) {
      got.insert(got.end(), block.begin(), block.end());
    }, 4096);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), event_time_order)) << "rank " << r;
    uint64_t kind_total = 0;
    for (uint64_t n : info.events_by_kind) kind_total += n;
    EXPECT_EQ(kind_total, 20000u);
    for (size_t i = 0; i < got.size(); ++i) {
      // Names are remapped to the job's table; everything else is as written.
      EXPECT_EQ(timeline.string(got[i].name_id), truth[static_cast<size_t>(r)].names.at(expected[i].name_id));
      Event a = got[i], b = expected[i];
      a.name_id = b.name_id = 0;
      if (std::memcmp(&a, &b, sizeof(Event)) != 0) {
        // Ties in (begin, end) may come in either order; compare the pair as a set.
        ASSERT_TRUE(i + 1 < got.size() && got[i].begin_ns == got[i + 1].begin_ns) << "rank " << r << " event " << i;
      }
    }
  }
}

TEST_F(MergeTest, SkewedClocksArePutOnRankZerosWithinTheBound) {
  testing::SyntheticJob job;
  job.world_size = 5;
  job.events_per_rank = 8000;
  job.chunk_events = 500;
  job.skewed = true;
  const auto truth = write_job(job);
  const std::string output = (dir_ / "job.h5").string();
  merge({dir_.string()}, output);
  const Timeline timeline(output);
  EXPECT_TRUE(timeline.clock_corrected());
  for (int r = 0; r < 5; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    ASSERT_TRUE(info.clock.synced);
    EXPECT_EQ(info.clock.points.size(), 2u);
    EXPECT_EQ(info.clock.bound_ns, testing::kSyntheticSyncBoundNs);
    std::vector<Event> expected = truth[static_cast<size_t>(r)].events;
    std::stable_sort(expected.begin(), expected.end(), event_time_order);
    std::vector<Event> got;
    timeline.for_each_event_block(r, [&](const std::vector<Event>& block) {
      got.insert(got.end(), block.begin(), block.end());
    });
    ASSERT_EQ(got.size(), expected.size());
    int64_t worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max({worst, static_cast<int64_t>(std::llabs(got[i].begin_ns - expected[i].begin_ns)),
                        static_cast<int64_t>(std::llabs(got[i].end_ns - expected[i].end_ns))});
      EXPECT_EQ(got[i].flags & kFlagClockOutsideModel, 0) << "rank " << r << " event " << i;
    }
    // The synthetic measurements are exact: only rounding is left.
    EXPECT_LE(worst, 2) << "rank " << r;
  }
  EXPECT_NEAR(timeline.ranks()[2].clock.drift_ppm, ((2 * 37) % 401 - 200) - 20, 0.01);
}

// Writes rank r of a `world`-rank job that ran ten allreduces on
// communicator 77, each rank's clock measured exact within `bound`;
// times(seq, event) sets each instance's begin and end.
template <typename Times>
void write_allreduce_rank(const fs::path& dir, int32_t r, int32_t world, int64_t bound, Times&& times) {
  RankMetadata metadata;
  metadata.rank = r;
  metadata.world_size = world;
  metadata.job = testing::SyntheticJob{}.job;
  ShardWriter writer;
  ASSERT_TRUE(writer.open((dir / ("rank-" + std::to_string(r) + ".shard")).string(), metadata, 0));
  const std::pair<uint32_t, std::string_view> name{0, "MPI_Allreduce"};
  ASSERT_TRUE(writer.write_strings({&name, 1}, 0));
  const SyncPoint points[2] = {{0, 0, bound}, {1'000'000'000, 0, bound}};
  ASSERT_TRUE(writer.write_sync_points(points, 0));
  std::vector<Event> events;
  for (uint64_t seq = 0; seq < 10; ++seq) {
    Event e{};
    e.kind = EventKind::kMpiCollective;
    e.op = CommOp::kAllReduce;
    e.comm_hash = 77;
    e.seq = seq;
    e.peer = kNoPeer;
    times(seq, e);
    events.push_back(e);
  }
  ASSERT_TRUE(writer.write_events(events));
  ASSERT_TRUE(writer.close(Counters{}, 2'000'000));
}

// Three ranks run ten allreduces together; in one of them rank 2 leaves before
// rank 0 enters, by more than their clock bounds allow.
TEST_F(MergeTest, CollectivesThatBreakCausalityAreCounted) {
  constexpr int64_t kBound = 10;
  if (process_rank() == 0) {
    for (int32_t r = 0; r < 3; ++r) {
      write_allreduce_rank(dir_, r, 3, kBound, [r](uint64_t seq, Event& e) {
        const int64_t t = 1'000'000 + static_cast<int64_t>(seq) * 100'000;
        e.begin_ns = t + r * 1000;  // rank 2 enters last
        e.end_ns = t + 5000;        // everyone leaves together
        if (seq == 4 && r == 2) e.begin_ns = t + 5500;           // enters after the others left: no one waited for it
        if (seq == 7 && r == 0) e.end_ns = t + 2000 - 2 * kBound; // leaves early, but within the bounds
      });
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string output = (dir_ / "job.h5").string();
  merge({dir_.string()}, output);
  const Timeline timeline(output);
  EXPECT_TRUE(timeline.clock_corrected());
  // In instance 4 rank 2 entered at +5500 while ranks 0 and 1 had left at +5000.
  EXPECT_EQ(timeline.ranks()[0].counters.get("clock_violations"), 1u);
  EXPECT_EQ(timeline.ranks()[0].counters.get("clock_violation_worst_ns"), 500u - 2 * kBound);
  EXPECT_EQ(timeline.ranks()[1].counters.get("clock_violations"), 0u);
  EXPECT_EQ(timeline.ranks()[2].counters.get("clock_violations"), 0u);
  EXPECT_EQ(timeline.ranks()[0].counters.get("clock_check_skipped"), 0u);

  // Room for four instances (32 bytes each): the rest are counted, not checked.
  const std::string small = (dir_ / "small-check.h5").string();
  merge({dir_.string()}, small, 4 * 32);
  const Timeline partial(small);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(partial.ranks()[static_cast<size_t>(r)].counters.get("clock_check_skipped"), 6u) << "rank " << r;
    EXPECT_EQ(partial.ranks()[static_cast<size_t>(r)].counters.get("clock_violations"), 0u) << "rank " << r;
  }
}

std::vector<Event> events_of(const Timeline& timeline, int32_t rank) {
  std::vector<Event> events;
  timeline.for_each_event_block(rank, [&](const std::vector<Event>& block) {
    events.insert(events.end(), block.begin(), block.end());
  });
  return events;
}

// A job whose collectives all ranks take part in, with `rank`'s clock
// measurements wrong by `error_ns`.
testing::SyntheticJob misclocked_job(int32_t world_size, int32_t rank, int64_t error_ns) {
  testing::SyntheticJob job;
  job.world_size = world_size;
  job.events_per_rank = 6000;
  job.chunk_events = 500;
  job.skewed = true;
  job.shared_collectives = true;
  job.misclocked_rank = rank;
  job.misclock_ns = error_ns;
  return job;
}

// The true (begin, end) of every rank in each shared collective, by sequence number.
std::map<uint64_t, std::vector<std::pair<int64_t, int64_t>>> collectives_by_seq(
    const std::vector<testing::SyntheticRank>& truth) {
  std::map<uint64_t, std::vector<std::pair<int64_t, int64_t>>> out;
  for (size_t r = 0; r < truth.size(); ++r) {
    for (const Event& e : truth[r].events) {
      if (e.comm_hash != testing::kSyntheticCommHash) continue;
      auto& ranks = out[e.seq];
      ranks.resize(truth.size());
      ranks[r] = {e.begin_ns, e.end_ns};
    }
  }
  return out;
}

// Rank `rank`'s events are the truth moved by `off_by_ns`, flagged as
// repaired when `repaired`; the merge's rounding allows 2 ns.
void expect_times(const Timeline& timeline, const testing::SyntheticRank& truth, int32_t rank, int64_t off_by_ns,
                  bool repaired) {
  std::vector<Event> expected = truth.events;
  std::stable_sort(expected.begin(), expected.end(), event_time_order);
  const std::vector<Event> got = events_of(timeline, rank);
  ASSERT_EQ(got.size(), expected.size());
  int64_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max({worst, static_cast<int64_t>(std::llabs(got[i].begin_ns - off_by_ns - expected[i].begin_ns)),
                      static_cast<int64_t>(std::llabs(got[i].end_ns - off_by_ns - expected[i].end_ns))});
    ASSERT_EQ((got[i].flags & kFlagClockRepaired) != 0, repaired) << "rank " << rank << " event " << i;
  }
  EXPECT_LE(worst, 2) << "rank " << rank;
}

// Rank 2's measurements put its events 2 ms too early: it leaves every
// allreduce before the others enter, and only it is counted.
TEST_F(MergeTest, MisclockedRankIsCountedButNotMovedWithoutRepair) {
  const auto truth = write_job(misclocked_job(4, 2, 2'000'000));
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge({dir_.string()}, output);
  EXPECT_TRUE(result.problems.empty());
  const Timeline timeline(output);
  const uint64_t instances = collectives_by_seq(truth).size();
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    EXPECT_EQ(info.counters.get("clock_violations"), r == 2 ? instances : 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_repaired"), 0u) << "rank " << r;
    EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << r;
    expect_times(timeline, truth[static_cast<size_t>(r)], r, r == 2 ? -2'000'000 : 0, false);
  }
  EXPECT_GT(timeline.ranks()[2].counters.get("clock_violation_worst_ns"), 1'990'000u);
}

// With the repair, rank 2 moves later by exactly what it takes for its
// earliest exit to meet the latest entry beyond the bounds, and no one else moves.
TEST_F(MergeTest, RepairMovesAnEarlyRankLaterByTheSmallestShift) {
  constexpr int64_t kError = 2'000'000;
  const auto truth = write_job(misclocked_job(4, 2, kError));
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge_repairing_clocks(output);
  int64_t smallest = INT64_MIN;
  for (const auto& [seq, ranks] : collectives_by_seq(truth)) {
    int64_t last_entry = INT64_MIN;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (r != 2) last_entry = std::max(last_entry, ranks[r].first);
    }
    smallest = std::max(smallest, last_entry - (ranks[2].second - kError) - 2 * testing::kSyntheticSyncBoundNs);
  }
  ASSERT_GT(smallest, kError - 30'000);  // the allreduces last microseconds: nearly all of the error

  const Timeline timeline(output);
  EXPECT_EQ(timeline.ranks()[0].clock.repair_shift_ns, 0);
  EXPECT_NEAR(static_cast<double>(timeline.ranks()[2].clock.repair_shift_ns), static_cast<double>(smallest), 3.0);
  EXPECT_LE(timeline.ranks()[2].clock.repair_shift_ns, kError);
  const uint64_t instances = collectives_by_seq(truth).size();
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    if (r != 2) {
      EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << r;
    }
    EXPECT_EQ(info.counters.get("clock_violations"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violation_worst_ns"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_repaired"), r == 2 ? instances : 0u) << "rank " << r;
    expect_times(timeline, truth[static_cast<size_t>(r)], r, r == 2 ? info.clock.repair_shift_ns - kError : 0, r == 2);
  }
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find("moved rank 2 by +"), std::string::npos) << result.problems[0];
}

// A rank whose measurements put it late enters after the others left; the
// violations are counted against those that left, but the repair moves only
// the late rank, earlier.
TEST_F(MergeTest, RepairMovesALateRankEarlier) {
  constexpr int64_t kError = -500'000;
  const auto truth = write_job(misclocked_job(5, 3, kError));
  const std::string output = (dir_ / "job.h5").string();
  merge_repairing_clocks(output);
  int64_t smallest = INT64_MAX;
  for (const auto& [seq, ranks] : collectives_by_seq(truth)) {
    int64_t first_exit = INT64_MAX;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (r != 3) first_exit = std::min(first_exit, ranks[r].second);
    }
    smallest = std::min(smallest, first_exit - (ranks[3].first - kError) + 2 * testing::kSyntheticSyncBoundNs);
  }
  const Timeline timeline(output);
  EXPECT_NEAR(static_cast<double>(timeline.ranks()[3].clock.repair_shift_ns), static_cast<double>(smallest), 3.0);
  EXPECT_GE(timeline.ranks()[3].clock.repair_shift_ns, kError);
  uint64_t before = 0;
  for (int32_t r = 0; r < 5; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    if (r != 3) {
      EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << r;
    }
    EXPECT_EQ(info.counters.get("clock_violations"), 0u) << "rank " << r;
    before += info.counters.get("clock_violations_repaired");
  }
  EXPECT_EQ(timeline.ranks()[3].counters.get("clock_violations_repaired"), 0u);
  EXPECT_EQ(before, collectives_by_seq(truth).size());
  expect_times(timeline, truth[3], 3, timeline.ranks()[3].clock.repair_shift_ns - kError, true);
}

TEST_F(MergeTest, RepairLeavesAHealthyJobAlone) {
  const auto truth = write_job(misclocked_job(4, -1, 0));
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge_repairing_clocks(output);
  EXPECT_TRUE(result.problems.empty());
  const Timeline timeline(output);
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_repaired"), 0u) << "rank " << r;
    expect_times(timeline, truth[static_cast<size_t>(r)], r, 0, false);
  }
}

// A job whose ranks exchange point-to-point messages (its allreduces have no
// communicator, so only the messages are checked), with `rank`'s clock
// measurements wrong by `error_ns`.
testing::SyntheticJob messaging_job(int32_t world_size, int32_t rank, int64_t error_ns) {
  testing::SyntheticJob job;
  job.world_size = world_size;
  job.events_per_rank = 6000;
  job.chunk_events = 500;
  job.skewed = true;
  job.messages = true;
  job.misclocked_rank = rank;
  job.misclock_ns = error_ns;
  return job;
}

// What the check must find for messages, per rank: the merge puts
// `misclocked`'s events `error_ns` before their true times and the others'
// at them; a receive that then ends before its send began, by more than
// both bounds, counts against the receiver.
struct MessageTruth {
  std::vector<uint64_t> violations;
  std::vector<int64_t> worst_ns;
  std::vector<uint64_t> halves;    // sends and receives
  std::vector<uint64_t> receives;
  // (rank, peer) -> its sends to and receives from the peer
  std::map<std::pair<int32_t, int32_t>, uint64_t> halves_with;
};

MessageTruth message_truth(const std::vector<testing::SyntheticRank>& truth, int32_t misclocked, int64_t error_ns) {
  const size_t ranks = truth.size();
  MessageTruth out{std::vector<uint64_t>(ranks, 0), std::vector<int64_t>(ranks, 0), std::vector<uint64_t>(ranks, 0),
                   std::vector<uint64_t>(ranks, 0), {}};
  const auto placed = [&](int32_t rank, int64_t t) { return rank == misclocked ? t - error_ns : t; };
  std::map<std::tuple<int32_t, int32_t, uint64_t, uint64_t>, int64_t> send_begins;  // (sender, receiver, tag, seq)
  for (size_t r = 0; r < ranks; ++r) {
    for (const Event& e : truth[r].events) {
      if (e.kind != EventKind::kMpiP2p) continue;
      const auto rank = static_cast<int32_t>(r);
      ++out.halves[r];
      ++out.halves_with[{rank, e.peer}];
      out.receives[r] += e.op == CommOp::kRecv;
      if (e.op == CommOp::kSend) send_begins[{rank, e.peer, e.correlation_id, e.seq}] = placed(rank, e.begin_ns);
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    for (const Event& e : truth[r].events) {
      if (e.kind != EventKind::kMpiP2p || e.op != CommOp::kRecv) continue;
      const auto send = send_begins.find({e.peer, static_cast<int32_t>(r), e.correlation_id, e.seq});
      EXPECT_NE(send, send_begins.end()) << "the synthetic job lost the send of a message to rank " << r;
      if (send == send_begins.end()) continue;
      const int64_t excess =
          send->second - placed(static_cast<int32_t>(r), e.end_ns) - 2 * testing::kSyntheticSyncBoundNs;
      if (excess > 0) {
        ++out.violations[r];
        out.worst_ns[r] = std::max(out.worst_ns[r], excess);
      }
    }
  }
  return out;
}

// Rank 2's measurements put its events 2 ms too early: every message it
// receives ends before its send began, and counts against it. Rank 1's put
// its events 500 us too late: its messages count against the ranks that
// receive them (its partners, 0 and 3), not against it.
TEST_F(MergeTest, MessagesReceivedBeforeTheyWereSentCountAgainstTheReceiver) {
  for (const auto& [misclocked, error_ns] : {std::pair<int32_t, int64_t>{2, 2'000'000}, {1, -500'000}}) {
    const auto truth = write_job(messaging_job(4, misclocked, error_ns));
    const MessageTruth expected = message_truth(truth, misclocked, error_ns);
    const std::string output = (dir_ / ("job" + std::to_string(misclocked) + ".h5")).string();
    const MergeResult result = merge({dir_.string()}, output);
    EXPECT_TRUE(result.problems.empty());
    const Timeline timeline(output);
    for (int32_t r = 0; r < 4; ++r) {
      const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
      const auto rank = static_cast<size_t>(r);
      const bool counted = error_ns > 0 ? r == misclocked : expected.halves_with.count({r, misclocked}) > 0;
      EXPECT_GT(expected.halves[rank], 1000u) << "rank " << r;
      EXPECT_EQ(expected.violations[rank] > 0, counted) << "rank " << r;
      EXPECT_EQ(info.counters.get("clock_violations_p2p"), expected.violations[rank]) << "rank " << r;
      EXPECT_NEAR(static_cast<double>(info.counters.get("clock_violation_worst_ns")),
                  static_cast<double>(expected.worst_ns[rank]), 4.0)
          << "rank " << r;
      EXPECT_EQ(info.counters.get("clock_violations"), 0u) << "rank " << r;
      EXPECT_EQ(info.counters.get("p2p_unmatched"), 0u) << "rank " << r;
      EXPECT_EQ(info.counters.get("clock_check_skipped"), 0u) << "rank " << r;
    }
    // Rank 2 receives every message early, by the error less the message's length and the bounds.
    if (error_ns > 0) {
      EXPECT_EQ(expected.violations[2], expected.receives[2]);
      EXPECT_GT(expected.worst_ns[2], error_ns - 1000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (process_rank() == 0) {
      for (const auto& rank : truth) fs::remove(rank.path);
    }
  }
}

TEST_F(MergeTest, HealthyMessagesAndCollectivesBreakNothing) {
  testing::SyntheticJob job = messaging_job(5, -1, 0);
  job.shared_collectives = true;
  const auto truth = write_job(job);
  const std::string output = (dir_ / "job.h5").string();
  EXPECT_TRUE(merge({dir_.string()}, output).problems.empty());
  const Timeline timeline(output);
  for (const RankInfo& info : timeline.ranks()) {
    EXPECT_GT(message_truth(truth, -1, 0).halves[static_cast<size_t>(info.rank)], 300u) << "rank " << info.rank;
    for (const char* name : {"clock_violations", "clock_violations_p2p", "clock_violation_worst_ns", "p2p_unmatched",
                             "clock_check_skipped"}) {
      EXPECT_EQ(info.counters.get(name), 0u) << name << " of rank " << info.rank;
    }
  }
}

// Rank 3's shard is lost: the messages it exchanged have one half only. They
// are counted as unmatched against the ranks that have the other half, and
// are no violations.
TEST_F(MergeTest, MessagesMissingTheirOtherHalfAreUnmatchedNotViolations) {
  const auto truth = write_job(messaging_job(4, -1, 0));
  if (process_rank() == 0) fs::remove(dir_ / "rank-00003.shard");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string output = (dir_ / "job.h5").string();
  EXPECT_EQ(merge({dir_.string()}, output).missing_ranks, std::vector<int32_t>{3});
  const MessageTruth expected = message_truth(truth, -1, 0);
  const Timeline timeline(output);
  for (int32_t r = 0; r < 3; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    const auto with_lost_rank = expected.halves_with.find({r, 3});
    const uint64_t lone = with_lost_rank == expected.halves_with.end() ? 0 : with_lost_rank->second;
    EXPECT_EQ(info.counters.get("p2p_unmatched"), lone) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_p2p"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_check_skipped"), 0u) << "rank " << r;
  }
  // Ranks 1 and 2 exchange messages with rank 3 (1 XOR 2, 2 XOR 1); rank 0 does not.
  EXPECT_EQ(timeline.ranks()[0].counters.get("p2p_unmatched"), 0u);
  EXPECT_GT(timeline.ranks()[1].counters.get("p2p_unmatched"), 0u);
  EXPECT_GT(timeline.ranks()[2].counters.get("p2p_unmatched"), 0u);
}

// Without memory for them, every send and receive is counted as unchecked.
// With room for some, a sample of the messages is checked: both halves of a
// message are checked or left out together, whichever processes hold them,
// so no half is taken for unmatched. Collectives take the memory first.
TEST_F(MergeTest, MessagesBeyondTheCheckMemoryAreCountedAsUnchecked) {
  const auto truth = write_job(messaging_job(4, 2, 2'000'000));
  const MessageTruth expected = message_truth(truth, 2, 2'000'000);
  const std::string none = (dir_ / "none.h5").string();
  merge({dir_.string()}, none, 0);
  const Timeline unchecked(none);
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = unchecked.ranks()[static_cast<size_t>(r)];
    EXPECT_EQ(info.counters.get("clock_check_skipped"), expected.halves[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_p2p"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("p2p_unmatched"), 0u) << "rank " << r;
  }

  // Room for about 300 halves per process (40 bytes each, in half the budget), of 1200 per rank.
  const std::string sampled = (dir_ / "sampled.h5").string();
  merge({dir_.string()}, sampled, 2 * 300 * 40);
  const Timeline timeline(sampled);
  uint64_t skipped = 0, halves = 0;
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    skipped += info.counters.get("clock_check_skipped");
    halves += expected.halves[static_cast<size_t>(r)];
    EXPECT_EQ(info.counters.get("p2p_unmatched"), 0u) << "rank " << r;
    if (r != 2) {
      EXPECT_EQ(info.counters.get("clock_violations_p2p"), 0u) << "rank " << r;
    }
  }
  EXPECT_GT(skipped, 0u);
  EXPECT_LT(skipped, halves);
  EXPECT_EQ(skipped % 2, 0u) << "a message was checked on one side only";
  const uint64_t found = timeline.ranks()[2].counters.get("clock_violations_p2p");
  EXPECT_GT(found, 0u);
  EXPECT_LT(found, expected.violations[2]);

  // Collectives come first: with room for the allreduces (32 bytes each) and
  // 40 halves more, every allreduce is checked, and no process keeps more
  // than those 40 halves of the messages.
  MPI_Barrier(MPI_COMM_WORLD);
  if (process_rank() == 0) {
    for (const auto& rank : truth) fs::remove(rank.path);
  }
  testing::SyntheticJob both = messaging_job(4, 2, 2'000'000);
  both.shared_collectives = true;
  const auto both_truth = write_job(both);
  const uint64_t instances = collectives_by_seq(both_truth).size();
  const std::string crowded = (dir_ / "crowded.h5").string();
  merge({dir_.string()}, crowded, instances * 32 + 1600);
  const Timeline crowded_timeline(crowded);
  const MessageTruth both_expected = message_truth(both_truth, 2, 2'000'000);
  uint64_t messages_skipped = 0, message_halves = 0;
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = crowded_timeline.ranks()[static_cast<size_t>(r)];
    EXPECT_EQ(info.counters.get("clock_violations"), r == 2 ? instances : 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("p2p_unmatched"), 0u) << "rank " << r;
    messages_skipped += info.counters.get("clock_check_skipped");
    message_halves += both_expected.halves[static_cast<size_t>(r)];
  }
  int processes = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  EXPECT_GE(messages_skipped + 40 * static_cast<uint64_t>(processes), message_halves);
}

// The repair treats a message like a collective: rank 2 received every
// message before it was sent, so it moves later, by the largest gap, and
// no other rank moves.
TEST_F(MergeTest, RepairMovesARankThatReceivesEarlyLater) {
  constexpr int64_t kError = 2'000'000;
  const auto truth = write_job(messaging_job(4, 2, kError));
  const MessageTruth expected = message_truth(truth, 2, kError);
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge_repairing_clocks(output);
  const Timeline timeline(output);
  EXPECT_NEAR(static_cast<double>(timeline.ranks()[2].clock.repair_shift_ns), static_cast<double>(expected.worst_ns[2]),
              4.0);
  for (int32_t r = 0; r < 4; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    if (r != 2) {
      EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << r;
    }
    EXPECT_EQ(info.counters.get("clock_violations_p2p"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violation_worst_ns"), 0u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_p2p_repaired"), expected.violations[static_cast<size_t>(r)])
        << "rank " << r;
    expect_times(timeline, truth[static_cast<size_t>(r)], r, r == 2 ? info.clock.repair_shift_ns - kError : 0, r == 2);
  }
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find(std::to_string(expected.violations[2]) +
                                    " messages broke causality before the repair, 0 after it; moved rank 2 by +"),
            std::string::npos)
      << result.problems[0];
}

// Rank 1's clock steps between its measurements: it leaves the first five
// allreduces before rank 0 enters and enters the last five after rank 0 left.
// No constant shift repairs that; both ranks keep their times, with a warning.
TEST_F(MergeTest, ContradictoryViolationsAreLeftAsMeasured) {
  if (process_rank() == 0) {
    for (int32_t r = 0; r < 2; ++r) {
      write_allreduce_rank(dir_, r, 2, 10, [r](uint64_t seq, Event& e) {
        const int64_t step = r == 1 ? (seq < 5 ? -20'000 : 20'000) : 0;
        e.begin_ns = 1'000'000 + static_cast<int64_t>(seq) * 100'000 + step;
        e.end_ns = e.begin_ns + 5000;
      });
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge_repairing_clocks(output);
  const Timeline timeline(output);
  for (int32_t r = 0; r < 2; ++r) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(r)];
    EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations"), 5u) << "rank " << r;
    EXPECT_EQ(info.counters.get("clock_violations_repaired"), 5u) << "rank " << r;
    for (const Event& e : events_of(timeline, r)) EXPECT_EQ(e.flags & kFlagClockRepaired, 0);
  }
  ASSERT_EQ(result.problems.size(), 2u);
  EXPECT_NE(result.problems[0].find("10 collectives broke causality before the repair, 10 after it; no rank moved"),
            std::string::npos)
      << result.problems[0];
  EXPECT_NE(result.problems[1].find("no constant shift repairs ranks 0,1:"), std::string::npos) << result.problems[1];
}

// Timelines written before /clock had repair_shift_ns read as unshifted.
TEST_F(MergeTest, ClockTableWithoutRepairShiftsReadsAsUnshifted) {
  write_job(misclocked_job(3, 1, 1'000'000));
  const std::string output = (dir_ / "job.h5").string();
  merge_repairing_clocks(output);
  struct OldClockRow {
    int32_t rank;
    uint8_t synced;
    int64_t offset_ns;
    double drift_ppm;
    int64_t bound_ns;
    uint64_t point_offset;
    uint64_t point_count;
  };
  if (process_rank() == 0) {
    const hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(OldClockRow));
    H5Tinsert(type, "rank", offsetof(OldClockRow, rank), H5T_NATIVE_INT32);
    H5Tinsert(type, "synced", offsetof(OldClockRow, synced), H5T_NATIVE_UINT8);
    H5Tinsert(type, "offset_ns", offsetof(OldClockRow, offset_ns), H5T_NATIVE_INT64);
    H5Tinsert(type, "drift_ppm", offsetof(OldClockRow, drift_ppm), H5T_NATIVE_DOUBLE);
    H5Tinsert(type, "bound_ns", offsetof(OldClockRow, bound_ns), H5T_NATIVE_INT64);
    H5Tinsert(type, "point_offset", offsetof(OldClockRow, point_offset), H5T_NATIVE_UINT64);
    H5Tinsert(type, "point_count", offsetof(OldClockRow, point_count), H5T_NATIVE_UINT64);
    const hid_t file = H5Fopen(output.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t clock = H5Dopen2(file, "clock", H5P_DEFAULT);
    OldClockRow rows[3];
    ASSERT_GE(H5Dread(clock, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
    H5Dclose(clock);
    H5Ldelete(file, "clock", H5P_DEFAULT);
    const hsize_t n = 3;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t old_clock = H5Dcreate2(file, "clock", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(old_clock, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
    H5Dclose(old_clock);
    H5Sclose(space);
    H5Fclose(file);
    H5Tclose(type);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(output);
  for (const RankInfo& info : timeline.ranks()) {
    EXPECT_EQ(info.clock.repair_shift_ns, 0) << "rank " << info.rank;
    EXPECT_EQ(info.clock.bound_ns, testing::kSyntheticSyncBoundNs) << "rank " << info.rank;
  }
  EXPECT_GT(timeline.ranks()[1].clock.offset_ns, 1'000'000'000);
}

TEST_F(MergeTest, DeadAndMissingRanksAreNamed) {
  testing::SyntheticJob job;
  job.world_size = 5;
  job.events_per_rank = 3000;
  job.chunk_events = 256;
  if (process_rank() == 0) {
    testing::write_synthetic_job(dir_.string(), job);
    fs::remove(dir_ / "rank-00004.shard");
    testing::SyntheticJob dead = job;
    dead.close_cleanly = false;
    testing::write_synthetic_rank((dir_ / "rank-00001.shard").string(), 1, dead);
    // Rank 3 was killed mid-write: its last chunk is cut short.
    const fs::path victim = dir_ / "rank-00003.shard";
    fs::resize_file(victim, fs::file_size(victim) - 100);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge({dir_.string()}, output);
  EXPECT_EQ(result.world_size, 5);
  EXPECT_EQ(result.missing_ranks, std::vector<int32_t>{4});
  EXPECT_EQ(result.dead_ranks, (std::vector<int32_t>{1, 3}));
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find("rank-00003.shard"), std::string::npos) << result.problems[0];

  const Timeline timeline(output);
  EXPECT_EQ(timeline.ranks()[4].status, RankStatus::kMissing);
  EXPECT_EQ(timeline.ranks()[4].event_count, 0u);
  EXPECT_EQ(timeline.ranks()[1].status, RankStatus::kDead);
  EXPECT_EQ(timeline.ranks()[1].event_count, 3000u);
  EXPECT_EQ(timeline.ranks()[3].status, RankStatus::kDead);
  EXPECT_GT(timeline.ranks()[3].counters.get(counter::kTruncatedBytes), 0u);
  EXPECT_EQ(timeline.ranks()[3].event_count + timeline.ranks()[3].counters.get(counter::kEventsLost), 3000u);
  EXPECT_GT(timeline.ranks()[3].last_heard_ns, 0);
  EXPECT_EQ(timeline.ranks()[0].status, RankStatus::kComplete);
}

TEST_F(MergeTest, TwoShardsOfOneRankAreRefused) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 100;
  if (process_rank() == 0) {
    testing::write_synthetic_job(dir_.string(), job);
    fs::copy_file(dir_ / "rank-00001.shard", dir_ / "rank-00001-copy.shard");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    merge({dir_.string()}, (dir_ / "job.h5").string());
    FAIL() << "duplicate rank accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two shards are from rank 1"), std::string::npos) << e.what();
  }
}

// The error a merge of the shards in the test's folder throws; "" when it merges.
std::string merge_error(const std::function<MergeResult()>& merge) {
  try {
    merge();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A rank of another job of the same size put among a job's shards.
TEST_F(MergeTest, AShardOfAnotherJobIsRefusedNamingBothJobs) {
  testing::SyntheticJob job;
  job.world_size = 3;
  job.events_per_rank = 100;
  testing::SyntheticJob other = job;
  other.job.id = "synthetic:2";
  if (process_rank() == 0) {
    testing::write_synthetic_job(dir_.string(), job);
    testing::write_synthetic_rank((dir_ / "rank-00002.shard").string(), 2, other);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string output = (dir_ / "job.h5").string();
  const std::string error = merge_error([&] { return merge({dir_.string()}, output); });
  EXPECT_NE(error.find("rank-00000.shard and " + (dir_ / "rank-00002.shard").string() +
                       " are shards of different jobs: synthetic:1, started 2023-11-14T22:13:20.000000000Z; and "
                       "synthetic:2, started 2023-11-14T22:13:20.000000000Z"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(output));
}

// Open MPI's job ids come back when mpirun's pid does: the start tells the jobs apart.
TEST_F(MergeTest, AJobIdUsedAgainIsToldApartByTheStart) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 100;
  testing::SyntheticJob later = job;
  later.job.start_wall_ns += 3'600'000'000'000;
  if (process_rank() == 0) {
    testing::write_synthetic_job(dir_.string(), job);
    testing::write_synthetic_rank((dir_ / "rank-00001.shard").string(), 1, later);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string error = merge_error([&] { return merge({dir_.string()}, (dir_ / "job.h5").string()); });
  EXPECT_NE(error.find("are shards of different jobs"), std::string::npos) << error;
  EXPECT_NE(error.find("synthetic:1, started 2023-11-14T23:13:20.000000000Z"), std::string::npos) << error;
}

// What a rank does not know of its job (a launcher that names none, a rank
// that died before MPI_Init) contradicts nothing; a shard that knows nothing
// of it (an older rankscope's) is merged with a warning.
TEST_F(MergeTest, ShardsThatKnowLessOfTheirJobAreMerged) {
  testing::SyntheticJob job;
  job.world_size = 4;
  job.events_per_rank = 100;
  testing::SyntheticJob unnamed = job, unstarted = job, older = job;
  unnamed.job.id.clear();
  unstarted.job.start_wall_ns = 0;
  older.job = {};
  if (process_rank() == 0) {
    testing::write_synthetic_job(dir_.string(), job);
    testing::write_synthetic_rank((dir_ / "rank-00000.shard").string(), 0, unnamed);
    testing::write_synthetic_rank((dir_ / "rank-00001.shard").string(), 1, unstarted);
    testing::write_synthetic_rank((dir_ / "rank-00002.shard").string(), 2, older);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string output = (dir_ / "job.h5").string();
  const MergeResult result = merge({dir_.string()}, output);
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find("rank-00002.shard records no job identity"), std::string::npos)
      << result.problems[0];
  const Timeline timeline(output);
  EXPECT_EQ(timeline.ranks()[0].job.id, "");
  EXPECT_EQ(timeline.ranks()[0].job.start_wall_ns, job.job.start_wall_ns);
  EXPECT_EQ(timeline.ranks()[1].job.id, "synthetic:1");
  EXPECT_EQ(timeline.ranks()[1].job.start_wall_ns, 0);
  EXPECT_FALSE(timeline.ranks()[2].job.known());
  EXPECT_EQ(timeline.ranks()[3].job.id, "synthetic:1");
  EXPECT_EQ(timeline.ranks()[3].job.start_wall_ns, job.job.start_wall_ns);
}

// A rank or world size no job of these shards can have is refused before
// anything is sized by it.
TEST_F(MergeTest, RanksBeyondTheirJobAreRefusedNamingTheShard) {
  const std::vector<std::tuple<int32_t, int32_t, std::string>> cases = {
      {5, 4, "says it is rank 5 of a job of only 4 ranks"},
      {3, 2'000'000'000, "says it is rank 3 of a job of 2000000000 ranks; rankscope takes jobs of at most 1048576"},
      {2'000'000'000, 0, "says it is rank 2000000000 of a job of 0 ranks; rankscope takes jobs of at most"},
  };
  for (const auto& [rank, world_size, message] : cases) {
    const fs::path path = dir_ / ("rank-" + std::to_string(rank) + ".shard");
    if (process_rank() == 0) {
      RankMetadata metadata;
      metadata.rank = rank;
      metadata.world_size = world_size;
      ShardWriter writer;
      ASSERT_TRUE(writer.open(path.string(), metadata, 1) && writer.close({}, 2)) << writer.error();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const std::string error = merge_error([&] { return merge({path.string()}, (dir_ / "job.h5").string()); });
    EXPECT_NE(error.find(path.string() + " " + message), std::string::npos) << error;
    MPI_Barrier(MPI_COMM_WORLD);
    if (process_rank() == 0) fs::remove(path);
  }
}

// A timeline written before /ranks had the job's identity reads as of an unknown job.
TEST_F(MergeTest, RanksTableWithoutTheJobReadsAsAnUnknownJob) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 100;
  write_job(job);
  const std::string output = (dir_ / "job.h5").string();
  merge({dir_.string()}, output);
  if (process_rank() == 0) {
    // The current row type without its job members, as older versions wrote /ranks.
    const hid_t current = schema::rank_row_type().release();
    const hid_t older = H5Tcreate(H5T_COMPOUND, sizeof(schema::RankRow));
    for (int i = 0; i < H5Tget_nmembers(current); ++i) {
      char* name = H5Tget_member_name(current, static_cast<unsigned>(i));
      const hid_t member = H5Tget_member_type(current, static_cast<unsigned>(i));
      if (std::string(name).rfind("job_", 0) != 0) {
        H5Tinsert(older, name, H5Tget_member_offset(current, static_cast<unsigned>(i)), member);
      }
      H5Tclose(member);
      H5free_memory(name);
    }
    const hid_t file = H5Fopen(output.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t ranks = H5Dopen2(file, "ranks", H5P_DEFAULT);
    std::vector<schema::RankRow> rows(2);
    ASSERT_GE(H5Dread(ranks, older, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    H5Dclose(ranks);
    H5Ldelete(file, "ranks", H5P_DEFAULT);
    const hsize_t n = rows.size();
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t older_ranks = H5Dcreate2(file, "ranks", older, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(older_ranks, older, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    H5Dclose(older_ranks);
    H5Sclose(space);
    H5Fclose(file);
    H5Tclose(older);
    H5Tclose(current);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const Timeline timeline(output);
  for (const RankInfo& info : timeline.ranks()) {
    EXPECT_FALSE(info.job.known()) << "rank " << info.rank;
    EXPECT_EQ(info.host, "node-0") << "rank " << info.rank;
  }
}

TEST_F(MergeTest, UnreadableShardIsNamedOnEveryProcess) {
  testing::SyntheticJob job;
  job.world_size = 3;
  job.events_per_rank = 100;
  if (process_rank() == 0) {
    testing::write_synthetic_job(dir_.string(), job);
    std::ofstream(dir_ / "rank-00001.shard", std::ios::trunc) << "garbage";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    merge({dir_.string()}, (dir_ / "job.h5").string());
    FAIL() << "garbage accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.shard is not a rankscope shard"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "job.h5"));
}

// Process 0 lists the inputs for all: the other processes' inputs name a
// folder that is not there (as when the first sidecar has removed an empty
// one), and they neither fail alone nor wait for the first in a collective.
TEST_F(MergeTest, ProcessZerosListingOfTheInputsIsEveryProcesss) {
  testing::SyntheticJob job;
  job.world_size = 3;
  job.events_per_rank = 100;
  write_job(job);
  const std::string gone = (dir_ / "removed-meanwhile").string();
  const MergeResult result = merge({process_rank() == 0 ? dir_.string() : gone}, (dir_ / "job.h5").string());
  EXPECT_EQ(result.world_size, 3);

  const fs::path empty = dir_ / "empty";
  if (process_rank() == 0) fs::create_directories(empty);
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    merge({process_rank() == 0 ? empty.string() : dir_.string()}, (dir_ / "other.h5").string());
    FAIL() << "process 0 found no shard, yet the merge went on";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), empty.string() + " holds no .shard files");
  }
}

TEST_F(MergeTest, FullOutputDiskLeavesShardsAndNoTimeline) {
  testing::SyntheticJob job;
  job.world_size = 4;
  job.events_per_rank = 20000;
  write_job(job);
  const auto shard_size = fs::file_size(dir_ / "rank-00000.shard");
  // The first process may write only a little: its share fails like a full disk.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &previous);
  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  if (process_rank() == 0) {
    rlimit limit = old_limit;
    limit.rlim_cur = 200000;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  const std::string output = (dir_ / "job.h5").string();
  std::string error;
  try {
    merge({dir_.string()}, output);
  } catch (const Error& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  sigaction(SIGXFSZ, &previous, nullptr);
  EXPECT_NE(error.find("job.h5.partial"), std::string::npos) << error;
  EXPECT_NE(error.find("ulimit -f"), std::string::npos) << error;
  EXPECT_NE(error.find("at most 195 KiB (ulimit -f)"), std::string::npos) << error;  // 200,000 bytes, rounded down
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(output));
  EXPECT_FALSE(fs::exists(output + ".partial"));
  EXPECT_EQ(fs::file_size(dir_ / "rank-00000.shard"), shard_size);
  // The shards are intact: the merge succeeds once there is room.
  EXPECT_EQ(merge({dir_.string()}, output).events, 80000u);
}

TEST_F(MergeTest, FullFilesystemIsFoundBeforeWriting) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 5000;
  write_job(job);
  const fs::path small = dir_ / "small";
  if (!make_test_folder(small, MountKind::kTiny)) GTEST_SKIP() << "cannot mount a small tmpfs here";
  std::string error;
  try {
    merge({dir_.string()}, (small / "job.h5").string());
  } catch (const Error& e) {
    error = e.what();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (process_rank() == 0) {
    EXPECT_TRUE(fs::is_empty(small));
    ::umount(small.c_str());
  }
  EXPECT_NE(error.find("small/job.h5.partial"), std::string::npos) << error;
  EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
}

// The room asked for is the timeline's size plus what HDF5 adds, not a fixed margin.
TEST_F(MergeTest, SmallTimelineFitsASmallFilesystem) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 1500;
  job.keep_truth = false;
  write_job(job);
  const fs::path small = dir_ / "small";
  if (!make_test_folder(small, MountKind::kOneMiB)) GTEST_SKIP() << "cannot mount a small tmpfs here";
  const MergeResult result = merge({dir_.string()}, (small / "job.h5").string());
  MPI_Barrier(MPI_COMM_WORLD);
  if (process_rank() == 0) {
    EXPECT_GT(fs::file_size(small / "job.h5"), 190000u);
    ::umount(small.c_str());
  }
  EXPECT_EQ(result.events, 3000u);
}

TEST_F(MergeTest, ReadOnlyOutputIsNamed) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 100;
  write_job(job);
  const fs::path readonly = dir_ / "readonly";
  // Root may write anywhere on a writable file system; only a read-only mount stops it.
  if (!make_test_folder(readonly, ::geteuid() == 0 ? MountKind::kReadOnly : MountKind::kNone)) {
    GTEST_SKIP() << "cannot make a read-only folder as root here";
  }
  if (process_rank() == 0 && ::geteuid() != 0) fs::permissions(readonly, fs::perms::owner_read | fs::perms::owner_exec);
  MPI_Barrier(MPI_COMM_WORLD);
  std::string error;
  try {
    merge({dir_.string()}, (readonly / "job.h5").string());
  } catch (const Error& e) {
    error = e.what();
  }
  if (process_rank() == 0 && ::geteuid() == 0) ::umount(readonly.c_str());
  EXPECT_NE(error.find("readonly/job.h5.partial"), std::string::npos) << error;
  EXPECT_TRUE(error.find("Read-only file system") != std::string::npos ||
              error.find("Permission denied") != std::string::npos)
      << error;
}

// An output made while the timeline was written (by the program profiled,
// say) is left as it is without replace_output, and replaced with it.
TEST_F(MergeTest, AnOutputThatAppearedMeanwhileIsReplacedOnlyWhenAsked) {
  testing::SyntheticJob job;
  job.world_size = 2;
  job.events_per_rank = 100;
  write_job(job);
  const fs::path output = dir_ / "job.h5";
  if (process_rank() == 0) {
    std::FILE* file = std::fopen(output.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("someone's", file);
    std::fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::string error;
  try {
    merge({dir_.string()}, output.string());
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("job.h5 appeared while it was written, and is not replaced"), std::string::npos) << error;
  EXPECT_EQ(fs::file_size(output), std::string("someone's").size());
  EXPECT_FALSE(fs::exists(dir_ / "job.h5.partial"));

  MergeOptions replacing;
  replacing.inputs = {dir_.string()};
  replacing.output = output.string();
  replacing.replace_output = true;
  EXPECT_GT(merge_shards(MPI_COMM_WORLD, replacing).events, 0u);
  EXPECT_GT(fs::file_size(output), std::string("someone's").size()) << "the timeline replaced it";
}

TEST_F(MergeTest, TimelineOfAnotherVersionIsRefused) {
  const std::string path = (dir_ / "future.h5").string();
  if (process_rank() == 0) {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t text = H5Tcopy(H5T_C_S1);
    H5Tset_size(text, std::strlen(kTimelineFormatName));
    hid_t attribute = H5Acreate2(file, "format", text, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, text, kTimelineFormatName);
    H5Aclose(attribute);
    const int64_t version = 99;
    attribute = H5Acreate2(file, "format_version", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, &version);
    H5Aclose(attribute);
    H5Tclose(text);
    H5Sclose(space);
    H5Fclose(file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    Timeline timeline(path);
    FAIL() << "version 99 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timeline format version 99 is not supported"), std::string::npos) << e.what();
  }
  if (process_rank() == 0) std::ofstream(dir_ / "plain.txt") << "not hdf5";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_THROW(Timeline((dir_ / "plain.txt").string()), Error);
}

// The solver, on constraints a check could report.
TEST(ClockRepairTest, AnEarlyRankMovesLaterByItsLargestGap) {
  ClockRepair repair(4);
  ASSERT_TRUE(repair.learn({{3, 0, 100}, {3, 1, 250}, {3, 2, 40}}));
  repair.solve();
  EXPECT_EQ(repair.shifts(), (std::vector<int64_t>{0, 0, 0, 250}));
  // A check of the moved times finds rank 3 still 10 ns early against rank 1 elsewhere.
  ASSERT_TRUE(repair.learn({{3, 1, 10}}));
  repair.solve();
  EXPECT_EQ(repair.shifts(), (std::vector<int64_t>{0, 0, 0, 260}));
  EXPECT_FALSE(repair.learn({}));
  EXPECT_TRUE(repair.contradictory().empty());
}

TEST(ClockRepairTest, ALateRankMovesEarlierAndRankZeroStays) {
  ClockRepair repair(3);
  ASSERT_TRUE(repair.learn({{0, 2, 480}, {1, 2, 300}}));
  repair.solve();
  EXPECT_EQ(repair.shifts(), (std::vector<int64_t>{0, 0, -480}));
}

TEST(ClockRepairTest, RankZeroLeavingEarlyMovesTheOthersEarlier) {
  ClockRepair repair(3);
  ASSERT_TRUE(repair.learn({{0, 1, 70}, {0, 2, 90}}));
  repair.solve();
  EXPECT_EQ(repair.shifts(), (std::vector<int64_t>{0, -70, -90}));
}

TEST(ClockRepairTest, RanksRankZeroDoesNotConstrainMoveLater) {
  ClockRepair repair(4);
  ASSERT_TRUE(repair.learn({{2, 1, 50}}));
  repair.solve();
  EXPECT_EQ(repair.shifts(), (std::vector<int64_t>{0, 0, 50, 0}));
}

TEST(ClockRepairTest, ContradictionsAreSetAside) {
  ClockRepair repair(4);
  // Rank 1 must be 100 ns later than rank 2 and rank 2 30 ns later than rank 1; rank 3 is early against rank 0.
  ASSERT_TRUE(repair.learn({{1, 2, 100}, {2, 1, 30}, {3, 0, 20}}));
  repair.solve();
  EXPECT_EQ(repair.contradictory(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(repair.shifts(), (std::vector<int64_t>{0, 0, 0, 20}));
  EXPECT_FALSE(repair.learn({{1, 2, 100}}));
}

}  // namespace
}  // namespace rankscope
