#include "rankscope/model/shard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "rankscope/model/crc32c.h"
#include "datasync_calls.h"
#include "rankscope/model/error.h"
#include "synthetic_job.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

bool same_event(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) == 0; }

bool event_less(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) < 0; }

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rankscope-shard-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  testing::SyntheticRank write(uint64_t events, uint32_t chunk_events, bool clean = true) {
    testing::SyntheticJob job;
    job.world_size = 4;
    job.events_per_rank = events;
    job.chunk_events = chunk_events;
    job.close_cleanly = clean;
    return testing::write_synthetic_rank((dir_ / "rank-00002.shard").string(), 2, job);
  }

  std::vector<char> read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }

  void write_file(const fs::path& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  std::vector<Event> all_events(const ShardFile& file, const ShardScan& scan) {
    std::vector<Event> all, chunk;
    for (const auto& ref : scan.event_chunks) {
      file.read_events(ref, chunk);
      all.insert(all.end(), chunk.begin(), chunk.end());
    }
    return all;
  }

  fs::path dir_;
};

// A shard is held while its writer has it open, by another process too,
// and let go however the writer ends; a held shard is never cut by another
// writer.
TEST_F(ShardTest, AWritersShardIsHeldUntilItEnds) {
  const std::string path = (dir_ / "rank-00000.shard").string();
  RankMetadata metadata;
  metadata.rank = 0;
  metadata.world_size = 1;
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ShardWriter writer;
    char go = writer.open(path, metadata, 0) ? 1 : 0;
    if (::write(ready[1], &go, 1) != 1) ::_exit(3);
    if (::read(done[0], &go, 1) != 1) ::_exit(3);
    ::_exit(0);  // no close: as a killed rank ends
  }
  char go = 0;
  ASSERT_EQ(::read(ready[0], &go, 1), 1);
  ASSERT_EQ(go, 1);
  const uint64_t bytes = fs::file_size(path);
  EXPECT_TRUE(shard_in_use(path));
  ShardWriter second;
  EXPECT_FALSE(second.open(path, metadata, 0));
  EXPECT_EQ(second.error(), "cannot create shard " + path + ": a running process writes it");
  EXPECT_EQ(fs::file_size(path), bytes) << "the running writer's shard was cut";
  EXPECT_FALSE(second.open_existing(path));
  ASSERT_EQ(::write(done[1], &go, 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_FALSE(shard_in_use(path)) << "a writer that ended without closing still holds its shard";
  EXPECT_TRUE(second.open_existing(path)) << second.error();
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST_F(ShardTest, RoundTripKeepsEverything) {
  const auto truth = write(10000, 1000);
  const ShardFile file(truth.path);
  const ShardScan scan = file.scan();
  EXPECT_FALSE(scan.damage.any());
  EXPECT_TRUE(scan.damage.problems.empty());
  EXPECT_TRUE(scan.ended);
  ASSERT_TRUE(scan.metadata);
  EXPECT_EQ(scan.rank(), 2);
  EXPECT_EQ(scan.world_size(), 4);
  EXPECT_EQ(scan.metadata->host, "node-0");
  EXPECT_EQ(scan.tracks.size(), 3u);
  EXPECT_EQ(scan.strings.size(), truth.names.size());
  for (const auto& [id, text] : scan.strings) EXPECT_EQ(text, truth.names.at(id));
  EXPECT_EQ(scan.event_count, 10000u);

  std::vector<Event> read = all_events(file, scan);
  std::vector<Event> expected = truth.events;
  std::sort(read.begin(), read.end(), event_less);
  std::sort(expected.begin(), expected.end(), event_less);
  ASSERT_EQ(read.size(), expected.size());
  EXPECT_TRUE(std::equal(read.begin(), read.end(), expected.begin(), same_event));
}

TEST_F(ShardTest, EventChunksAreSortedByBegin) {
  const auto truth = write(5000, 500);
  const ShardFile file(truth.path);
  const ShardScan scan = file.scan();
  std::vector<Event> chunk;
  for (const auto& ref : scan.event_chunks) {
    EXPECT_TRUE(ref.sorted);
    file.read_events(ref, chunk);
    EXPECT_TRUE(std::is_sorted(chunk.begin(), chunk.end(),
                               [](const Event& a, const Event& b) { return a.begin_ns < b.begin_ns; }));
    EXPECT_EQ(chunk.front().begin_ns, ref.first_ns);
  }
}

TEST_F(ShardTest, ShardCutAnywhereKeepsEveryWholeChunk) {
  const auto truth = write(6000, 300);
  const std::vector<char> original = read_file(truth.path);
  const ShardScan clean = ShardFile(truth.path).scan();
  std::mt19937_64 random(42);
  std::vector<uint64_t> cuts;
  for (int i = 0; i < 150; ++i) cuts.push_back(sizeof(ShardFileHeader) + random() % (original.size() - 32));
  for (const auto& ref : clean.event_chunks) {
    const uint64_t end = ref.payload_offset + uint64_t{ref.count} * sizeof(Event);
    cuts.insert(cuts.end(), {ref.payload_offset - sizeof(ChunkHeader), end - 1, end});
  }
  const fs::path cut_path = dir_ / "cut.shard";
  for (const uint64_t cut : cuts) {
    write_file(cut_path, std::vector<char>(original.begin(), original.begin() + static_cast<long>(cut)));
    const ShardFile file(cut_path.string());
    const ShardScan scan = file.scan();
    uint64_t expected = 0;
    for (const auto& ref : clean.event_chunks) {
      if (ref.payload_offset + uint64_t{ref.count} * sizeof(Event) <= cut) expected += ref.count;
    }
    ASSERT_EQ(scan.event_count, expected) << "cut at byte " << cut;
    EXPECT_EQ(all_events(file, scan).size(), expected);
    EXPECT_FALSE(scan.ended) << "cut at byte " << cut;
    EXPECT_EQ(scan.damage.chunks_corrupt, 0u);
    EXPECT_EQ(scan.rank(), 2);
    if (scan.damage.truncated_bytes > 0) {
      ASSERT_FALSE(scan.damage.problems.empty());
      EXPECT_NE(scan.damage.problems.back().find("cut.shard"), std::string::npos);
      EXPECT_NE(scan.damage.problems.back().find("byte"), std::string::npos);
    }
  }
}

// A process killed mid-write leaves a chunk cut short; `rankscope run`
// then appends what it saw of the death. The chunk written later is read,
// and so is every whole chunk before the cut.
TEST_F(ShardTest, AChunkWrittenAfterACutIsRead) {
  const auto truth = write(6000, 300, /*clean=*/false);
  const std::vector<char> original = read_file(truth.path);
  const ShardScan clean = ShardFile(truth.path).scan();
  std::mt19937_64 random(7);
  std::vector<uint64_t> cuts;
  for (int i = 0; i < 60; ++i) cuts.push_back(sizeof(ShardFileHeader) + 64 + random() % (original.size() - 96));
  for (const auto& ref : clean.event_chunks) cuts.insert(cuts.end(), {ref.payload_offset + 8, ref.payload_offset - 4});
  const fs::path cut_path = dir_ / "appended.shard";
  for (const uint64_t cut : cuts) {
    write_file(cut_path, std::vector<char>(original.begin(), original.begin() + static_cast<long>(cut)));
    Counters later;
    later.set("killed_by_signal", 9);
    ShardWriter writer;
    ASSERT_TRUE(writer.open_existing(cut_path.string())) << writer.error();
    ASSERT_TRUE(writer.write_counters(later, 1234));
    writer = ShardWriter();
    const ShardScan scan = ShardFile(cut_path.string()).scan();
    uint64_t expected = 0;
    for (const auto& ref : clean.event_chunks) {
      if (ref.payload_offset + uint64_t{ref.count} * sizeof(Event) <= cut) expected += ref.count;
    }
    EXPECT_EQ(scan.event_count, expected) << "cut at byte " << cut;
    EXPECT_EQ(scan.counters.get("killed_by_signal"), 9u) << "cut at byte " << cut;
    EXPECT_FALSE(scan.ended);
  }
}

TEST_F(ShardTest, FlippedBytesLoseOnlyTheChunksTheyHit) {
  const auto truth = write(6000, 300);
  const std::vector<char> original = read_file(truth.path);
  const ShardScan clean = ShardFile(truth.path).scan();
  const fs::path damaged_path = dir_ / "flipped.shard";
  std::mt19937_64 random(99);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<char> bytes = original;
    std::set<uint64_t> flipped;
    const int flips = 1 + static_cast<int>(random() % 6);
    for (int f = 0; f < flips; ++f) {
      const uint64_t at = sizeof(ShardFileHeader) + random() % (bytes.size() - sizeof(ShardFileHeader));
      bytes[at] = static_cast<char>(bytes[at] ^ static_cast<char>(1 + random() % 255));
      flipped.insert(at);
    }
    write_file(damaged_path, bytes);
    const ShardFile file(damaged_path.string());
    const ShardScan scan = file.scan();

    std::set<uint64_t> recovered;
    for (const auto& ref : scan.event_chunks) recovered.insert(ref.payload_offset);
    uint64_t untouched_events = 0;
    for (const auto& ref : clean.event_chunks) {
      const uint64_t begin = ref.payload_offset - sizeof(ChunkHeader);
      const uint64_t end = ref.payload_offset + uint64_t{ref.count} * sizeof(Event);
      const bool hit = flipped.lower_bound(begin) != flipped.end() && *flipped.lower_bound(begin) < end;
      if (!hit) {
        EXPECT_TRUE(recovered.count(ref.payload_offset)) << "trial " << trial << ": lost untouched chunk at " << begin;
        untouched_events += ref.count;
      } else {
        EXPECT_FALSE(recovered.count(ref.payload_offset)) << "trial " << trial << ": kept a damaged chunk";
      }
    }
    EXPECT_EQ(scan.event_count, untouched_events) << "trial " << trial;
    EXPECT_GE(scan.damage.chunks_corrupt, 1u) << "trial " << trial;
    EXPECT_EQ(all_events(file, scan).size(), untouched_events);
  }
}

TEST_F(ShardTest, DamagedFileHeaderFallsBackToMetadata) {
  const auto truth = write(1000, 100);
  std::vector<char> bytes = read_file(truth.path);
  bytes[offsetof(ShardFileHeader, rank)] ^= 0x40;
  write_file(truth.path, bytes);
  const ShardScan scan = ShardFile(truth.path).scan();
  EXPECT_EQ(scan.rank(), 2);
  EXPECT_EQ(scan.event_count, 1000u);
  ASSERT_FALSE(scan.damage.problems.empty());
  EXPECT_NE(scan.damage.problems.front().find("file header damaged"), std::string::npos);
}

TEST_F(ShardTest, UnknownVersionIsRefused) {
  const auto truth = write(100, 100);
  std::vector<char> bytes = read_file(truth.path);
  ShardFileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.version = 7;
  header.header_crc = crc32c(&header, offsetof(ShardFileHeader, header_crc));
  std::memcpy(bytes.data(), &header, sizeof(header));
  write_file(truth.path, bytes);
  try {
    ShardFile file(truth.path);
    FAIL() << "version 7 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 7 is not supported"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(truth.path), std::string::npos) << e.what();
  }
}

TEST_F(ShardTest, OtherFilesAreRefusedByName) {
  const fs::path path = dir_ / "notes.txt";
  write_file(path, {'h', 'e', 'l', 'l', 'o'});
  EXPECT_THROW(
      {
        try {
          ShardFile file(path.string());
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("notes.txt is not a rankscope shard"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(ShardFile((dir_ / "absent.shard").string()), Error);
}

TEST_F(ShardTest, FailedWriteKeepsEverythingWrittenBefore) {
  RankMetadata metadata;
  metadata.rank = 0;
  metadata.world_size = 1;
  const std::string path = (dir_ / "full.shard").string();
  ShardWriter writer;
  ASSERT_TRUE(writer.open(path, metadata, 1));
  std::vector<Event> events(1000);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i] = Event{};
    events[i].begin_ns = events[i].end_ns = static_cast<int64_t>(i);
    events[i].kind = EventKind::kInstant;
  }
  ASSERT_TRUE(writer.write_events(events));

  // A file size limit stands in for a full disk: the kernel refuses the write the same way.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ignore, &previous);
  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit limit = old_limit;
  limit.rlim_cur = writer.bytes_written() + 1000;
  setrlimit(RLIMIT_FSIZE, &limit);
  const bool written = writer.write_events(events);
  const std::string error = writer.error();
  setrlimit(RLIMIT_FSIZE, &old_limit);
  sigaction(SIGXFSZ, &previous, nullptr);

  EXPECT_FALSE(written);
  EXPECT_NE(error.find("full.shard"), std::string::npos) << error;
  EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  // The partial chunk was taken back: later chunks still land cleanly.
  ASSERT_TRUE(writer.write_events(events));
  ASSERT_TRUE(writer.close(Counters{}, 2));
  const ShardScan scan = ShardFile(path).scan();
  EXPECT_FALSE(scan.damage.any());
  EXPECT_EQ(scan.event_count, 2000u);
  EXPECT_TRUE(scan.ended);
}

// The descriptor open on `path` in this process, or -1.
int descriptor_of(const std::string& path) {
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ignored;
    if (fs::read_symlink(entry.path(), ignored) == fs::path(path)) return std::stoi(entry.path().filename().string());
  }
  return -1;
}

// A program that closes the descriptors it did not open, or puts a file of
// its own in the shard's place (dup2): the writer opens the shard again,
// loses nothing, and writes nothing into the program's file.
TEST_F(ShardTest, AShardWhoseDescriptorTheProgramTookIsOpenedAgain) {
  const std::string path = (dir_ / "rank-00000.shard").string();
  const std::string own = (dir_ / "programs-own.txt").string();
  RankMetadata metadata;
  metadata.rank = 0;
  metadata.world_size = 1;
  ShardWriter writer;
  ASSERT_TRUE(writer.open(path, metadata, 1));
  const SyncPoint point{1, 2, 3};
  ASSERT_TRUE(writer.write_sync_points({&point, 1}, 1));
  const int fd = descriptor_of(path);
  ASSERT_GE(fd, 0);
  const int program_file = ::open(own.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(program_file, 0);
  ASSERT_EQ(::dup2(program_file, fd), fd);  // the shard's descriptor is the program's file now
  ASSERT_TRUE(writer.write_sync_points({&point, 1}, 2)) << writer.error();
  ::close(descriptor_of(path));  // and now closed outright
  ASSERT_TRUE(writer.write_sync_points({&point, 1}, 3)) << writer.error();
  EXPECT_EQ(writer.reopened(), 2u);
  ASSERT_TRUE(writer.close({}, 4));
  EXPECT_EQ(fs::file_size(own), 0u) << "the agent wrote into the program's file";
  EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "the program's descriptor was closed by the writer";
  ::close(fd);
  ::close(program_file);
  const ShardScan scan = ShardFile(path).scan();
  EXPECT_FALSE(scan.damage.any());
  EXPECT_TRUE(scan.ended);
  EXPECT_EQ(scan.sync_points.size(), 3u);
  EXPECT_FALSE(shard_in_use(path));
}

// Where another file took the shard's path and its descriptor is gone, the
// writer refuses to write into that file, and says why.
TEST_F(ShardTest, AShardReplacedUnderItsPathIsNotWrittenOver) {
  const std::string path = (dir_ / "rank-00000.shard").string();
  const std::string other = (dir_ / "other.txt").string();
  ShardWriter writer;
  ASSERT_TRUE(writer.open(path, RankMetadata{}, 1));
  const int fd = descriptor_of(path);
  ASSERT_GE(fd, 0);
  std::ofstream(other) << "the program's";
  fs::rename(other, path);
  ::close(fd);
  const SyncPoint point{1, 2, 3};
  EXPECT_FALSE(writer.write_sync_points({&point, 1}, 2));
  EXPECT_NE(writer.error().find("another file has taken its place"), std::string::npos) << writer.error();
  EXPECT_EQ(fs::file_size(path), std::string("the program's").size());
}

TEST_F(ShardTest, UnwritablePlaceIsNamed) {
  ShardWriter writer;
  RankMetadata metadata;
  EXPECT_FALSE(writer.open((dir_ / "no-such-dir" / "r.shard").string(), metadata, 0));
  EXPECT_NE(writer.error().find("no-such-dir/r.shard"), std::string::npos) << writer.error();
  EXPECT_NE(writer.error().find("No such file or directory"), std::string::npos) << writer.error();
}

TEST_F(ShardTest, FullDeviceIsReported) {
  ShardWriter writer;
  RankMetadata metadata;
  // /dev/full accepts the open and fails every write with ENOSPC.
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "/dev/full is not available";
  EXPECT_FALSE(writer.open("/dev/full", metadata, 0));
  EXPECT_NE(writer.error().find("No space left on device"), std::string::npos) << writer.error();
}

// A capture's shard must outlast a crash of the machine once its program
// ended; the import's shards are removed after its merge, and waiting for
// the disk cost it 0.3-0.6 s of 2 s. Either way the shard is whole.
TEST_F(ShardTest, ACapturesShardIsSyncedAtCloseAnImportsTemporaryOneIsNot) {
  RankMetadata metadata;
  metadata.rank = 0;
  metadata.world_size = 1;
  std::vector<Event> events(100);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i] = Event{};
    events[i].begin_ns = events[i].end_ns = static_cast<int64_t>(i);
    events[i].kind = EventKind::kInstant;
  }
  for (const auto keeping : {ShardWriter::Keeping::kDurable, ShardWriter::Keeping::kTemporary}) {
    const std::string path = (dir_ / (keeping == ShardWriter::Keeping::kDurable ? "capture.shard" : "import.shard")).string();
    ShardWriter writer;
    ASSERT_TRUE(writer.open(path, metadata, 1));
    ASSERT_TRUE(writer.write_events(events));
    const int before = testing::datasync_calls();
    ASSERT_TRUE(writer.close(Counters{}, 200, keeping)) << writer.error();
    EXPECT_EQ(testing::datasync_calls() - before, keeping == ShardWriter::Keeping::kDurable ? 1 : 0) << path;
    const ShardScan scan = ShardFile(path).scan();
    EXPECT_FALSE(scan.damage.any()) << path;
    EXPECT_EQ(scan.event_count, 100u) << path;
    EXPECT_TRUE(scan.ended) << path;
  }
}

}  // namespace
}  // namespace rankscope
