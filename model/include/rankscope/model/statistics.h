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

// The median of `sorted` (ascending) with one occurrence of `value`, which it
// holds, left out: each rank against the others at the cost of one sort.
// `when_empty` when nothing is left.
template <typename T>
double median_without(const std::vector<T>& sorted, T value,
                      double when_empty = std::numeric_limits<double>::quiet_NaN()) {
  if (sorted.size() <= 1) return when_empty;
  const auto gone = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), value) - sorted.begin());
  const auto at = [&](size_t i) { return static_cast<double>(sorted[i < gone ? i : i + 1]); };
  const size_t left = sorted.size() - 1;
  if (left % 2 == 1) return at(left / 2);
  const double lower = at(left / 2 - 1), upper = at(left / 2);
  return lower + (upper - lower) / 2;
}

// The value a share `q` (0 to 1) of the way from the least to the greatest,
// interpolated between the two nearest (R's and NumPy's default);
// `when_empty` for no values.
template <typename T>
double quantile(std::vector<T> values, double q, double when_empty = std::numeric_limits<double>::quiet_NaN()) {
  if (values.empty()) return when_empty;
  std::sort(values.begin(), values.end());
  const double at = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(at);
  const size_t above = std::min(below + 1, values.size() - 1);
  return static_cast<double>(values[below]) +
         (static_cast<double>(values[above]) - static_cast<double>(values[below])) * (at - static_cast<double>(below));
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

// The mean of values and its standard error (the sample standard
// deviation over the square root of the count); the error is 0 for fewer
// than two values, the mean 0 for none.
struct MeanWithError {
  double mean = 0, error = 0;
};
inline MeanWithError mean_with_error(const std::vector<double>& values) {
  MeanWithError out;
  if (values.empty()) return out;
  double total = 0;
  for (double v : values) total += v;
  const double n = static_cast<double>(values.size());
  out.mean = total / n;
  if (values.size() < 2) return out;
  double squares = 0;
  for (double v : values) squares += (v - out.mean) * (v - out.mean);
  out.error = std::sqrt(squares / (n - 1) / n);
  return out;
}

}  // namespace rankscope
