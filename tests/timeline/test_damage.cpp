// The timeline reader on damaged files: every damaged value and unreadable
// chunk is left out, named with dataset, row and field, and counted; nothing
// else is lost and nothing crashes. One process (MPI singleton, for the merge).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/model/error.h"

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

// A block whose checksum a read verified gives later reads only the rows
// asked for: the same rows as a whole read, across a block's end too, and
// still with each value checked.
TEST_F(TimelineDamageTest, RowsOfVerifiedBlocksAreTheRowsOfAWholeRead) {
  const uint64_t damaged = kEventChunkRows + 2;
  testing::set_timeline_value(path_, "/events", damaged, "kind", 250);
  const Timeline timeline(path_);
  const RankInfo& rank = timeline.ranks()[0];
  std::vector<Event> whole, part;
  timeline.read_events(rank.rank, 0, rank.event_count, whole);  // verifies every block
  ASSERT_EQ(whole.size(), rank.event_count - 1);
  timeline.read_events(rank.rank, kEventChunkRows - 3, 6, part);
  ASSERT_EQ(part.size(), 5u);  // the damaged row left out
  for (size_t i = 0; i < part.size(); ++i) {
    const Event& expected = whole[kEventChunkRows - 3 + i];  // rows before the damaged one are at their index
    EXPECT_EQ(part[i].begin_ns, expected.begin_ns) << i;
    EXPECT_EQ(part[i].end_ns, expected.end_ns) << i;
  }
  timeline.read_events(rank.rank, 2 * kEventChunkRows + 5, 1, part);
  ASSERT_EQ(part.size(), 1u);
  EXPECT_EQ(part[0].begin_ns, whole[2 * kEventChunkRows + 4].begin_ns);
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

// Readers that each read some ranks (the processes of `mpirun rankscope
// report`) joined hold what one reader of every rank holds: the same rows
// left out, the findings of the lowest rows kept, whatever the order.
TEST_F(TimelineDamageTest, ReadersOfSomeRanksJoinedFindWhatOneReaderFinds) {
  // More damaged rows than findings are kept, in both ranks.
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < TimelineDamage::kFindingsKept; ++i) {
    rows.push_back(3 * i + 1);
    rows.push_back(3 * kEventChunkRows + 2 * i + 5);
  }
  for (const uint64_t row : rows) testing::set_timeline_value(path_, "/events", row, "kind", 250);
  const Timeline whole(path_), first(path_), second(path_);
  events_read(whole);
  const auto read_rank = [](const Timeline& timeline, int32_t rank) {
    timeline.for_each_event_block(rank, [](const std::vector<Event>&) {});
  };
  read_rank(first, 1);  // the higher rows first: what is kept does not follow the order read
  read_rank(first, 0);
  read_rank(second, 1);
  first.join_damage(second.damage_seen());
  second.join_damage(first.damage_seen());
  const TimelineDamage expected = whole.damage();
  EXPECT_EQ(expected.rows_left_out.at("/events"), rows.size());
  ASSERT_EQ(expected.findings.size(), TimelineDamage::kFindingsKept);
  EXPECT_EQ(expected.findings.front().row, 1u);
  for (const Timeline* joined : {&first, &second}) {
    const TimelineDamage damage = joined->damage();
    EXPECT_EQ(damage.rows_left_out, expected.rows_left_out);
    ASSERT_EQ(damage.findings.size(), expected.findings.size());
    for (size_t i = 0; i < damage.findings.size(); ++i) {
      EXPECT_EQ(damage.findings[i].row, expected.findings[i].row) << i;
      EXPECT_EQ(damage.findings[i].problem, expected.findings[i].problem) << i;
    }
  }
}

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

// Replaces `name` by a dataset of the same rows read through `row_type`,
// stored as `stored_type`, chunked by `chunk_rows` (0: contiguous), of which
// only the first `rows_written` are written (all when -1).
void rewrite_dataset(const std::string& path, const char* name, hid_t row_type, size_t row_bytes, hid_t stored_type,
                     hsize_t chunk_rows = 0, hssize_t rows_written = -1) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
  const hid_t space = H5Dget_space(dataset);
  hsize_t rows = 0;
  H5Sget_simple_extent_dims(space, &rows, nullptr);
  std::vector<char> data(rows * row_bytes);
  ASSERT_GE(H5Dread(dataset, row_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), 0);
  H5Dclose(dataset);
  H5Ldelete(file, name, H5P_DEFAULT);
  const hid_t creation = H5Pcreate(H5P_DATASET_CREATE);
  if (chunk_rows > 0) H5Pset_chunk(creation, 1, &chunk_rows);
  H5Pset_fill_time(creation, H5D_FILL_TIME_NEVER);
  const hid_t written = H5Dcreate2(file, name, stored_type, space, H5P_DEFAULT, creation, H5P_DEFAULT);
  ASSERT_GE(written, 0);
  const hsize_t first = 0, count = rows_written < 0 ? rows : static_cast<hsize_t>(rows_written);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, &first, nullptr, &count, nullptr);
  const hid_t memory = H5Screate_simple(1, &count, nullptr);
  ASSERT_GE(H5Dwrite(written, row_type, memory, space, H5P_DEFAULT, data.data()), 0);
  H5Sclose(memory);
  H5Dclose(written);
  H5Pclose(creation);
  H5Sclose(space);
  H5Fclose(file);
}

std::string error_opening(const std::string& path) {
  try {
    Timeline timeline(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// HDF5 converts what it reads from the type the file describes: a damaged
// description (in a timeline written before HDF5 checksummed its metadata)
// would crash the conversion or change every value. It is refused by name.
TEST_F(TimelineDamageTest, AStoredTypeOtherThanTheWrittenOneIsRefused) {
  {
    // offset_ns big-endian: each offset would be read byte-swapped.
    const schema::Handle clock_type(schema::clock_row_type());
    const schema::Handle stored(H5Tcreate(H5T_COMPOUND, sizeof(schema::ClockRow)), H5Tclose);
    for (int m = 0; m < H5Tget_nmembers(clock_type); ++m) {
      char* member = H5Tget_member_name(clock_type, static_cast<unsigned>(m));
      const schema::Handle type(H5Tget_member_type(clock_type, static_cast<unsigned>(m)), H5Tclose);
      H5Tinsert(stored, member, H5Tget_member_offset(clock_type, static_cast<unsigned>(m)),
                std::string(member) == "offset_ns" ? H5T_STD_I64BE : hid_t(type));
      H5free_memory(member);
    }
    rewrite_dataset(path_, schema::kClock, schema::clock_row_type(), sizeof(schema::ClockRow), stored);
  }
  EXPECT_EQ(error_opening(path_), path_ + ": dataset /clock: member offset_ns: its size or byte order differs (damaged?)");

  fs::copy_file(dir_ / "sound.h5", path_, fs::copy_options::overwrite_existing);
  {
    const schema::Handle renamed(H5Tcreate(H5T_COMPOUND, sizeof(schema::CounterRow)), H5Tclose);
    H5Tinsert(renamed, "rank", offsetof(schema::CounterRow, rank), H5T_NATIVE_INT32);
    H5Tinsert(renamed, "name_jd", offsetof(schema::CounterRow, name_id), H5T_NATIVE_UINT32);
    H5Tinsert(renamed, "value", offsetof(schema::CounterRow, value), H5T_NATIVE_UINT64);
    // Written through the stored type itself: HDF5 would not convert to a member it does not know.
    rewrite_dataset(path_, schema::kCounters, renamed, sizeof(schema::CounterRow), renamed);
  }
  EXPECT_EQ(error_opening(path_),
            path_ + ": dataset /counters: member 1 is named 'name_jd', which rankscope never writes (damaged?)");

  fs::copy_file(dir_ / "sound.h5", path_, fs::copy_options::overwrite_existing);
  {
    // The status enum with "dead" at another value: every dead rank would read as another status.
    const schema::Handle rank_type(schema::rank_row_type());
    const schema::Handle stored(H5Tcreate(H5T_COMPOUND, sizeof(schema::RankRow)), H5Tclose);
    for (int m = 0; m < H5Tget_nmembers(rank_type); ++m) {
      char* member = H5Tget_member_name(rank_type, static_cast<unsigned>(m));
      const schema::Handle type(H5Tget_member_type(rank_type, static_cast<unsigned>(m)), H5Tclose);
      schema::Handle status(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose);
      const bool is_status = std::string(member) == "status";
      if (is_status) {
        for (uint8_t value = 0; value <= static_cast<uint8_t>(kLastRankStatus); ++value) {
          const uint8_t stored_value = value == 1 ? 9 : value;
          H5Tenum_insert(status, rank_status_name(static_cast<RankStatus>(value)), &stored_value);
        }
      }
      H5Tinsert(stored, member, H5Tget_member_offset(rank_type, static_cast<unsigned>(m)),
                is_status ? hid_t(status) : hid_t(type));
      H5free_memory(member);
    }
    rewrite_dataset(path_, schema::kRanks, stored, sizeof(schema::RankRow), stored);
  }
  EXPECT_EQ(error_opening(path_),
            path_ + ": dataset /ranks: member status: its enum value 1 differs from the one written (damaged?)");
}

// A chunk its dataset's index does not list reads as zeros through HDF5:
// those rows are damage, left out and named, not zero counters.
TEST_F(TimelineDamageTest, AChunkMissingFromTheIndexIsDamageNotZeros) {
  rewrite_dataset(path_, schema::kCounters, schema::counter_row_type(), sizeof(schema::CounterRow),
                  schema::counter_row_type(), 4, 4);
  const Timeline timeline(path_);
  const TimelineDamage damage = timeline.damage();
  ASSERT_FALSE(damage.empty());
  EXPECT_EQ(damage.findings.at(0).dataset, "/counters");
  EXPECT_EQ(damage.findings.at(0).row, 4u);
  EXPECT_EQ(damage.findings.at(0).problem, "not in the dataset's chunk index (damaged?)");
  uint64_t counters = 0;
  for (const RankInfo& rank : timeline.ranks()) counters += rank.counters.entries().size();
  EXPECT_EQ(counters, 4u) << "only the written chunk's counters are read";
}

// Timelines are written in HDF5's 1.10 format, whose metadata HDF5 checksums.
TEST_F(TimelineDamageTest, TheMetadataIsChecksummed) { EXPECT_TRUE(Timeline(path_).metadata_checksummed()); }

}  // namespace
}  // namespace rankscope
