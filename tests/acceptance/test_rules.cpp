#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>

#include <filesystem>
#include <fstream>

#include "fleet_fixtures.h"
#include "rankscope/acceptance/rules.h"
#include "rankscope/model/error.h"

namespace rankscope::acceptance {
namespace {

class Files : public ::testing::Test {
 protected:
  std::filesystem::path folder_ = std::filesystem::temp_directory_path() /
                                  ("rankscope-rules-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { std::filesystem::create_directories(folder_); }
  void TearDown() override { std::filesystem::remove_all(folder_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (folder_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  // The message of the Error `read` throws.
  template <typename Read>
  std::string error_of(Read read) {
    try {
      read();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
};

Acceptance judged(const Measurements& m, const RuleFile& file, const Baseline* baseline = nullptr) {
  Acceptance a = judge(m, file.fleet);
  apply_rules(a, m, file.rules, baseline);
  return a;
}

TEST_F(Files, RulesReadWithTheirPlace) {
  const RuleFile file = read_rule_file(write("rules", "# thresholds\n"
                                                      "compute_gflops >= 0.95 baseline  # SuperBench's -5 %\n"
                                                      "\n"
                                                      "link.latency_us <= 80\n"
                                                      "fleet.fail_below 0.7\n"));
  ASSERT_EQ(file.rules.size(), 2u);
  EXPECT_EQ(file.rules[0].metric, "compute_gflops");
  EXPECT_TRUE(file.rules[0].at_least && file.rules[0].of_baseline);
  EXPECT_DOUBLE_EQ(file.rules[0].threshold, 0.95);
  EXPECT_EQ(file.rules[0].where, (folder_ / "rules").string() + ":2");
  EXPECT_FALSE(file.rules[1].at_least || file.rules[1].of_baseline);
  EXPECT_EQ(file.rules[1].where, (folder_ / "rules").string() + ":4");
  EXPECT_DOUBLE_EQ(file.fleet.fail_below, 0.7);
  EXPECT_DOUBLE_EQ(file.fleet.retest_below, 0.9);
}

TEST_F(Files, BadRulesNameFileAndLine) {
  const auto error = [&](const std::string& text) {
    const std::string path = write("rules", text);
    return error_of([&] { read_rule_file(path); });
  };
  const std::string at = (folder_ / "rules").string() + ":2: ";
  EXPECT_EQ(error("\ncompute_glops >= 1\n").rfind(at + "unknown metric 'compute_glops' (known: compute_gflops, ", 0), 0u);
  EXPECT_EQ(error("\ncompute_gflops > 1\n").rfind(at + "a rule is METRIC >= VALUE", 0), 0u);
  EXPECT_EQ(error("\ncompute_gflops >= 1 baseline extra\n").rfind(at + "a rule is", 0), 0u);
  EXPECT_EQ(error("\ncompute_gflops >= fast\n"), at + "'fast' is no number of 0 or more");
  EXPECT_EQ(error("\ncompute_gflops >= nan\n"), at + "'nan' is no number of 0 or more");
  EXPECT_EQ(error("\nfleet.fail_bellow 0.8\n").rfind(at + "unknown fleet setting 'fleet.fail_bellow'", 0), 0u);
  EXPECT_EQ(error("x\n").rfind((folder_ / "rules").string() + ":1: a rule is", 0), 0u);
  EXPECT_EQ(error("fleet.fail_below 0.95\n"), (folder_ / "rules").string() + ": fleet.fail_below 0.95 lies above fleet.retest_below 0.9");
  EXPECT_EQ(error_of([&] { read_rule_file((folder_ / "absent").string()); }),
            "cannot read the rule file " + (folder_ / "absent").string() + ": No such file or directory");
  const std::string loop = (folder_ / "loop").string();
  std::filesystem::create_symlink(loop, loop);
  EXPECT_EQ(error_of([&] { read_rule_file(loop); }),
            "cannot read the rule file " + loop + ": Too many levels of symbolic links");
  EXPECT_EQ(error(std::string("\ncompute_gflops >= 1") + '\0' + "\n"), at + "a NUL byte: not a rule file (text)");
}

// A huge file (one endless line, say) is refused before it is read into memory.
TEST_F(Files, RulesAndBaselinesAreSmall) {
  const std::string line(kLargestWordFileBytes + 1, 'x');
  EXPECT_EQ(error_of([&] { read_rule_file(write("rules", line)); }),
            (folder_ / "rules").string() + ": larger than 1024 KiB: not a rule file (a few lines of text)");
  EXPECT_EQ(error_of([&] { read_baseline(write("baseline", "rankscope-accept-baseline 1\n" + line)); }),
            (folder_ / "baseline").string() + ": larger than 1024 KiB: not a baseline (a few lines of text)");
}

// What is no regular file is refused by name, never waited on (a FIFO) nor read as empty (a folder, /dev/null).
TEST_F(Files, RulesAndBaselinesAreRegularFiles) {
  const std::string fifo = (folder_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { read_rule_file(fifo); }),
            "cannot read " + fifo + ": it is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([&] { read_baseline(folder_.string()); }),
            "cannot read " + folder_.string() + ": it is a folder, not a regular file");
  EXPECT_EQ(error_of([&] { read_rule_file("/dev/null"); }),
            "cannot read /dev/null: it is a character device, not a regular file");
}

TEST_F(Files, ABaselineIsTheFleetMedianAndReadsBack) {
  Measurements m = healthy_fleet(4);
  add_gpus(m, 2);
  const std::string text = baseline_text(m, "quick");
  const Baseline baseline = read_baseline(write("baseline", text));
  EXPECT_EQ(baseline.level, "quick");
  EXPECT_EQ(baseline.nodes, 4);
  // Best repeats 100, 101, 102, 100: median 100.5.
  EXPECT_NEAR(baseline.metrics.at("compute_gflops"), 100.5, 1e-3);
  EXPECT_NEAR(baseline.metrics.at("link.bandwidth_gbps"), 1.0, 1e-9);
  EXPECT_NEAR(baseline.metrics.at("link.latency_us"), 50, 1e-9);
  // Each node's slowest GPU: 700 on nodes 0, 2 and 3, 703.5 on node 1.
  EXPECT_NEAR(baseline.metrics.at("gpu.compute_tflops"), 700, 1e-3);
  EXPECT_EQ(baseline.metrics.size(), known_metrics().size());
  EXPECT_EQ(baseline.ring_gbps, 0) << "all pairs: no ring to judge later rings by";
  EXPECT_EQ(text.find("ring_gbps"), std::string::npos);
}

TEST_F(Files, AGroupTestingBaselineKeepsTheMedianRing) {
  Measurements m = healthy_fleet(8, false);
  m.link_screen = LinkScreen::group_testing;
  // Round 1's rings, their slowest nodes 1.0, 1.2, 0.9 and 1.1 GB/s: median (on the log scale rings are judged
  // on) √(1.0 × 1.1). Later rounds are not the reference.
  m.ring_tests = {{0, {0, 1}, {1.0, 1.3}}, {0, {2, 3}, {1.2, 1.4}}, {0, {4, 5}, {0.9, 2.0}}, {0, {6, 7}, {1.1, 1.1}},
                  {1, {0, 4}, {0.1, 0.1}, true}};
  const Baseline baseline = read_baseline(write("baseline", baseline_text(m, "quick")));
  EXPECT_NEAR(baseline.ring_gbps, std::sqrt(1.1), 1e-5);  // written with 6 significant digits
  const auto error = [&](const std::string& text) {
    const std::string path = write("baseline", text);
    return error_of([&] { read_baseline(path); });
  };
  EXPECT_EQ(error("rankscope-accept-baseline 1\nlevel quick\nring_gbps none\n"),
            (folder_ / "baseline").string() + ":3: 'none' is no positive figure");
}

TEST_F(Files, BadBaselinesNameFileAndLine) {
  const auto error = [&](const std::string& text) {
    const std::string path = write("baseline", text);
    return error_of([&] { read_baseline(path); });
  };
  const std::string path = (folder_ / "baseline").string();
  EXPECT_EQ(error("compute_gflops 3\n").rfind(path + ": not a baseline of rankscope accept", 0), 0u);
  EXPECT_EQ(error("rankscope-accept-baseline 2\n"), path + ":1: baseline version 2, this rankscope reads version 1");
  EXPECT_EQ(error("rankscope-accept-baseline 1\nlevel quick\ncompute_gflops -3\n"),
            path + ":3: '-3' is no positive figure");
  EXPECT_EQ(error("rankscope-accept-baseline 1\nlevel quick\nwarp_speed 3\n").rfind(path + ":3: unknown metric 'warp_speed'", 0), 0u);
  EXPECT_EQ(error("rankscope-accept-baseline 1\ncompute_gflops 3\n"), path + ": the baseline names no level");
  EXPECT_EQ(error("rankscope-accept-baseline 1\nlevel quick\ncompute_gflops 3\ncompute_gflops 4\n"),
            path + ":4: 'compute_gflops' again (first at " + path + ":3): a baseline holds each figure once");
  EXPECT_EQ(error("rankscope-accept-baseline 1\nlevel quick\nlevel full\ncompute_gflops 3\n"),
            path + ":3: 'level' again (first at " + path + ":2): a baseline holds each figure once");
  EXPECT_EQ(error("rankscope-accept-baseline 1\nlevel quick\nnodes 4\n").rfind(
                path + ": the baseline holds no figure (compute_gflops, ", 0),
            0u);
}

TEST(Rules, BaselineRulesAreCheckedBeforeTheRun) {
  RuleFile file;
  file.rules.push_back({"memory_gbps", true, 0.9, true, "memory_gbps >= 0.9 baseline", "r:3"});
  EXPECT_THROW(check_rules(file.rules, nullptr, "quick"), Error);
  Baseline baseline{"b", "quick", 4, {{"compute_gflops", 100}}};
  try {
    check_rules(file.rules, &baseline, "quick");
    FAIL() << "a rule on a metric the baseline lacks passed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "r:3: 'memory_gbps >= 0.9 baseline': the baseline b has no memory_gbps");
  }
  try {
    check_rules({}, &baseline, "full");
    FAIL() << "a baseline of another level passed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "b: a baseline of level quick cannot judge a run of level full");
  }
}

TEST(Rules, ANodeBelowItsBaselineFailsWhereTheFleetSeesNothing) {
  // The whole fleet is 20 % slower than its baseline: alike, so the fleet comparison passes every node.
  Measurements m = healthy_fleet(4);
  for (NodeMeasurements& node : m.nodes)
    for (double& g : node.gemm_gflops) g *= 0.8;
  EXPECT_EQ(judge(m).verdict, Verdict::pass);
  const Baseline baseline{"b", "quick", 4, {{"compute_gflops", 100}, {"memory_gbps", 10}}};
  RuleFile file;
  file.rules = default_baseline_rules(baseline);
  ASSERT_EQ(file.rules.size(), 2u);
  EXPECT_EQ(file.rules[0].text, "compute_gflops >= 0.95 baseline");
  const Acceptance a = judged(m, file, &baseline);
  EXPECT_EQ(a.verdict, Verdict::fail);
  for (const NodeVerdict& node : a.nodes) {
    EXPECT_EQ(node.verdict, Verdict::fail) << node.host;
    const Check& rule = check_named(node, "rule compute_gflops");
    EXPECT_EQ(rule.verdict, Verdict::fail);
    EXPECT_NEAR(rule.ratio, 0.8, 0.03);
    EXPECT_EQ(rule.rule, "compute_gflops >= 0.95 baseline (default)");
    EXPECT_EQ(rule.reference, "100 GFLOP/s (baseline b)");
    EXPECT_EQ(check_named(node, "rule memory_gbps").verdict, Verdict::pass);
  }
}

TEST(Rules, AbsoluteRulesJudgeEveryLinkAndNothingElse) {
  Measurements m = healthy_fleet(4);
  m.links[2].latency_us = {60, 62, 60};  // slower than the rest, but not enough for the fleet to fail it
  RuleFile file;
  file.rules.push_back({"link.latency_us", false, 55, false, "link.latency_us <= 55", "r:1"});
  Acceptance a = judged(m, file);
  EXPECT_EQ(a.verdict, Verdict::fail);
  for (size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_EQ(a.links[l].verdict == Verdict::fail, l == 2) << l;
  }
  EXPECT_NE(a.links[2].cause.find("rule link.latency_us <= 55 (r:1): 60 us against 55 us"), std::string::npos)
      << a.links[2].cause;
  EXPECT_TRUE(failed_nodes(a).empty());
  file.rules[0].threshold = 100;
  EXPECT_EQ(judged(m, file).verdict, Verdict::pass);
}

TEST(Rules, AMissingMeasurementFails) {
  Measurements m = healthy_fleet(3);
  m.nodes[1].triad_gbps.clear();
  RuleFile file;
  file.rules.push_back({"memory_gbps", true, 1, false, "memory_gbps >= 1", "r:1"});
  const Acceptance a = judged(m, file);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node1"});
  EXPECT_EQ(check_named(a.nodes[1], "rule memory_gbps").value, "not measured");
}

TEST(Rules, TheRuleFileSetsTheFleetComparison) {
  Measurements m = healthy_fleet(8);
  for (double& g : m.nodes[5].gemm_gflops) g *= 0.75;
  EXPECT_EQ(failed_nodes(judge(m)), std::set<std::string>{"node5"});
  RuleFile file;
  file.fleet.fail_below = 0.7;
  EXPECT_TRUE(failed_nodes(judged(m, file)).empty());
}

}  // namespace
}  // namespace rankscope::acceptance
