// Group testing's judgement of its rings, shared by the planning of the next
// round (group_testing.cpp) and the verdicts (verdict.cpp), so that the run
// bisects exactly the tests the verdicts call failed.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fleet.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/verdict.h"

namespace rankscope::acceptance {

// A test's figure is its slowest node's.
inline double ring_figure(const RingTest& test) {
  return test.gbps.empty() ? 0 : *std::min_element(test.gbps.begin(), test.gbps.end());
}

// What each ring is judged against: the first round's rings, every node in
// one, or the baseline's ring where the rules carry one. A bad node slows
// both its ring neighbours' transfers with its own, so the rings, not the
// nodes, are the samples: one bad node among eight would otherwise spoil
// three of eight figures, and the spread with them. The spread is taken on
// a log scale: healthy rings on shared or oversubscribed nodes differ by a
// factor (0.9 to 1.9 GB/s on the test hosts), while a failed link is orders
// of magnitude slower, and on a linear scale the one hides the other when
// there are only four rings.
struct RingReference {
  Fleet log_fleet{{}};       // of the first round's rings' logarithms; its spread no less than that of kResolution
  double baseline_gbps = 0;  // Rules::ring_baseline_gbps, where its rings were as wide as this run's
  std::string set_aside;     // why the baseline's ring was not: its rings were of other widths
  // The pairs are measured last, under whatever else then loads the machine
  // or the fabric: where the reference pairs (two sound nodes each) ran
  // below gbps(), their median over it, and every pair is judged against
  // them too (judge_ring). Below 1 only; see pairs_load().
  double pairs_load = 1;

  double median_gbps() const { return std::exp(log_fleet.median); }
  double gbps() const { return baseline_gbps > 0 ? baseline_gbps : median_gbps(); }
  std::string what() const {
    return baseline_gbps > 0 ? "the baseline's ring" : "the first round's median ring" + set_aside;
  }
  double pairs_gbps() const { return pairs_load * gbps(); }
  std::pair<Verdict, double> judge(double figure, const Rules& rules) const {
    const double ratio = figure / gbps();
    // Against the baseline, by the ratio alone, as a rule is.
    if (baseline_gbps > 0) return {verdict_of(ratio, true, rules), ratio};
    return {verdict_of(ratio, figure <= 0 || log_fleet.beyond_noise(std::log(figure), rules), rules), ratio};
  }
};

// A ring's figure is its slowest node's, which falls as rings widen: the
// baseline's ring judges this run's only where the baseline's fleet began
// with rings as wide (first_rings of its node count, whose first ring is
// of the width most are).
inline RingReference ring_reference(const std::vector<RingTest>& tests, const Rules& rules) {
  std::vector<double> logs;
  size_t width = 0;
  for (const RingTest& test : tests) {
    if (test.round != 0 || test.pair) continue;
    if (ring_figure(test) > 0) logs.push_back(std::log(ring_figure(test)));
    if (width == 0) width = test.nodes.size();
  }
  RingReference reference{Fleet(logs, std::log1p(kResolution)), rules.ring_baseline_gbps, ""};
  if (reference.baseline_gbps > 0 && rules.ring_baseline_nodes > 0 && width > 0) {
    const size_t baseline_width = first_rings(rules.ring_baseline_nodes).front().size();
    if (baseline_width != width) {
      reference.baseline_gbps = 0;
      reference.set_aside = "; not the baseline's, of " + std::to_string(rules.ring_baseline_nodes) + " nodes in rings of " +
                            std::to_string(baseline_width) + ", against rings of " + std::to_string(width) + " here";
    }
  }
  return reference;
}

// A pair slow against the rings but not against the reference pairs may owe
// it to the load those ran under, or not: pairs are measured in turns, and
// it may have run alone. It is to be retested, neither passed nor failed.
inline std::pair<Verdict, double> judge_ring(const RingTest& test, const RingReference& reference, const Rules& rules) {
  const double figure = ring_figure(test);
  if (!test.pair || reference.pairs_load >= 1) return reference.judge(figure, rules);
  const auto [loaded, ratio] = reference.judge(figure / reference.pairs_load, rules);
  if (reference.judge(figure, rules).first == Verdict::pass) return {Verdict::pass, ratio};
  return {loaded == Verdict::fail ? Verdict::fail : Verdict::retest, ratio};
}

// What bisection made of the tests: the nodes it left alone (suspects), in
// the order found; the nodes of passed tests (sound), each once; and the
// links that joined the halves of a failed ring whose halves all passed (a
// slow link between two sound nodes that were ring neighbours), each once
// as (lower, higher).
struct Bisection {
  std::vector<std::vector<int>> next_rings;  // the halves of the last round's failed tests, two nodes or more
  std::vector<int> suspects;
  std::vector<int> sound;
  std::vector<std::pair<int, int>> crossing_links;
  // Each suspect with the sound node it is measured with: one that never
  // shared a ring with it where there is one, so that a slow ring neighbour
  // cannot pass for the suspect's own fault, and never across a crossing
  // link. Suspects go round the sound nodes, so that few share one.
  std::vector<std::pair<int, int>> confirmations;
};

inline Bisection bisect(const std::vector<RingTest>& tests, const Rules& rules) {
  Bisection out;
  if (tests.empty()) return out;
  const RingReference reference = ring_reference(tests, rules);
  int last_round = 0;
  for (const RingTest& test : tests)
    if (!test.pair) last_round = std::max(last_round, test.round);
  const auto verdict_of = [&](const RingTest& test) { return judge_ring(test, reference, rules).first; };
  for (const RingTest& test : tests) {
    if (test.pair) continue;  // measured after bisection, from its outcome
    const Verdict verdict = verdict_of(test);
    if (verdict == Verdict::pass) {
      for (int n : test.nodes)
        if (std::find(out.sound.begin(), out.sound.end(), n) == out.sound.end()) out.sound.push_back(n);
    }
    if (verdict != Verdict::fail) continue;
    const std::vector<int>& ring = test.nodes;
    const size_t half = ring.size() / 2;
    bool halves_passed = true;
    for (const auto& part : {std::vector<int>(ring.begin(), ring.begin() + static_cast<ptrdiff_t>(half)),
                             std::vector<int>(ring.begin() + static_cast<ptrdiff_t>(half), ring.end())}) {
      if (part.size() == 1) {
        out.suspects.push_back(part.front());
      } else if (test.round == last_round) {
        out.next_rings.push_back(part);
        halves_passed = false;
      } else {
        const auto tested = std::find_if(tests.begin(), tests.end(), [&](const RingTest& t) {
          return !t.pair && t.round == test.round + 1 && t.nodes == part;
        });
        if (tested == tests.end() || verdict_of(*tested) != Verdict::pass) halves_passed = false;
      }
    }
    if (!halves_passed) continue;
    for (const auto& [a, b] : {std::pair(ring[half - 1], ring[half]), std::pair(ring.back(), ring.front())}) {
      const std::pair<int, int> link = std::minmax(a, b);
      if (std::find(out.crossing_links.begin(), out.crossing_links.end(), link) == out.crossing_links.end())
        out.crossing_links.push_back(link);
    }
  }
  const auto shared_a_ring = [&](int a, int b) {
    return std::any_of(tests.begin(), tests.end(), [&](const RingTest& t) {
      return !t.pair && std::find(t.nodes.begin(), t.nodes.end(), a) != t.nodes.end() &&
             std::find(t.nodes.begin(), t.nodes.end(), b) != t.nodes.end();
    });
  };
  const auto crossing = [&](int a, int b) {
    return std::find(out.crossing_links.begin(), out.crossing_links.end(), std::pair<int, int>(std::minmax(a, b))) !=
           out.crossing_links.end();
  };
  for (size_t s = 0; s < out.suspects.size() && !out.sound.empty(); ++s) {
    const int suspect = out.suspects[s];
    int partner = -1;
    for (const bool strangers_only : {true, false}) {
      for (size_t k = 0; k < out.sound.size() && partner < 0; ++k) {
        const int candidate = out.sound[(s + k) % out.sound.size()];
        if (!crossing(suspect, candidate) && (!strangers_only || !shared_a_ring(suspect, candidate))) partner = candidate;
      }
    }
    if (partner >= 0) out.confirmations.emplace_back(suspect, partner);
  }
  return out;
}

// RingReference::pairs_load of `tests`: the reference pairs are the pairs of
// two sound nodes that are no crossing link, measured in the same stage as
// the suspects' pairs. A median of 3 or more, so that one slow reference pair
// (a slow link no ring had crossed) cannot lower the bar for the others.
inline double pairs_load(const std::vector<RingTest>& tests, const Bisection& bisection, const RingReference& reference) {
  const auto sound = [&](int n) { return std::find(bisection.sound.begin(), bisection.sound.end(), n) != bisection.sound.end(); };
  std::vector<double> figures;
  for (const RingTest& test : tests) {
    if (!test.pair || test.nodes.size() != 2 || !sound(test.nodes[0]) || !sound(test.nodes[1])) continue;
    const std::pair<int, int> link = std::minmax(test.nodes[0], test.nodes[1]);
    if (std::find(bisection.crossing_links.begin(), bisection.crossing_links.end(), link) != bisection.crossing_links.end())
      continue;
    if (ring_figure(test) > 0) figures.push_back(ring_figure(test));
  }
  constexpr size_t kFewestReferencePairs = 3;
  if (figures.size() < kFewestReferencePairs || reference.gbps() <= 0) return 1;
  return std::min(1.0, rankscope::median(figures, 0) / reference.gbps());
}

}  // namespace rankscope::acceptance
