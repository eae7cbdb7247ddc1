// How --hta-compat reads trace timestamps: as HTA does, the µs the trace
// writes parsed to the nearest float64.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "rankscope/analysis/hta.h"

namespace rankscope::analysis {
namespace {

// The µs as a trace writes them ("1712345678901234.567"), parsed by strtod,
// which rounds correctly as Python's float() does.
double parsed_from_text(int64_t ns) {
  char text[48];
  const int64_t magnitude = ns < 0 ? -ns : ns;
  std::snprintf(text, sizeof(text), "%s%" PRId64 ".%03" PRId64, ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
  return std::strtod(text, nullptr);
}

TEST(HtaMicroseconds, EqualsTheTracesTextParsedToFloat64AtEveryMagnitude) {
  std::mt19937_64 random(42);
  for (int64_t magnitude = 1; magnitude <= (int64_t{1} << 61); magnitude *= 2) {
    for (int i = 0; i < 2000; ++i) {
      const int64_t ns = static_cast<int64_t>(random() % static_cast<uint64_t>(magnitude)) + magnitude;
      ASSERT_EQ(hta_microseconds(ns), parsed_from_text(ns)) << ns;
      ASSERT_EQ(hta_microseconds(-ns), parsed_from_text(-ns)) << -ns;
    }
  }
}

TEST(HtaMicroseconds, RoundsHalfwayToEvenAtEpochMagnitudes) {
  // Around 1.7e15 µs a float64 steps by 0.25 µs: .125 and .375 lie halfway.
  const int64_t whole_us = 1'712'345'678'901'234;
  for (int64_t rest = 0; rest < 1000; ++rest) {
    const int64_t ns = whole_us * 1000 + rest;
    ASSERT_EQ(hta_microseconds(ns), parsed_from_text(ns)) << rest;
  }
  EXPECT_EQ(hta_microseconds(whole_us * 1000 + 125), static_cast<double>(whole_us));
  EXPECT_EQ(hta_microseconds(whole_us * 1000 + 375), static_cast<double>(whole_us) + 0.5);
}

TEST(HtaMicroseconds, ADecimalBelowTheFloatStepRoundsAwayFromItsExactCeiling) {
  // 0.1 µs past a whole µs reads as the whole µs itself: HTA's begin rounds
  // up to it, where the exact time would round up to the next µs.
  const int64_t ns = 1'712'345'678'901'234'100;
  EXPECT_EQ(std::ceil(hta_microseconds(ns)), 1'712'345'678'901'234.0);
}

}  // namespace
}  // namespace rankscope::analysis
