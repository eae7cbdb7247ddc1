#include <gtest/gtest.h>

#include <set>

#include "rankscope/acceptance/acceptance.h"
#include "sample_measurements.h"

namespace rankscope::acceptance {
namespace {

using test::healthy_fleet;

std::set<std::string> failed_nodes(const Acceptance& a) {
  std::set<std::string> out;
  for (const NodeVerdict& n : a.nodes)
    if (n.verdict == Verdict::fail) out.insert(n.host);
  return out;
}

const Check& check_named(const NodeVerdict& node, const std::string& name) {
  for (const Check& c : node.checks)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

TEST(PairingRounds, EveryPairOnceNoNodeTwiceInARound) {
  for (int nodes = 2; nodes <= 17; ++nodes) {
    std::set<std::pair<int, int>> seen;
    const auto rounds = pairing_rounds(nodes);
    EXPECT_EQ(rounds.size(), static_cast<size_t>(nodes % 2 == 0 ? nodes - 1 : nodes)) << nodes;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "a node in two pairs of one round";
        EXPECT_TRUE(seen.insert({a, b}).second) << "a pair met twice";
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(nodes * (nodes - 1) / 2)) << nodes;
  }
  EXPECT_TRUE(pairing_rounds(1).empty());
}

TEST(Judge, AHealthyFleetPasses) {
  for (int nodes : {1, 2, 3, 4, 8}) {
    const Acceptance a = judge(healthy_fleet(nodes));
    EXPECT_EQ(a.verdict, Verdict::pass) << nodes << "\n" << summary_text(a);
    for (const NodeVerdict& n : a.nodes) EXPECT_EQ(n.verdict, Verdict::pass) << n.host;
    for (const LinkVerdict& l : a.links) EXPECT_EQ(l.verdict, Verdict::pass);
  }
}

TEST(Judge, ASlowCpuFailsOnComputeAlone) {
  Measurements m = healthy_fleet(4);
  m.nodes[2].gemm_gflops = {40, 42, 41};
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node2"}));
  EXPECT_EQ(check_named(a.nodes[2], "compute").verdict, Verdict::fail);
  EXPECT_EQ(check_named(a.nodes[2], "memory").verdict, Verdict::pass);
  EXPECT_NEAR(check_named(a.nodes[2], "compute").ratio, 42.0 / 100, 0.02);
}

TEST(Judge, OneNoisySampleFlagsNothing) {
  // The best of the repeats decides: one bad repeat on each node is noise.
  Measurements m = healthy_fleet(4);
  for (NodeMeasurements& node : m.nodes) node.gemm_gflops[0] = 30;
  m.links[0].bandwidth_gbps[1] = 0.2;
  m.links[1].latency_us[0] = 400;
  EXPECT_EQ(judge(m).verdict, Verdict::pass) << summary_text(judge(m));
}

TEST(Judge, ANodeWhoseEveryLinkIsSlowFailsOnNetworkAndOwnsItsLinks) {
  Measurements m = healthy_fleet(4);
  for (LinkMeasurements& link : m.links)
    if (link.a == 3 || link.b == 3) link.bandwidth_gbps = {0.1, 0.12, 0.11};
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node3"})) << summary_text(a);
  EXPECT_EQ(check_named(a.nodes[3], "network").verdict, Verdict::fail);
  for (const LinkVerdict& l : a.links) {
    const bool touches = l.hosts.first == "node3" || l.hosts.second == "node3";
    EXPECT_EQ(l.verdict, touches ? Verdict::fail : Verdict::pass) << l.hosts.first << "-" << l.hosts.second;
    if (touches) {
      EXPECT_NE(l.cause.find("node node3"), std::string::npos) << l.cause;
    }
  }
}

TEST(Judge, ASlowLinkBetweenSoundNodesIsTheLinks) {
  Measurements m = healthy_fleet(5);
  for (LinkMeasurements& link : m.links)
    if (link.a == 1 && link.b == 3) link.latency_us = {400, 420, 410};
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail);
  EXPECT_TRUE(failed_nodes(a).empty()) << summary_text(a);
  for (const LinkVerdict& l : a.links) {
    const bool that_one = l.hosts == std::pair<std::string, std::string>{"node1", "node3"};
    EXPECT_EQ(l.verdict, that_one ? Verdict::fail : Verdict::pass) << l.hosts.first << "-" << l.hosts.second;
    if (that_one) {
      EXPECT_EQ(l.cause, "this link");
    }
  }
}

TEST(Judge, AnInventoryDifferenceFailsThatNode) {
  Measurements m = healthy_fleet(4);
  m.nodes[1].inventory.mpi_library = "Open MPI v4.1.2";
  m.nodes[2].inventory.memory_bytes += int64_t{3} << 20;  // firmware reservations: not a difference
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node1"}));
  EXPECT_EQ(check_named(a.nodes[1], "inventory.mpi_library").verdict, Verdict::fail);
  EXPECT_EQ(check_named(a.nodes[2], "inventory.memory_gib").verdict, Verdict::pass);
}

TEST(Judge, ALowFigureWithinTheFleetsNoiseIsRetestedNotFailed) {
  // Compute spread widely over the fleet: a node at 0.78 of the median lies within 3 robust deviations.
  Measurements m = healthy_fleet(6);
  const double best[] = {60, 140, 80, 120, 100, 70};
  for (size_t n = 0; n < 6; ++n) m.nodes[n].gemm_gflops = {best[n]};
  const Acceptance a = judge(m);
  const Check& low = check_named(a.nodes[5], "compute");
  EXPECT_LT(low.ratio, 0.8);
  EXPECT_EQ(low.verdict, Verdict::retest);
  // At 0.86 of the median and within the noise: passed; on a quiet fleet, 0.82 is retested.
  m.nodes[5].gemm_gflops = {77};
  EXPECT_EQ(check_named(judge(m).nodes[5], "compute").verdict, Verdict::pass);
  Measurements quiet = healthy_fleet(6);
  quiet.nodes[5].gemm_gflops = {83};
  EXPECT_EQ(check_named(judge(quiet).nodes[5], "compute").verdict, Verdict::retest);
}

TEST(Judge, DifferencesBelowTheResolutionAreNotFlagged) {
  // Latencies alike to the microsecond but one: 10 µs against 8.8 µs (12 %) is no finding.
  Measurements m = healthy_fleet(4);
  for (LinkMeasurements& link : m.links) link.latency_us = {8.8, 8.8, 8.8};
  m.links[2].latency_us = {10.0, 10.1};
  const Acceptance a = judge(m);
  for (const LinkVerdict& l : a.links) EXPECT_EQ(l.verdict, Verdict::pass) << summary_text(a);
}

TEST(Summary, JsonHasTheVerdictNodesAndLinks) {
  Measurements m = healthy_fleet(3);
  m.nodes[0].gemm_gflops = {10};
  const std::string json = summary_json(judge(m), m);
  EXPECT_NE(json.find("\"verdict\":\"fail\""), std::string::npos);
  EXPECT_NE(json.find("\"host\":\"node0\""), std::string::npos);
  EXPECT_NE(json.find("\"hosts\":[\"node0\",\"node1\"]"), std::string::npos);
  EXPECT_NE(json.find("\"bandwidth_gbps\""), std::string::npos);
  const std::string text = summary_text(judge(m));
  EXPECT_EQ(text.find("acceptance: FAIL"), 0u) << text;
  EXPECT_LT(text.find("fail  node0"), text.find("pass  node1")) << "failed items first\n" << text;
}

}  // namespace
}  // namespace rankscope::acceptance
