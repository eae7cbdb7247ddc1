// How every analysis and report format prints quantities.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rankscope/analysis/profile.h"
#include "rankscope/model/format.h"

namespace rankscope::analysis {
namespace {

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
