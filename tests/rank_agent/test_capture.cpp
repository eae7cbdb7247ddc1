// The capture library as an application meets it: loaded at start, NVTX
// calls from several threads and a forked child, then its shard read back.
// Run by test_capture.sh twice: capturing (the environment `rankscope run`
// sets) and not capturing (no environment: the library must stay out of the way).
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "rankscope/model/counters.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "shard_contents.h"

extern "C" void nvtx_module_ranges(int count);  // tests/rank_agent/nvtx_module.cpp

namespace {

using rankscope::Event;
using rankscope::EventKind;

// What test_capture.sh set up: "capture", "off" or "full disk".
std::string expected() {
  const char* mode = std::getenv("TEST_CAPTURE_EXPECT");
  return mode ? mode : "off";
}
bool expect_capture() { return expected() == "capture"; }

using rankscope::testing::read_shard;

TEST(Capture, NvtxFromThreadsDomainsAndAForkedChildEndUpInTheShard) {
  if (!expect_capture()) GTEST_SKIP() << "run for another case";
  ASSERT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureNvtx));
  const std::string shard = rankscope_agent_shard_path();
  ASSERT_FALSE(shard.empty());

  // Nested push/pop on the main thread.
  nvtxRangePushA("outer");
  nvtxRangePushA("inner");
  nvtxMarkA("a mark");
  EXPECT_EQ(nvtxRangePop(), 1);
  EXPECT_EQ(nvtxRangePop(), 0);
  EXPECT_LT(nvtxRangePop(), 0) << "a pop with no open range";

  // A domain, a registered string, a named category.
  nvtxDomainHandle_t domain = nvtxDomainCreateA("trainer");
  nvtxStringHandle_t step = nvtxDomainRegisterStringA(domain, "step");
  nvtxDomainNameCategoryA(domain, 7, "optimizer work");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.category = 7;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = step;
  nvtxDomainRangePushEx(domain, &attributes);
  nvtxDomainRangePop(domain);
  nvtxRangePushW(L"wide");
  nvtxRangePop();
  nvtx_module_ranges(10);  // another module's NVTX, initialised separately

  // A start/end range that ends on another thread, and four busy threads.
  const nvtxRangeId_t crossing = nvtxRangeStartA("crossing");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, crossing] {
      for (int i = 0; i < 1000; ++i) {
        nvtxRangePushA("worker range");
        nvtxRangePop();
      }
      if (t == 0) nvtxRangeEnd(crossing);
    });
  }
  for (auto& t : threads) t.join();

  // A forked child (a data loader worker) records nothing into its parent's shard.
  const pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 100; ++i) {
      nvtxRangePushA("child range");
      nvtxRangePop();
    }
    std::exit(0);  // its exit handlers run, and must leave the parent's shard alone
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  ASSERT_TRUE(rankscope_agent_finish());
  EXPECT_FALSE(rankscope_agent_capturing(rankscope::agent::kCaptureNvtx));
  nvtxRangePushA("after finish");  // ignored, and harmless
  nvtxRangePop();

  const auto back = read_shard(shard);
  EXPECT_TRUE(back.scan.ended);
  EXPECT_FALSE(back.scan.damage.any());
  EXPECT_EQ(back.scan.counters.get("events_dropped"), 0u);

  const auto outer = back.named("outer"), inner = back.named("inner");
  ASSERT_EQ(outer.size(), 1u);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(outer[0].kind, EventKind::kNvtxRange);
  EXPECT_LE(outer[0].begin_ns, inner[0].begin_ns);
  EXPECT_GE(outer[0].end_ns, inner[0].end_ns);
  EXPECT_EQ(outer[0].track, inner[0].track);
  const auto mark = back.named("a mark");
  ASSERT_EQ(mark.size(), 1u);
  EXPECT_EQ(mark[0].kind, EventKind::kNvtxMark);
  EXPECT_GE(mark[0].begin_ns, inner[0].begin_ns);
  EXPECT_LE(mark[0].begin_ns, inner[0].end_ns);

  const auto steps = back.named("step");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].seq, 7u) << "category";
  ASSERT_NE(steps[0].comm_hash, 0u) << "a domain's range names its domain";
  EXPECT_EQ(back.names.at(static_cast<uint32_t>(steps[0].comm_hash - 1)), "trainer");
  const auto category = back.named("optimizer work");
  ASSERT_EQ(category.size(), 1u);
  EXPECT_EQ(category[0].kind, EventKind::kInstant);
  EXPECT_EQ(category[0].seq, 7u);
  EXPECT_EQ(back.named("wide").size(), 1u);
  EXPECT_EQ(back.named("module range").size(), 10u) << "a second module's NVTX calls are seen too";

  const auto crossed = back.named("crossing");
  ASSERT_EQ(crossed.size(), 1u);
  EXPECT_NE(crossed[0].track, outer[0].track) << "start/end ranges live on their domain's track";
  bool domain_track = false;
  for (const auto& track : back.scan.tracks) domain_track |= track.id == crossed[0].track && track.type == rankscope::TrackType::kNvtxDomain;
  EXPECT_TRUE(domain_track);

  const auto workers = back.named("worker range");
  EXPECT_EQ(workers.size(), 4000u);
  std::map<uint16_t, int> per_track;
  for (const Event& e : workers) ++per_track[e.track];
  EXPECT_EQ(per_track.size(), 4u) << "one track per thread";
  EXPECT_TRUE(back.named("child range").empty());
  EXPECT_TRUE(back.named("after finish").empty());
}

// A full disk: the shard keeps what was written before, the program runs
// on, and the shard still ends with the counters that say what was lost
// (the room each chunk keeps past itself).
TEST(Capture, AFullDiskKeepsWhatWasWrittenAndTheProgramRunsOn) {
  if (expected() != "full disk") GTEST_SKIP() << "run for another case";
  const std::string shard = rankscope_agent_shard_path();
  ASSERT_FALSE(shard.empty());
  constexpr int kRanges = 200000;  // 12.8 MB of events against a 1 MiB file size limit
  for (int i = 0; i < kRanges; ++i) {
    nvtxRangePushA("filling");
    nvtxRangePop();
  }
  EXPECT_FALSE(rankscope_agent_finish()) << "the shard cannot be complete";
  const auto back = read_shard(shard);
  EXPECT_TRUE(back.scan.ended) << "the end record did not fit in the room kept for it";
  EXPECT_GT(back.scan.counters.get(rankscope::counter::kEventsUnwritten), 0u);
  EXPECT_EQ(back.scan.damage.chunks_corrupt, 0u) << "failed chunks were taken back, not left half-written";
  const size_t kept = back.named("filling").size();
  EXPECT_GT(kept, 1000u) << "what fitted was kept";
  EXPECT_LT(kept, static_cast<size_t>(kRanges));
}

TEST(Capture, WithoutTheEnvironmentTheLibraryStaysOutOfTheWay) {
  if (expected() != "off") GTEST_SKIP() << "run for another case";
  EXPECT_FALSE(rankscope_agent_capturing(rankscope::agent::kCaptureNvtx));
  EXPECT_STREQ(rankscope_agent_shard_path(), "");
  // NVTX calls work as without any tool; events go nowhere.
  nvtxRangePushA("nobody listens");
  nvtxRangePop();
  EXPECT_FALSE(rankscope_agent_finish());
  const Event e{};
  rankscope_agent_record(&e);
}

}  // namespace
