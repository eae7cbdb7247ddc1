// The statistics the analyses, reports and importers share.
#include "rankscope/model/statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace rankscope {
namespace {

constexpr int64_t kNone = INT64_MIN;

TEST(Statistics, MedianIsTheMiddleValueOrTheMeanOfTheTwo) {
  EXPECT_EQ(median(std::vector<int64_t>{7}), 7);
  EXPECT_EQ(median(std::vector<int64_t>{9, 1, 5}), 5);
  EXPECT_EQ(median(std::vector<int64_t>{10, 1, 4, 6}), 5);  // (4 + 6) / 2, not the upper 6 nor the lower 4
  EXPECT_EQ(median(std::vector<double>{0.5, 0.25}), 0.375);
  EXPECT_TRUE(std::isnan(median(std::vector<double>{})));
  EXPECT_EQ(median(std::vector<double>{}, 0), 0);
}

// Each value against the others: the same as the median of the others, whatever the ties.
TEST(Statistics, MedianWithoutOneValueIsTheMedianOfTheRest) {
  const std::vector<int64_t> sorted = {1, 3, 3, 8, 10, 40};
  for (const int64_t value : sorted) {
    std::vector<int64_t> rest = sorted;
    rest.erase(std::find(rest.begin(), rest.end(), value));
    EXPECT_DOUBLE_EQ(median_without(sorted, value), median(rest)) << value;
  }
  EXPECT_DOUBLE_EQ(median_without(std::vector<int64_t>{60, 160}, int64_t{160}), 60) << "two ranks: the other one";
  EXPECT_TRUE(std::isnan(median_without(std::vector<int64_t>{5}, int64_t{5}))) << "no other";
}

TEST(Statistics, QuantilesInterpolateBetweenTheNearestValues) {
  const std::vector<double> values = {60, 64, 61, 130, 63, 62};
  EXPECT_DOUBLE_EQ(quantile(values, 0.75), 63.75);  // NumPy: np.quantile([60, 61, 62, 63, 64, 130], 0.75)
  EXPECT_DOUBLE_EQ(quantile(values, 0.25), 61.25);
  EXPECT_DOUBLE_EQ(quantile(values, 0.5), median(values));
  EXPECT_DOUBLE_EQ(quantile(values, 0), 60);
  EXPECT_DOUBLE_EQ(quantile(values, 1), 130);
  EXPECT_DOUBLE_EQ(quantile(std::vector<int64_t>{7}, 0.75), 7);
  EXPECT_TRUE(std::isnan(quantile(std::vector<double>{}, 0.75)));
  EXPECT_EQ(quantile(std::vector<double>{}, 0.75, 0), 0);
}

TEST(Statistics, MedianOfTimesRoundsDownAndDoesNotOverflow) {
  EXPECT_EQ(median_ns({3, 4}), 3);
  EXPECT_EQ(median_ns({-4, -3}), -4);
  EXPECT_EQ(median_ns({}, kNone), kNone);
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

}  // namespace
}  // namespace rankscope
