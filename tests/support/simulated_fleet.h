// A fleet simulated for group testing, for the tests and bench/bench_group_testing.
#pragma once

#include <algorithm>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fleet_fixtures.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"

namespace rankscope::acceptance {

// A fleet whose nodes move `healthy` GB/s each in a ring, ±3 % of noise, except for the bad nodes, at
// `slow_factor` of it; a bad node slows its ring neighbours' transfers with it. `slow_link`, when set, is
// a link between two sound nodes, as slow.
struct SimulatedFleet {
  int nodes;
  std::set<int> bad;
  std::pair<int, int> slow_link{-1, -1};
  double healthy = 2.0;
  double slow_factor = 0.25;
  Rules rules = {};  // as the run's planner and verdicts take them
  std::mt19937 noise{7};

  double jitter() { return healthy * std::uniform_real_distribution<double>(0.97, 1.03)(noise); }
  bool slow(int a, int b) const {
    return bad.count(a) || bad.count(b) || std::minmax(a, b) == std::minmax(slow_link.first, slow_link.second);
  }
  RingTest ring(int round, const std::vector<int>& nodes_in_ring) {
    RingTest test{round, nodes_in_ring, {}};
    const size_t k = nodes_in_ring.size();
    for (size_t i = 0; i < k; ++i) {
      const int node = nodes_in_ring[i], next = nodes_in_ring[(i + 1) % k], before = nodes_in_ring[(i + k - 1) % k];
      test.gbps.push_back(jitter() * (slow(node, next) || slow(node, before) ? slow_factor : 1));
    }
    return test;
  }
  // Bisection over: each pair as a ring of two, and as a link.
  void add_pairs(Measurements& m, const GroupTestingStep& step, int round) {
    for (const auto& [a, b] : step.links) {
      RingTest pair = ring(round, {a, b});
      pair.pair = true;
      m.ring_tests.push_back(pair);
      m.links.push_back(link(a, b));
    }
  }
  LinkMeasurements link(int a, int b) {
    const double factor = slow(a, b) ? slow_factor : 1;
    return {std::min(a, b), std::max(a, b), {jitter() * factor, jitter() * factor}, {50 / factor, 51 / factor}};
  }
  // Group testing to the end, as measure() runs it: the measurements and the number of rounds of rings.
  std::pair<Measurements, int> run() {
    Measurements m = healthy_fleet(nodes, false);
    m.link_screen = LinkScreen::group_testing;
    int rounds = 0;
    for (;; ++rounds) {
      const GroupTestingStep step = next_group_tests(nodes, m.ring_tests, rules);
      if (step.rings.empty()) {
        add_pairs(m, step, rounds);
        break;
      }
      std::set<int> tested;
      for (const auto& r : step.rings) {
        for (int n : r)
          if (!tested.insert(n).second) throw std::logic_error("node " + std::to_string(n) + " in two rings of one round");
        m.ring_tests.push_back(ring(rounds, r));
      }
    }
    return {m, rounds};
  }
};

}  // namespace rankscope::acceptance
