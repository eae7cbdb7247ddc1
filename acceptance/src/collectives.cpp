// nccl-tests' bandwidth figures of a collective sweep.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "rankscope/acceptance/collectives.h"
#include "rankscope/model/statistics.h"

namespace rankscope::acceptance {

double busbw_factor(std::string_view collective, int ranks) {
  if (ranks < 2) return 0;
  const double n = ranks;
  return collective == "allreduce" ? 2 * (n - 1) / n : (n - 1) / n;
}

std::string collective_label(std::string_view transport, std::string_view collective) {
  return (transport == "mpi" ? "" : std::string(transport) + " ") + std::string(collective);
}

std::string collective_check_name(std::string_view transport, std::string_view collective) {
  return "collectives." + (transport == "mpi" ? "" : std::string(transport) + ".") + std::string(collective);
}

CollectiveFigures collective_figures(const CollectivePoint& point, std::string_view collective, int ranks) {
  CollectiveFigures figures;
  const std::vector<double>& times = point.iteration_us;
  if (times.empty()) return figures;
  figures.median_us = median(times, 0);
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  // The nearest rank at or above the 99th percentile.
  const size_t at = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(sorted.size()))) - 1;
  figures.p99_us = sorted[std::min(at, sorted.size() - 1)];
  const double mean = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  double squares = 0;
  for (double t : times) squares += (t - mean) * (t - mean);
  figures.cv = mean > 0 ? std::sqrt(squares / static_cast<double>(times.size())) / mean : 0;
  if (figures.median_us > 0) {
    figures.algbw_gbps = static_cast<double>(point.bytes) / (figures.median_us * 1e-6) / 1e9;
    figures.busbw_gbps = figures.algbw_gbps * busbw_factor(collective, ranks);
  }
  return figures;
}

}  // namespace rankscope::acceptance
