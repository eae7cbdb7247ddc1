// bench_group_testing [TRIALS]: group testing as `rankscope accept --links
// groups` plans it (next_group_tests, judge), run on simulated fleets of up
// to 4,096 nodes with d bad nodes (each slowing its own transfers and its
// ring neighbours' to SLOW of the healthy figure, ±3 % noise elsewhere):
// how many ring tests, pairs and rounds it takes against all pairs, and how
// often it fails exactly the bad nodes, with rings judged against the first
// round's median ring or against a baseline's. Prints a Markdown table.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "simulated_fleet.h"

using namespace rankscope::acceptance;

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 20;
  std::mt19937 placement(1);
  std::printf("| nodes | bad nodes | slow | reference ring | all pairs: tests | rounds | group testing: ring tests | pairs | rounds of rings | "
              "bad nodes failed | other nodes failed | other nodes retest |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const std::pair<int, int> fleets[] = {{64, 0}, {64, 1}, {232, 5}, {1024, 1}, {1024, 5}, {4096, 0}, {4096, 1}, {4096, 5}, {4096, 20}, {4096, 40}, {4096, 100}};
  struct Row {
    int nodes, d;
    double slow;
    bool baseline;  // rings judged against a healthy run's median ring (2 GB/s) instead of this run's
  };
  std::vector<Row> rows;
  for (const double slow : {0.25, 0.7})
    for (const auto& [nodes, d] : fleets) rows.push_back({nodes, d, slow, false});
  for (const int d : {20, 40, 100}) rows.push_back({4096, d, 0.25, true});
  for (const auto& [nodes, d, slow, baseline] : rows) {
    double rings = 0, pairs = 0, rounds = 0, found = 0, others = 0, others_retest = 0;
    for (int t = 0; t < trials; ++t) {
      std::set<int> bad;
      while (static_cast<int>(bad.size()) < d) bad.insert(std::uniform_int_distribution<int>(0, nodes - 1)(placement));
      SimulatedFleet fleet{nodes, bad};
      fleet.slow_factor = slow;
      if (baseline) fleet.rules.ring_baseline_gbps = fleet.healthy;
      fleet.noise.seed(static_cast<unsigned>(t + 1));
      auto [m, ring_rounds] = fleet.run();
      for (const RingTest& test : m.ring_tests) (test.pair ? pairs : rings) += 1.0 / trials;
      rounds += static_cast<double>(ring_rounds) / trials;
      const Acceptance judged = judge(m, fleet.rules);
      for (size_t n = 0; n < judged.nodes.size(); ++n) {
        const bool failed = judged.nodes[n].verdict == Verdict::fail;
        if (bad.count(static_cast<int>(n))) found += failed ? 1 : 0;
        else others += failed ? 1 : 0, others_retest += judged.nodes[n].verdict == Verdict::retest ? 1 : 0;
      }
    }
    const double all_pairs = static_cast<double>(nodes) * (nodes - 1) / 2;
    std::printf("| %d | %d | %.2f | %s | %.0f | %d | %.1f | %.1f | %.1f | %s | %.0f of %d | %.0f of %d |\n", nodes, d, slow,
                baseline ? "baseline" : "round 1's median", all_pairs, nodes - 1, rings, pairs, rounds,
                d == 0 ? "—" : (std::to_string(static_cast<int>(found)) + " of " + std::to_string(d * trials)).c_str(),
                others, (nodes - d) * trials, others_retest, (nodes - d) * trials);
  }
}
