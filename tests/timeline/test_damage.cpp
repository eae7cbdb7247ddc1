// The timeline reader on damaged files: every damaged value and unreadable
// chunk is left out, named with dataset, row and field, and counted; nothing
// else is lost and nothing crashes. One process (MPI singleton, for the merge).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "rankscope/merge/merge.h"
#include "rankscope/timeline/schema.h"
#include "rankscope/timeline/timeline.h"
#include "synthetic_job.h"
#include "timeline_damage.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

// Rows of a rank per checksum of /events; the job's ranks span several.
constexpr uint64_t kEventChunkRows = schema::kEventChecksumRows;

class TimelineDamageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("rankscope-damage-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "shards");
    testing::SyntheticJob job;
    job.world_size = 2;
    job.events_per_rank = 3 * kEventChunkRows;
    job.keep_truth = false;
    testing::write_synthetic_job((dir_ / "shards").string(), job);
    MergeOptions options;
    options.inputs = {(dir_ / "shards").string()};
    options.output = (dir_ / "sound.h5").string();
    merge_shards(MPI_COMM_WORLD, options);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');  // parameterized tests
    path_ = (dir_ / (name + ".h5")).string();
    fs::copy_file(dir_ / "sound.h5", path_, fs::copy_options::overwrite_existing);
  }

  // Every event of every rank, read as the analyses read them.
  static uint64_t events_read(const Timeline& timeline) {
    uint64_t n = 0;
    for (const RankInfo& rank : timeline.ranks()) {
      timeline.for_each_event_block(rank.rank, [&](const std::vector<Event>& events) { n += events.size(); });
    }
    return n;
  }

  static inline fs::path dir_;
  std::string path_;
};

TEST_F(TimelineDamageTest, SoundTimelineIsChecksummedAndFindsNothing) {
  const Timeline timeline(path_);
  EXPECT_TRUE(timeline.checksummed());
  EXPECT_EQ(events_read(timeline), timeline.event_count());
  EXPECT_TRUE(timeline.damage().empty());
}

// Values changed through HDF5 keep a valid checksum: the reader's checks find them.
struct BadValue {
  const char* field;
  int64_t value;
};

class DamagedEventTest : public TimelineDamageTest, public ::testing::WithParamInterface<BadValue> {};

TEST_P(DamagedEventTest, EventIsLeftOutAndNamed) {
  const BadValue bad = GetParam();
  const uint64_t row = kEventChunkRows + 7;
  testing::set_timeline_value(path_, "/events", row, bad.field, bad.value);
  const Timeline timeline(path_);
  EXPECT_EQ(events_read(timeline), timeline.event_count() - 1);
  const TimelineDamage damage = timeline.damage();
  ASSERT_EQ(damage.findings.size(), 1u);
  EXPECT_EQ(damage.findings[0].dataset, "/events");
  EXPECT_EQ(damage.findings[0].row, row);
  EXPECT_EQ(damage.findings[0].field, bad.field);
  EXPECT_EQ(damage.rows_left_out.at("/events"), 1u);
  EXPECT_NE(damage.summary().find("1 rows of /events"), std::string::npos) << damage.summary();
}

INSTANTIATE_TEST_SUITE_P(Fields, DamagedEventTest,
                         ::testing::Values(BadValue{"op", 65}, BadValue{"op", 129}, BadValue{"kind", 0},
                                           BadValue{"kind", kEventKindCount + 1}, BadValue{"datatype", 200},
                                           BadValue{"algorithm", 9}, BadValue{"protocol", 4},
                                           BadValue{"flags", 0x80}, BadValue{"name_id", 1090519092},
                                           BadValue{"name_id", 553648180}, BadValue{"end_ns", INT64_MAX / 2},
                                           BadValue{"begin_ns", -415968838323813000}),
                         [](const auto& info) {
                           return std::string(info.param.field) + "_" +
                                  (info.param.value < 0 ? "minus" + std::to_string(-info.param.value)
                                                        : std::to_string(info.param.value));
                         });

TEST_F(TimelineDamageTest, EndBeforeBeginIsLeftOut) {
  const int64_t begin = testing::get_timeline_value(path_, "/events", 3, "begin_ns");
  testing::set_timeline_value(path_, "/events", 3, "end_ns", begin - 1);
  const Timeline timeline(path_);
  EXPECT_EQ(events_read(timeline), timeline.event_count() - 1);
  EXPECT_EQ(timeline.damage().findings.at(0).field, "end_ns");
}

TEST_F(TimelineDamageTest, UnreadableEventChunkCostsOnlyItsRows) {
  testing::flip_timeline_byte(path_, "/events", kEventChunkRows + 100, 3);
  const Timeline timeline(path_);
  EXPECT_EQ(events_read(timeline), timeline.event_count() - kEventChunkRows);
  const TimelineDamage damage = timeline.damage();
  ASSERT_EQ(damage.findings.size(), 1u);
  EXPECT_EQ(damage.findings[0].row, kEventChunkRows);
  EXPECT_EQ(damage.findings[0].rows, kEventChunkRows);
  EXPECT_NE(damage.findings[0].problem.find("checksum mismatch"), std::string::npos) << damage.findings[0].problem;
}

TEST_F(TimelineDamageTest, UnreadableRankRowMakesTheRankMissing) {
  testing::flip_timeline_byte(path_, "/ranks", 1, 20);
  const Timeline timeline(path_);
  ASSERT_EQ(timeline.world_size(), 2);
  EXPECT_EQ(timeline.ranks()[0].status, RankStatus::kComplete);
  EXPECT_EQ(timeline.ranks()[1].status, RankStatus::kMissing);
  EXPECT_EQ(timeline.ranks()[1].event_count, 0u);
  EXPECT_EQ(timeline.damage().rows_left_out.at("/ranks"), 1u);
  EXPECT_EQ(events_read(timeline), timeline.ranks()[0].event_count);
}

TEST_F(TimelineDamageTest, ImpossibleRankRowValuesAreNamed) {
  for (const auto& [field, value] : {std::pair<const char*, int64_t>{"pid", int64_t{1} << 40}, {"status", 9},
                                     {"event_count", int64_t{1} << 50}, {"node_id", 1 << 20}, {"rank", 5}}) {
    fs::copy_file(dir_ / "sound.h5", path_, fs::copy_options::overwrite_existing);
    testing::set_timeline_value(path_, "/ranks", 1, field, value);
    const Timeline timeline(path_);
    EXPECT_EQ(timeline.ranks()[1].status, RankStatus::kMissing) << field;
    const TimelineDamage damage = timeline.damage();
    ASSERT_EQ(damage.findings.size(), 1u) << field;
    EXPECT_EQ(damage.findings[0].dataset, "/ranks");
    EXPECT_EQ(damage.findings[0].field, field);
  }
}

TEST_F(TimelineDamageTest, EventCountsThatDoNotAddUpReadAsUnknown) {
  testing::set_timeline_value(path_, "/event_counts", 0, std::to_string(kEventKindCount - 2), 553648128);
  const Timeline timeline(path_);
  const RankInfo& rank = timeline.ranks()[0];
  for (uint64_t n : rank.events_by_kind) EXPECT_EQ(n, 0u);
  EXPECT_EQ(timeline.damage().findings.at(0).dataset, "/event_counts");
  EXPECT_EQ(events_read(timeline), timeline.event_count());  // the events themselves are sound
}

// Timelines written before the torch kinds count events by 16 kinds: read
// as they are, the torch kinds' counts 0, nothing called damaged.
TEST_F(TimelineDamageTest, EventCountsOfTimelinesBeforeTheTorchKindsAreRead) {
  const std::vector<uint64_t> counts_now = Timeline(path_).ranks()[0].events_by_kind;
  {
    const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t dataset = H5Dopen2(file, schema::kEventCounts, H5P_DEFAULT);
    std::vector<uint64_t> counts(2 * kEventKindCount);
    ASSERT_GE(H5Dread(dataset, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts.data()), 0);
    H5Dclose(dataset);
    H5Ldelete(file, schema::kEventCounts, H5P_DEFAULT);
    std::vector<uint64_t> older;
    for (int r = 0; r < 2; ++r) {
      older.insert(older.end(), counts.begin() + r * kEventKindCount,
                   counts.begin() + r * kEventKindCount + kEventKindCountBeforeTorch);
    }
    const hsize_t dims[2] = {2, kEventKindCountBeforeTorch};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t written = H5Dcreate2(file, schema::kEventCounts, H5T_NATIVE_UINT64, space, H5P_DEFAULT, H5P_DEFAULT,
                                     H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(written, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, older.data()), 0);
    H5Dclose(written);
    H5Sclose(space);
    H5Fclose(file);
  }
  const Timeline timeline(path_);
  EXPECT_EQ(timeline.ranks()[0].events_by_kind, counts_now);
  EXPECT_TRUE(timeline.damage().empty());
}

TEST_F(TimelineDamageTest, UnreadableStringsReadAsDamagedNames) {
  testing::flip_timeline_byte(path_, "/strings/bytes", 0, 0);
  const Timeline timeline(path_);
  EXPECT_EQ(timeline.damage().rows_left_out.count("/strings/bytes"), 1u);
  for (const std::string& s : timeline.strings()) EXPECT_EQ(s, "<damaged name>");
  EXPECT_EQ(events_read(timeline), timeline.event_count());
}

TEST_F(TimelineDamageTest, CounterWithAnUnknownNameIsLeftOut) {
  testing::set_timeline_value(path_, "/counters", 0, "name_id", 1 << 30);
  const Timeline timeline(path_);
  EXPECT_EQ(timeline.damage().findings.at(0).dataset, "/counters");
  EXPECT_EQ(timeline.damage().findings.at(0).field, "name_id");
}

TEST_F(TimelineDamageTest, ImpossibleClockIsReadAsNotSynced) {
  testing::set_timeline_value(path_, "/clock", 1, "bound_ns", -5);
  const Timeline timeline(path_);
  EXPECT_FALSE(timeline.ranks()[1].clock.synced);
  EXPECT_EQ(timeline.damage().findings.at(0).dataset, "/clock");
}

}  // namespace
}  // namespace rankscope
