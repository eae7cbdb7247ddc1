// Group testing (docs/design/group-testing.md): the plan round by round,
// driven by a simulated fleet, and the verdicts it leads to.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "fleet_fixtures.h"
#include "simulated_fleet.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/error.h"

namespace rankscope::acceptance {
namespace {

TEST(FirstRings, EveryNodeOnceInFourRingsOrMoreOfAboutTheSquareRoot) {
  EXPECT_EQ(first_rings(2), (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(first_rings(8), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  // A last node alone joins the ring before it.
  EXPECT_EQ(first_rings(9), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7, 8}}));
  EXPECT_EQ(first_rings(12), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(first_rings(17).size(), 4u);  // 5 wide
  for (int nodes = 8; nodes <= 300; ++nodes) {
    std::set<int> seen;
    const auto rings = first_rings(nodes);
    for (const auto& ring : rings) {
      EXPECT_GE(ring.size(), 2u) << nodes;
      EXPECT_LE(ring.size(), static_cast<size_t>(std::ceil(std::sqrt(nodes))) + 1) << nodes;
      for (int n : ring) EXPECT_TRUE(seen.insert(n).second) << nodes;
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(nodes));
    EXPECT_GE(rings.size(), 4u) << nodes;
  }
}

size_t pairs_of(const Measurements& m) {
  return static_cast<size_t>(std::count_if(m.ring_tests.begin(), m.ring_tests.end(), [](const RingTest& t) { return t.pair; }));
}

const LinkVerdict* link_of(const Acceptance& a, const std::string& host) {
  for (const LinkVerdict& l : a.links)
    if (l.hosts.first == host || l.hosts.second == host) return &l;
  return nullptr;
}

TEST(GroupTesting, AutoTestsGroupsAbove128NodesAndGroupsNeedEight) {
  EXPECT_EQ(link_screen_for("auto", 128), LinkScreen::all_pairs);
  EXPECT_EQ(link_screen_for("auto", 129), LinkScreen::group_testing);
  EXPECT_EQ(link_screen_for("pairs", 4096), LinkScreen::all_pairs);
  EXPECT_EQ(link_screen_for("groups", 8), LinkScreen::group_testing);
  EXPECT_EQ(link_screen_for("pairs", 2), LinkScreen::all_pairs);
  EXPECT_THROW(link_screen_for("groups", 7), Error);
  EXPECT_THROW(link_screen_for("rings", 200), Error);
  EXPECT_EQ(first_rings(8).size(), 4u);
}

TEST(GroupTesting, AHealthyFleetTakesOneRoundAndPasses) {
  for (int nodes : {8, 9, 64, 300}) {
    SimulatedFleet fleet{nodes, {}};
    auto [m, rounds] = fleet.run();
    EXPECT_EQ(rounds, 1) << nodes;
    // The first rings, then reference pairs of sound nodes, ⌈√N⌉ or 3 of them, as there are nodes for, each a
    // ring of two and a link.
    EXPECT_EQ(pairs_of(m), m.links.size());
    EXPECT_EQ(m.ring_tests.size() - pairs_of(m), first_rings(nodes).size());
    EXPECT_EQ(m.links.size(), std::min<size_t>(static_cast<size_t>(nodes) / 2,
                                               std::max<size_t>(3, static_cast<size_t>(std::ceil(std::sqrt(nodes))))));
    const Acceptance a = judge(m);
    EXPECT_EQ(a.verdict, Verdict::pass) << nodes;
    EXPECT_EQ(a.link_screen, LinkScreen::group_testing);
    EXPECT_EQ(a.ring_tests.size(), m.ring_tests.size());
    for (const NodeVerdict& node : a.nodes) EXPECT_EQ(check_named(node, "network").verdict, Verdict::pass) << node.host;
  }
}

TEST(GroupTesting, FindsEachBadNodeAndNoOtherInAboutDLogNOverDTests) {
  for (const auto& [nodes, bad] : std::vector<std::pair<int, std::set<int>>>{
           {9, {4}}, {16, {0}}, {16, {15}}, {64, {5, 40}}, {256, {3, 100, 101, 250}}, {1000, {999}}}) {
    SimulatedFleet fleet{nodes, bad};
    auto [m, rounds] = fleet.run();
    const Acceptance a = judge(m);
    std::set<std::string> expected;
    for (int n : bad) expected.insert("node" + std::to_string(n));
    EXPECT_EQ(failed_nodes(a), expected) << nodes;
    for (const NodeVerdict& node : a.nodes) {
      if (expected.count(node.host)) {
        EXPECT_EQ(check_named(node, "network").verdict, Verdict::fail);
        const LinkVerdict* link = link_of(a, node.host);
        ASSERT_NE(link, nullptr) << node.host;
        EXPECT_EQ(link->verdict, Verdict::fail);
        EXPECT_EQ(link->cause, "node " + node.host + ": slow in its rings and with a node known sound");
      } else {
        EXPECT_NE(check_named(node, "network").verdict, Verdict::fail) << node.host;
      }
    }
    // The first round, then log2 of the ring size rounds of halves at most.
    const double width = std::ceil(std::sqrt(nodes));
    EXPECT_LE(rounds, 2 + static_cast<int>(std::ceil(std::log2(width)))) << nodes;
    // Far fewer tests than all pairs: each bad node costs about two tests per halving, and its ring neighbours
    // a few more; then a few pairs each, and the reference pairs.
    const double d = static_cast<double>(bad.size());
    EXPECT_LE(static_cast<double>(m.ring_tests.size() - pairs_of(m)), width + 4 * d * (std::log2(width) + 1) + 4) << nodes;
    EXPECT_LE(static_cast<double>(pairs_of(m)), 4 * d + std::max(3.0, width)) << nodes;
  }
}

const LinkVerdict* link_between(const Acceptance& a, const std::string& x, const std::string& y) {
  for (const LinkVerdict& l : a.links)
    if ((l.hosts.first == x && l.hosts.second == y) || (l.hosts.first == y && l.hosts.second == x)) return &l;
  return nullptr;
}

TEST(GroupTesting, ASlowLinkBetweenRingNeighboursIsMeasuredAcrossTheHalvesAndFailsAlone) {
  // 16 nodes: rings 0-3, 4-7, ...; the link 5-6 is slow, both nodes sound. Their ring fails, its halves
  // 4-5 and 6-7 pass, so the links that joined them (5-6 and 7-4) are measured: 5-6 fails, on its own.
  // 9 nodes: rings 0-1, 2-3, 4-5, 6-8, the link 2-3 slow: both are suspects, each sound with a sound
  // node, and the link between them, measured across the halves, fails on its own.
  for (const auto& [nodes, slow] : std::vector<std::pair<int, std::pair<int, int>>>{{16, {5, 6}}, {9, {2, 3}}}) {
    SimulatedFleet fleet{nodes, {}, slow};
    auto [m, rounds] = fleet.run();
    const Acceptance a = judge(m);
    EXPECT_TRUE(failed_nodes(a).empty()) << nodes;
    EXPECT_EQ(a.verdict, Verdict::fail) << nodes;
    const std::string x = "node" + std::to_string(slow.first), y = "node" + std::to_string(slow.second);
    const LinkVerdict* link = link_between(a, x, y);
    ASSERT_NE(link, nullptr) << nodes;
    EXPECT_EQ(link->verdict, Verdict::fail);
    EXPECT_EQ(link->cause, "this link");
    for (const LinkVerdict& l : a.links)
      if (&l != link) {
        EXPECT_EQ(l.verdict, Verdict::pass) << l.hosts.first << "-" << l.hosts.second;
      }
    for (const NodeVerdict& node : a.nodes) {
      const Check& network = check_named(node, "network");
      EXPECT_EQ(network.verdict, Verdict::pass) << node.host << ": " << network.value;
      if (nodes == 9 && (node.host == x || node.host == y)) {
        EXPECT_NE(network.value.find("its link with " + (node.host == x ? y : x) + " fails on its own"), std::string::npos)
            << network.value;
      }
    }
  }
}

TEST(GroupTesting, ASuspectNothingExplainsIsRetested) {
  // A ring of two failed once, and every link measured afterwards is sound: noise, or a fault that came
  // and went.
  SimulatedFleet fleet{8, {}};
  Measurements m = healthy_fleet(8);
  m.links.clear();
  m.link_screen = LinkScreen::group_testing;
  for (const auto& r : first_rings(8)) m.ring_tests.push_back(fleet.ring(0, r));
  ASSERT_EQ(m.ring_tests[3].nodes, (std::vector<int>{6, 7}));
  m.ring_tests[3].gbps = {0.5, 0.5};
  const GroupTestingStep step = next_group_tests(8, m.ring_tests);
  EXPECT_TRUE(step.rings.empty());
  EXPECT_NE(std::find(step.links.begin(), step.links.end(), std::pair(6, 7)), step.links.end()) << "the crossing link";
  fleet.add_pairs(m, step, 1);
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::pass);
  for (const NodeVerdict& node : a.nodes) {
    const Check& network = check_named(node, "network");
    const bool suspect = node.host == "node6" || node.host == "node7";
    EXPECT_EQ(network.verdict, suspect ? Verdict::retest : Verdict::pass) << node.host;
    if (suspect) {
      EXPECT_NE(network.value.find("nothing measured explains"), std::string::npos) << network.value;
    }
  }
}

TEST(GroupTesting, ASuspectBesideABadNodeIsClearedByIt) {
  // 16 nodes, node6 bad: the ring 6-7 fails, both are suspects; node7 is sound with a sound node, and
  // node6, which fails, explains its slow rings.
  SimulatedFleet fleet{16, {6}};
  auto [m, rounds] = fleet.run();
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node6"});
  const Check& network = check_named(a.nodes[7], "network");
  EXPECT_EQ(network.verdict, Verdict::pass) << network.value;
  EXPECT_NE(network.value.find("slow beside node6, which fails"), std::string::npos) << network.value;
}

TEST(GroupTesting, AFailedRingNotBisectedBeforeTheRunEndedIsRetested) {
  SimulatedFleet fleet{9, {4}};
  Measurements m = healthy_fleet(9);
  m.links.clear();
  m.link_screen = LinkScreen::group_testing;
  for (const auto& r : next_group_tests(9, {}).rings) m.ring_tests.push_back(fleet.ring(0, r));
  const Acceptance a = judge(m);
  for (const NodeVerdict& node : a.nodes) {
    const bool in_failed_ring = node.host == "node4" || node.host == "node5";
    EXPECT_EQ(check_named(node, "network").verdict, in_failed_ring ? Verdict::retest : Verdict::pass) << node.host;
  }
  EXPECT_EQ(a.ring_tests[2].verdict, Verdict::fail);
}

TEST(GroupTesting, WhereMostRingsHoldABadNodeTheBaselinesRingFindsThem) {
  // 1,024 nodes in 32 rings of 32, 60 bad nodes: most rings hold one, and the median ring is a bad one.
  std::set<int> bad;
  for (int n = 7; bad.size() < 60; n += 17) bad.insert(n % 1024);
  std::set<std::string> expected;
  for (int n : bad) expected.insert("node" + std::to_string(n));
  SimulatedFleet alone{1024, bad};
  auto [m, rounds] = alone.run();
  const Acceptance fleet_only = judge(m);
  EXPECT_LT(failed_nodes(fleet_only).size(), bad.size() / 2) << "the median ring should have hidden most of them";
  SimulatedFleet with_baseline{1024, bad};
  with_baseline.rules.ring_baseline_gbps = 2.0;  // a healthy ring of an earlier run
  auto [b, baseline_rounds] = with_baseline.run();
  const Acceptance judged = judge(b, with_baseline.rules);
  EXPECT_EQ(failed_nodes(judged), expected);
  const Check& network = check_named(judged.nodes[7], "network");
  EXPECT_NE(network.reference.find("(the baseline's ring)"), std::string::npos) << network.reference;
  EXPECT_EQ(network.rule.rfind("fail below 0.80 of the baseline's ring, retest below 0.90", 0), 0u) << network.rule;
}

// Rings of ten run slower than rings of two (their slowest of ten nodes), so a baseline saved on a
// fleet of 100 does not judge a fleet of 8: healthy rings at half its figure would all fail.
TEST(GroupTesting, ABaselineOfRingsOfAnotherWidthIsSetAsideAndSaysSo) {
  Measurements m = healthy_fleet(8, false);
  m.link_screen = LinkScreen::group_testing;
  for (int r = 0; r < 4; ++r) m.ring_tests.push_back({0, {2 * r, 2 * r + 1}, {1.0, 1.0}});
  Rules rules;
  rules.ring_baseline_gbps = 2.0;
  rules.ring_baseline_nodes = 100;
  const Acceptance wider = judge(m, rules);
  EXPECT_TRUE(failed_nodes(wider).empty());
  const Check& network = check_named(wider.nodes[0], "network");
  EXPECT_EQ(network.verdict, Verdict::pass) << network.value;
  EXPECT_NE(network.reference.find("the first round's median ring; not the baseline's, of 100 nodes in rings of 10, "
                                   "against rings of 2 here"),
            std::string::npos)
      << network.reference;
  for (const RingVerdict& ring : wider.ring_tests) EXPECT_EQ(ring.verdict, Verdict::pass);
  // A baseline of nine nodes began with rings of two too: it judges, and every ring is at half of it.
  rules.ring_baseline_nodes = 9;
  const Acceptance as_wide = judge(m, rules);
  ASSERT_EQ(as_wide.ring_tests.size(), 4u);
  for (const RingVerdict& ring : as_wide.ring_tests) EXPECT_EQ(ring.verdict, Verdict::fail);
}

TEST(GroupTesting, ASuspectWhosePairWithASoundNodeIsToBeRetestedIsNeitherFailedNorCleared) {
  // Rings of two at 2 GB/s; the ring 6-7 at 0.5. Its pairs: 6 with a sound node at 1.65 (0.825 of the
  // median ring, beyond the 5 % floor of noise: retest), 7 with one at 2.0, and 6-7 across at 0.5.
  Measurements m = healthy_fleet(8, false);
  m.link_screen = LinkScreen::group_testing;
  for (int r = 0; r < 3; ++r) m.ring_tests.push_back({0, {2 * r, 2 * r + 1}, {2.0, 2.0}});
  m.ring_tests.push_back({0, {6, 7}, {0.5, 0.5}});
  const GroupTestingStep step = next_group_tests(8, m.ring_tests);
  ASSERT_TRUE(step.rings.empty());
  for (const auto& [a, b] : step.links) {
    const bool with_6 = a == 6 || b == 6, with_7 = a == 7 || b == 7;
    const double gbps = with_6 && with_7 ? 0.5 : with_6 ? 1.65 : 2.0;
    m.ring_tests.push_back({1, {a, b}, {gbps, gbps}, true});
    m.links.push_back({a, b, {gbps}, {50}});
  }
  const Acceptance a = judge(m);
  const Check& six = check_named(a.nodes[6], "network");
  EXPECT_EQ(six.verdict, Verdict::retest) << six.value;
  EXPECT_NE(six.value.find("and to be retested, 1.65 GB/s"), std::string::npos) << six.value;
  EXPECT_TRUE(failed_nodes(a).empty());
  EXPECT_EQ(a.suspects, (std::vector<std::string>{"node6", "node7"}));
}

// Rings of two at 2 GB/s, node5 bad (the ring 4-5 at 0.05), and the machine busier once the pairs are
// measured: `reference_pairs` are the figures of the pairs of sound nodes, in plan order; node4's pair
// with its sound node runs as they do, node5's at 0.05.
Measurements pairs_measured_under_load(const std::vector<double>& reference_pairs, double node4_pair) {
  Measurements m = healthy_fleet(8, false);
  m.link_screen = LinkScreen::group_testing;
  for (int r = 0; r < 4; ++r) m.ring_tests.push_back({0, {2 * r, 2 * r + 1}, {r == 2 ? 0.05 : 2.0, r == 2 ? 0.05 : 2.0}});
  const GroupTestingStep step = next_group_tests(8, m.ring_tests);
  size_t reference = 0;
  for (const auto& [a, b] : step.links) {
    const bool with_4 = a == 4 || b == 4, with_5 = a == 5 || b == 5;
    const double gbps = with_5 ? 0.05 : with_4 ? node4_pair : reference_pairs.at(reference++);
    m.ring_tests.push_back({1, {a, b}, {gbps, gbps}, true});
    m.links.push_back({a, b, {gbps}, {50}});
  }
  EXPECT_EQ(reference, reference_pairs.size());
  return m;
}

TEST(GroupTesting, PairsAreJudgedAgainstTheReferencePairsWhereTheseRanSlower) {
  // Everything at 0.6 of the first round's rings while the pairs were measured: node5 still fails (at
  // 0.05, it is slow against anything); node4, slow against the rings but not against the reference
  // pairs, is to be retested, as is every pair so; no pair of sound nodes fails.
  const Acceptance a = judge(pairs_measured_under_load({1.2, 1.2, 1.2}, 1.2));
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node5"});
  const Check& four = check_named(a.nodes[4], "network");
  EXPECT_EQ(four.verdict, Verdict::retest) << four.value;
  EXPECT_NE(four.value.find("and to be retested, 1.20 GB/s"), std::string::npos) << four.value;
  EXPECT_NE(four.reference.find("the first round's median ring); pairs against their reference pairs' 1.20 GB/s"),
            std::string::npos)
      << four.reference;
  EXPECT_NE(four.rule.find("pairs are judged against the reference pairs of sound nodes where those ran slower"),
            std::string::npos)
      << four.rule;
  for (const LinkVerdict& link : a.links) {
    if (link.verdict == Verdict::fail) {
      EXPECT_EQ(link.cause.rfind("node node5", 0), 0u) << link.cause;
    }
  }
  for (const RingVerdict& ring : a.ring_tests) {
    if (ring.pair && std::find(ring.hosts.begin(), ring.hosts.end(), "node5") == ring.hosts.end()) {
      EXPECT_EQ(ring.verdict, Verdict::retest) << ring.hosts[0] << "-" << ring.hosts[1] << " at " << ring.ratio;
      EXPECT_DOUBLE_EQ(ring.ratio, 1.0) << "to the reference pairs";
    }
  }
  // A pair at the rings' figure passes, whatever the reference pairs did.
  const Acceptance fast = judge(pairs_measured_under_load({1.2, 1.2, 1.2}, 2.0));
  EXPECT_EQ(check_named(fast.nodes[4], "network").verdict, Verdict::pass) << check_named(fast.nodes[4], "network").value;
}

TEST(GroupTesting, OneSlowReferencePairLowersTheBarForNoOtherPair) {
  // The median of the reference pairs is at the rings' 2 GB/s: a pair at 0.6 of it fails, and so does the
  // slow reference pair, on its own.
  const Acceptance a = judge(pairs_measured_under_load({0.3, 2.0, 2.0}, 1.2));
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node4", "node5"}));
  const Check& four = check_named(a.nodes[4], "network");
  EXPECT_EQ(four.reference.find("reference pairs'"), std::string::npos) << four.reference;
  const auto slow_reference = std::find_if(a.ring_tests.begin(), a.ring_tests.end(),
                                           [](const RingVerdict& r) { return r.pair && r.gbps == 0.3; });
  ASSERT_NE(slow_reference, a.ring_tests.end());
  EXPECT_EQ(slow_reference->verdict, Verdict::fail);
  // With only two pairs of sound nodes, their median is no reference: rings judge the pairs.
  Measurements few = pairs_measured_under_load({1.2, 1.2, 1.2}, 1.2);
  ASSERT_TRUE(few.ring_tests.back().pair);
  ASSERT_EQ(few.ring_tests.back().gbps.front(), 1.2) << "the last pair is a reference pair";
  few.ring_tests.pop_back();
  few.links.pop_back();
  EXPECT_EQ(failed_nodes(judge(few)), (std::set<std::string>{"node4", "node5"}));
}

TEST(GroupTesting, TheSummariesShowTheRings) {
  SimulatedFleet fleet{16, {6}};
  auto [m, rounds] = fleet.run();
  const Acceptance a = judge(m);
  const std::string text = summary_text(a), json = summary_json(a, m), html = summary_html(a, m);
  EXPECT_NE(text.find("group testing ("), std::string::npos) << text;
  EXPECT_NE(text.find("2 suspects"), std::string::npos) << text;
  EXPECT_NE(json.find("\"link_screen\":\"group_testing\""), std::string::npos);
  EXPECT_NE(json.find("\"ring_tests\":[{\"round\":1,\"pair\":false,\"hosts\":[\"node0\",\"node1\",\"node2\",\"node3\"]"), std::string::npos)
      << json.substr(0, 2000);
  EXPECT_NE(html.find("id=\"ring-table\""), std::string::npos);
  // Its few links as a table, not as a nodes × nodes matrix.
  EXPECT_NE(html.find("id=\"link-table\""), std::string::npos);
  EXPECT_EQ(html.find("id=\"link-heatmap\""), std::string::npos);
  EXPECT_NE(json.find("\"suspects\":[\"node6\",\"node7\"]"), std::string::npos);
  const Acceptance pairs = judge(healthy_fleet(4));
  EXPECT_NE(summary_json(pairs, healthy_fleet(4)).find("\"link_screen\":\"all_pairs\",\"ring_tests\":[]"), std::string::npos);
  EXPECT_EQ(summary_text(pairs).find("group testing"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::acceptance
