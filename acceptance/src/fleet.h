// The robust statistics every figure of the fleet is judged by (docs/accept-reference.md,
// "Verdicts"): verdict.cpp's checks, the clock's and the reference job's.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"

namespace rankscope::acceptance {

inline Verdict worse(Verdict a, Verdict b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

// Items with a verdict, worst first, then in the order they came.
template <typename Item>
std::vector<const Item*> worst_first(const std::vector<Item>& items) {
  std::vector<const Item*> order;
  for (const Item& item : items) order.push_back(&item);
  std::stable_sort(order.begin(), order.end(), [](const Item* a, const Item* b) {
    return static_cast<int>(a->verdict) > static_cast<int>(b->verdict);
  });
  return order;
}

// A figure's verdict from its ratio to its reference and whether it lies beyond the fleet's noise.
inline Verdict verdict_of(double ratio, bool beyond_noise, const Rules& rules) {
  if (ratio < rules.fail_below) return beyond_noise ? Verdict::fail : Verdict::retest;
  if (ratio < rules.retest_below && beyond_noise) return Verdict::retest;
  return Verdict::pass;
}

// Figures within this share of each other are the same figure: below it,
// differences between like nodes are the measurement's own (a microsecond
// of latency on a virtual network, a burst of a shared core).
inline constexpr double kResolution = 0.05;

// A fleet's figures (one per node or link, higher is better): their median,
// and the median absolute deviation scaled to a standard deviation, no less
// than kResolution of the median, or than `least_spread` where given (for
// figures on a log scale, whose median says nothing of their resolution).
// Two figures have no deviation to measure noise by (each lies as far from
// their median as the other, so neither could ever lie beyond it): for
// them, the floor alone is the noise.
struct Fleet {
  double median = 0, spread = 0;
  explicit Fleet(const std::vector<double>& values, std::optional<double> least_spread = std::nullopt) {
    median = rankscope::median(values, 0);
    std::vector<double> deviations;
    for (double v : values) deviations.push_back(std::fabs(v - median));
    constexpr size_t kFewestToMeasureNoise = 3;
    const double deviation = values.size() >= kFewestToMeasureNoise ? 1.4826 * rankscope::median(deviations, 0) : 0;
    spread = std::max(deviation, least_spread.value_or(kResolution * median));
  }
  bool beyond_noise(double value, const Rules& rules) const { return (median - value) > rules.robust_z * spread; }
  // The verdict on `value`, and its ratio to the median.
  std::pair<Verdict, double> judge(double value, const Rules& rules) const {
    const double ratio = median > 0 ? value / median : 1;
    return {verdict_of(ratio, beyond_noise(value, rules), rules), ratio};
  }
};

// The rule of Fleet::judge in words, `of` naming the reference.
inline std::string rule_text(const Rules& rules, const char* of) {
  return printf_string("fail below %.2f", rules.fail_below) + " of " + of + " and beyond " +
         printf_string("%.0f", rules.robust_z) + " robust deviations of the fleet (retest when within them), retest below " +
         printf_string("%.2f", rules.retest_below) + " and beyond them";
}

}  // namespace rankscope::acceptance
