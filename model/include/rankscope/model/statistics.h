// The statistics the analyses, the reports and the importers share, so that
// a figure called the median is the same figure wherever it is computed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace rankscope {

// The middle value; for an even count, the mean of the two middle ones.
// `when_empty` for no values.
template <typename T>
double median(std::vector<T> values, double when_empty = std::numeric_limits<double>::quiet_NaN()) {
  if (values.empty()) return when_empty;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  const double upper = static_cast<double>(*middle);
  if (values.size() % 2 == 1) return upper;
  const double lower = static_cast<double>(*std::max_element(values.begin(), middle));
  return lower + (upper - lower) / 2;
}

// The median of times or sizes in whole units, rounded down; `when_empty`
// for no values.
inline int64_t median_ns(std::vector<int64_t> values, int64_t when_empty = 0) {
  if (values.empty()) return when_empty;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) return *middle;
  const int64_t lower = *std::max_element(values.begin(), middle);
  // Halved before adding, so that two large times cannot overflow.
  return lower + (*middle - lower) / 2;
}

// The arithmetic mean, rounded toward zero; 0 for no values.
inline int64_t mean_ns(const std::vector<int64_t>& values) {
  if (values.empty()) return 0;
  long double total = 0;
  for (int64_t v : values) total += static_cast<long double>(v);
  return static_cast<int64_t>(total / static_cast<long double>(values.size()));
}

}  // namespace rankscope
