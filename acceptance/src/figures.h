// The one figure each kind of repeated measurement is judged by.
#pragma once

#include <vector>

#include "rankscope/model/statistics.h"

namespace rankscope::acceptance {

// A node's figure, or a link's bandwidth: the upper quartile of its repeats.
// A disturbance (a neighbour's burst of load, another job's traffic) slows
// repeats far more often than anything speeds one up, so the figure looks
// past up to three spoiled repeats in four; yet one lucky repeat does not
// decide it, as it would the best: a triad on a shared machine ran at
// 7-34 GB/s from repeat to repeat (docs/accept-reference.md, "Verdicts").
inline double upper_quartile(const std::vector<double>& repeats) { return quantile(repeats, 0.75, 0); }
// A link's latency: the lower quartile of its repeats, for the same reasons.
inline double lower_quartile(const std::vector<double>& repeats) { return quantile(repeats, 0.25, 0); }
// A GPU's sustained GEMM: the median of the last half of its one-second
// slices, the throughput it holds once hot, where its first burst would
// hide a GPU that throttles.
inline double held_figure(const std::vector<double>& slices) {
  return median(std::vector<double>(slices.begin() + static_cast<std::ptrdiff_t>(slices.size() / 2), slices.end()), 0);
}

}  // namespace rankscope::acceptance
