// summary_html(): the acceptance page's structure, on measurements built by
// hand. How a browser renders it: tests/support/check_html_render.py.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <utility>

#include "html_page_checks.h"
#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/format.h"
#include "fleet_fixtures.h"

namespace rankscope::acceptance {
namespace {

using test::count;
using test::expect_well_formed_and_self_contained;

std::string page(const Measurements& m) { return summary_html(judge(m), m); }

// The part of the page from `<svg id="ID"` to its end.
std::string plot(const std::string& html, const std::string& id) {
  const size_t start = html.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return {};
  return html.substr(start, html.find("</svg>", start) - start);
}

// The heatmap cells (row, column) that carry a failed link's mark.
std::set<std::pair<int, int>> marked_failed(const std::string& html) {
  std::set<std::pair<int, int>> cells;
  const std::regex mark("class=\"failed-mark( on-dark)?\" data-cell=\"([0-9]+),([0-9]+)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), mark); it != std::sregex_iterator(); ++it) {
    cells.insert({std::stoi((*it)[2]), std::stoi((*it)[3])});
  }
  return cells;
}

TEST(Html, AHealthyFleetIsWellFormedAndPasses) {
  for (int nodes : {1, 2, 4, 64}) {
    const std::string html = page(healthy_fleet(nodes));
    expect_well_formed_and_self_contained(html);
    EXPECT_NE(html.find("<title>rankscope acceptance: PASS, " + std::to_string(nodes) + " nodes</title>"),
              std::string::npos);
    EXPECT_NE(html.find("id=\"verdict\">PASS</p>"), std::string::npos);
    EXPECT_NE(html.find("Nothing failed and nothing is to be retested."), std::string::npos);
    EXPECT_TRUE(marked_failed(html).empty());
  }
}

TEST(Html, TheHeatmapHasACellForEveryPairOfNodesAndAnEmptyDiagonal) {
  for (int nodes : {2, 4, 64}) {
    const std::string heatmap = plot(page(healthy_fleet(nodes)), "link-heatmap");
    EXPECT_EQ(count(heatmap, "class=\"cell "), static_cast<size_t>(nodes * nodes)) << nodes;
    EXPECT_EQ(count(heatmap, "class=\"cell diagonal\""), static_cast<size_t>(nodes)) << nodes;
    // Every link twice (above and below the diagonal), each with its figures on hover.
    EXPECT_EQ(count(heatmap, "class=\"cell r1\"><title>"), static_cast<size_t>(nodes * (nodes - 1))) << nodes;
  }
  EXPECT_NE(plot(page(healthy_fleet(4)), "link-heatmap").find("<title>node1 – node3: 1.00 GB/s, "),
            std::string::npos);
}

TEST(Html, AFailedLinkIsMarkedBothWaysRoundAndListedFirst) {
  Measurements m = healthy_fleet(5);
  for (LinkMeasurements& link : m.links)
    if (link.a == 1 && link.b == 3) link.bandwidth_gbps = {0.1, 0.12, 0.12};
  m.nodes[4].triad_gbps = {8.3};  // below 0.9 of the median on a quiet fleet: to be retested
  const std::string html = page(m);
  expect_well_formed_and_self_contained(html);
  EXPECT_EQ(marked_failed(html), (std::set<std::pair<int, int>>{{1, 3}, {3, 1}}));
  EXPECT_NE(html.find("<title>node1 – node3: 0.12 GB/s, 0.12 of the median link; 50.0 µs, 1.00; fail: this link"),
            std::string::npos);
  EXPECT_NE(html.find("id=\"verdict\">FAIL</p>"), std::string::npos);
  EXPECT_NE(html.find("<dt>Links</dt><dd>9 of 10 links accepted (1 failed, 0 to retest)</dd>"), std::string::npos);
  // The evidence: value, reference, ratio and rule; failed items before those to be retested.
  const size_t link_row = html.find("<tr><td>node1 – node3</td><td>link</td><td><span class=\"verdict-fail\">");
  const size_t memory_row = html.find("<tr><td>node4</td><td>memory</td><td><span class=\"verdict-retest\">");
  ASSERT_NE(link_row, std::string::npos);
  ASSERT_NE(memory_row, std::string::npos);
  EXPECT_LT(link_row, memory_row);
  EXPECT_NE(html.find("<td>0.12 GB/s, 50.0 µs</td><td>median link: 1.00 GB/s, 50.0 µs</td>"
                      "<td class=\"num\">0.12, 1.00</td><td>this link: its bandwidth or latency below 0.80"),
            std::string::npos);
  EXPECT_NE(html.find("<td>8.30 GB/s</td><td>10.00 GB/s (fleet median"), std::string::npos);
  EXPECT_LT(html.find("id=\"problem-table\""), html.find("id=\"link-heatmap\""));
}

TEST(Html, ANodeWhoseEveryLinkIsSlowHasItsRowAndColumnMarked) {
  Measurements m = healthy_fleet(4);
  for (LinkMeasurements& link : m.links)
    if (link.a == 2 || link.b == 2) link.bandwidth_gbps = {0.1};
  const std::set<std::pair<int, int>> expected = {{2, 0}, {2, 1}, {2, 3}, {0, 2}, {1, 2}, {3, 2}};
  const std::string html = page(m);
  EXPECT_EQ(marked_failed(html), expected);
  EXPECT_NE(html.find("node node2: every link of it is slow: the node fails network"), std::string::npos);
}

TEST(Html, BarsForEveryNodesComputeAndMemoryWithTheFailLine) {
  Measurements m = healthy_fleet(6);
  m.nodes[2].gemm_gflops = {40, 42, 42};
  const std::string html = page(m);
  const std::string compute = plot(html, "compute-bars"), memory = plot(html, "memory-bars");
  EXPECT_EQ(count(compute, "<rect "), 6u);
  EXPECT_EQ(count(memory, "<rect "), 6u);
  EXPECT_EQ(count(compute, "class=\"bar-fail\"><title>node2: 42.00 GFLOP/s, 0.42 of "), 1u);
  EXPECT_EQ(count(compute, "class=\"bar-pass\""), 5u);
  EXPECT_EQ(count(memory, "class=\"bar-pass\""), 6u);
  for (const std::string& bars : {compute, memory}) {
    EXPECT_EQ(count(bars, "class=\"fail-line\""), 1u);
    EXPECT_NE(bars.find(">fail below 0.8</text>"), std::string::npos);
  }
  // The fail line follows the rules the page is given.
  EXPECT_NE(summary_html(judge(m), m, Rules{0.5, 0.9, 3}).find(">fail below 0.5</text>"), std::string::npos);
}

TEST(Html, BusBandwidthCurvesWhenCollectivesWereMeasured) {
  Measurements m = healthy_fleet(4);
  EXPECT_NE(page(m).find("No collectives measured."), std::string::npos);
  EXPECT_EQ(page(m).find("busbw-curves"), std::string::npos);

  m.collectives = sample_sweeps(4);
  const std::string html = page(m);
  expect_well_formed_and_self_contained(html);
  EXPECT_EQ(html.find("No collectives measured."), std::string::npos);
  const std::string curves = plot(html, "busbw-curves");
  ASSERT_FALSE(curves.empty());
  const size_t points = m.collectives[0].points.size();
  EXPECT_EQ(count(curves, "<path class=\"c0 curve\" d=\"M"), 1u);
  EXPECT_EQ(count(curves, "<path class=\"c1 curve\" d=\"M"), 1u);
  EXPECT_EQ(count(curves, "class=\"point c0\""), points);
  EXPECT_EQ(count(curves, "class=\"point c1\""), points);
  // The line has a point at every size (M, then L to each of the others).
  const size_t start = curves.find("<path class=\"c0 curve\" d=\"");
  EXPECT_EQ(count(curves.substr(start, curves.find("\"/>", start) - start), "L"), points - 1);
  // Bus bandwidth as collective_figures() gives it, at the largest size.
  const CollectiveFigures largest = collective_figures(m.collectives[0].points.back(), "allreduce", 4);
  EXPECT_NE(curves.find("<title>allreduce, 4 nodes, 64 MiB: busbw " + format_bandwidth(largest.busbw_gbps) + " (algbw "),
            std::string::npos)
      << largest.busbw_gbps;
  EXPECT_NE(curves.find(">message size</text>"), std::string::npos);
  EXPECT_NE(html.find("<td>allgather</td><td class=\"num\">4</td><td class=\"num\">4 B – 64 MiB (13)</td>"),
            std::string::npos);
}

TEST(Html, EscapesWhatComesFromTheNodes) {
  Measurements m = healthy_fleet(3);
  m.nodes[1].inventory.host = "<b>&\"x";
  m.nodes[1].inventory.kernel = "6.1.0 <i>";
  m.nodes[1].gemm_gflops = {10};
  m.collectives = sample_sweeps(3);
  m.collectives[0].collective = "all<reduce>";
  const std::string html = page(m);
  expect_well_formed_and_self_contained(html);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<i>"), std::string::npos);
  EXPECT_EQ(html.find("all<reduce>"), std::string::npos);
  EXPECT_NE(html.find("<tr><td>&lt;b&gt;&amp;&quot;x</td><td>compute</td>"), std::string::npos);
  EXPECT_NE(html.find("<title>node0 – &lt;b&gt;&amp;&quot;x: "), std::string::npos);
  EXPECT_NE(html.find(">&lt;b&gt;&amp;&quot;x</text>"), std::string::npos) << "the heatmap's and bars' labels";
  EXPECT_NE(html.find("6.1.0 &lt;i&gt;"), std::string::npos);
  EXPECT_NE(html.find("all&lt;reduce&gt;, 3 nodes"), std::string::npos);
}

TEST(Html, LongHostNamesAreCutInLabelsNotInsideACharacter) {
  Measurements m = healthy_fleet(2);
  m.nodes[0].inventory.host = "gpu-node-with-a-very-long-name-é-0001";
  m.nodes[1].inventory.host = "ééééééééééééééééééééééé";
  const std::string html = page(m);
  EXPECT_NE(html.find(">gpu-node-with-a-very…</text>"), std::string::npos);
  EXPECT_NE(html.find(">éééééééééééééééééééé…</text>"), std::string::npos);
  EXPECT_NE(html.find("<td>gpu-node-with-a-very-long-name-é-0001</td>"), std::string::npos) << "whole in the table";
}

}  // namespace
}  // namespace rankscope::acceptance
