// The GPU checks' verdicts, rules and outputs, on fleets built by hand (the
// measurements themselves need a GPU: scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <algorithm>

#include "fleet_fixtures.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/acceptance/node_ranks.h"
#include "rankscope/acceptance/rules.h"

namespace rankscope::acceptance {
namespace {

size_t checks_starting(const NodeVerdict& node, std::string_view prefix) {
  return static_cast<size_t>(std::count_if(node.checks.begin(), node.checks.end(),
                                           [&](const Check& c) { return c.name.starts_with(prefix); }));
}

TEST(Gpus, AHealthyFleetPassesEveryGpu) {
  Measurements m = healthy_fleet(4);
  add_gpus(m, 8);
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::pass);
  for (const NodeVerdict& node : a.nodes) {
    EXPECT_EQ(node.verdict, Verdict::pass) << node.host;
    EXPECT_EQ(checks_starting(node, "gpu"), 24u) << node.host;  // a GEMM, a triad and the GEMM held per GPU
    const Check& compute = check_named(node, "gpu7.compute");
    EXPECT_EQ(compute.value.substr(0, compute.value.find(" (")), compute.value.substr(0, 6) + " TFLOP/s");
    EXPECT_NE(compute.value.find("NVIDIA H200, GPU-"), std::string::npos) << compute.value;
    EXPECT_NE(compute.reference.find("fleet median of 32 GPUs"), std::string::npos) << compute.reference;
    for (const char* field : {"inventory.gpus", "inventory.gpu_model", "inventory.gpu_driver", "inventory.cuda_version",
                              "inventory.nccl_version"})
      EXPECT_EQ(check_named(node, field).verdict, Verdict::pass) << field;
  }
}

TEST(Gpus, OneSlowGpuFailsItsNodeAndNothingElse) {
  Measurements m = healthy_fleet(4);
  add_gpus(m, 8);
  for (double& t : m.nodes[2].gpus[5].gemm_tflops) t *= 0.6;
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node2"});
  const Check& slow = check_named(a.nodes[2], "gpu5.compute");
  EXPECT_EQ(slow.verdict, Verdict::fail);
  EXPECT_NEAR(slow.ratio, 0.6, 0.02);
  EXPECT_NE(slow.value.find("GPU-2-5"), std::string::npos) << slow.value;
  for (const Check& check : a.nodes[2].checks) {
    if (check.name != "gpu5.compute") {
      EXPECT_EQ(check.verdict, Verdict::pass) << check.name;
    }
  }
  const std::string text = summary_text(a);
  EXPECT_NE(text.find("fail gpu5.compute: 4"), std::string::npos) << text;
  // The page's GPU table: a row per GPU, the failed one first.
  const std::string html = summary_html(a, m);
  const size_t table = html.find("<table id=\"gpu-table\">");
  ASSERT_NE(table, std::string::npos);
  const std::string body = html.substr(table, html.find("</table>", table) - table);
  size_t rows = 0;
  for (size_t at = body.find("<tr><td>"); at != std::string::npos; at = body.find("<tr><td>", at + 1)) ++rows;
  EXPECT_EQ(rows, 32u);
  const size_t first_row = body.find("<tr><td>");
  EXPECT_NE(body.substr(first_row, body.find("</tr>", first_row) - first_row).find("GPU-2-5"), std::string::npos) << body;
  EXPECT_NE(text.find("gpus:  gpu0 "), std::string::npos) << text;
}

TEST(Gpus, SlowDeviceMemoryFailsAsMemory) {
  Measurements m = healthy_fleet(3);
  add_gpus(m, 2);
  for (double& g : m.nodes[0].gpus[1].triad_gbps) g *= 0.5;
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node0"});
  EXPECT_EQ(check_named(a.nodes[0], "gpu1.memory").verdict, Verdict::fail);
  EXPECT_EQ(check_named(a.nodes[0], "gpu1.compute").verdict, Verdict::pass);
}

TEST(Gpus, ANodeShortOfAGpuOrOnAnotherDriverFailsItsInventory) {
  Measurements m = healthy_fleet(4);
  add_gpus(m, 8);
  m.nodes[1].gpus.pop_back();
  m.nodes[1].inventory.gpus = 7;
  m.nodes[3].inventory.gpu_driver = "570.86.15";
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node1", "node3"}));
  const Check& count = check_named(a.nodes[1], "inventory.gpus");
  EXPECT_EQ(count.verdict, Verdict::fail);
  EXPECT_EQ(count.value, "7");
  EXPECT_EQ(count.reference, "8 (most nodes)");
  EXPECT_EQ(check_named(a.nodes[3], "inventory.gpu_driver").verdict, Verdict::fail);
  EXPECT_EQ(check_named(a.nodes[3], "inventory.gpus").verdict, Verdict::pass);
}

TEST(Gpus, GpusThatCouldNotBeMeasuredFailWithTheReason) {
  Measurements m = healthy_fleet(3);
  add_gpus(m, 4);
  m.nodes[2].gpus.clear();
  m.nodes[2].gpu_error = "the GPU checks need cuBLAS (libcublas.so.13, the CUDA toolkit's or PyTorch's): not found";
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node2"});
  const Check& measure = check_named(a.nodes[2], "gpu.measure");
  EXPECT_EQ(measure.verdict, Verdict::fail);
  EXPECT_EQ(measure.value, m.nodes[2].gpu_error);
  EXPECT_EQ(checks_starting(a.nodes[0], "gpu"), 12u);

  // One GPU of a node failed before its first figure, the others measured: no zero joins the median.
  Measurements some = healthy_fleet(3);
  add_gpus(some, 4);
  some.nodes[1].gpus[2].gemm_tflops.clear();
  some.nodes[1].gpus[2].triad_gbps.clear();
  some.nodes[1].gpus[2].sustained_tflops.clear();
  some.nodes[1].gpu_error = "gpu2: cudaMalloc: out of memory";
  const Acceptance b = judge(some);
  EXPECT_EQ(failed_nodes(b), std::set<std::string>{"node1"});
  EXPECT_EQ(check_named(b.nodes[1], "gpu.measure").value, "gpu2: cudaMalloc: out of memory");
  EXPECT_EQ(checks_starting(b.nodes[1], "gpu2."), 0u);
  EXPECT_EQ(check_named(b.nodes[1], "gpu3.compute").verdict, Verdict::pass);
  EXPECT_NE(check_named(b.nodes[0], "gpu0.compute").reference.find("fleet median of 11 GPUs"), std::string::npos);
  EXPECT_NE(summary_html(a, m).find("<ul id=\"gpu-errors\">"), std::string::npos);
}

// A driver older than the CUDA runtime rankscope carries sees GPUs that
// CUDA cannot use: every node fails, rather than passing as nodes without GPUs.
TEST(Gpus, AFleetWhoseGpusCudaCannotUseFailsEveryNode) {
  Measurements m = healthy_fleet(3);
  add_gpus(m, 4);
  for (NodeMeasurements& node : m.nodes) {
    node.gpus.clear();
    node.inventory.gpu_model.clear();
    node.gpu_error = "the driver (535.104.05, CUDA 12.2) sees 4 GPUs that CUDA 13.0 cannot use: "
                     "CUDA driver version is insufficient for CUDA runtime version";
  }
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail);
  EXPECT_EQ(failed_nodes(a), (std::set<std::string>{"node0", "node1", "node2"}));
  for (const NodeVerdict& node : a.nodes) {
    EXPECT_EQ(check_named(node, "gpu.measure").value, m.nodes[0].gpu_error) << node.host;
    EXPECT_EQ(check_named(node, "inventory.gpus").verdict, Verdict::pass) << "the driver's count, alike on every node";
  }
}

// A node that could not set up its part of NCCL's communicators fails, with
// its reason; a fleet where NCCL could not be tried says why, and fails no one.
TEST(Gpus, NcclSetUpFailuresAndFleetsNcclCannotSpanAreSaid) {
  Measurements m = healthy_fleet(3);
  add_gpus(m, 4);
  m.nodes[1].nccl_error = "ncclCommInitRank: unhandled system error";
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node1"});
  EXPECT_EQ(check_named(a.nodes[1], "collectives.nccl").value, m.nodes[1].nccl_error);
  EXPECT_EQ(checks_starting(a.nodes[0], "collectives.nccl"), 0u);
  EXPECT_NE(summary_html(a, m).find("<li>node1: ncclCommInitRank: unhandled system error</li>"), std::string::npos);
  EXPECT_NE(summary_json(a, m).find(R"("nccl_error":"ncclCommInitRank: unhandled system error")"), std::string::npos);

  Measurements apart = healthy_fleet(3);
  add_gpus(apart, 4);
  apart.nccl_not_measured = "node2: no libnccl.so.2";
  const Acceptance b = judge(apart);
  EXPECT_EQ(b.verdict, Verdict::pass) << "the inventory's comparison is what judges a node without NCCL";
  EXPECT_NE(summary_text(b).find("nccl: not measured: node2: no libnccl.so.2"), std::string::npos) << summary_text(b);
  EXPECT_NE(summary_json(b, apart).find(R"("nccl_not_measured":"node2: no libnccl.so.2")"), std::string::npos);
  EXPECT_NE(summary_html(b, apart).find("not measured: node2: no libnccl.so.2"), std::string::npos);
}

// A GPU whose burst is as fast as its peers' but which cannot hold it (its
// cooling, its power) fails on the held GEMM alone, with what NVML said.
TEST(Gpus, AGpuThatCannotHoldItsBurstFailsOnTheHeldGemm) {
  Measurements m = healthy_fleet(3);
  add_gpus(m, 4);
  GpuMeasurements& hot = m.nodes[2].gpus[1];
  hot.sustained_tflops = {700, 650, 520, 480, 470, 475};  // the last half: 480, 470, 475
  hot.clocks_held_back = "HW thermal slowdown";
  const Acceptance a = judge(m);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node2"});
  const Check& held = check_named(a.nodes[2], "gpu1.sustained");
  EXPECT_EQ(held.verdict, Verdict::fail);
  EXPECT_NEAR(held.ratio, 475.0 / 672, 0.01);
  EXPECT_NE(held.value.find("475.00 TFLOP/s"), std::string::npos) << held.value;
  EXPECT_NE(held.value.find("of its burst; clocks held back by HW thermal slowdown"), std::string::npos) << held.value;
  EXPECT_NE(held.reference.find("median of the last half of 6 one-second slices"), std::string::npos) << held.reference;
  EXPECT_EQ(check_named(a.nodes[2], "gpu1.compute").verdict, Verdict::pass) << "its burst is as fast as its peers'";
  EXPECT_NE(summary_html(a, m).find("<td>HW thermal slowdown</td>"), std::string::npos);
  EXPECT_NE(summary_json(a, m).find(R"("clocks_held_back":"HW thermal slowdown")"), std::string::npos);
}

// The held figure is the last half's median, however few the slices.
TEST(Gpus, TheHeldFigureIsTheMedianOfTheLastHalfOfTheSlices) {
  const std::vector<std::pair<std::vector<double>, std::string>> cases = {
      {{500}, "500.00"}, {{690, 300}, "300.00"}, {{690, 680, 300, 400}, "350.00"}, {{690, 680, 670, 300, 400}, "400.00"}};
  for (const auto& [slices, held] : cases) {
    Measurements m = healthy_fleet(3);
    add_gpus(m, 4);
    m.nodes[0].gpus[0].sustained_tflops = slices;
    const Acceptance a = judge(m);
    const Check& check = check_named(a.nodes[0], "gpu0.sustained");
    EXPECT_EQ(check.value.substr(0, check.value.find(' ')), held) << check.value;
  }
}

TEST(Gpus, AFleetWithoutGpusHasNoGpuChecks) {
  const Measurements m = healthy_fleet(3);
  const Acceptance a = judge(m);
  for (const NodeVerdict& node : a.nodes) {
    EXPECT_EQ(checks_starting(node, "gpu"), 0u);
    EXPECT_EQ(checks_starting(node, "inventory.gpu"), 0u);
  }
  EXPECT_EQ(summary_html(a, m).find("gpu-section"), std::string::npos);
  EXPECT_EQ(summary_text(a).find("gpus:"), std::string::npos);
}

TEST(Gpus, RulesAndBaselinesTakeTheSlowestGpuOfEachNode) {
  Measurements m = healthy_fleet(4);
  add_gpus(m, 2);
  for (double& t : m.nodes[3].gpus[0].gemm_tflops) t = 400;
  std::vector<MetricValue> compute;
  for (const MetricValue& value : metric_values(m))
    if (value.metric == "gpu.compute_tflops") compute.push_back(value);
  ASSERT_EQ(compute.size(), 4u);
  EXPECT_DOUBLE_EQ(compute[3].value, 400);
  EXPECT_GT(compute[0].value, 690);

  const std::string baseline = baseline_text(m, "quick");
  EXPECT_NE(baseline.find("\ngpu.compute_tflops "), std::string::npos) << baseline;
  EXPECT_NE(baseline.find("\ngpu.memory_gbps "), std::string::npos) << baseline;

  Acceptance a = judge(m);
  apply_rules(a, m, {{"gpu.compute_tflops", true, 600, false, "gpu.compute_tflops >= 600", "r:1"}}, nullptr);
  EXPECT_EQ(check_named(a.nodes[3], "rule gpu.compute_tflops").verdict, Verdict::fail);
  EXPECT_EQ(check_named(a.nodes[3], "rule gpu.compute_tflops").value, "400 TFLOP/s");
  EXPECT_EQ(check_named(a.nodes[0], "rule gpu.compute_tflops").verdict, Verdict::pass);

  // A GPU rule on a node without GPUs: not measured, which is no pass.
  Measurements mixed = healthy_fleet(2);
  add_gpus(mixed, 1);
  mixed.nodes[1].gpus.clear();
  Acceptance b = judge(mixed);
  apply_rules(b, mixed, {{"gpu.memory_gbps", true, 1000, false, "gpu.memory_gbps >= 1000", "r:2"}}, nullptr);
  EXPECT_EQ(check_named(b.nodes[1], "rule gpu.memory_gbps").value, "not measured");
  EXPECT_EQ(check_named(b.nodes[1], "rule gpu.memory_gbps").verdict, Verdict::fail);
}

TEST(Gpus, JsonCarriesTheInventoryAndEveryRepeat) {
  Measurements m = healthy_fleet(2);
  add_gpus(m, 1);
  const std::string json = summary_json(judge(m), m);
  EXPECT_NE(json.find(R"("gpus":1,"gpu_model":"NVIDIA H200","gpu_driver":"580.82.07","cuda_version":"13.0","nccl_version":"2.28.3","gpu_unavailable":"")"),
            std::string::npos) << json;
  EXPECT_NE(json.find(R"("gpus":[{"index":0,"model":"NVIDIA H200","uuid":"GPU-1-0","memory_bytes":151397597184,"gemm_tflops":[)"),
            std::string::npos) << json;
  EXPECT_NE(json.find(R"("gpu_error":"")"), std::string::npos) << json;
}

// A launcher that gives each rank of a node its own GPU: the rank that
// measures the node must see all of theirs.
TEST(Gpus, TheNodesMeasuringRankSeesEveryGpuItsRanksWereGiven) {
  using Seen = std::vector<std::optional<std::string>>;
  EXPECT_EQ(visible_to_any(Seen{"0", "1", " 2", "3 "}), "0,1,2,3");
  EXPECT_EQ(visible_to_any(Seen{"2,3", "0,1", "3"}), "2,3,0,1");  // in the order first named, each once
  EXPECT_EQ(visible_to_any(Seen{"GPU-8f3a", "GPU-1c07,"}), "GPU-8f3a,GPU-1c07");  // UUIDs as well
  EXPECT_EQ(visible_to_any(Seen{"0", std::nullopt}), std::nullopt);  // one rank may use every GPU: so may it
  EXPECT_EQ(visible_to_any(Seen{std::nullopt}), std::nullopt);
  EXPECT_EQ(visible_to_any(Seen{"", ""}), "");  // every GPU hidden stays hidden
  EXPECT_EQ(visible_to_any(Seen{"", "1"}), "1");
}

// Fewer GPUs to CUDA than this fails the node: the driver's, or as many as CUDA_VISIBLE_DEVICES names.
TEST(Gpus, CudaShouldFindEveryGpuTheDriverSeesOrTheVariableNames) {
  EXPECT_EQ(gpus_cuda_should_find(8, nullptr), 8);
  EXPECT_EQ(gpus_cuda_should_find(8, "0,1, 2,3"), 4);
  EXPECT_EQ(gpus_cuda_should_find(8, "GPU-8f3a,"), 1);
  EXPECT_EQ(gpus_cuda_should_find(8, ""), 0);  // every GPU hidden on purpose: none missing
}

}  // namespace
}  // namespace rankscope::acceptance
