// rankscope diff's statistics and matching on figures built by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "rankscope/analysis/diff.h"
#include "rankscope/analysis/diff_rules.h"
#include "rankscope/model/error.h"
#include "../support/html_page_checks.h"

namespace rankscope::analysis {
namespace {

Figure per_step(const std::string& metric, int32_t rank, std::vector<double> samples, const char* unit = "ns") {
  Figure f;
  f.metric = metric;
  f.rank = rank;
  f.unit = unit;
  f.samples = std::move(samples);
  std::vector<double> sorted = f.samples;
  std::sort(sorted.begin(), sorted.end());
  f.value = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  return f;
}

std::vector<double> noisy(double center, double spread, int n, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> jitter(-spread, spread);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(center + jitter(random));
  return out;
}

RunFigures run(std::vector<Figure> figures, int32_t world_size = 2) {
  RunFigures r;
  r.path = "run.h5";
  r.world_size = world_size;
  r.steps = 20;
  r.figures = std::move(figures);
  return r;
}

const Change& find(const DiffReport& diff, const std::string& metric, int32_t rank = -1) {
  for (const Change& c : diff.changes) {
    if (c.metric == metric && c.rank == rank) return c;
  }
  throw std::runtime_error("no change of " + metric);
}

TEST(MannWhitney, ExactForSmallSamplesWithoutTies) {
  // Completely apart: the two most extreme of C(2n, n) arrangements.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4}, {5, 6, 7, 8}), 2.0 / 70, 1e-12);
  EXPECT_NEAR(mann_whitney_p({1, 2, 3}, {4, 5, 6}), 2.0 / 20, 1e-12);
  EXPECT_NEAR(mann_whitney_p({5, 6, 7, 8}, {1, 2, 3, 4}), 2.0 / 70, 1e-12);
  // Interleaved: no evidence at all.
  EXPECT_NEAR(mann_whitney_p({1, 4, 5, 8}, {2, 3, 6, 7}), 1.0, 1e-12);
}

TEST(MannWhitney, NormalApproximationForLargeOrTiedSamples) {
  EXPECT_LT(mann_whitney_p(noisy(100, 5, 30, 1), noisy(110, 5, 30, 2)), 1e-8);
  EXPECT_GT(mann_whitney_p(noisy(100, 5, 30, 3), noisy(100, 5, 30, 4)), 0.05);
  EXPECT_NEAR(mann_whitney_p({1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}), 1.0, 1e-12);
}

TEST(Diff, TheSameRunAgainChangesNothing) {
  const RunFigures a = run({per_step("step_ns", -1, noisy(100e6, 3e6, 20, 1)), per_step("step_ns", 0, noisy(100e6, 3e6, 20, 2))});
  const RunFigures b = run({per_step("step_ns", -1, noisy(100e6, 3e6, 20, 3)), per_step("step_ns", 0, noisy(100e6, 3e6, 20, 4))});
  const DiffReport diff = diff_runs(a, b);
  EXPECT_EQ(diff.tested, 2);
  EXPECT_FALSE(diff.regression());
  for (const Change& c : diff.changes) EXPECT_FALSE(c.significant) << c.metric;
  EXPECT_NE(diff_text(diff).find("no significant change"), std::string::npos);
}

TEST(Diff, ASlowerStepIsASignificantRegressionFirst) {
  const RunFigures a = run({per_step("step_ns", -1, noisy(100e6, 3e6, 20, 1)),
                            per_step("data_loading_ns", -1, noisy(20e6, 1e6, 20, 2)),
                            per_step("compute_ns", -1, noisy(60e6, 2e6, 20, 3))});
  const RunFigures b = run({per_step("step_ns", -1, noisy(112e6, 3e6, 20, 4)),
                            per_step("data_loading_ns", -1, noisy(32e6, 1e6, 20, 5)),
                            per_step("compute_ns", -1, noisy(60e6, 2e6, 20, 6))});
  const DiffReport diff = diff_runs(a, b);
  ASSERT_GE(diff.changes.size(), 3u);
  EXPECT_EQ(diff.changes[0].metric, "step_ns");  // the most step time explained first
  EXPECT_TRUE(diff.changes[0].regression);
  EXPECT_NEAR(diff.changes[0].ratio, 1.12, 0.03);
  EXPECT_LT(diff.changes[0].p_value, 0.001);
  EXPECT_TRUE(find(diff, "data_loading_ns").regression);
  EXPECT_FALSE(find(diff, "compute_ns").significant);
  EXPECT_TRUE(diff.regression());
  EXPECT_NE(diff_json(diff).find("\"metric\":\"step_ns\",\"scope\":\"job\",\"rank\":null"), std::string::npos);
}

TEST(Diff, OfTwoRanksTheSlowedRanksWorkComesBeforeTheOthersWait) {
  // Rank 1's forward grew by 100 ms; rank 0 waits for it a little longer than that.
  const RunFigures a = run({per_step("step_ns", -1, noisy(170e6, 2e6, 20, 1)),
                            per_step("forward_ns", 0, noisy(5e6, 1e6, 20, 2)), per_step("forward_ns", 1, noisy(105e6, 1e6, 20, 3)),
                            per_step("comm_ns", 0, noisy(117e6, 2e6, 20, 4)), per_step("comm_ns", 1, noisy(17e6, 2e6, 20, 5))});
  const RunFigures b = run({per_step("step_ns", -1, noisy(272e6, 2e6, 20, 6)),
                            per_step("forward_ns", 0, noisy(5e6, 1e6, 20, 7)), per_step("forward_ns", 1, noisy(205e6, 1e6, 20, 8)),
                            per_step("comm_ns", 0, noisy(220e6, 2e6, 20, 9)), per_step("comm_ns", 1, noisy(17e6, 2e6, 20, 10))});
  const DiffReport diff = diff_runs(a, b);
  ASSERT_GE(diff.changes.size(), 3u);
  EXPECT_EQ(diff.changes[0].metric, "step_ns");
  EXPECT_EQ(diff.changes[1].metric, "forward_ns");
  EXPECT_EQ(diff.changes[1].rank, 1);
  EXPECT_EQ(diff.changes[2].metric, "comm_ns");
  EXPECT_EQ(diff.changes[2].rank, 0);
}

TEST(Diff, CommunicationLongerInFlightBehindComputeIsNoChange) {
  // Twice as long in flight, all of it behind compute: the exposed part, and the step, stay.
  const RunFigures a = run({per_step("step_ns", -1, noisy(100e6, 2e6, 20, 1)), per_step("comm_ns", -1, noisy(10e6, 1e6, 20, 2)),
                            per_step("overlap_ns", -1, noisy(8e6, 1e6, 20, 3))});
  const RunFigures b = run({per_step("step_ns", -1, noisy(100e6, 2e6, 20, 4)), per_step("comm_ns", -1, noisy(20e6, 1e6, 20, 5)),
                            per_step("overlap_ns", -1, noisy(18e6, 1e6, 20, 6))});
  const DiffReport diff = diff_runs(a, b);
  EXPECT_LT(find(diff, "comm_ns").p_value, 0.05) << "the samples do differ";
  EXPECT_FALSE(find(diff, "comm_ns").significant);
  EXPECT_FALSE(find(diff, "overlap_ns").significant);
  // Exposed: the same growth not hidden is a change.
  const RunFigures c = run({per_step("step_ns", -1, noisy(110e6, 2e6, 20, 7)), per_step("comm_ns", -1, noisy(20e6, 1e6, 20, 8)),
                            per_step("overlap_ns", -1, noisy(8e6, 1e6, 20, 9))});
  EXPECT_TRUE(find(diff_runs(a, c), "comm_ns").significant);
}

TEST(Diff, FewStepsOrOneValueAreSaidNotTested) {
  const RunFigures a = run({per_step("step_ns", -1, {100, 101, 99}), per_step("bucket.busbw_gbps:0", -1, {}, "GB/s")});
  RunFigures b = run({per_step("step_ns", -1, {200, 201, 199}), per_step("bucket.busbw_gbps:0", -1, {}, "GB/s")});
  b.figures[1].value = 5;
  const DiffReport diff = diff_runs(a, b);
  const Change& step = find(diff, "step_ns");
  EXPECT_EQ(step.p_value, -1);
  EXPECT_FALSE(step.significant);
  EXPECT_NE(step.untested.find("3 and 3 steps: 4 a run are needed"), std::string::npos) << step.untested;
  EXPECT_NE(find(diff, "bucket.busbw_gbps:0").untested.find("no step-to-step samples"), std::string::npos);
}

TEST(Diff, OtherWorldSizesCompareTheJobOnlyAndFiguresOfOneRunAreNamed) {
  const RunFigures a = run({per_step("step_ns", -1, noisy(100, 1, 10, 1)), per_step("step_ns", 0, noisy(100, 1, 10, 2)),
                            per_step("kernel.total_ns:gemm", -1, {})},
                           4);
  const RunFigures b = run({per_step("step_ns", -1, noisy(100, 1, 10, 3)), per_step("step_ns", 0, noisy(100, 1, 10, 4)),
                            per_step("kernel.total_ns:conv", -1, {})},
                           2);
  const DiffReport diff = diff_runs(a, b);
  ASSERT_EQ(diff.notes.size(), 1u);
  EXPECT_NE(diff.notes[0].find("4 and 2 ranks: only the job's figures"), std::string::npos);
  EXPECT_THROW(find(diff, "step_ns", 0), std::runtime_error);
  EXPECT_EQ(find(diff, "kernel.total_ns:gemm").untested, "only in the base run");
  EXPECT_EQ(find(diff, "kernel.total_ns:conv").untested, "only in the new run");
  EXPECT_TRUE(std::isnan(find(diff, "kernel.total_ns:conv").base)) << "a missing side is never 0";
}

TEST(DiffHtml, ASelfContainedPageWithABarPerSignificantChange) {
  RunFigures a = run({per_step("step_ns", -1, noisy(100e6, 3e6, 20, 1)),
                      per_step("data_loading_ns", -1, noisy(20e6, 1e6, 20, 2)),
                      per_step("kernel.total_ns:<gemm & \"co\">", -1, {})});
  RunFigures b = run({per_step("step_ns", -1, noisy(112e6, 3e6, 20, 4)),
                      per_step("data_loading_ns", -1, noisy(32e6, 1e6, 20, 5))});
  a.path = "base<&>.h5";
  const std::string html = diff_html(diff_runs(a, b));
  test::expect_well_formed_and_self_contained(html);
  EXPECT_EQ(test::count(html, "class=\"worse\"><title>"), 2u);
  EXPECT_NE(html.find("<strong>regression</strong>"), std::string::npos);
  EXPECT_NE(html.find("base&lt;&amp;&gt;.h5"), std::string::npos);
  EXPECT_NE(html.find("kernel.total_ns:&lt;gemm &amp; &quot;co&quot;&gt;"), std::string::npos);
  EXPECT_NE(html.find("only in the base run"), std::string::npos);
  const std::string calm = diff_html(diff_runs(a, a));
  test::expect_well_formed_and_self_contained(calm);
  EXPECT_NE(calm.find("id=\"no-change\""), std::string::npos);
}

class BaselineFile : public ::testing::Test {
 protected:
  void SetUp() override { path_ = std::filesystem::temp_directory_path() / ("baseline-" + std::to_string(::getpid())); }
  void TearDown() override { std::filesystem::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::filesystem::path path_;
};

TEST_F(BaselineFile, RoundTripsEveryFigureWithItsSamples) {
  RunFigures a = run({per_step("step_ns", -1, {1.5, 2.25, 3}), per_step("kernel.total_ns:void gemm<float, 2>(int)", -1, {})});
  a.figures[1].value = 12345.678;
  a.figures[0].higher_is_better = true;
  write(baseline_text(a));
  const RunFigures back = read_baseline_file(path_.string());
  EXPECT_EQ(back.world_size, 2);
  ASSERT_EQ(back.figures.size(), 2u);
  EXPECT_EQ(back.figures[0].samples, (std::vector<double>{1.5, 2.25, 3}));
  EXPECT_TRUE(back.figures[0].higher_is_better);
  EXPECT_EQ(back.figures[1].metric, "kernel.total_ns:void gemm<float, 2>(int)");
  EXPECT_DOUBLE_EQ(back.figures[1].value, 12345.678);
}

TEST_F(BaselineFile, DamageAndNewerFormatsAreRefusedByFileAndLine) {
  write("rankscope-baseline 1\nworld_size 2\nfigure -1 ns 0 5 3 1 2 step_ns\n");
  try {
    read_baseline_file(path_.string());
    FAIL() << "a figure with fewer samples than it says was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path_.string() + ":3: a figure has fewer samples"), std::string::npos) << e.what();
  }
  write("rankscope-baseline 9\n");
  try {
    read_baseline_file(path_.string());
    FAIL() << "a newer format was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":1: baseline format 9 is newer than this rankscope reads (1)"), std::string::npos)
        << e.what();
  }
  write("{\"file\": \"a report\"}\n");
  EXPECT_THROW(read_baseline_file(path_.string()), Error);
}


const RuleVerdict* verdict_of(const DiffReport& diff, const std::string& metric) {
  for (const RuleVerdict& v : diff.verdicts)
    if (v.metric == metric) return &v;
  return nullptr;
}

ThresholdRule rule(const std::string& text) { return parse_threshold_rule({[&] {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}(), "rules:1"}); }

// A CPU job's figures the default rules judge, its step `step_ms` long.
RunFigures gated_run(double step_ms, unsigned seed) {
  std::vector<Figure> figures = {per_step("step_ns", -1, noisy(step_ms * 1e6, 3e6, 20, seed))};
  for (const char* metric : {"exposed_wait_ns", "exposed_transfer_ns", "idle_ns", "data_loading_ns"})
    figures.push_back(per_step(metric, -1, noisy(10e6, 1e6, 20, ++seed)));
  return run(figures);
}

TEST(DiffRules, TheDefaultBreaksOnASignificantlySlowerStepOnly) {
  const RunFigures base = gated_run(100, 1);
  DiffReport calm = diff_runs(base, gated_run(100, 10));
  judge_rules(calm, default_diff_rules(), "default");
  EXPECT_FALSE(calm.rule_broken());
  EXPECT_EQ(calm.rules_kept, 5);
  // A CPU job has no GPU figure: that rule is said not judged, not passed in silence.
  ASSERT_EQ(calm.verdicts.size(), 1u);
  EXPECT_EQ(calm.verdicts[0].metric, "gpu.idle.*");
  EXPECT_EQ(calm.verdicts[0].outcome, RuleVerdict::Outcome::not_judged);
  DiffReport worse = diff_runs(base, gated_run(112, 20));
  judge_rules(worse, default_diff_rules(), "default");
  EXPECT_TRUE(worse.rule_broken());
  const RuleVerdict* step = verdict_of(worse, "step_ns");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->outcome, RuleVerdict::Outcome::broken);
  EXPECT_EQ(step->rule, "step_ns <= 1 baseline (default)");
  EXPECT_NE(step->why.find("(x1.1"), std::string::npos) << step->why;
  EXPECT_EQ(worse.verdicts.front().outcome, RuleVerdict::Outcome::broken) << "the broken come first";
  // A job that lost its steps cannot pass a gate on them.
  DiffReport stepless = diff_runs(run({}), run({}));
  judge_rules(stepless, default_diff_rules(), "default");
  ASSERT_NE(verdict_of(stepless, "step_ns"), nullptr);
  EXPECT_EQ(verdict_of(stepless, "step_ns")->why, "not measured in either run");
}

TEST(DiffRules, ThresholdsOfTheirOwnKind) {
  RunFigures a = run({per_step("step_ns", -1, noisy(100e6, 3e6, 20, 1)), per_step("comm_ns", -1, noisy(10e6, 3e6, 20, 2)),
                      per_step("bucket.busbw_gbps:0", -1, {}, "GB/s"), per_step("process.peak_rss_bytes", 0, {}, "bytes"),
                      per_step("process.peak_rss_bytes", 1, {}, "bytes"), per_step("kernel.count:gemm", -1, {}, "count")});
  a.figures[2].value = 10;
  a.figures[3].value = a.figures[4].value = 1e9;
  a.figures[5].value = 100;
  RunFigures b = run({per_step("step_ns", -1, noisy(101e6, 3e6, 20, 3)), per_step("comm_ns", -1, noisy(10.4e6, 3e6, 20, 4)),
                      per_step("bucket.busbw_gbps:0", -1, {}, "GB/s"), per_step("process.peak_rss_bytes", 0, {}, "bytes"),
                      per_step("process.peak_rss_bytes", 1, {}, "bytes")});
  b.figures[2].value = 8;
  b.figures[3].value = 1.05e9;
  b.figures[4].value = 1.3e9;
  DiffReport diff = diff_runs(a, b);
  judge_rules(diff,
              {rule("step_ns <= 90000000"),                    // absolute: the new run's step alone
               rule("comm_ns <= 1.01 baseline"),               // beyond the ratio, but within the noise: kept
               rule("bucket.busbw_gbps:0 >= 0.9 baseline"),    // one value a run: the ratio alone
               rule("process.peak_rss_bytes <= 1.2 baseline"), // no job figure: each rank's
               rule("kernel.count:* <= 1.5 baseline"),         // gone from the new run
               rule("kernel.mean_ns:* <= 1 baseline")},        // nothing to judge
              "rules");
  using Outcome = RuleVerdict::Outcome;
  ASSERT_NE(verdict_of(diff, "step_ns"), nullptr);
  EXPECT_NE(verdict_of(diff, "step_ns")->why.find("against at most 90 ms"), std::string::npos)
      << verdict_of(diff, "step_ns")->why;
  EXPECT_EQ(verdict_of(diff, "comm_ns"), nullptr);
  ASSERT_NE(verdict_of(diff, "bucket.busbw_gbps:0"), nullptr);
  EXPECT_NE(verdict_of(diff, "bucket.busbw_gbps:0")->why.find("one value a run: not tested"), std::string::npos);
  ASSERT_NE(verdict_of(diff, "process.peak_rss_bytes"), nullptr);
  EXPECT_EQ(verdict_of(diff, "process.peak_rss_bytes")->rank, 1);
  EXPECT_EQ(verdict_of(diff, "kernel.count:gemm")->outcome, Outcome::broken);
  EXPECT_NE(verdict_of(diff, "kernel.count:gemm")->why.find("not measured in the new run"), std::string::npos);
  EXPECT_EQ(verdict_of(diff, "kernel.mean_ns:*")->outcome, Outcome::not_judged);
  EXPECT_EQ(diff.rules_kept, 2);  // comm_ns and rank 0's memory
  const std::string text = diff_text(diff);
  EXPECT_NE(text.find("rules (rules): 2 figures kept them, 4 broken, 1 not judged"), std::string::npos) << text;
  const std::string json = diff_json(diff);
  EXPECT_NE(json.find("\"outcome\":\"broken\""), std::string::npos) << json;
  test::expect_well_formed_and_self_contained(diff_html(diff));
  EXPECT_NE(diff_json(diff_runs(a, b)).find("\"rules\":null"), std::string::npos);
}

TEST_F(BaselineFile, RuleFilesNameTheirMistakesByFileAndLine) {
  write("# gate\nstep_ns <= 1.05 baseline\nkernel.total_ns:* <= 1.2 baseline\ngpu.idle.* <= 1 baseline\n"
        "kernel.count:void f(int) <= 2 baseline\n");
  EXPECT_THROW(read_diff_rules(path_.string()), Error) << "a kernel name with spaces is no single word";
  write("# gate\nstep_ns <= 1.05 baseline\nkernel.total_ns:* <= 1.2 baseline\ngpu.idle.* <= 1 baseline\n"
        "bucket.bytes:3 <= 1 baseline\n");
  EXPECT_EQ(read_diff_rules(path_.string()).size(), 4u);
  const auto refused = [&](const std::string& text, const std::string& expected) {
    write(text);
    try {
      read_diff_rules(path_.string());
      ADD_FAILURE() << "read: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path_.string() + expected), std::string::npos) << e.what();
    }
  };
  refused("step_ns <= 1 baseline\nstepns <= 1 baseline\n", ":2: no figure of diff's is named 'stepns'");
  refused("foo* <= 1\n", ":1: no figure of diff's is named 'foo*'");
  refused("kernel.total_ns: <= 1\n", ":1: no figure of diff's is named 'kernel.total_ns:'");
  refused("step_ns < 1 baseline\n", ":1: a rule is METRIC >= VALUE");
  refused("step_ns <= -1\n", ":1: '-1' is no number of 0 or more");
  refused("# nothing\n", ": no rule in the file");
}

}  // namespace
}  // namespace rankscope::analysis
