// The exporter (rankscope/export.h): its protobuf encoding against golden
// bytes, the selection parsers, and exports of a hand-made job
// (export_fixture.h) and of a synthetic one, counted. The command-line test
// (tests/coordinator/test_export_cli.sh) runs the independent checker on the
// files themselves.
#include "rankscope/exporters/export.h"

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "export_fixture.h"
#include "rankscope/merge/merge.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/timeline/timeline.h"
#include "synthetic_job.h"
// The encoder is internal to the exporter; its bytes are tested directly.
#include "proto_writer.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using export_detail::ProtoWriter;
using export_detail::WireType;
namespace field = export_detail::perfetto_fields;

std::string hex(const ProtoWriter& w) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string text;
  for (size_t i = 0; i < w.size(); ++i) {
    text += (text.empty() ? "" : " ");
    text += kDigits[w.data()[i] >> 4];
    text += kDigits[w.data()[i] & 15];
  }
  return text;
}

std::string tag_bytes(uint32_t number, WireType type) {
  ProtoWriter w;
  w.tag(number, type);
  return hex(w);
}

// The tag bytes of docs/export.md's field table, checked against a hex dump
// of a trace written by Perfetto's own tools (shared/reference/perfetto-format.md).
TEST(ExportEncoding, TagBytesMatchPerfettosFieldNumbers) {
  EXPECT_EQ(tag_bytes(field::kTracePacket, WireType::kLengthDelimited), "0A");
  EXPECT_EQ(tag_bytes(field::kTimestamp, WireType::kVarint), "40");
  EXPECT_EQ(tag_bytes(field::kTrustedPacketSequenceId, WireType::kVarint), "50");
  EXPECT_EQ(tag_bytes(field::kTrackEvent, WireType::kLengthDelimited), "5A");
  EXPECT_EQ(tag_bytes(field::kInternedData, WireType::kLengthDelimited), "62");
  EXPECT_EQ(tag_bytes(field::kSequenceFlags, WireType::kVarint), "68");
  EXPECT_EQ(tag_bytes(field::kTracePacketDefaults, WireType::kLengthDelimited), "DA 03");
  EXPECT_EQ(tag_bytes(field::kTrackDescriptor, WireType::kLengthDelimited), "E2 03");
  EXPECT_EQ(tag_bytes(field::kCategoryIids, WireType::kVarint), "18");
  EXPECT_EQ(tag_bytes(field::kDebugAnnotations, WireType::kLengthDelimited), "22");
  EXPECT_EQ(tag_bytes(field::kType, WireType::kVarint), "48");
  EXPECT_EQ(tag_bytes(field::kNameIid, WireType::kVarint), "50");
  EXPECT_EQ(tag_bytes(field::kTrackUuid, WireType::kVarint), "58");
  EXPECT_EQ(tag_bytes(field::kCounterValue, WireType::kVarint), "F0 01");
  EXPECT_EQ(tag_bytes(field::kFlowIds, WireType::kFixed64), "F9 02");
  EXPECT_EQ(field::kSliceBegin, 1u);
  EXPECT_EQ(field::kSliceEnd, 2u);
  EXPECT_EQ(field::kInstant, 3u);
  EXPECT_EQ(field::kCounter, 4u);
}

TEST(ExportEncoding, MessagesNestWithTheirLengths) {
  ProtoWriter w;
  const size_t packet = w.begin(field::kTracePacket);
  w.varint_field(field::kTimestamp, 300);
  const size_t event = w.begin(field::kTrackEvent);
  w.varint_field(field::kType, field::kSliceBegin);
  w.fixed64_field(field::kFlowIds, 0x0102030405060708ull);
  w.end(event);
  w.end(packet);
  EXPECT_EQ(hex(w), "0A 11 40 AC 02 5A 0C 48 01 F9 02 08 07 06 05 04 03 02 01");

  // A message of 128 bytes or more takes a two-byte length, moved into place.
  ProtoWriter long_message;
  const size_t outer = long_message.begin(field::kTracePacket);
  long_message.bytes_field(field::kName, std::string(200, 'x'));
  long_message.end(outer);
  ASSERT_EQ(long_message.size(), 2u + 1 + 2 + 200 + 1);
  EXPECT_EQ(hex(long_message).substr(0, 14), "0A CB 01 12 C8");  // 203 = CB 01; 200 = C8 01
  EXPECT_EQ(long_message.data()[6], 'x');
  EXPECT_EQ(long_message.data()[long_message.size() - 1], 'x');
}

TEST(ExportSelection, TimeWindows) {
  const TimeSelection absolute = parse_time_selection("5000:9000");
  EXPECT_EQ(absolute.begin.kind, TimeBound::Kind::kAbsolute);
  EXPECT_EQ(absolute.begin.ns, 5000);
  EXPECT_EQ(absolute.end.ns, 9000);
  const TimeSelection relative = parse_time_selection("+1.5s:+2500ms");
  EXPECT_EQ(relative.begin.kind, TimeBound::Kind::kFromJobStart);
  EXPECT_EQ(relative.begin.ns, 1'500'000'000);
  EXPECT_EQ(relative.end.ns, 2'500'000'000);
  EXPECT_EQ(parse_time_selection("+10us:").begin.ns, 10'000);
  EXPECT_EQ(parse_time_selection("+10us:").end.kind, TimeBound::Kind::kOpen);
  EXPECT_EQ(parse_time_selection(":+0.000000001s").end.ns, 1);
  EXPECT_EQ(parse_time_selection("+1.25us:+7ns").begin.ns, 1'250);
  EXPECT_EQ(parse_time_selection("-20:5").begin.ns, -20);
  for (const char* bad : {"", "5", "1:2:3", "+:", "+1h:", "+1.s:", "x:y", "+-1s:"}) {
    EXPECT_THROW(parse_time_selection(bad), Error) << bad;
  }
}

// The fixture's timeline, merged once for all the tests below.
class ExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("rankscope-export-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "shards");
    testing::write_export_fixture((dir_ / "shards").string());
    MergeOptions options;
    options.inputs = {(dir_ / "shards").string()};
    options.output = (dir_ / "job.h5").string();
    merge_shards(MPI_COMM_SELF, options);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Into the same file each time.
  static ExportResult run(ExportFormat format, ExportOptions options = {}) {
    const Timeline timeline((dir_ / "job.h5").string());
    const char* name = format == ExportFormat::kPerfetto ? "out.pftrace" : "out.json";
    options.replace_output = true;
    return export_timeline(timeline, format, (dir_ / name).string(), options);
  }

  static fs::path dir_;
};
fs::path ExportTest::dir_;

using testing::kFixtureRanks;
using testing::kFixtureSteps;

TEST_F(ExportTest, FullExportHasEveryTrackSliceCounterAndFlow) {
  for (const ExportFormat format : {ExportFormat::kPerfetto, ExportFormat::kChromeJson}) {
    const ExportResult r = run(format);
    const ExportCounts& c = r.counts;
    SCOPED_TRACE(export_format_name(format));
    const uint64_t per_rank_steps = kFixtureRanks * kFixtureSteps;
    EXPECT_EQ(c.processes, static_cast<uint64_t>(kFixtureRanks));
    EXPECT_EQ(c.thread_tracks, static_cast<uint64_t>(kFixtureRanks));
    EXPECT_EQ(c.other_tracks, testing::kFixtureOtherTracks * kFixtureRanks)
        << "three MPI lanes for three collectives in flight, two on the stream and the NVTX domain, one overflow "
           "lane for the unfinished call";
    EXPECT_EQ(c.counter_tracks, testing::kFixtureCounterTracks * kFixtureRanks);
    EXPECT_EQ(c.slices, testing::kFixtureSlicesPerStep * per_rank_steps);
    EXPECT_EQ(c.instants, testing::kFixtureInstantsPerStep * per_rank_steps);
    // Each instance: every rank but the last arriver sends one flow to it.
    EXPECT_EQ(c.collective_flows,
              (testing::kFixtureMpiCollectivesPerStep + testing::kFixtureNcclCollectivesPerStep) * kFixtureSteps *
                  (kFixtureRanks - 1));
    EXPECT_EQ(c.launch_flows, testing::kFixtureLaunchesPerStep * per_rank_steps);
    EXPECT_EQ(c.flows, c.collective_flows + c.launch_flows);
    // The source's samples, plus bytes in flight and GPU busy at each change.
    EXPECT_GT(c.counter_samples, testing::kFixtureCounterEventsPerStep * per_rank_steps);
    EXPECT_EQ(r.events_written, (testing::kFixtureSlicesPerStep + testing::kFixtureInstantsPerStep +
                                 testing::kFixtureCounterEventsPerStep) * per_rank_steps);
    EXPECT_EQ(r.bytes, fs::file_size(r.output));
    EXPECT_FALSE(fs::exists(r.output + ".partial"));
    // The estimate, made before writing, is within a factor of two.
    EXPECT_GT(r.estimated_bytes, r.bytes / 2);
    EXPECT_LT(r.estimated_bytes, r.bytes * 2);
  }
}

TEST_F(ExportTest, BothFormatsCountTheSame) {
  const ExportResult perfetto = run(ExportFormat::kPerfetto);
  const ExportResult json = run(ExportFormat::kChromeJson);
  EXPECT_EQ(perfetto.counts.counter_samples, json.counts.counter_samples);
  EXPECT_EQ(perfetto.counts.flows, json.counts.flows);
  EXPECT_EQ(perfetto.counts.slices, json.counts.slices);
  EXPECT_LT(perfetto.bytes, json.bytes / 2);
}

TEST_F(ExportTest, RankSelectionKeepsFlowsAmongTheSelectedRanks) {
  ExportOptions options;
  options.ranks = std::vector<int32_t>{0, 2};
  const ExportResult r = run(ExportFormat::kPerfetto, options);
  EXPECT_EQ(r.ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(r.counts.processes, 2u);
  EXPECT_EQ(r.counts.slices, testing::kFixtureSlicesPerStep * 2 * kFixtureSteps);
  EXPECT_EQ(r.counts.collective_flows,
            (testing::kFixtureMpiCollectivesPerStep + testing::kFixtureNcclCollectivesPerStep) * kFixtureSteps);
  EXPECT_EQ(r.counts.launch_flows, testing::kFixtureLaunchesPerStep * 2 * kFixtureSteps);
}

TEST_F(ExportTest, StepSelectionTakesTheStepsRangesWhole) {
  ExportOptions options;
  options.steps = parse_step_selection("1:2");
  const ExportResult r = run(ExportFormat::kPerfetto, options);
  EXPECT_EQ(r.window_begin_ns, testing::kFixtureStart + testing::kFixtureStepNs);
  EXPECT_EQ(r.window_end_ns, testing::kFixtureStart + 3 * testing::kFixtureStepNs - 1'000);
  EXPECT_EQ(r.counts.slices, testing::kFixtureSlicesPerStep * kFixtureRanks * 2);
  EXPECT_EQ(r.counts.instants, testing::kFixtureInstantsPerStep * kFixtureRanks * 2);
  EXPECT_EQ(r.counts.collective_flows,
            (testing::kFixtureMpiCollectivesPerStep + testing::kFixtureNcclCollectivesPerStep) * 2 * (kFixtureRanks - 1));

  options.steps = parse_step_selection("3:");
  EXPECT_EQ(run(ExportFormat::kPerfetto, options).counts.slices, testing::kFixtureSlicesPerStep * kFixtureRanks);
  options.steps = parse_step_selection("7:9");
  try {
    run(ExportFormat::kPerfetto, options);
    FAIL() << "steps that do not exist must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("steps 0 to 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("job.h5"), std::string::npos) << e.what();
  }
}

TEST_F(ExportTest, TimeWindowKeepsWhatOverlapsIt) {
  // From the middle of step 1 to the middle of step 2, relative to the job's first event.
  ExportOptions options;
  options.time = parse_time_selection("+150us:+250us");
  const ExportResult relative = run(ExportFormat::kPerfetto, options);
  EXPECT_EQ(relative.window_begin_ns, testing::kFixtureStart + 150'000);
  EXPECT_EQ(relative.window_end_ns, testing::kFixtureStart + 250'000);
  EXPECT_GT(relative.counts.slices, 0u);
  EXPECT_LT(relative.counts.slices, testing::kFixtureSlicesPerStep * kFixtureRanks * 2);

  options.time = parse_time_selection(std::to_string(testing::kFixtureStart + 150'000) + ":" +
                                      std::to_string(testing::kFixtureStart + 250'000));
  const ExportResult absolute = run(ExportFormat::kPerfetto, options);
  EXPECT_EQ(absolute.counts.slices, relative.counts.slices);
  EXPECT_EQ(absolute.counts.flows, relative.counts.flows);

  options.time = parse_time_selection("+10s:");
  EXPECT_THROW(run(ExportFormat::kPerfetto, options), Error);
}

TEST_F(ExportTest, BadSelectionsNameTheTimeline) {
  ExportOptions options;
  options.ranks = std::vector<int32_t>{5};
  try {
    run(ExportFormat::kPerfetto, options);
    FAIL() << "a rank beyond the job must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("job.h5: rank 5 is not in the job"), std::string::npos) << e.what();
  }
  const Timeline timeline((dir_ / "job.h5").string());
  try {
    export_timeline(timeline, ExportFormat::kPerfetto, (dir_ / "no-such-folder" / "out.pftrace").string());
    FAIL() << "an unwritable output must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-folder/out.pftrace"), std::string::npos) << e.what();
  }
}

TEST_F(ExportTest, LargeOutputIsWarnedAboutWithASmallerSelection) {
  std::vector<std::string> warnings;
  ExportOptions options;
  options.warn = [&](const std::string& text) { warnings.push_back(text); };
  const uint64_t estimated = run(ExportFormat::kChromeJson, options).estimated_bytes;
  EXPECT_TRUE(warnings.empty());
  // Room for 80 % of 0.7 of the output: one rank of two, or 56 % of the window.
  options.warn_bytes = estimated * 7 / 10;
  run(ExportFormat::kChromeJson, options);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("select less, e.g. --ranks 0 (1 of " + std::to_string(kFixtureRanks) + " ranks) or --time +"),
            std::string::npos)
      << warnings[0];
  // Not one rank fits: only a shorter window is suggested.
  warnings.clear();
  options.warn_bytes = estimated / (2 * kFixtureRanks);
  run(ExportFormat::kChromeJson, options);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].find("--ranks"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("select less, e.g. --time +0.000000s:+"), std::string::npos) << warnings[0];
}

// Another program makes the output while the trace is written (here when the
// size warning is given, after the output was checked and before it is
// written): it is kept, and the export fails naming it, leaving no partial file.
TEST_F(ExportTest, AnOutputThatAppearsMeanwhileIsNotWrittenOver) {
  const fs::path output = dir_ / "appeared.pftrace";
  ExportOptions options;
  options.warn_bytes = 0;
  options.warn = [&](const std::string&) { std::ofstream(output) << "theirs"; };
  const Timeline timeline((dir_ / "job.h5").string());
  try {
    export_timeline(timeline, ExportFormat::kPerfetto, output.string(), options);
    ADD_FAILURE() << "the export wrote over a file that appeared meanwhile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("appeared.pftrace appeared while it was written, and is not replaced"),
              std::string::npos)
        << e.what();
  }
  std::string kept;
  std::ifstream(output) >> kept;
  EXPECT_EQ(kept, "theirs");
  EXPECT_FALSE(fs::exists(output.string() + ".partial"));
  options.replace_output = true;  // --overwrite
  EXPECT_GT(export_timeline(timeline, ExportFormat::kPerfetto, output.string(), options).bytes, 6u);
  fs::remove(output);
}

TEST_F(ExportTest, ChromeJsonIsOneObjectWithTraceEvents) {
  const ExportResult r = run(ExportFormat::kChromeJson);
  std::ifstream file(r.output);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("{\"displayTimeUnit\":\"ns\"", 0), 0u);
  EXPECT_NE(text.find("\"traceEvents\":["), std::string::npos);
  EXPECT_NE(text.find("\"name\":\"rank 2 (host-b)\""), std::string::npos);
  EXPECT_NE(text.find("\"op\":\"AllReduce\""), std::string::npos);
  EXPECT_NE(text.find("\"algorithm\":\"RING\""), std::string::npos);
  EXPECT_NE(text.find("\"ts\":1002.000,\"dur\":0.500"), std::string::npos) << "µs with exact nanoseconds";
  EXPECT_EQ(text.substr(text.size() - 4), "\n]}\n");
  // Rank 0's counters in step 0: two allreduces in flight (1 + 2 MiB) from
  // 7 µs; the copy runs beside the kernel on the stream from 10 µs.
  EXPECT_NE(text.find("{\"ph\":\"C\",\"pid\":1,\"ts\":1007.000,\"name\":\"bytes in flight\",\"args\":{\"value\":3145728}}"),
            std::string::npos);
  EXPECT_NE(text.find("{\"ph\":\"C\",\"pid\":1,\"ts\":1010.000,\"name\":\"GPU busy\",\"args\":{\"value\":2}}"),
            std::string::npos);
  EXPECT_NE(text.find("{\"ph\":\"C\",\"pid\":1,\"ts\":1012.000,\"name\":\"GPU busy\",\"args\":{\"value\":1}}"),
            std::string::npos);
  EXPECT_NE(text.find("{\"ph\":\"C\",\"pid\":3,\"ts\":1000.500,\"name\":\"GPU memory\",\"args\":{\"value\":1000000002}}"),
            std::string::npos);
}

// Perfetto and OTF2 count time in unsigned integers: a rank whose clock put
// events before 0 (its own clock, never synchronised) is refused by name.
TEST(ExportTimes, EventsBeforeTimeZeroAreRefusedByTheUnsignedFormats) {
  const fs::path dir = fs::temp_directory_path() / ("rankscope-export-negative-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "shards");
  RankMetadata metadata;
  metadata.rank = 0;
  metadata.world_size = 1;
  ShardWriter writer;
  ASSERT_TRUE(writer.open((dir / "shards" / "rank-0.shard").string(), metadata, 0));
  const std::pair<uint32_t, std::string_view> names[] = {{0, "early"}};
  ASSERT_TRUE(writer.write_strings(names, 0));
  Event early{};
  early.kind = EventKind::kNvtxRange;
  early.begin_ns = -5'000;
  early.end_ns = 1'000;
  early.peer = kNoPeer;
  std::vector<Event> events{early};
  ASSERT_TRUE(writer.write_events(events));
  ASSERT_TRUE(writer.close(Counters{}, 2'000));
  MergeOptions options;
  options.inputs = {(dir / "shards").string()};
  options.output = (dir / "job.h5").string();
  merge_shards(MPI_COMM_SELF, options);
  const Timeline timeline(options.output);
  for (const auto& [format, name, output] :
       {std::tuple{ExportFormat::kPerfetto, "Perfetto", "job.pftrace"}, std::tuple{ExportFormat::kOtf2, "OTF2", "job.otf2"}}) {
    try {
      export_timeline(timeline, format, (dir / output).string());
      ADD_FAILURE() << name << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 has events before time 0 (-5000 ns), which " + std::string(name) +
                                           "'s unsigned timestamps cannot hold"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(dir / output)) << name;
    EXPECT_FALSE(fs::exists(dir / (std::string(output) + ".partial"))) << name;
  }
  fs::remove_all(dir);
}

// A synthetic job where every rank takes part in every allreduce: each
// instance gives ranks - 1 flows, and the lanes of its threads nest.
TEST(ExportSynthetic, EveryCollectiveInstanceIsLinked) {
  const fs::path dir = fs::temp_directory_path() / ("rankscope-export-synthetic-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "shards");
  testing::SyntheticJob job;
  job.world_size = 4;
  job.events_per_rank = 5000;
  job.shared_collectives = true;
  job.keep_truth = false;
  testing::write_synthetic_job((dir / "shards").string(), job);
  MergeOptions options;
  options.inputs = {(dir / "shards").string()};
  options.output = (dir / "job.h5").string();
  merge_shards(MPI_COMM_SELF, options);
  const Timeline timeline(options.output);
  const ExportResult r = export_timeline(timeline, ExportFormat::kPerfetto, (dir / "job.pftrace").string());
  // Every fifth event is an allreduce, except where a step range takes the slot.
  uint64_t allreduces = 0;
  timeline.for_each_event_block(0, [&](const std::vector<Event>& events) {
    for (const Event& e : events) allreduces += e.kind == EventKind::kMpiCollective;
  });
  EXPECT_EQ(r.counts.collective_flows, allreduces * (job.world_size - 1));
  EXPECT_EQ(r.counts.slices, job.events_per_rank * job.world_size);
  EXPECT_EQ(r.counts.thread_tracks, static_cast<uint64_t>(job.world_size * job.threads));
  EXPECT_EQ(r.counts.other_tracks, 0u) << "nested ranges need no extra lanes";
  EXPECT_EQ(r.counts.counter_tracks, static_cast<uint64_t>(job.world_size)) << "bytes in flight";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope
