// rankscope diff's statistics and matching on figures built by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "rankscope/analysis/diff.h"
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

}  // namespace
}  // namespace rankscope::analysis
