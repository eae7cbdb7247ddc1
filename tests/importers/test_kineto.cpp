// The Kineto importer's parts: the streaming reader, one trace's translation
// and its damage counts, and the matching and clock alignment across ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/hash.h"
#include "rankscope/model/metadata.h"
#include "rankscope/model/shard.h"
#include "datasync_calls.h"
#include "shard_contents.h"
// Internal to the merge library; tested directly.
#include "kineto_align.h"
#include "kineto_job.h"
#include "kineto_reader.h"
#include "kineto_trace.h"

namespace rankscope::kineto {
namespace {

TEST(KinetoNumbers, MilliUnitsAreExactToThreeDecimals) {
  int64_t v = 0;
  ASSERT_TRUE(parse_milli("4458676522690.655", v));
  EXPECT_EQ(v, 4458676522690655);
  ASSERT_TRUE(parse_milli("1682725898236567", v));
  EXPECT_EQ(v, 1682725898236567000);
  ASSERT_TRUE(parse_milli("68.0", v));
  EXPECT_EQ(v, 68000);
  ASSERT_TRUE(parse_milli("-2.5", v));
  EXPECT_EQ(v, -2500);
  ASSERT_TRUE(parse_milli("1.0005", v));  // the fourth decimal rounds
  EXPECT_EQ(v, 1001);
  ASSERT_TRUE(parse_milli("1.5e3", v));
  EXPECT_EQ(v, 1500000);
  EXPECT_FALSE(parse_milli("", v));
  EXPECT_FALSE(parse_milli("abc", v));
  EXPECT_FALSE(parse_milli("12x", v));
  EXPECT_FALSE(parse_milli("99999999999999999999", v));  // beyond int64 ns
  EXPECT_FALSE(parse_milli("1e300", v));
}

TEST(KinetoFileNames, RankFromName) {
  EXPECT_EQ(rank_from_file_name("/x/sampled_rank-1.json.gz"), 1);
  EXPECT_EQ(rank_from_file_name("trace_RANK_12.json"), 12);
  EXPECT_EQ(rank_from_file_name("/ranks/host.rank3.pt.trace.json"), 3);
  EXPECT_EQ(rank_from_file_name("/rank7/trace.json"), -1);  // folders do not count
  EXPECT_EQ(rank_from_file_name("trace.json"), -1);
}

struct Collected {
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> events;
  std::vector<uint64_t> offsets;
  std::vector<std::string> problems;
};

ReaderStats read(std::string_view text, Collected& out) {
  TraceReader::Callbacks callbacks;
  callbacks.on_header = [&](std::string_view key, std::string_view value) {
    out.headers.emplace_back(std::string(key), std::string(value));
  };
  callbacks.on_event = [&](std::string_view value, uint64_t, uint64_t offset) {
    out.events.emplace_back(value);
    out.offsets.push_back(offset);
  };
  callbacks.on_problem = [&](const std::string& message) { out.problems.push_back(message); };
  return TraceReader::read_text("t.json", text, callbacks);
}

TEST(KinetoReader, HandsOutHeaderValuesAndEventsWhole) {
  Collected c;
  const std::string text =
      R"({"schemaVersion": 1, "distributedInfo": {"rank": 3, "x": [1, {"y": "}]"}]},
  "traceEvents": [ {"ph": "X", "name": "a \"quoted\" }{ name", "args": {"k": [1, 2]}},
  {"ph": "i"} ],
  "baseTimeNanoseconds": 1711964646000000000})";
  const ReaderStats stats = read(text, c);
  EXPECT_FALSE(stats.truncated);
  ASSERT_EQ(c.headers.size(), 3u);
  EXPECT_EQ(c.headers[0], std::make_pair(std::string("schemaVersion"), std::string("1")));
  EXPECT_EQ(c.headers[1].second, R"({"rank": 3, "x": [1, {"y": "}]"}]})");
  EXPECT_EQ(c.headers[2].second, "1711964646000000000");
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0], R"({"ph": "X", "name": "a \"quoted\" }{ name", "args": {"k": [1, 2]}})");
  EXPECT_EQ(c.events[1], R"({"ph": "i"})");
  EXPECT_EQ(text.substr(c.offsets[1], 11), R"({"ph": "i"})");
  EXPECT_TRUE(c.problems.empty());
}

TEST(KinetoReader, SkipsAnUnbalancedEventToTheNextOne) {
  Collected c;
  const ReaderStats stats = read(R"({"traceEvents": [{"ph": "X"}, {"ph": "X", "args": {]}, {"ph": "i"}]})", c);
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[1], R"({"ph": "i"})");
  EXPECT_EQ(stats.elements_skipped, 1u);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("t.json: event 1 at byte 30"), std::string::npos) << c.problems[0];
}

// JSON nested deeper than the reader's stack is said to be so, not called
// unbalanced, and costs that event only.
TEST(KinetoReader, AnEventNestedTooDeepIsSaidSoAndSkipped) {
  Collected c;
  const std::string deep = "{\"ph\": \"X\", \"args\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  const ReaderStats stats = read("{\"traceEvents\": [\n{\"ph\": \"i\"},\n" + deep + ",\n{\"ph\": \"X\"}]}", c);
  EXPECT_EQ(c.events, (std::vector<std::string>{R"({"ph": "i"})", R"({"ph": "X"})"}));
  EXPECT_EQ(stats.elements_skipped, 1u);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("event 1 at byte 31 nests brackets deeper than 1024 levels"), std::string::npos)
      << c.problems[0];
}

// Damage that looks like events inside it (a nested object after "},", a
// string holding "}, {", an unterminated string running on for lines) costs
// the damaged event only.
TEST(KinetoReader, LosesOnlyTheDamagedEvent) {
  const std::string sound_a = R"({"ph":"X","name":"a","ts":1,"dur":1})";
  const std::string sound_b = R"({"ph":"X","name":"b","ts":2,"dur":1})";
  const std::string damaged[] = {
      R"({"ph":"X","name":"bad","args":{"l":[{"p":1},{"q":2}]}]})",  // an extra ']'
      R"({"ph":"X","name":"x}, {y","args":{"l":[1}})",             // '}' closing a '['
      R"({"ph":"X","name":"cut)",                                    // the string never ends
      R"({"ph":"X","name":"cut","args":{"x":[1,2)",                  // nor the brackets
  };
  for (const std::string& bad : damaged) {
    Collected c;
    const std::string text = "{\"traceEvents\": [\n  " + sound_a + ",\n  " + bad + ",\n  " + sound_b + ",\n  " +
                             sound_a + "\n],\n\"baseTimeNanoseconds\": 5}";
    const ReaderStats stats = read(text, c);
    EXPECT_EQ(c.events, (std::vector<std::string>{sound_a, sound_b, sound_a})) << bad;
    EXPECT_EQ(stats.elements_skipped, 1u) << bad;
    EXPECT_FALSE(stats.truncated) << bad;
    ASSERT_EQ(c.headers.size(), 1u) << bad;  // the keys after the events are still read
    EXPECT_EQ(c.headers[0].second, "5") << bad;
  }
}

TEST(KinetoReader, KeepsEverythingBeforeACut) {
  Collected c;
  const ReaderStats stats = read(R"({"traceEvents": [{"ph": "X"}, {"ph": "i"}, {"ph": "X", "na)", c);
  EXPECT_TRUE(stats.truncated);
  EXPECT_EQ(c.events.size(), 2u);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("ends inside event 2"), std::string::npos) << c.problems[0];
}

TEST(KinetoReader, RefusesWhatIsNotATrace) {
  Collected c;
  EXPECT_THROW(read("", c), Error);
  EXPECT_THROW(read("[1, 2]", c), Error);
}

TEST(KinetoReader, ReadsEventsLargerThanItsWindowAndManySmallOnes) {
  std::string text = R"({"traceEvents": [)";
  const std::string big_name(9u << 20, 'n');  // beyond the 4 MiB first window
  text += R"({"ph": "X", "name": ")" + big_name + R"("})";
  for (int i = 0; i < 100000; ++i) text += R"(, {"ph": "i", "ts": )" + std::to_string(i) + "}";
  text += "]}";
  Collected c;
  const ReaderStats stats = read(text, c);
  EXPECT_FALSE(stats.truncated);
  ASSERT_EQ(c.events.size(), 100001u);
  EXPECT_EQ(c.events[0].size(), big_name.size() + 23);
  EXPECT_EQ(c.events.back(), R"({"ph": "i", "ts": 99999})");
}

// Strings full of brackets, quotes and backslashes, at every alignment to
// the reader's 64-byte blocks: each event comes out exactly as written.
TEST(KinetoReader, FindsEveryEventWhateverItsStringsHold) {
  std::mt19937 random(7);
  const std::string alphabet = "ab{}[]\"\\:, ";
  std::vector<std::string> events;
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 3000; ++i) {
    std::string name;
    const int length = static_cast<int>(random() % 150);
    for (int k = 0; k < length; ++k) {
      const char c = alphabet[random() % alphabet.size()];
      if (c == '"' || c == '\\') name += '\\';
      name += c;
    }
    events.push_back(R"({"ph": "X", "name": ")" + name + R"(", "args": {"a": [[1], {"b": "]"}]}})");
    text += (i ? ", " : "") + events.back();
  }
  text += "]}";
  Collected c;
  const ReaderStats stats = read(text, c);
  EXPECT_FALSE(stats.truncated);
  EXPECT_TRUE(c.problems.empty());
  EXPECT_EQ(c.events, events);
}

// One trace translated without a shard: what it counts and says.
class KinetoTrace : public ::testing::Test {
 protected:
  TraceImport& import(const std::string& name, const std::string& text) {
    trace_ = std::make_unique<TraceImport>(name, "", settings_);
    trace_->read_text(text);
    return *trace_;
  }
  ImportSettings settings_;
  std::unique_ptr<TraceImport> trace_;
};

TEST_F(KinetoTrace, TakesRankBaseAndCommunicationFromTheirSources) {
  const std::string text = R"json({"distributedInfo": {"backend": "nccl", "rank": "5", "world_size": 8},
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2,
   "args": {"External id": 77, "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
            "Process Group Name": "0", "Seq": 41}},
  {"ph": "X", "cat": "kernel", "name": "my_custom_allreduce", "pid": 0, "tid": 7, "ts": 11, "dur": 5,
   "args": {"External id": 77, "correlation": 9, "stream": 7, "device": 0}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
   "pid": 0, "tid": 7, "ts": 20, "dur": 5,
   "args": {"correlation": 10, "Comms Id": 18446744073709551615, "Collective name": "_allgather_base",
            "dtype": "BFloat16", "In msg nelems": 10}},
  {"ph": "X", "cat": "kernel", "name": "deep_ep::dispatch<1>", "pid": 0, "tid": 8, "ts": 30, "dur": 1, "args": {}},
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 40, "dur": 1, "args": {}},
  {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "pid": 0, "tid": 7,
   "ts": 50, "dur": 1, "args": {"Collective name": "allreduce", "Seq": 42}}
 ],
 "baseTimeNanoseconds": 1000000000})json";
  settings_.comm_kernel_patterns = {"^deep_ep::"};
  const TraceImport& t = import("trace.json", text);
  EXPECT_EQ(t.summary().rank, 5);
  EXPECT_EQ(t.summary().world_size, 8);
  EXPECT_EQ(t.summary().base_ns, 1'000'000'000);
  EXPECT_EQ(t.summary().events, 6u);
  const auto& records = t.collectives().records;
  ASSERT_EQ(records.size(), 4u);
  // Launched inside record_param_comms: communication whatever its name.
  EXPECT_EQ(records[0].op, CommOp::kAllReduce);
  EXPECT_EQ(records[0].key, MatchKey::kSeq);
  EXPECT_EQ(records[0].id, 41u);
  EXPECT_EQ(records[0].begin_ns, 1'000'000'000 + 11'000);  // the base is added
  // Comms Id is unsigned: UINT64_MAX is a valid one.
  EXPECT_EQ(records[1].op, CommOp::kAllGather);
  EXPECT_EQ(records[1].key, MatchKey::kCommsId);
  EXPECT_EQ(records[1].id, UINT64_MAX);
  EXPECT_EQ(records[2].op, CommOp::kNone);  // known by the user's pattern only
  // Seq counts per process group: without the group, matching falls back to time.
  EXPECT_EQ(records[3].op, CommOp::kAllReduce);
  EXPECT_EQ(records[3].key, MatchKey::kTime);
  EXPECT_EQ(t.summary().problems, 0u);
}

// Keys are read as their text, whether written plainly or with escapes.
TEST_F(KinetoTrace, KeysWrittenWithEscapesAreReadAsTheirText) {
  const std::string text = R"json({"distributedInfo": {"rank": 0}, "traceEvents": [
  {"\u0070h": "X", "c\u0061t": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
   "pid": 0, "tid": 7, "ts": 50, "dur": 1, "args": {"Collective n\u0061me": "allreduce", "S\u0065q": 42}}
 ]})json";
  const TraceImport& t = import("trace.json", text);
  EXPECT_EQ(t.summary().events, 1u);
  EXPECT_EQ(t.summary().problems, 0u);
  ASSERT_EQ(t.collectives().records.size(), 1u);
  EXPECT_EQ(t.collectives().records[0].op, CommOp::kAllReduce);
}

// What distributedInfo says of the job, for telling jobs apart: the backend
// and each process group's members, whatever order the ranks are listed in.
TEST_F(KinetoTrace, TakesTheJobFromDistributedInfo) {
  const std::string text = R"json({"distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 4,
   "pg_count": 2, "pg_config": [
    {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 4, "ranks": [3, 0, 1, 2]},
    {"pg_name": "1", "pg_size": 2, "ranks": [1, 3]},
    {"pg_name": "no ranks", "pg_size": 2}]},
 "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})json";
  const TraceSummary& s = import("trace.json", text).summary();
  EXPECT_EQ(s.backend, "nccl");
  ASSERT_EQ(s.process_groups.size(), 2u);
  EXPECT_EQ(s.process_groups[0].name, "0");
  EXPECT_EQ(s.process_groups[0].members, "size 4, ranks 0-3");
  EXPECT_EQ(s.process_groups[1].name, "1");
  EXPECT_EQ(s.process_groups[1].members, "size 2, ranks 1,3");
  EXPECT_EQ(s.problems, 0u);
}

// A world size of 0 is said, not taken as 1: the job's size then comes from its ranks.
TEST_F(KinetoTrace, AWorldSizeOfNoRanksIsSaid) {
  const TraceSummary& s = import("trace.json", R"json({"distributedInfo": {"rank": 2, "world_size": 0},
 "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "step", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})json")
                              .summary();
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.world_size, 0) << "not known";
  ASSERT_EQ(s.problems, 1u);
  EXPECT_EQ(s.problem_lines.at(0),
            "trace.json: distributedInfo.world_size is not a number of ranks: 0; the job's size is taken from its ranks");
}

// A JSON file of another kind, or a trace with no event, is no rank of a
// job: refused by name, not imported as a rank that captured nothing.
TEST_F(KinetoTrace, AFileWithoutEventsIsRefusedByName) {
  const auto error = [&](const std::string& text) {
    try {
      import("rank-0.json", text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("{}"), "rank-0.json: not a torch.profiler trace: it has no traceEvents array");
  EXPECT_EQ(error(R"({"schema": "1.0.1", "nodes": []})"), "rank-0.json: not a torch.profiler trace: it has no traceEvents array");
  EXPECT_EQ(error(R"({"traceEvents": "abc"})"), "rank-0.json: not a torch.profiler trace: it has no traceEvents array");
  EXPECT_EQ(error(R"({"traceEvents": []})"), "rank-0.json: its traceEvents array is empty: no event to import");
  EXPECT_EQ(error("{"), "rank-0.json: the file ends before a traceEvents array (cut short?)");
  EXPECT_EQ(error(R"({"traceEvents": [)"), "rank-0.json: the trace ends before its first event");
}

TEST_F(KinetoTrace, CountsAndNamesEveryKindOfDamageAndKeepsTheRest) {
  const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "good", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
  {"ph": "X", "cat": "cpu_op", "name": "negative", "pid": 1, "tid": 1, "ts": 1, "dur": -5},
  {"ph": "X", "cat": "cpu_op", "name": "236 years", "pid": 1, "tid": 1, "ts": 1, "dur": 7444512000000000},
  {"ph": "X", "cat": "cpu_op", "name": "no dur", "pid": 1, "tid": 1, "ts": 1},
  {"cat": "cpu_op", "name": "no ph", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2, "dur": 1,
   "args": {"correlation": 9223372036854775808}},
  {"ph": "X", "ts": "soon", "dur": 1},
  {"ph": "X", "name": "bad json" "ts": 1},
  {"ph": "B", "name": "begin", "pid": 1, "tid": 1, "ts": 3},
  {"ph": "X", "cat": "cpu_op", "name": "good too", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
  {"ph": "X", "cat": "cpu_op", "name": "far future", "pid": 1, "tid": 1, "ts": 9e15, "dur": 1},
  {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 6, "dur": 1,
   "args": {"External id": -3, "correlation": 11}}
 ]})";
  const TraceImport& t = import("trace_rank_2.json", text);
  EXPECT_EQ(t.summary().rank, 2);  // from the file name
  EXPECT_EQ(t.summary().events, 4u);  // the two good ones and the kernels, without their bad ids
  const Counters& c = t.counters();
  EXPECT_EQ(c.get(counter::kKinetoBadTimes), 4u);
  EXPECT_EQ(c.get(counter::kKinetoMissingFields), 2u);
  EXPECT_EQ(c.get(counter::kKinetoIdsOutOfRange), 2u);
  EXPECT_EQ(c.get(counter::kKinetoMalformed), 1u);
  EXPECT_EQ(c.get(counter::kKinetoUnsupported), 1u);
  EXPECT_EQ(c.get(counter::kKinetoTruncated), 0u);
  const auto& lines = t.summary().problem_lines;
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_NE(lines[0].find("trace_rank_2.json: event 1 (byte "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("negative"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("event 2 "), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("absurd"), std::string::npos) << lines[1];
  EXPECT_NE(lines[4].find("9223372036854775808 is not an id"), std::string::npos) << lines[4];
  EXPECT_NE(lines[6].find("event 7 "), std::string::npos) << lines[6];
  EXPECT_NE(lines[7].find("event 10 "), std::string::npos) << lines[7];
  EXPECT_NE(lines[7].find("within 146 years"), std::string::npos) << lines[7];
  EXPECT_NE(lines[8].find("External id -3 is not an id"), std::string::npos) << lines[8];
}

// Imports a trace as the reference rank into a shard and reads the shard
// back, its events in time order.
testing::ShardContents import_as_reference(const std::string& text, const std::string& shard_name,
                                           Counters* counters = nullptr) {
  const std::string path = ::testing::TempDir() + "/" + shard_name;
  const ImportSettings settings;
  TraceImport trace("rank-0.json", path, settings);
  trace.read_text(text);
  RankAlignment reference;
  reference.aligned = true;
  trace.finish({1, 0, {}}, reference, {}, 0);
  if (counters) *counters = trace.counters();
  testing::ShardContents contents = testing::read_shard(path);
  std::sort(contents.events.begin(), contents.events.end(), event_time_order);
  return contents;
}

// Events without a correlation argument take it from the launch -> kernel
// flow that follows them; the shard holds what the timeline will.
TEST(KinetoShard, FlowsLinkLaunchesAndKernelsThatLackCorrelationIds) {
  const std::string text = R"({"distributedInfo": {"rank": 0}, "traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 2},
  {"ph": "s", "id": 501, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 15, "dur": 4},
  {"ph": "f", "id": 501, "pid": 0, "tid": 7, "ts": 15, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "kernel", "name": "not followed", "pid": 0, "tid": 7, "ts": 20, "dur": 1},
  {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 21, "dur": 1},
  {"ph": "f", "id": 777, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g", "bp": "e"}
 ]})";
  const auto shard = import_as_reference(text, "kineto-flows.shard");
  const std::vector<Event>& events = shard.events;
  const ShardScan& scan = shard.scan;
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, EventKind::kCudaApi);
  EXPECT_EQ(events[0].correlation_id, 501u);
  EXPECT_EQ(events[1].kind, EventKind::kGpuKernel);
  EXPECT_EQ(events[1].correlation_id, 501u);
  EXPECT_EQ(events[2].correlation_id, 0u);  // another event came between it and the flow
  EXPECT_TRUE(scan.ended);
  EXPECT_EQ(scan.rank(), 0);
  EXPECT_EQ(scan.sync_points.size(), 2u);
}

// Counters keep whole values; the caching allocator's [memory] instants
// become a counter of bytes allocated per device.
TEST(KinetoShard, CountersAndMemoryInstants) {
  const std::string text = R"({"distributedInfo": {"rank": 0}, "traceEvents": [
  {"ph": "C", "name": "queue", "pid": 1, "tid": 1, "ts": 10, "args": {"depth": 2.6}},
  {"ph": "C", "name": "queue", "pid": 1, "tid": 1, "ts": 11, "args": {"depth": -1}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12,
   "args": {"Device Type": 1, "Device Id": 3, "Bytes": 512, "Total Allocated": 4096}}
 ]})";
  Counters counters;
  const auto shard = import_as_reference(text, "kineto-counters.shard", &counters);
  const std::vector<Event>& events = shard.events;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::kCounter);
  EXPECT_EQ(events[0].bytes, 3u);  // 2.6 rounded
  EXPECT_EQ(events[1].kind, EventKind::kCounter);
  EXPECT_EQ(events[1].bytes, 4096u);
  EXPECT_EQ(shard.track_names.at(events[0].track), "queue depth");
  EXPECT_EQ(shard.track_names.at(events[1].track), "memory allocated (device 3)");
  EXPECT_EQ(counters.get(counter::kKinetoUnsupported), 1u);  // the negative sample
}

// A rank that shares no communication keeps the reference's clock, but its
// timestamps count from its own baseTimeNanoseconds: that difference is
// corrected, with a bound that claims nothing.
TEST(KinetoShard, UnalignedRanksStillTakeTheirBaseIntoAccount) {
  const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 100, "dur": 2}],
  "baseTimeNanoseconds": 3000000000})";
  const std::string path = ::testing::TempDir() + "/kineto-base.shard";
  const ImportSettings settings;
  TraceImport trace("rank-1.json", path, settings);
  trace.read_text(text);
  RankAlignment none;
  none.rank = 1;
  trace.finish({2, 1'000'000'000, {}}, none, {}, 0);
  const ShardScan scan = testing::read_shard(path).scan;
  ASSERT_EQ(scan.sync_points.size(), 2u);  // at the first and last event
  for (const SyncPoint& point : scan.sync_points) {
    // local - reference: this rank's timestamps are 2 s later than the reference's would be.
    EXPECT_EQ(point.offset_ns, -2'000'000'000);
    EXPECT_EQ(point.bound_ns, kUnknownClockBoundNs);
  }
  EXPECT_EQ(trace.counters().get(counter::kKinetoUnaligned), 1u);
}

// The import's shards are its merge's alone and removed after it: they do
// not wait for the disk (0.3-0.6 s of an 8-rank import on the VM's disk).
TEST(KinetoShard, TheImportsShardIsNotSyncedToDisk) {
  const int before = testing::datasync_calls();
  const auto shard = import_as_reference(R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 100, "dur": 2}]})",
                                         "kineto-unsynced.shard");
  EXPECT_TRUE(shard.scan.ended);
  EXPECT_EQ(shard.events.size(), 1u);
  EXPECT_EQ(testing::datasync_calls(), before);
}

// ---------------------------------------------- real traces' categories ---

// ROCm traces carry each ProfilerStep#N twice: the host's range, and on the
// GPU the span of the work it launched. Only the host's is the step: the
// GPU's is kept on its stream under a name that is no step's.
TEST(KinetoShard, AGpuSideProfilerStepIsNoStep) {
  const std::string text = R"({"distributedInfo": {"rank": 0}, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 10, "tid": 10, "ts": 1000, "dur": 9300},
  {"ph": "X", "cat": "kernel", "name": "Cijk_gemm", "pid": 2, "tid": 0, "ts": 1300, "dur": 500,
   "args": {"device": 2, "stream": 0, "correlation": 1}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#4", "pid": 2, "tid": 0, "ts": 1300, "dur": 540,
   "args": {"device": 2}}
 ]})";
  const auto shard = import_as_reference(text, "kineto-gpu-step.shard");
  const std::vector<Event> steps = shard.named("ProfilerStep#4");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].end_ns - steps[0].begin_ns, 9'300'000);
  EXPECT_EQ(shard.track(steps[0].track)->type, TrackType::kThread);
  const std::vector<Event> gpu = shard.named("GPU work of ProfilerStep#4");
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].kind, EventKind::kNvtxRange);
  EXPECT_EQ(gpu[0].end_ns - gpu[0].begin_ns, 540'000);
  EXPECT_EQ(shard.track(gpu[0].track)->type, TrackType::kCudaStream);
}

// A synchronisation of the whole device ("stream": -1) is on a stream track
// of no one stream, which HTA's figures leave out.
TEST(KinetoShard, ADeviceWideSynchronisationIsOnNoStream) {
  const std::string text = R"({"distributedInfo": {"rank": 0}, "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 100, "dur": 10,
   "args": {"device": 0, "stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "cuda_sync", "name": "Device Synchronize", "pid": 0, "tid": -1, "ts": 140, "dur": 60,
   "args": {"device": 0, "stream": -1, "correlation": 3}}
 ]})";
  const auto shard = import_as_reference(text, "kineto-device-sync.shard");
  ASSERT_EQ(shard.events.size(), 2u);
  const Event& sync = shard.events[1];
  EXPECT_EQ(sync.kind, EventKind::kGpuSync);
  EXPECT_EQ(shard.track(sync.track)->type, TrackType::kCudaStream);
  EXPECT_EQ(shard.track(sync.track)->os_id, UINT64_MAX);
  EXPECT_EQ(shard.track(shard.events[0].track)->os_id, 7u);
}

// MTIA's device work and runtime calls, and older Kineto's capitalised
// categories, are the kinds their CUDA namesakes are; a category not known
// is counted, named once, and not read as the host's.
TEST(KinetoShard, EveryAcceleratorsCategoriesAreReadAsTheirKinds) {
  const std::string text = R"json({"distributedInfo": {"rank": 0}, "traceEvents": [
  {"ph": "X", "cat": "mtia_runtime", "name": "runFunction - job_prep_and_submit_for_execution", "pid": 10,
   "tid": 10, "ts": 95, "dur": 4, "args": {"correlation": 1}},
  {"ph": "X", "cat": "mtia_ccp_events", "name": "gemm_kernel", "pid": 1, "tid": 3, "ts": 100, "dur": 30,
   "args": {"device": 1, "stream": 3, "correlation": 1}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 200, "dur": 4,
   "args": {"correlation": 2}},
  {"ph": "X", "cat": "Kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 210, "dur": 5,
   "args": {"device": 0, "stream": 7, "correlation": 2}},
  {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 220, "dur": 5,
   "args": {"device": 0, "stream": 7, "bytes": 4096}},
  {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 230, "dur": 5,
   "args": {"device": 0, "stream": 7, "bytes": 512}},
  {"ph": "X", "cat": "mtia_insight", "name": "insight", "pid": 1, "tid": 3, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "mtia_insight", "name": "insight", "pid": 1, "tid": 3, "ts": 110, "dur": 10},
  {"ph": "X", "name": "no category", "pid": 10, "tid": 10, "ts": 120, "dur": 10}
 ]})json";
  const std::string path = ::testing::TempDir() + "/kineto-categories.shard";
  TraceImport trace("rank-0.json", path, ImportSettings{});
  trace.read_text(text);
  RankAlignment reference;
  reference.aligned = true;
  trace.finish({1, 0, {}}, reference, {}, 0);
  testing::ShardContents shard = testing::read_shard(path);
  std::sort(shard.events.begin(), shard.events.end(), event_time_order);
  const EventKind expected[] = {EventKind::kCudaApi, EventKind::kGpuKernel, EventKind::kCudaApi,
                                EventKind::kGpuKernel, EventKind::kGpuMemcpy, EventKind::kGpuMemset};
  ASSERT_EQ(shard.events.size(), std::size(expected));
  for (size_t i = 0; i < shard.events.size(); ++i) EXPECT_EQ(shard.events[i].kind, expected[i]) << i;
  EXPECT_EQ(shard.track(shard.events[1].track)->type, TrackType::kCudaStream);
  EXPECT_EQ(shard.track(shard.events[1].track)->os_id, 3u);
  EXPECT_EQ(shard.events[1].correlation_id, 1u);
  EXPECT_EQ(shard.events[4].bytes, 4096u);
  EXPECT_EQ(trace.counters().get(counter::kKinetoCategoryUnknown), 3u);
  EXPECT_EQ(trace.counters().get(counter::kKinetoKernelsMissing), 0u);
  const auto& lines = trace.summary().problem_lines;
  ASSERT_EQ(lines.size(), 2u);  // once per category
  EXPECT_NE(lines[0].find("rank-0.json: event 6 (byte "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("category \"mtia_insight\": not a kind of event rankscope knows"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("event 8 "), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("no \"cat\""), std::string::npos) << lines[1];
}

// Launches without a single kernel: the GPU's work was not recorded, which
// is said with the file and the count, and counted.
TEST_F(KinetoTrace, LaunchesWithoutAnyKernelAreNamedAndCounted) {
  std::string events;
  for (int i = 0; i < 3; ++i) {
    events += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" +
              std::to_string(10 * i) + R"(, "dur": 2, "args": {"correlation": )" + std::to_string(i + 1) + "}},\n";
  }
  events += R"({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": 40, "dur": 2},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 50, "dur": 2},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 60, "dur": 2})";
  const TraceImport& t = import("trace_rank_0.json", R"({"traceEvents": [)" + events + "]}");
  EXPECT_EQ(t.counters().get(counter::kKinetoKernelsMissing), 4u);
  ASSERT_EQ(t.summary().problem_lines.size(), 1u);
  EXPECT_EQ(t.summary().problem_lines[0].rfind("trace_rank_0.json: 4 kernel launches (cudaLaunchKernel and the like) "
                                               "but not one kernel",
                                               0),
            0u)
      << t.summary().problem_lines[0];

  // One kernel recorded, however many launches lack theirs: the trace has its GPU side.
  const TraceImport& with_kernel = import(
      "trace_rank_0.json", R"({"traceEvents": [)" + events + R"(,
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 12, "dur": 1, "args": {"stream": 7}}]})");
  EXPECT_EQ(with_kernel.counters().get(counter::kKinetoKernelsMissing), 0u);
  EXPECT_TRUE(with_kernel.summary().problem_lines.empty());
}

// The profiler's markers lie far outside the program's events ("Record
// Window End" seconds after): they do not stretch the rank's span.
TEST_F(KinetoTrace, TheProfilersMarkersDoNotStretchTheSpan) {
  const TraceImport& t = import("trace_rank_0.json", R"json({"traceEvents": [
  {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0,
   "dur": 2120000},
  {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
   "tid": "Trace PyTorch Profiler", "ts": 0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10, "ts": 30000, "dur": 1000},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "mark", "pid": 10, "tid": 10, "ts": 31000},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 10, "tid": 10, "ts": 31040, "dur": 600},
  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 2120000}
 ]})json");
  EXPECT_EQ(t.summary().events, 3u);  // the ops and the program's own instant
  EXPECT_EQ(t.summary().first_ns, 30'000'000);
  EXPECT_EQ(t.summary().last_ns, 31'640'000);
  EXPECT_EQ(t.summary().problems, 0u);
}

// ------------------------------------------------------------ alignment ---

// Ranks with known clock offsets running the same collectives, each ending
// together within `spread_ns` after every rank has begun.
std::vector<RankCollectives> job(const std::vector<int64_t>& offsets, int collectives, MatchKey key, uint32_t seed,
                                 int64_t spread_ns = 3'000) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int64_t> arrive(0, 200'000), spread(0, spread_ns);
  std::vector<RankCollectives> ranks(offsets.size());
  for (size_t r = 0; r < offsets.size(); ++r) ranks[r].rank = static_cast<int32_t>(r);
  int64_t t = 1'000'000;
  for (int c = 0; c < collectives; ++c) {
    const int64_t last_arrival = t + 200'000, end = last_arrival + 50'000;
    for (size_t r = 0; r < offsets.size(); ++r) {
      CollectiveRecord record;
      record.group = 7;
      record.op = CommOp::kAllReduce;
      record.key = key;
      record.id = key == MatchKey::kTime ? 0 : static_cast<uint64_t>(c);
      record.begin_ns = t + arrive(random) + offsets[r];
      record.end_ns = end + spread(random) + offsets[r];
      ranks[r].records.push_back(record);
    }
    t += 1'000'000 + static_cast<int64_t>(random() % 500'000);
  }
  return ranks;
}

TEST(KinetoAlignment, FindsKnownOffsetsWithinTheirBoundsBySeq) {
  const std::vector<int64_t> offsets = {0, 2'500'000'000, -730'000, 42};
  const Alignment a = align_ranks(job(offsets, 50, MatchKey::kSeq, 1));
  EXPECT_EQ(a.reference, 0);
  for (size_t r = 0; r < offsets.size(); ++r) {
    ASSERT_TRUE(a.ranks[r].aligned) << r;
    EXPECT_TRUE(a.ranks[r].consistent) << r;
    EXPECT_LE(std::llabs(a.ranks[r].offset_ns - offsets[r]), a.ranks[r].bound_ns) << r;
    EXPECT_LE(std::llabs(a.ranks[r].offset_ns - offsets[r]), 3'000) << r;  // ends agree within the spread
    EXPECT_LE(a.ranks[r].bound_ns, 100'000) << r;  // causality alone pins it near the 50 µs transfers
    EXPECT_EQ(a.unmatched[r], 0u);
  }
  EXPECT_EQ(a.instance[1][17], a.instance[3][17]);
  EXPECT_EQ(a.instance[1][17], 17u);  // instances are named by their Seq
}

TEST(KinetoAlignment, MatchesByTimeWhenTracesSayNothingAndSomeKernelsAreMissing) {
  const std::vector<int64_t> offsets = {0, -40'000'000, 900'000};
  std::vector<RankCollectives> ranks = job(offsets, 40, MatchKey::kTime, 2);
  // Sampled traces: each rank lost different kernels, so order says nothing.
  ranks[1].records.erase(ranks[1].records.begin() + 3);
  ranks[2].records.erase(ranks[2].records.begin() + 10, ranks[2].records.begin() + 13);
  const Alignment a = align_ranks(ranks);
  for (size_t r = 0; r < offsets.size(); ++r) {
    ASSERT_TRUE(a.ranks[r].aligned) << r;
    EXPECT_LE(std::llabs(a.ranks[r].offset_ns - offsets[r]), a.ranks[r].bound_ns) << r;
    EXPECT_LE(std::llabs(a.ranks[r].offset_ns - offsets[r]), 3'000) << r;
  }
  // Rank 1's fourth kernel is gone: its fifth is the reference's fifth.
  EXPECT_EQ(a.instance[1][3], a.instance[0][4]);
  EXPECT_EQ(a.instance[2][10], a.instance[0][13]);
  // Each lost kernel is lost on one rank only: the others still match it.
  EXPECT_EQ(a.unmatched[0], 0u);
  EXPECT_EQ(a.instance[0][3], a.instance[2][3]);
  EXPECT_NE(a.instance[0][3], a.instance[0][4]);
}

TEST(KinetoAlignment, MatchesByTimeWhenClocksAreHundredsOfKernelsApart) {
  const std::vector<int64_t> offsets = {0, 2'500'000'000, -100'000'000};
  const Alignment a = align_ranks(job(offsets, 300, MatchKey::kTime, 5));
  for (size_t r = 0; r < offsets.size(); ++r) {
    ASSERT_TRUE(a.ranks[r].aligned) << r;
    EXPECT_TRUE(a.ranks[r].consistent) << r;
    EXPECT_LE(std::llabs(a.ranks[r].offset_ns - offsets[r]), 3'000) << r;
    EXPECT_EQ(a.unmatched[r], 0u) << r;
  }
}

TEST(KinetoAlignment, RanksWithNothingInCommonStayUnaligned) {
  std::vector<RankCollectives> ranks = job({0, 5'000}, 10, MatchKey::kSeq, 3);
  RankCollectives alone;
  alone.rank = 2;
  CollectiveRecord r;
  r.group = 99;  // another process group, shared with nobody here
  r.key = MatchKey::kSeq;
  r.op = CommOp::kAllReduce;
  alone.records.push_back(r);
  ranks.push_back(alone);
  const Alignment a = align_ranks(ranks);
  EXPECT_TRUE(a.ranks[1].aligned);
  EXPECT_FALSE(a.ranks[2].aligned);
  EXPECT_EQ(a.unmatched[2], 1u);
}

TEST(KinetoAlignment, ContradictingCausalityIsFlaggedNotHidden) {
  // Rank 1's clock gains 1 ms a collective: no constant offset fits them all.
  std::vector<RankCollectives> ranks = job({0, 0}, 40, MatchKey::kSeq, 4);
  for (size_t i = 0; i < ranks[1].records.size(); ++i) {
    ranks[1].records[i].begin_ns += static_cast<int64_t>(i) * 1'000'000;
    ranks[1].records[i].end_ns += static_cast<int64_t>(i) * 1'000'000;
  }
  const Alignment a = align_ranks(ranks);
  ASSERT_TRUE(a.ranks[1].aligned);
  EXPECT_FALSE(a.ranks[1].consistent);
  EXPECT_GT(a.ranks[1].bound_ns, 0);
}

// A rank whose matches defend no bound is not aligned, and its shard says why in a counter.
TEST(KinetoShard, ADoubtfulRankIsCountedAndKeepsNoBound) {
  const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 100, "dur": 2}]})";
  const std::string path = ::testing::TempDir() + "/kineto-doubt.shard";
  TraceImport trace("rank-1.json", path, ImportSettings{});
  trace.read_text(text);
  RankAlignment doubted;
  doubted.rank = 1;
  doubted.doubt = "against rank 0: only 2 collectives matched; a bound needs 3";
  trace.finish({2, 0, {"", 1'000}}, doubted, {}, 0);
  const ShardScan scan = testing::read_shard(path).scan;
  EXPECT_TRUE(scan.sync_points.empty());  // same base as the reference: nothing to move
  ASSERT_TRUE(scan.metadata.has_value());
  EXPECT_EQ(scan.metadata->job.start_wall_ns, 1'000);
  EXPECT_EQ(trace.counters().get(counter::kKinetoUnaligned), 1u);
  EXPECT_EQ(trace.counters().get(counter::kKinetoDoubtful), 1u);
}

// ------------------------------------------------------- gloo and c10d ---

// distributedInfo of a 2-rank gloo job with its one process group, as torch 2.15 writes it.
std::string gloo_job(int rank, const std::string& host, const std::string& groups = "") {
  return R"({"distributedInfo": {"backend": "gloo", "rank": )" + std::to_string(rank) +
         R"(, "world_size": 2, "pg_count": 1, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
   "backend_config": "cpu:gloo,cuda:gloo", "pg_size": 2, "ranks": [0, 1]})" +
         groups + R"(]}, "host_name": ")" + host + R"(", "baseTimeNanoseconds": 1000000000,)";
}

// Imports a trace into a shard as the reference rank; its events in time
// order, and its collectives and counters in `trace`.
testing::ShardContents import_gloo(const std::string& text, const std::string& shard_name,
                                   std::unique_ptr<TraceImport>& trace) {
  const std::string path = ::testing::TempDir() + "/" + shard_name;
  static const ImportSettings settings;
  trace = std::make_unique<TraceImport>("rank-0.json", path, settings);
  trace->read_text(text);
  RankAlignment reference;
  reference.aligned = true;
  trace->finish({2, 1'000'000'000, {}}, reference, {}, 0);
  testing::ShardContents contents = testing::read_shard(path);
  std::sort(contents.events.begin(), contents.events.end(), event_time_order);
  return contents;
}

std::vector<Event> of_kind(const testing::ShardContents& shard, EventKind kind) {
  std::vector<Event> found;
  std::copy_if(shard.events.begin(), shard.events.end(), std::back_inserter(found),
               [&](const Event& e) { return e.kind == kind; });
  return found;
}

// Each c10d call (the arrival, on the calling thread) takes the first gloo
// range not yet taken that begins after it, whichever of gloo's two workers
// ran it; a range that begins before every call is of a call made before the
// trace began. FSDP's reduce-scatter runs as gloo:all_reduce: the call says
// the operation. A call with no range left ends where it does, counted.
TEST(KinetoGloo, CallsTakeTheirExecutionRangesInOrderAcrossBothWorkers) {
  const std::string text = gloo_job(0, "node-a") + R"json( "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 10, "ts": 90, "dur": 200},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 100, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 110, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::_reduce_scatter_base_", "pid": 10, "tid": 10, "ts": 120, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::_allgather_base_", "pid": 10, "tid": 10, "ts": 130, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::send", "pid": 10, "tid": 10, "ts": 136, "dur": 1},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:send", "pid": 10, "tid": 10, "ts": 136.5, "dur": 0.4},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::barrier", "pid": 10, "tid": 10, "ts": 140, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 10, "tid": 10, "ts": 250, "dur": 1},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 5, "dur": 10},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 102, "dur": 50,
   "args": {"Input Dims": [[1000]], "Input type": ["float"]}},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 13, "ts": 111, "dur": 60,
   "args": {"Input Dims": [[10, 10]], "Input type": ["double"]}},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 153, "dur": 20,
   "args": {"Input Dims": [[1000]], "Input type": ["float"]}},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_gather", "pid": 10, "tid": 13, "ts": 172, "dur": 10,
   "args": {"Input Dims": [[500]], "Input type": ["c10::BFloat16"]}},
  {"ph": "M", "name": "thread_name", "pid": 10, "tid": 12, "args": {"name": "thread 12 (pt_gloo_runloop)"}}
 ]})json";
  std::unique_ptr<TraceImport> trace;
  const testing::ShardContents shard = import_gloo(text, "kineto-gloo.shard", trace);
  const std::vector<Event> collectives = of_kind(shard, EventKind::kTorchCollective);
  ASSERT_EQ(collectives.size(), 5u);  // not the send
  const uint64_t group = hash_bytes("torch.distributed process group 0");
  struct Expected {
    CommOp op;
    int64_t begin_us, end_us;
    uint64_t bytes;
    DataType datatype;
  };
  const Expected expected[] = {{CommOp::kAllReduce, 100, 152, 4000, DataType::kFloat32},
                               {CommOp::kAllReduce, 110, 171, 800, DataType::kFloat64},
                               {CommOp::kReduceScatter, 120, 173, 4000, DataType::kFloat32},
                               {CommOp::kAllGather, 130, 182, 2000, DataType::kBfloat16},  // all 2 ranks' halves
                               {CommOp::kBarrier, 140, 145, 0, DataType::kNone}};          // no range: its call's end
  for (size_t i = 0; i < collectives.size(); ++i) {
    const Event& e = collectives[i];
    EXPECT_EQ(e.op, expected[i].op) << i;
    EXPECT_EQ(e.begin_ns, expected[i].begin_us * 1000) << i;
    EXPECT_EQ(e.end_ns, expected[i].end_us * 1000) << i;
    EXPECT_EQ(e.bytes, expected[i].bytes) << i;
    EXPECT_EQ(e.datatype, expected[i].datatype) << i;
    EXPECT_EQ(e.seq, i) << i;  // the call's order in its group: how ranks' instances meet
    EXPECT_EQ(e.comm_hash, group) << i;
    const Track* track = shard.track(e.track);
    ASSERT_NE(track, nullptr);
    EXPECT_EQ(track->type, TrackType::kProcessGroup);
    EXPECT_EQ(track->os_id, group);
  }
  EXPECT_EQ(shard.name(collectives[2].name_id), "c10d::_reduce_scatter_base_");
  EXPECT_EQ(shard.track_names.at(collectives[0].track), "torch.distributed group 0 (default_pg, 2 ranks, gloo)");
  // The calls and ranges stay on their threads as they were.
  EXPECT_EQ(shard.named("gloo:all_reduce").size(), 4u);
  EXPECT_EQ(shard.named("c10d::barrier").at(0).kind, EventKind::kNvtxRange);
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dUnexecuted), 1u);
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dGroupUnknown), 0u);

  // Only executed collectives that every rank must join bound the clocks.
  const auto& records = trace->collectives().records;
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(trace->collectives().host, "node-a");
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].key, MatchKey::kSeq);
    EXPECT_EQ(records[i].id, i);
    EXPECT_EQ(records[i].group, group);
    EXPECT_EQ(records[i].end_ns, 1'000'000'000 + expected[i].end_us * 1000);  // the base is added
  }
}

// Nothing in the trace links a call to the thread's wait for it (Work.wait,
// DDP's wait for its buckets): a calling thread silent from before a
// completion until just after it waited for the last that completed. A
// functional collective's wait_tensor is a wait as it stands.
TEST(KinetoGloo, WaitsAreTheCallingThreadsSilencesThatEndAtACompletion) {
  const std::string text = gloo_job(0, "node-a") + R"( "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 10, "ts": 0, "dur": 20000},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 100, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 110, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "torch.distributed.ddp.reducer::copy_bucket_to_grad", "pid": 10, "tid": 10,
   "ts": 5100, "dur": 10},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 6000, "dur": 5},
  {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
   "pid": 10, "tid": 10, "ts": 6010, "dur": 3000},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 10, "tid": 10, "ts": 9020, "dur": 10},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 10000, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "_c10d_functional::wait_tensor", "pid": 10, "tid": 10, "ts": 10010,
   "dur": 990},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 10, "tid": 10, "ts": 14000, "dur": 10},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 101, "dur": 4899},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 13, "ts": 111, "dur": 4950},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 6001, "dur": 2000},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 13, "ts": 10001, "dur": 999}
 ]})";
  std::unique_ptr<TraceImport> trace;
  const testing::ShardContents shard = import_gloo(text, "kineto-waits.shard", trace);
  const std::vector<Event> waits = of_kind(shard, EventKind::kTorchWait);
  ASSERT_EQ(waits.size(), 2u);
  // From the second call's end until the later of the two completions it resumed 39 µs after.
  EXPECT_EQ(waits[0].begin_ns, 115'000);
  EXPECT_EQ(waits[0].end_ns, 5'061'000);
  EXPECT_EQ(waits[0].seq, 1u);
  EXPECT_EQ(waits[0].op, CommOp::kAllReduce);
  EXPECT_EQ(waits[0].comm_hash, hash_bytes("torch.distributed process group 0"));
  EXPECT_EQ(shard.name(waits[0].name_id), "wait for c10d::allreduce_ (inferred)");
  const Track* thread = shard.track(waits[0].track);
  ASSERT_NE(thread, nullptr);
  EXPECT_EQ(thread->type, TrackType::kThread);
  // The third completed during data loading, a range that ended after it:
  // the thread was busy, not silent. The fourth was waited for in wait_tensor.
  EXPECT_EQ(waits[1].begin_ns, 10'010'000);
  EXPECT_EQ(shard.name(waits[1].name_id), "_c10d_functional::wait_tensor");
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dWaitsInferred), 1u);
}

// A trace that lists the rank in several process groups does not say which
// one a call used: its collectives are counted and matched with nobody's.
TEST(KinetoGloo, CallsOfARankInSeveralGroupsAreCountedNotGuessed) {
  const std::string text =
      gloo_job(1, "node-a", R"(, {"pg_name": "1", "pg_desc": "undefined", "pg_size": 2, "ranks": [0, 1]},
   {"pg_name": "2", "pg_size": 1, "ranks": [0]})") +
      R"( "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 100, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 110, "dur": 5},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 102, "dur": 50},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 13, "ts": 111, "dur": 60}
 ]})";
  std::unique_ptr<TraceImport> trace;
  const testing::ShardContents shard = import_gloo(text, "kineto-groups.shard", trace);
  const std::vector<Event> collectives = of_kind(shard, EventKind::kTorchCollective);
  ASSERT_EQ(collectives.size(), 2u);
  EXPECT_EQ(collectives[1].end_ns, 171'000);  // still paired: the ends are known
  for (const Event& e : collectives) EXPECT_EQ(e.comm_hash, 0u);
  EXPECT_EQ(shard.track_names.at(collectives[0].track),
            "torch.distributed group not known (distributedInfo.pg_config lists rank 1 in 2 groups)");
  EXPECT_TRUE(trace->collectives().records.empty());
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dGroupUnknown), 2u);

  // Rank 0 is in group "2" too; a group the rank is not in is no candidate.
  const std::string one_group = gloo_job(1, "node-a", R"(, {"pg_name": "2", "pg_size": 1, "ranks": [0]})") +
                                R"( "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 100, "dur": 5}]})";
  const testing::ShardContents alone = import_gloo(one_group, "kineto-one-group.shard", trace);
  EXPECT_EQ(of_kind(alone, EventKind::kTorchCollective).at(0).comm_hash,
            hash_bytes("torch.distributed process group 0"));
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dGroupUnknown), 0u);
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dUnexecuted), 1u);
}

// On NCCL the c10d calls only enqueue the kernels record_param_comms
// describes: those stay the collectives, as before.
TEST(KinetoGloo, NcclTracesKeepTheirKernelsAsTheCollectives) {
  const std::string text = R"json({"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
 "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2,
   "args": {"External id": 77, "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
            "Process Group Name": "0", "Seq": 41}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
   "pid": 0, "tid": 7, "ts": 11, "dur": 5, "args": {"External id": 77, "correlation": 9, "stream": 7, "device": 0}}
 ]})json";
  std::unique_ptr<TraceImport> trace;
  const testing::ShardContents shard = import_gloo(text, "kineto-nccl-c10d.shard", trace);
  EXPECT_TRUE(of_kind(shard, EventKind::kTorchCollective).empty());
  ASSERT_EQ(of_kind(shard, EventKind::kNcclCollectiveGpu).size(), 1u);
  EXPECT_EQ(trace->counters().get(counter::kKinetoC10dUnexecuted), 0u);
}

// Two ranks of one host: torch.profiler stamps both with the host's
// CLOCK_REALTIME, so they share a clock whatever their collectives say, and
// a rank without any is aligned too. A rank of another host is aligned from
// its collectives; with none, not at all.
TEST(KinetoAlignment, RanksOfOneHostShareItsClock) {
  std::vector<RankCollectives> ranks = job({0, 0, 2'000'000, 0}, 20, MatchKey::kSeq, 8);
  ranks[0].host = ranks[1].host = "node-a";
  ranks[2].host = "node-b";
  ranks[3].host = "node-a";
  ranks[3].records.clear();
  RankCollectives far_away;
  far_away.rank = 4;
  far_away.host = "node-c";
  ranks.push_back(far_away);
  const Alignment a = align_ranks(ranks);
  ASSERT_TRUE(a.ranks[1].aligned);
  EXPECT_TRUE(a.ranks[1].same_host);
  EXPECT_EQ(a.ranks[1].offset_ns, 0);
  EXPECT_EQ(a.ranks[1].bound_ns, 0);
  EXPECT_EQ(a.ranks[1].matched, 20u);
  EXPECT_EQ(a.instance[1][7], a.instance[0][7]);  // still matched, for the analyses
  ASSERT_TRUE(a.ranks[3].aligned);
  EXPECT_TRUE(a.ranks[3].same_host);
  EXPECT_EQ(a.ranks[3].bound_ns, 0);
  ASSERT_TRUE(a.ranks[2].aligned);
  EXPECT_FALSE(a.ranks[2].same_host);
  EXPECT_LE(std::llabs(a.ranks[2].offset_ns - 2'000'000), a.ranks[2].bound_ns);
  EXPECT_GT(a.ranks[2].bound_ns, 0);
  EXPECT_FALSE(a.ranks[4].aligned);

  // Without host names, or with a name any machine may give itself, ranks of
  // one base are aligned from their collectives.
  for (const char* name : {"", "localhost", "localhost.localdomain"}) {
    for (RankCollectives& rank : ranks) rank.host = name;
    const Alignment nameless = align_ranks(ranks);
    EXPECT_FALSE(nameless.ranks[1].same_host) << name;
    EXPECT_GT(nameless.ranks[1].bound_ns, 0) << name;
    EXPECT_FALSE(nameless.ranks[3].aligned) << name;
  }
}

// DDP's gradient allreduces, made inside backward, are asynchronous even
// where the last is waited for at once; an allreduce of the loss after it,
// its thread silent from its return to its completion, is synchronous and
// goes on the thread's track, as the Python hook records it.
TEST(KinetoGloo, ACallWaitedForAtOnceOutsideBackwardIsSynchronous) {
  const std::string text = gloo_job(0, "node-a") + R"json( "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: AccumulateGrad", "pid": 10, "tid": 10,
   "ts": 100, "dur": 20},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 110, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 300, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 10, "tid": 10, "ts": 400, "dur": 1},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 112, "dur": 50},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 302, "dur": 90}
 ]})json";
  std::unique_ptr<TraceImport> trace;
  const testing::ShardContents shard = import_gloo(text, "kineto-sync.shard", trace);
  const std::vector<Event> collectives = of_kind(shard, EventKind::kTorchCollective);
  ASSERT_EQ(collectives.size(), 2u);
  EXPECT_EQ(shard.track(collectives[0].track)->type, TrackType::kProcessGroup) << "DDP's, from backward";
  EXPECT_EQ(shard.track(collectives[1].track)->type, TrackType::kThread) << "the loss's, waited for at once";
  EXPECT_EQ(collectives[1].end_ns, 392'000);
}

// On a loaded machine the thread a completion wakes waits for its turn on
// a core: 6 ms after the loss's allreduce completed, it still waited for
// it. One that ran no op until 12 ms after is taken for a thread that went
// on with Python meanwhile.
TEST(KinetoGloo, AThreadRunLateByALoadedMachineStillWaited) {
  const std::string text = gloo_job(0, "node-a") + R"json( "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 300, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 10, "tid": 10, "ts": 6392, "dur": 1},
  {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 10, "tid": 10, "ts": 20000, "dur": 5},
  {"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 10, "tid": 10, "ts": 32090, "dur": 1},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 302, "dur": 90},
  {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 10, "tid": 12, "ts": 20002, "dur": 88}
 ]})json";
  std::unique_ptr<TraceImport> trace;
  const testing::ShardContents shard = import_gloo(text, "kineto-late-resume.shard", trace);
  const std::vector<Event> collectives = of_kind(shard, EventKind::kTorchCollective);
  ASSERT_EQ(collectives.size(), 2u);
  EXPECT_EQ(shard.track(collectives[0].track)->type, TrackType::kThread) << "resumed 6 ms late: waited";
  EXPECT_EQ(shard.track(collectives[1].track)->type, TrackType::kProcessGroup) << "resumed 12 ms late: went on";
}

// Hosts that share a name (containers, cloud images) do not share a clock:
// where causality rules one clock out, the collectives align the rank.
TEST(KinetoAlignment, AHostNameThatCausalityContradictsIsNotBelieved) {
  std::vector<RankCollectives> ranks = job({0, 5'000'000}, 20, MatchKey::kSeq, 9);
  ranks[0].host = ranks[1].host = "node-7";
  const Alignment a = align_ranks(ranks);
  ASSERT_TRUE(a.ranks[1].aligned);
  EXPECT_FALSE(a.ranks[1].same_host);
  EXPECT_LE(std::llabs(a.ranks[1].offset_ns - 5'000'000), 3'000);
  EXPECT_NE(a.ranks[1].host_doubt.find("its trace names the host \"node-7\" as rank 0's does, but causality in "
                                       "their 20 matched collectives puts their clocks at least "),
            std::string::npos)
      << a.ranks[1].host_doubt;
}

// The shard of a rank whose host's clock was contradicted says so in a counter.
TEST(KinetoShard, AContradictedHostIsCounted) {
  const std::string path = ::testing::TempDir() + "/kineto-host.shard";
  TraceImport trace("rank-1.json", path, ImportSettings{});
  trace.read_text(
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})");
  RankAlignment aligned;
  aligned.rank = 1;
  aligned.aligned = true;
  aligned.host_doubt = "its trace names the host ...";
  trace.finish({2, 0, {"", 1'000}}, aligned, {}, 0);
  EXPECT_EQ(trace.counters().get(counter::kKinetoClockHostContradicted), 1u);
  EXPECT_EQ(trace.counters().get(counter::kKinetoUnaligned), 0u);
}

// --------------------------------------------------------------- one job ---

TraceSummary trace_of(const std::string& path, int32_t rank, int32_t world_size, int64_t first_ns, int64_t last_ns) {
  TraceSummary t;
  t.path = path;
  t.rank = rank;
  t.world_size = world_size;
  t.backend = "nccl";
  t.base_ns = 1'700'000'000'000'000'000;
  t.first_ns = first_ns;
  t.last_ns = last_ns;
  t.process_groups = {{"0", "size " + std::to_string(world_size) + ", ranks 0-" + std::to_string(world_size - 1)}};
  return t;
}

TEST(KinetoJob, OneJobsTracesAgree) {
  std::vector<TraceSummary> traces = {trace_of("a.json", 0, 4, 0, 2'000'000'000),
                                      trace_of("b.json", 1, 4, 500'000'000, 2'500'000'000)};
  // A subgroup only one rank belongs to, a trace that says less, and clocks seconds apart: one job still.
  traces[1].process_groups.push_back({"1", "size 2, ranks 1,3"});
  TraceSummary terse = trace_of("c.json", 2, 0, -3'000'000'000, -1'000'000'000);
  terse.backend.clear();
  terse.process_groups.clear();
  traces.push_back(terse);
  EXPECT_TRUE(job_disagreements(traces).empty());
}

TEST(KinetoJob, TracesOfDifferentJobsAreNamedWithWhy) {
  TraceSummary other = trace_of("other.json", 1, 2, 0, 1'000'000'000);
  other.backend = "gloo";
  const std::vector<std::string> reasons = job_disagreements({trace_of("a.json", 0, 8, 0, 1'000'000'000), other});
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0], "a.json and other.json are traces of different jobs: distributedInfo.world_size is 8 in the "
                        "first and 2 in the second");
  EXPECT_EQ(reasons[1], "a.json and other.json are traces of different jobs: distributedInfo.backend is nccl in the "
                        "first and gloo in the second");
  EXPECT_EQ(reasons[2], "a.json and other.json are traces of different jobs: process group \"0\" has size 8, ranks "
                        "0-7 in the first and size 2, ranks 0-1 in the second");
}

TEST(KinetoJob, TracesRecordedHoursApartAreOfDifferentJobs) {
  constexpr int64_t kDay = 86'400'000'000'000;
  const std::vector<TraceSummary> traces = {trace_of("late.json", 1, 2, 8 * kDay + kDay / 2, 8 * kDay + kDay / 2 + 1),
                                            trace_of("early.json", 0, 2, 0, 2'000'000'000),
                                            trace_of("between.json", 1, 2, kDay, kDay + 1)};
  const std::vector<std::string> reasons = job_disagreements(traces);
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0], "early.json and late.json are traces of different jobs: the first was recorded from "
                        "2023-11-14T22:13:20.000000000Z to 2023-11-14T22:13:22.000000000Z, the second from "
                        "2023-11-23T10:13:20.000000000Z, 204.0 hours later (one job's traces are recorded within 1 "
                        "hour)");
  // Within the hour: one job.
  EXPECT_TRUE(job_disagreements({trace_of("a.json", 0, 2, 0, 1), trace_of("b.json", 1, 2, kDay / 25, kDay / 25 + 1)})
                  .empty());
}

// ----------------------------------------------------- defended bounds ---

// Two ranks whose three matched collectives satisfy causality within a
// narrow interval, but whose ends lie far apart: they did not finish together.
TEST(KinetoAlignment, EndsScatteredBeyondTheBoundAreDoubted) {
  std::vector<RankCollectives> ranks(2);
  ranks[0].rank = 0;
  ranks[1].rank = 1;
  const auto add = [](RankCollectives& rank, uint64_t seq, int64_t begin, int64_t end) {
    rank.records.push_back({7, seq, begin, end, CommOp::kAllReduce, MatchKey::kSeq});
  };
  add(ranks[0], 0, 0, 100);
  add(ranks[1], 0, 0, 100);
  add(ranks[0], 1, 1000, 1100);
  add(ranks[1], 1, 1090, 1190);
  add(ranks[0], 2, 2090, 2190);
  add(ranks[1], 2, 2000, 2100);
  const Alignment a = align_ranks(ranks);
  EXPECT_FALSE(a.ranks[1].aligned);
  EXPECT_EQ(a.ranks[1].doubt, "against rank 0: the ends of its 3 matched collectives lie up to 90 ns from the offset, "
                              "beyond the 10 ns bound causality leaves: they did not finish together, so they are "
                              "not one collective");
  // The same collectives finishing together are believed.
  ranks[1].records[1] = {7, 1, 1000, 1100, CommOp::kAllReduce, MatchKey::kSeq};
  ranks[1].records[2] = {7, 2, 2090, 2190, CommOp::kAllReduce, MatchKey::kSeq};
  EXPECT_TRUE(align_ranks(ranks).ranks[1].aligned);
}

TEST(KinetoAlignment, TooFewMatchesAreDoubted) {
  std::vector<RankCollectives> ranks = job({0, 5'000}, 2, MatchKey::kSeq, 6);
  const Alignment a = align_ranks(ranks);
  EXPECT_FALSE(a.ranks[1].aligned);
  EXPECT_EQ(a.ranks[1].doubt, "against rank 0: only 2 collectives matched; a bound needs 3");
  EXPECT_TRUE(align_ranks(job({0, 5'000}, 3, MatchKey::kSeq, 6)).ranks[1].aligned);
}

// The same Seq numbers in a trace of another job recorded a day later.
TEST(KinetoAlignment, ClocksFurtherApartThanOneJobsCanBeAreDoubted) {
  const Alignment a = align_ranks(job({0, 86'400'000'000'000}, 20, MatchKey::kSeq, 7));
  EXPECT_FALSE(a.ranks[1].aligned);
  EXPECT_EQ(a.ranks[1].doubt, "against rank 0: its matches put its clock 86400 s from the reference's, more than one "
                              "job's clocks can be apart (3600 s)");
  EXPECT_TRUE(align_ranks(job({0, 3'000'000'000'000}, 20, MatchKey::kSeq, 7)).ranks[1].aligned);
}

}  // namespace
}  // namespace rankscope::kineto
