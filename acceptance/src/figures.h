// The one figure each kind of repeated measurement is judged by.
#pragma once

#include <algorithm>
#include <vector>

namespace rankscope::acceptance {

// The best of a node's repeats, or of a link's bandwidths: a slow repeat is
// noise more often than a fast one is.
inline double best(const std::vector<double>& repeats) {
  return repeats.empty() ? 0 : *std::max_element(repeats.begin(), repeats.end());
}
// The shortest of a link's latencies, for the same reason.
inline double least(const std::vector<double>& repeats) {
  return repeats.empty() ? 0 : *std::min_element(repeats.begin(), repeats.end());
}

}  // namespace rankscope::acceptance
