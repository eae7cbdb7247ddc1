// The statistics and the formats every analysis and report shares.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rankscope/analysis/analysis.h"
#include "rankscope/analysis/format.h"
#include "rankscope/analysis/statistics.h"

namespace rankscope::analysis {
namespace {

TEST(Statistics, MedianIsTheMiddleValueOrTheMeanOfTheTwo) {
  EXPECT_EQ(median(std::vector<int64_t>{7}), 7);
  EXPECT_EQ(median(std::vector<int64_t>{9, 1, 5}), 5);
  EXPECT_EQ(median(std::vector<int64_t>{10, 1, 4, 6}), 5);  // (4 + 6) / 2, not the upper 6 nor the lower 4
  EXPECT_EQ(median(std::vector<double>{0.5, 0.25}), 0.375);
  EXPECT_TRUE(std::isnan(median(std::vector<double>{})));
  EXPECT_EQ(median(std::vector<double>{}, 0), 0);
}

TEST(Statistics, MedianOfTimesRoundsDownAndDoesNotOverflow) {
  EXPECT_EQ(median_ns({3, 4}), 3);
  EXPECT_EQ(median_ns({-4, -3}), -4);
  EXPECT_EQ(median_ns({}, kUnknown), kUnknown);
  EXPECT_EQ(median_ns({INT64_MAX - 2, INT64_MAX}), INT64_MAX - 1);
  // The integer median agrees with the general one wherever that is whole.
  const std::vector<int64_t> steps = {12, 18, 11, 40, 13, 15};
  EXPECT_EQ(static_cast<double>(median_ns(steps)), median(steps));
}

TEST(Statistics, MeanOfTimes) {
  EXPECT_EQ(mean_ns({}), 0);
  EXPECT_EQ(mean_ns({1, 2, 4}), 2);
  EXPECT_EQ(mean_ns({INT64_MAX, INT64_MAX}), INT64_MAX);
}

TEST(Format, DurationsPickTheirUnit) {
  EXPECT_EQ(format_duration(950), "950 ns");
  EXPECT_EQ(format_duration(1'500), "1.5 µs");
  EXPECT_EQ(format_duration(12'345'678), "12.3 ms");
  EXPECT_EQ(format_duration(2'000'000'000), "2 s");
  EXPECT_EQ(format_duration(-3'000'000), "-3 ms");
  EXPECT_EQ(format_duration(static_cast<double>(kUnknown)), "—");
  EXPECT_EQ(format_duration(std::nan("")), "—");
}

TEST(Format, SizesSharesAndRates) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(25.0 * (1 << 20)), "25 MiB");
  EXPECT_EQ(format_percent(100.0 / 3), "33.3 %");
  EXPECT_EQ(format_percent(25), "25 %");
  EXPECT_EQ(format_percent(std::nan("")), "—");
  EXPECT_EQ(format_bandwidth(123.456), "123 GB/s");
  EXPECT_EQ(significant(1.234), "1.23");
  EXPECT_EQ(trimmed(-0.01, 1), "0");
}

}  // namespace
}  // namespace rankscope::analysis
