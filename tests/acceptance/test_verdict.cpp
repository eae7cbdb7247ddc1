#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "fleet_fixtures.h"
#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/retests.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/acceptance/measure.h"
#include "rankscope/model/error.h"

namespace rankscope::acceptance {
namespace {

// A sweep of `collective` over `nodes` from 8 B to 16 MiB, ×8: 20 µs of latency, then as fast as
// `busbw_gbps` (bus bandwidth, as nccl-tests counts it) allows; three iterations, a little apart.
// Over MPI, a rank per node; over NCCL, `gpus_per_node` ranks per node.
CollectiveSweep sweep_of(const std::string& collective, std::vector<int> nodes, double busbw_gbps,
                         const std::string& transport = "mpi", int gpus_per_node = 1) {
  const int ranks = static_cast<int>(nodes.size()) * gpus_per_node;
  CollectiveSweep sweep{collective, nodes, {}, transport, ranks};
  const double algbw_gbps = busbw_gbps / busbw_factor(collective, ranks);
  for (size_t bytes = 8; bytes <= (16u << 20); bytes *= 8) {
    const double us = 20 + static_cast<double>(bytes) / (algbw_gbps * 1e3);
    sweep.points.push_back({bytes, {us * 1.02, us, us * 0.99}});
  }
  return sweep;
}

// Every collective at full scale and over each group of node_groups(), at `busbw_gbps`.
void add_collectives(Measurements& m, double busbw_gbps) {
  std::vector<int> every;
  for (size_t n = 0; n < m.nodes.size(); ++n) every.push_back(static_cast<int>(n));
  for (std::string_view collective : kCollectives) m.collectives.push_back(sweep_of(std::string(collective), every, busbw_gbps));
  for (const std::vector<int>& group : node_groups(static_cast<int>(m.nodes.size())))
    for (std::string_view collective : kCollectives) m.collectives.push_back(sweep_of(std::string(collective), group, busbw_gbps));
}

bool has_check(const NodeVerdict& node, const std::string& name) {
  for (const Check& c : node.checks)
    if (c.name == name) return true;
  return false;
}

TEST(PairingRounds, EveryPairOnceNoNodeTwiceInARound) {
  for (int nodes = 2; nodes <= 17; ++nodes)
    for (unsigned repeat : {0u, 1u, 7u}) {
      std::set<std::pair<int, int>> seen;
      const auto rounds = pairing_rounds(nodes, repeat);
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

// Which pairs are measured at once changes from repeat to repeat: a pair whose flow collides with
// another's on a shared uplink collides in some repeats, not all.
TEST(PairingRounds, EachRepeatMeasuresOtherPairsAtOnce) {
  const auto met_with = [](const std::vector<std::vector<std::pair<int, int>>>& rounds) {
    std::map<std::pair<int, int>, std::set<std::pair<int, int>>> at_once;
    for (const auto& round : rounds)
      for (const auto& pair : round) at_once[pair] = std::set<std::pair<int, int>>(round.begin(), round.end());
    return at_once;
  };
  const auto first = met_with(pairing_rounds(16, 0));
  for (unsigned repeat = 1; repeat < 5; ++repeat) {
    const auto later = met_with(pairing_rounds(16, repeat));
    size_t same = 0;
    for (const auto& [pair, others] : first) same += later.at(pair) == others;
    EXPECT_LT(same, first.size() / 4) << "repeat " << repeat << ": most pairs measured beside the same pairs";
  }
  EXPECT_EQ(pairing_rounds(16, 3), pairing_rounds(16, 3));  // every rank seats the nodes alike
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

// Two nodes lie equally far from their median, so their deviation measures no noise: by it, neither
// could ever fail. The resolution alone is their noise.
TEST(Judge, OfTwoNodesTheOneAtHalfItsPeerFails) {
  Measurements m = healthy_fleet(2);
  m.nodes[1].gemm_gflops = {48, 50, 50};
  Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail) << summary_text(a);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node1"}));
  EXPECT_NEAR(check_named(a.nodes[1], "compute").ratio, 50.0 / 75.5, 0.01);
  EXPECT_EQ(check_named(a.nodes[0], "compute").verdict, Verdict::pass);

  m.nodes[1].gemm_gflops = {78, 80, 80};  // 0.8 of its peer: 0.89 of the median, a retest at most
  a = judge(m);
  EXPECT_NE(check_named(a.nodes[1], "compute").verdict, Verdict::fail) << summary_text(a);
  EXPECT_EQ(a.verdict, Verdict::pass) << summary_text(a);
}

TEST(Judge, OneNoisySampleFlagsNothing) {
  // The upper quartile of the repeats decides: one bad repeat on each node is noise.
  Measurements m = healthy_fleet(4);
  for (NodeMeasurements& node : m.nodes) node.gemm_gflops[0] = 30;
  m.links[0].bandwidth_gbps[1] = 0.2;
  m.links[1].latency_us[0] = 400;
  EXPECT_EQ(judge(m).verdict, Verdict::pass) << summary_text(judge(m));
}

TEST(Judge, OneLuckyRepeatDecidesNothing) {
  // A slow node's one fast repeat (a timer's or a cache's artefact) would pass it by its best repeat.
  Measurements m = healthy_fleet(4);
  m.nodes[1].gemm_gflops = {60, 61, 62, 63, 64, 130};
  m.links[2].bandwidth_gbps = {0.5, 0.52, 0.51, 1.4};
  const Acceptance a = judge(m);
  EXPECT_EQ(check_named(a.nodes[1], "compute").verdict, Verdict::fail) << summary_text(a);
  EXPECT_NEAR(check_named(a.nodes[1], "compute").ratio, 63.75 / 98.5, 0.03);
  EXPECT_EQ(a.links[2].verdict, Verdict::fail);
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

// On three nodes a bad node owns two of the three links, so the median link is one of its own: against
// it, every link passes. Its best link against the others' best fails it, on 3, 4 and 8 nodes alike;
// the links measured as in the test hosts' run (host3 at 200 Mbit/s): 1.44 GB/s against 0.024.
TEST(Judge, ANodeWhoseEveryLinkIsSlowFailsOnAnyNumberOfNodes) {
  for (const int nodes : {3, 4, 8}) {
    Measurements m = healthy_fleet(nodes);
    const int bad = nodes - 1;
    for (LinkMeasurements& link : m.links) {
      link.bandwidth_gbps = (link.a == bad || link.b == bad) ? std::vector<double>{0.024, 0.024, 0.023}
                                                             : std::vector<double>{1.40, 1.44, 1.43};
      link.latency_us = {60, 58, 59};  // a rate limit leaves small messages' latency as it was
    }
    const Acceptance a = judge(m);
    const std::string bad_host = "node" + std::to_string(bad);
    EXPECT_EQ(failed_nodes(a), (std::set<std::string>{bad_host})) << nodes << "\n" << summary_text(a);
    EXPECT_NEAR(check_named(a.nodes[static_cast<size_t>(bad)], "network").ratio, 0.024 / 1.44, 0.002);
    for (const NodeVerdict& node : a.nodes) {
      if (node.host == bad_host) continue;
      EXPECT_EQ(node.verdict, Verdict::pass) << nodes << " " << node.host;
    }
    for (const LinkVerdict& l : a.links) {
      const bool touches = l.hosts.first == bad_host || l.hosts.second == bad_host;
      EXPECT_EQ(l.verdict, touches ? Verdict::fail : Verdict::pass) << nodes << " " << l.hosts.first << "-" << l.hosts.second;
    }
  }
}

// A node whose one link is fast and the rest slow has a sound NIC: the slow links are theirs or their
// other ends'. Two nodes have one link, which names no node.
TEST(Judge, ANodesBestLinkClearsItAndTwoNodesNameNone) {
  Measurements m = healthy_fleet(4);
  for (LinkMeasurements& link : m.links)
    if ((link.a == 3 || link.b == 3) && !(link.a == 0 || link.b == 0)) link.bandwidth_gbps = {0.1, 0.1, 0.1};
  const Acceptance a = judge(m);
  EXPECT_EQ(check_named(a.nodes[3], "network").verdict, Verdict::pass) << summary_text(a);
  EXPECT_TRUE(failed_nodes(a).empty()) << summary_text(a);

  Measurements two = healthy_fleet(2);
  two.links[0].bandwidth_gbps = {0.01, 0.01, 0.01};
  const Acceptance pair = judge(two);
  EXPECT_TRUE(failed_nodes(pair).empty()) << summary_text(pair);
  for (const NodeVerdict& node : pair.nodes)
    for (const Check& check : node.checks) EXPECT_NE(check.name, "network") << node.host;
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

TEST(Retests, AHealthyFleetRetestsNothing) {
  const Measurements m = healthy_fleet(5);
  EXPECT_TRUE(retests_of(judge(m), m).empty());
}

TEST(Retests, WhatIsNotPassedIsMeasuredAgainAndNothingElse) {
  Measurements m = healthy_fleet(5);
  m.nodes[1].gemm_gflops = {40, 42, 41};  // fails
  m.nodes[3].triad_gbps = {8.3};           // retest: 0.84 of the median, beyond the noise
  for (LinkMeasurements& link : m.links)
    if (link.a == 0 && link.b == 4) link.bandwidth_gbps = {0.5};
  const Acceptance so_far = judge(m);
  ASSERT_EQ(check_named(so_far.nodes[3], "memory").verdict, Verdict::retest);
  const Retests retests = retests_of(so_far, m);
  EXPECT_EQ(retests.compute, std::vector<int>{1});
  EXPECT_EQ(retests.memory, std::vector<int>{3});
  EXPECT_EQ(retests.links, (std::vector<std::pair<int, int>>{{0, 4}}));
}

TEST(Retests, ANodeBelowARuleIsMeasuredAgain) {
  Measurements m = healthy_fleet(4);
  Acceptance so_far = judge(m);
  so_far.nodes[2].checks.push_back({"rule memory_gbps", "9.8 GB/s", "12 GB/s (baseline b)", 0.82,
                                    "memory_gbps >= 0.95 baseline (default)", Verdict::fail});
  const Retests retests = retests_of(so_far, m);
  EXPECT_TRUE(retests.compute.empty());
  EXPECT_EQ(retests.memory, std::vector<int>{2});
}

TEST(Retests, GroupTestingsLinksAreItsOwnToRetest) {
  Measurements m = healthy_fleet(4);
  m.links[0].bandwidth_gbps = {0.3};
  Acceptance so_far = judge(m);
  ASSERT_NE(so_far.links[0].verdict, Verdict::pass);
  so_far.link_screen = LinkScreen::group_testing;
  EXPECT_TRUE(retests_of(so_far, m).links.empty());
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

TEST(Collectives, BusbwFactorsAreNcclTests) {
  // nccl-tests' doc/PERFORMANCE.md: allreduce 2(n-1)/n, the others (n-1)/n.
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 16), 1.875);
  for (const char* collective : {"allgather", "reduce_scatter", "alltoall"}) {
    EXPECT_DOUBLE_EQ(busbw_factor(collective, 8), 0.875) << collective;
    EXPECT_DOUBLE_EQ(busbw_factor(collective, 2), 0.5) << collective;
  }
  EXPECT_DOUBLE_EQ(busbw_factor("allreduce", 1), 0);
}

TEST(Collectives, FiguresOfOneSize) {
  // 1 MB in a median of 30 µs: algbw 33.3 GB/s (GB = 1e9 B); allgather over 4 ranks: busbw 0.75 of it.
  const CollectivePoint point{1000000, {40, 10, 100, 30, 20}};
  const CollectiveFigures figures = collective_figures(point, "allgather", 4);
  EXPECT_DOUBLE_EQ(figures.median_us, 30);
  EXPECT_DOUBLE_EQ(figures.p99_us, 100);  // the nearest rank: the 5th of 5
  EXPECT_NEAR(figures.cv, std::sqrt(1000.0) / 40, 1e-12);  // mean 40, variance 5000 / 5
  EXPECT_NEAR(figures.algbw_gbps, 1e6 / 30e-6 / 1e9, 1e-9);
  EXPECT_NEAR(figures.busbw_gbps, figures.algbw_gbps * 0.75, 1e-9);
  CollectivePoint hundred{8, {}};
  for (int i = 100; i >= 1; --i) hundred.iteration_us.push_back(i);
  EXPECT_DOUBLE_EQ(collective_figures(hundred, "allreduce", 2).p99_us, 99);  // the 99th of 100
  EXPECT_DOUBLE_EQ(collective_figures({8, {}}, "allreduce", 2).busbw_gbps, 0);
}

TEST(Collectives, GroupsOfTheSquareRootConsecutiveNodes) {
  using Groups = std::vector<std::vector<int>>;
  EXPECT_TRUE(node_groups(1).empty());
  EXPECT_TRUE(node_groups(2).empty()) << "one group of every node is full scale";
  EXPECT_EQ(node_groups(3), (Groups{{0, 1}})) << "a group of one node is left out";
  EXPECT_EQ(node_groups(4), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(node_groups(5), (Groups{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(node_groups(10), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  for (int nodes = 3; nodes <= 200; ++nodes) {
    const int width = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(nodes))));
    int next = 0;
    for (const std::vector<int>& group : node_groups(nodes)) {
      EXPECT_GE(group.size(), 2u) << nodes;
      EXPECT_LE(group.size(), static_cast<size_t>(width)) << nodes;
      for (int n : group) EXPECT_EQ(n, next++) << nodes;
    }
    EXPECT_GE(next, nodes - 1) << nodes << ": every node but a last one alone is in a group";
  }
}

TEST(Collectives, SizesGrowByTheStepInWholeFloatsPerRank) {
  const Level quick = level_named("quick"), full = level_named("full");
  EXPECT_EQ(collective_sizes("allreduce", 4, quick),
            (std::vector<size_t>{8, 64, 512, 4096, 32768, 262144, 1048576})) << "the largest is the last size";
  // 8 B is less than a float from each of 4 ranks; 1 MiB is no whole number of floats from each of 3.
  EXPECT_EQ(collective_sizes("allgather", 4, quick).front(), 16u);
  EXPECT_EQ(collective_sizes("alltoall", 3, quick).back(), 1048576u / 12 * 12);
  const std::vector<size_t> wide = collective_sizes("reduce_scatter", 64, quick);
  EXPECT_EQ(wide.front(), 256u);
  EXPECT_TRUE(std::is_sorted(wide.begin(), wide.end()) && std::adjacent_find(wide.begin(), wide.end()) == wide.end());
  const std::vector<size_t> sizes = collective_sizes("allreduce", 16, full);
  EXPECT_EQ(sizes.front(), 8u);
  EXPECT_EQ(sizes.back(), size_t{64} << 20);
  EXPECT_EQ(sizes.size(), 13u);
  Level flat = quick;
  flat.collective_step = 1;
  EXPECT_THROW(collective_sizes("allreduce", 4, flat), Error);
}

TEST(Collectives, ASlowGroupFailsItsNodesAndOnlyThem) {
  Measurements m = healthy_fleet(9);
  add_collectives(m, 2.0);
  // Group 2 (node3-node5): allreduce at 0.4 of the others.
  for (CollectiveSweep& sweep : m.collectives)
    if (sweep.collective == "allreduce" && sweep.nodes == std::vector<int>{3, 4, 5}) sweep = sweep_of("allreduce", {3, 4, 5}, 0.8);
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node3", "node4", "node5"})) << summary_text(a);
  for (size_t n = 0; n < 9; ++n) {
    const Check& check = check_named(a.nodes[n], "collectives.allreduce");
    EXPECT_EQ(check.verdict, n >= 3 && n <= 5 ? Verdict::fail : Verdict::pass) << n;
    EXPECT_EQ(check_named(a.nodes[n], "collectives.alltoall").verdict, Verdict::pass) << n;
  }
  EXPECT_NEAR(check_named(a.nodes[4], "collectives.allreduce").ratio, 0.4, 0.01);
  ASSERT_EQ(a.collectives.size(), m.collectives.size());
  int failed = 0;
  for (const CollectiveVerdict& c : a.collectives) {
    if (c.full_scale) {
      EXPECT_EQ(c.verdict, Verdict::pass);
      EXPECT_FALSE(c.ratio.has_value()) << "full scale has no peers";
      EXPECT_EQ(c.hosts.size(), 9u);
      EXPECT_NEAR(c.peak_busbw_gbps, 2.0, 0.1) << c.collective;
      EXPECT_EQ(c.peak_bytes, 16u << 20) << "the largest size, where latency weighs least";
      EXPECT_NEAR(c.small_message_us, 20, 0.1);
      EXPECT_NEAR(c.small_message_p99_us, 20 * 1.02, 0.1);
    } else {
      EXPECT_TRUE(c.ratio.has_value());
      failed += c.verdict == Verdict::fail ? 1 : 0;
    }
    if (c.verdict == Verdict::fail) {
      EXPECT_EQ(c.collective, "allreduce");
      EXPECT_EQ(c.hosts, (std::vector<std::string>{"node3", "node4", "node5"}));
      EXPECT_FALSE(c.cause.empty());
    }
  }
  EXPECT_EQ(failed, 1);
  const std::string text = summary_text(a);
  EXPECT_NE(text.find("fail  allreduce" + std::string(11, ' ') + "group node3-node5 (3 nodes)"), std::string::npos) << text;
  EXPECT_LT(text.find("fail  allreduce"), text.find("pass  allreduce")) << "failed first\n" << text;
}

// A node that fails network slows every collective of its group: the group's verdict names it, and
// the group's other nodes are cleared (as on eight test hosts with host8's link at 200 Mbit/s).
TEST(Collectives, ANodeFailingNetworkExplainsItsGroupsCollectives) {
  Measurements m = healthy_fleet(9);
  add_collectives(m, 2.0);
  for (LinkMeasurements& link : m.links)
    if (link.a == 5 || link.b == 5) link.bandwidth_gbps = {0.01, 0.01, 0.01};
  for (CollectiveSweep& sweep : m.collectives)
    if (sweep.nodes == std::vector<int>{3, 4, 5}) sweep = sweep_of(sweep.collective, {3, 4, 5}, 0.02);
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node5"})) << summary_text(a);
  for (const int n : {3, 4}) {
    const Check& check = check_named(a.nodes[static_cast<size_t>(n)], "collectives.allreduce");
    EXPECT_EQ(check.verdict, Verdict::pass) << n;
    EXPECT_NE(check.value.find("slow beside node5, which fails network"), std::string::npos) << check.value;
  }
  EXPECT_EQ(check_named(a.nodes[5], "collectives.allreduce").verdict, Verdict::fail);
  for (const CollectiveVerdict& c : a.collectives) {
    if (c.verdict != Verdict::fail) continue;
    EXPECT_EQ(c.hosts, (std::vector<std::string>{"node3", "node4", "node5"}));
    EXPECT_EQ(c.cause, "node node5, which fails network");
  }
}

TEST(Collectives, TwoGroupsAreNotJudgedAgainstPeers) {
  Measurements m = healthy_fleet(4);
  add_collectives(m, 2.0);
  for (CollectiveSweep& sweep : m.collectives)
    if (sweep.nodes == std::vector<int>{2, 3}) sweep = sweep_of(sweep.collective, {2, 3}, 0.2);
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::pass) << summary_text(a);
  for (const NodeVerdict& node : a.nodes) EXPECT_FALSE(has_check(node, "collectives.allreduce")) << node.host;
  ASSERT_EQ(a.collectives.size(), 12u);  // 4 collectives, at full scale and over 2 groups
  for (const CollectiveVerdict& c : a.collectives) {
    EXPECT_EQ(c.verdict, Verdict::pass);
    EXPECT_FALSE(c.ratio.has_value());
    if (!c.full_scale) {
      EXPECT_NE(c.cause.find("2 groups"), std::string::npos) << c.cause;
    }
  }
  EXPECT_NE(summary_text(a).find("not judged against peers: 2 groups"), std::string::npos) << summary_text(a);
}

TEST(Collectives, JsonHasEverySweepWithItsFigures) {
  Measurements m = healthy_fleet(9);
  add_collectives(m, 2.0);
  const std::string json = summary_json(judge(m), m);
  EXPECT_NE(json.find("\"collectives\":[{\"collective\":\"allreduce\",\"transport\":\"mpi\",\"ranks\":9,"
                      "\"scope\":\"full\",\"hosts\":[\"node0\",\"node1\","),
            std::string::npos) << json;
  EXPECT_NE(json.find("\"scope\":\"group\",\"hosts\":[\"node0\",\"node1\",\"node2\"],\"verdict\":\"pass\",\"peak_busbw_gbps\":"),
            std::string::npos) << json;
  EXPECT_NE(json.find("\"ratio\":null,\"ratio_reason\":\"full scale"), std::string::npos) << json;
  EXPECT_NE(json.find("\"points\":[{\"bytes\":8,\"time_us\":20"), std::string::npos) << json;
  for (const char* key : {"\"algbw_gbps\":", "\"busbw_gbps\":", "\"p99_us\":", "\"cv\":", "\"small_message_us\":",
                          "\"peak_bytes\":", "\"cause\":"})
    EXPECT_NE(json.find(key), std::string::npos) << key;
  EXPECT_NE(summary_json(judge(healthy_fleet(1)), healthy_fleet(1)).find("\"collectives\":[]"), std::string::npos);
}

// NCCL's sweeps between GPUs are judged apart from MPI's between nodes:
// their own checks, their groups against their own median, their bus
// bandwidth over every GPU of the group.
TEST(Collectives, NcclSweepsAreJudgedApartOverTheirGpus) {
  Measurements m = healthy_fleet(9);
  add_collectives(m, 2.0);
  std::vector<int> every;
  for (int n = 0; n < 9; ++n) every.push_back(n);
  for (std::string_view collective : kCollectives) m.collectives.push_back(sweep_of(std::string(collective), every, 300, "nccl", 8));
  for (const std::vector<int>& group : node_groups(9)) {
    for (std::string_view collective : kCollectives) {
      const bool slow = collective == "allreduce" && group == std::vector<int>{6, 7, 8};
      m.collectives.push_back(sweep_of(std::string(collective), group, slow ? 150 : 300, "nccl", 8));
    }
  }
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node6", "node7", "node8"})) << summary_text(a);
  const Check& nccl = check_named(a.nodes[7], "collectives.nccl.allreduce");
  EXPECT_EQ(nccl.verdict, Verdict::fail);
  EXPECT_GT(nccl.ratio, 0.5) << "half the bandwidth, with the same latency";
  EXPECT_LT(nccl.ratio, 0.6);
  EXPECT_EQ(check_named(a.nodes[7], "collectives.allreduce").verdict, Verdict::pass) << "MPI's groups are judged apart";
  EXPECT_EQ(check_named(a.nodes[0], "collectives.nccl.allreduce").verdict, Verdict::pass);
  ASSERT_EQ(a.collectives.size(), m.collectives.size());
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    const CollectiveVerdict& c = a.collectives[i];
    if (c.transport != "nccl") continue;
    EXPECT_EQ(c.ranks, static_cast<int>(c.hosts.size()) * 8);
    const CollectivePoint& largest = m.collectives[i].points.back();
    EXPECT_DOUBLE_EQ(c.peak_busbw_gbps, collective_figures(largest, c.collective, c.ranks).busbw_gbps);
    if (c.full_scale && c.collective != "allreduce") {
      EXPECT_GT(c.peak_busbw_gbps, collective_figures(largest, c.collective, 9).busbw_gbps * 1.1)
          << "bus bandwidth over 72 GPUs, not 9 nodes";
    }
  }
  const std::string text = summary_text(a);
  EXPECT_NE(text.find("fail  nccl allreduce" + std::string(6, ' ') + "group node6-node8 (3 nodes), 24 GPUs"), std::string::npos)
      << text;
  const std::string json = summary_json(a, m);
  EXPECT_NE(json.find("{\"collective\":\"allreduce\",\"transport\":\"nccl\",\"ranks\":72,\"scope\":\"full\""),
            std::string::npos) << json;
}

}  // namespace
}  // namespace rankscope::acceptance
