#include "rankscope/model/capture_windows.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "rankscope/model/shard.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using Spans = std::vector<TimeSpan>;

RecordedWindows recorded(std::initializer_list<std::vector<CaptureWindow>> chunks) {
  RecordedWindows windows;
  for (const auto& chunk : chunks) windows.add_chunk(chunk);
  return windows;
}

TEST(CaptureWindows, AShardWithoutWindowsRecordedThroughout) {
  EXPECT_FALSE(captured_spans(std::nullopt, std::nullopt, 100));
}

TEST(CaptureWindows, SteeredWindowsAreUnitedInOrder) {
  // Written twice (closed while current, then again from the recorder's log), touching, and out of order.
  const auto spans = captured_spans(recorded({{{30, 40}, {10, 20}}, {{10, 20}, {20, 25}, {50, 60}}}), std::nullopt, 100);
  ASSERT_TRUE(spans);
  EXPECT_EQ(*spans, (Spans{{10, 25}, {30, 40}, {50, 60}}));
}

TEST(CaptureWindows, OnlyTheLatestChunksOpenWindowIsOpen) {
  // Open since 30 in the first chunk, closed at 45 in the second, which opens another at 70.
  const auto steered = recorded({{{10, 20}, {30, kWindowStillOpen}}, {{30, 45}, {70, kWindowStillOpen}}});
  EXPECT_EQ(*captured_spans(steered, std::nullopt, 90), (Spans{{10, 20}, {30, 45}, {70, 90}}));
  // A rank that died with a window open: it ends where the rank was last heard from.
  EXPECT_EQ(*captured_spans(recorded({{{30, kWindowStillOpen}}}), std::nullopt, 80), (Spans{{30, 80}}));
}

TEST(CaptureWindows, RingDumpsMeetTheSteeredWindows) {
  const auto steered = recorded({{{0, 50}, {60, 100}}});
  const auto dumped = recorded({{{40, 70}}, {{90, 120}}});
  EXPECT_EQ(*captured_spans(steered, dumped, 200), (Spans{{40, 50}, {60, 70}, {90, 100}}));
  EXPECT_EQ(*captured_spans(std::nullopt, dumped, 200), (Spans{{40, 70}, {90, 120}}));
}

TEST(CaptureWindows, AWindowedShardThatNeverOpenedOneHoldsNothing) {
  const auto spans = captured_spans(recorded({{}}), std::nullopt, 100);
  ASSERT_TRUE(spans);
  EXPECT_TRUE(spans->empty());
}

TEST(CaptureWindows, AStepIsWholeOnlyInsideOneWindow) {
  const Spans spans{{10, 20}, {20 + 1, 40}, {50, 60}};
  EXPECT_EQ(span_holding(spans, 10, 20), 0u);
  EXPECT_EQ(span_holding(spans, 25, 40), 1u);
  EXPECT_FALSE(span_holding(spans, 15, 25)) << "across a gap";
  EXPECT_FALSE(span_holding(spans, 5, 15)) << "begun before the first window";
  EXPECT_FALSE(span_holding(spans, 55, 61)) << "ended after the last";
  EXPECT_FALSE(span_holding(spans, 42, 45)) << "between windows";
  EXPECT_FALSE(span_holding({}, 1, 2));
}

TEST(CaptureWindows, ShardChunksRoundTripByKind) {
  const fs::path dir = fs::temp_directory_path() / ("rankscope-windows-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "rank-00000.shard").string();
  {
    ShardWriter writer;
    ASSERT_TRUE(writer.open(path, RankMetadata{}, 1));
    const CaptureWindow first[] = {{10, 20}, {30, kWindowStillOpen}};
    const CaptureWindow second[] = {{30, 40}};
    const CaptureWindow dump[] = {{35, 50}};
    ASSERT_TRUE(writer.write_capture_windows(first, WindowHolds::kEventsBegun, 2));
    ASSERT_TRUE(writer.write_capture_windows(second, WindowHolds::kEventsBegun, 3));
    ASSERT_TRUE(writer.write_capture_windows(dump, WindowHolds::kEventsEnded, 4));
    ASSERT_TRUE(writer.close({}, 5));
  }
  const ShardScan scan = ShardFile(path).scan();
  EXPECT_FALSE(scan.damage.any());
  ASSERT_TRUE(scan.steered_windows && scan.dumped_windows);
  EXPECT_FALSE(scan.steered_windows->open_since);
  EXPECT_EQ(*scan.captured(), (Spans{{35, 40}}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope
