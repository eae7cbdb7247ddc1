// report_html(): the page's structure, on Reports built by hand. How a browser
// renders it: tests/support/check_html_render.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "html_page_checks.h"
#include "rankscope/analysis/hta.h"
#include "rankscope/analysis/report.h"
#include "sample_reports.h"

namespace rankscope {
namespace {

using analysis::Report;
using analysis::report_html;
using test::count;
using test::expect_well_formed_and_self_contained;

TEST(ReportHtml, SmallJobIsWellFormedAndSelfContained) {
  expect_well_formed_and_self_contained(report_html(test::sample_report(4, 10)));
}

TEST(ReportHtml, MissingRanksAndWaitsThatCannotBeMeasuredAreSaidSo) {
  Report report = test::sample_report(4, 10);
  report.profile.ranks[1].status = RankStatus::kMissing;
  report.overlap[1].status = RankStatus::kMissing;
  report.overlap[2].wait_unmeasured = "none of its collectives was matched with another rank's";
  const std::string html = report_html(report);
  expect_well_formed_and_self_contained(html);
  EXPECT_NE(html.find("<title>rank 1: missing, no data</title>"), std::string::npos);
  EXPECT_NE(html.find("<td>missing</td><td colspan=\"8\">no data</td>"), std::string::npos);
  EXPECT_NE(html.find(": exposed wait n/a: none of its collectives was matched with another rank&#39;s</title>"),
            std::string::npos);
  EXPECT_EQ(count(html, ">n/a</span>"), 2u) << "rank 2's exposed wait and transfer";
  EXPECT_NE(html.find("onto rank 0's clock"), std::string::npos);
}

TEST(ReportHtml, OneRankWithDataHasNoStragglerVerdict) {
  Report report = test::sample_report(1, 10);
  report.stragglers.unmeasured = "only rank 0 has data: there is no other rank to compare it with";
  const std::string html = report_html(report);
  expect_well_formed_and_self_contained(html);
  EXPECT_NE(html.find("<dt>Top straggler</dt><dd>n/a: only rank 0 has data"), std::string::npos);
  EXPECT_NE(html.find("Stragglers n/a: only rank 0 has data"), std::string::npos);
  EXPECT_NE(html.find("one rank with data: no clocks to align"), std::string::npos);
  EXPECT_EQ(html.find("no straggler found"), std::string::npos);
}

TEST(ReportHtml, SmallJobHasEveryPlotAndTable) {
  const std::string html = report_html(test::sample_report(4, 10));
  for (const char* id : {"summary", "wait-heatmap", "overlap-bars", "bucket-plot", "bucket-prediction-plot",
                         "straggler-table", "rank-table", "bucket-table", "cost-table", "breakdown-bars",
                         "breakdown-table"}) {
    EXPECT_NE(html.find("id=\"" + std::string(id) + "\""), std::string::npos) << id;
  }
  EXPECT_NE(html.find("<svg id=\"wait-heatmap\""), std::string::npos);
  // One row per rank in the heatmap, one bar per rank, a point per bucket and per prediction.
  EXPECT_EQ(count(html, "<g><title>rank "), 4u);
  EXPECT_EQ(count(html, "class=\"bar\"><title>") + count(html, "class=\"no-comm\"><title>"), 4u);
  EXPECT_EQ(count(html, "class=\"bandwidth\"><title>"), 6u);
  EXPECT_EQ(count(html, "class=\"prediction-point\"><title>"), 7u);
  EXPECT_NE(html.find("class=\"recommended\""), std::string::npos);
  EXPECT_NE(html.find("<details open>"), std::string::npos) << "a short rank table starts open";
  // The step breakdown: each rank's bar split by category; the phase never marked is n/a, not 0.
  EXPECT_EQ(count(html, "class=\"c-data\"><title>rank "), 4u);
  EXPECT_EQ(count(html, "class=\"c-optimizer\"><title>"), 0u);
  EXPECT_NE(html.find("n/a on ranks 0-3, optimizer: no optimizer range"), std::string::npos);
  EXPECT_NE(html.find("n/a on rank 1, communication: no collective was seen on this rank"), std::string::npos);
}

// The overview: the verdict first, then the GPU breakdown, kernels, gaps, transfers and memory.
TEST(ReportHtml, TheVerdictComesFirstWithTheGpuOverviewAfterIt) {
  const std::string html = report_html(test::sample_report(4, 10));
  expect_well_formed_and_self_contained(html);
  const size_t verdict = html.find("id=\"verdict\"");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, html.find("id=\"wait-heatmap\""));
  EXPECT_LT(verdict, html.find("id=\"straggler-table\""));
  for (const char* id : {"gpu-breakdown-bars", "gpu-breakdown-table", "top-kernels-table", "idle-gaps-table",
                         "transfers-table", "memory-note"}) {
    EXPECT_NE(html.find("id=\"" + std::string(id) + "\""), std::string::npos) << id;
  }
  // Ranks 0, 2 and 3 ran GPU work: a bar each, split by category.
  EXPECT_EQ(count(html, "class=\"g-kernel\"><title>rank "), 3u);
  // The straggler, then the GPU classes the sample's figures make, each with its fix.
  EXPECT_NE(html.find("<strong>straggler</strong>: 2.9 ms a step"), std::string::npos);
  EXPECT_NE(html.find("<strong>launch_overhead</strong>"), std::string::npos);
  EXPECT_NE(html.find("fix: take synchronisations out of the hot path"), std::string::npos);
  EXPECT_NE(html.find("ampere_sgemm_128x64_tn &lt;&quot;escaped&quot;&gt;"), std::string::npos);
}

TEST(ReportHtml, ShowsTheFigures) {
  const std::string html = report_html(test::sample_report(4, 10));
  EXPECT_NE(html.find("<code>/scratch/jobs/ddp_run/job.h5</code>"), std::string::npos);
  EXPECT_NE(html.find("<dt>Ranks</dt><dd>4 (rank 3 dead)</dd>"), std::string::npos);
  EXPECT_NE(html.find("<dt>Steps</dt><dd>10</dd>"), std::string::npos);
  EXPECT_NE(html.find("<dt>Mean step time</dt><dd>10 ms"), std::string::npos);
  EXPECT_NE(html.find("largest error bound ±1.61 µs"), std::string::npos) << "1500 + 37 × 3 ns";
  EXPECT_NE(html.find("rank 2 on gpu-node-0</span>: slow compute, score 0.87"), std::string::npos);
  EXPECT_NE(html.find("33.3 %"), std::string::npos) << "rank 0's overlap, 1 ms of 3 ms";
  EXPECT_NE(html.find("no communication"), std::string::npos) << "rank 1 never communicates";
  EXPECT_NE(html.find("20.1 GB/s"), std::string::npos) << "bucket 1's bandwidth";
  EXPECT_NE(html.find("recommended 25 MiB"), std::string::npos);
  EXPECT_NE(html.find("R² = 0.993"), std::string::npos);
  EXPECT_NE(html.find("◀ straggler 2: slow compute"), std::string::npos);
  EXPECT_NE(html.find("in step 3"), std::string::npos) << "steps are labelled by their ProfilerStep number";
  // 0.5 + 6 + 0.1 + 0.15 + 3 + 2.25 ms of a 2 s run.
  EXPECT_NE(html.find("<td class=\"num\">12 ms</td><td class=\"num\">0.6 %</td>"), std::string::npos);
}

// The text report's capture cost: a line per rank up to a screen's worth,
// then how many more and which one capture cost the most.
TEST(ReportText, CaptureCostListsEightRanksThenTheLargestShare) {
  Report report = test::sample_report(12, 10);
  report.capture_cost[10].flusher_cpu_ns += 40'000'000;  // 52 ms of 2 s
  const std::string text = analysis::report_text(report);
  EXPECT_NE(text.find("\ncapture cost (time each rank's process spent on capture; calls estimated):\n"), std::string::npos);
  EXPECT_NE(text.find("  rank 0     12 ms of 2 s (0.60 %): start 500 µs, MPI_Init 6 ms, MPI_Finalize 100 µs, "
                      "last flush 150 µs, writer thread 3 ms CPU, 40000 calls ~2.25 ms; buffers 3 MiB\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(count(text, " ms CPU, "), 8u);
  EXPECT_NE(text.find("  ... 4 more ranks; the largest share is rank 10's, 2.60 %\n"), std::string::npos) << text;
}

// A step of a hundred thousand kernels has as many segments on its path:
// written whole they were 60 MB of JSON. Beyond 10,000, touching
// stretches of one rank and category are one entry, named by its longest
// part, with how many parts it joined; a short path stays whole.
TEST(ReportJson, ALongPathIsWrittenAsJoinedStretches) {
  Report report = test::sample_report(2, 4);
  report.ends.resize(report.profile.ranks.size());
  const auto step_with = [](int kernels_per_rank) {
    analysis::StepPath step;
    step.which = "median";
    int64_t t = 1'000'000;
    const auto add = [&](int32_t rank, analysis::PathCategory category, uint32_t name, int64_t ns) {
      step.segments.push_back({rank, t - ns, t, category, name});  // latest first
      t -= ns;
    };
    for (int i = 0; i < kernels_per_rank; ++i) add(0, analysis::PathCategory::kCompute, i == 7 ? 0 : 1, i == 7 ? 40 : 20);
    add(0, analysis::PathCategory::kCommunicationTransfer, 1, 500);
    for (int i = 0; i < kernels_per_rank; ++i) add(1, analysis::PathCategory::kCompute, 1, 20);
    step.begin_ns = t;
    step.end_ns = 1'000'000;
    return step;
  };
  report.critical_path.steps = {step_with(6'000)};
  std::string json = report_json(report);
  EXPECT_NE(json.find(R"("segments_joined":true,"segments":[{"rank":0,"begin_ns":879980,"end_ns":1000000,)"
                      R"("category":"compute","name":"ampere_sgemm_128x64_tn <\"escaped\">","parts":6000},)"
                      R"({"rank":0,"begin_ns":879480,"end_ns":879980,"category":"communication transfer",)"
                      R"("name":"vectorized_elementwise_kernel","parts":1},)"
                      R"({"rank":1,"begin_ns":759480,"end_ns":879480,"category":"compute",)"
                      R"("name":"vectorized_elementwise_kernel","parts":6000}]})"),
            std::string::npos)
      << json.substr(json.find("\"steps\":[{"), 600);
  report.critical_path.steps = {step_with(3)};
  json = report_json(report);
  EXPECT_NE(json.find(R"("segments_joined":false,"segments":[{"rank":0,"begin_ns":999980,"end_ns":1000000,)"
                      R"("category":"compute","name":"vectorized_elementwise_kernel"},)"),
            std::string::npos)
      << json.substr(json.find("\"steps\":[{"), 600);
}

TEST(ReportHtml, EscapesEverythingFromTheTimeline) {
  Report report = test::sample_report(4, 10);
  report.profile.path = "/tmp/<script>alert(1)</script>.h5";
  report.profile.ranks[2].host = "<b>&\"'";
  report.stragglers.stragglers[0].cause = "slow <i>compute</i>";
  report.stragglers.stragglers[0].evidence = "waits > 3 ms & \"more\"\x01";
  report.buckets.recommendation = "Use <25 MiB & see";
  const std::string html = report_html(report);
  EXPECT_EQ(html.find("<b>&\"'"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;&quot;&#39;"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("/tmp/&lt;script&gt;alert(1)&lt;/script&gt;.h5"), std::string::npos);
  EXPECT_EQ(html.find("<i>"), std::string::npos);
  EXPECT_NE(html.find("slow &lt;i&gt;compute&lt;/i&gt;"), std::string::npos);
  EXPECT_NE(html.find("waits &gt; 3 ms &amp; &quot;more&quot;\xEF\xBF\xBD"), std::string::npos);
  EXPECT_NE(html.find("Use &lt;25 MiB &amp; see"), std::string::npos);
  expect_well_formed_and_self_contained(html);
}

TEST(ReportHtml, EmptyReportSaysWhatIsMissing) {
  const std::string html = report_html(Report{});
  expect_well_formed_and_self_contained(html);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<dt>Steps</dt><dd>0</dd>"), std::string::npos);
  EXPECT_NE(html.find("<dt>Mean step time</dt><dd>n/a <span class=\"note\">(no rank has an event to time a step by"),
            std::string::npos);
  EXPECT_NE(html.find("no straggler found"), std::string::npos);
  for (const char* note : {"wait-heatmap-note", "straggler-note", "overlap-note", "bucket-note"}) {
    EXPECT_NE(html.find("id=\"" + std::string(note) + "\""), std::string::npos) << note;
  }
}

TEST(ReportHtml, RanksWithoutStepsDrawNoHeatmap) {
  Report report = test::sample_report(3, 0);
  const std::string html = report_html(report);
  expect_well_formed_and_self_contained(html);
  EXPECT_NE(html.find("id=\"wait-heatmap-note\""), std::string::npos);
  EXPECT_EQ(html.find("id=\"wait-heatmap\""), std::string::npos);
}

TEST(ReportHtml, SingleRankWithoutCommunication) {
  const std::string html = report_html(test::single_rank_report(5));
  expect_well_formed_and_self_contained(html);
  EXPECT_NE(html.find("id=\"wait-heatmap\""), std::string::npos);
  EXPECT_NE(html.find("rank 0: no communication"), std::string::npos);
  EXPECT_EQ(html.find("class=\"mean\""), std::string::npos) << "no mean overlap without communication";
  EXPECT_NE(html.find("id=\"bucket-note\""), std::string::npos);
  EXPECT_NE(html.find("no straggler found"), std::string::npos);
}

// --hta-compat: HTA's figures in a table of their own, only when computed.
TEST(ReportHtml, HtaFiguresHaveTheirTable) {
  Report report = test::sample_report(3, 10);
  EXPECT_EQ(report_html(report).find("id=\"hta-table\""), std::string::npos);
  report.overlap[0].hta = analysis::HtaFigures{62.75, 47'227'000, 12.68, 71.66, 15.67, {}, {}, {}};
  report.overlap[1].hta = analysis::HtaFigures{NAN, 1'000'000, 10, 90, 0, {}, {}, {}};
  report.overlap[2].hta = analysis::HtaFigures{NAN, 0, 0, 0, 0, {}, {}, {}};
  const std::string html = report_html(report);
  expect_well_formed_and_self_contained(html);
  EXPECT_NE(html.find("id=\"hta-table\""), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">0</td><td class=\"num\">62.75 %</td><td class=\"num\">47.2 ms</td>"
                      "<td class=\"num\">12.68 %</td><td class=\"num\">71.66 %</td><td class=\"num\">15.67 %</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"num\">1</td><td class=\"num\">no communication kernel</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">2</td><td class=\"num\">no communication kernel</td>"
                      "<td colspan=\"4\">no GPU event in its window</td>"),
            std::string::npos);
}

TEST(ReportHtml, DegenerateBucketFiguresStayFinite) {
  Report report = test::sample_report(2, 3);
  report.buckets.buckets.resize(1);
  report.buckets.buckets[0].bytes = 0;
  report.buckets.buckets[0].bus_bandwidth_gbps = NAN;
  report.buckets.buckets[0].overlap_pct = NAN;
  report.buckets.predictions = {{64u << 20, 5'000'000}};
  report.buckets.recommended_bucket_bytes = 64u << 20;
  report.buckets.fit = {};
  report.profile.clock_corrected = false;
  report.profile.clocks.clear();
  const std::string html = report_html(report);
  expect_well_formed_and_self_contained(html);
  EXPECT_NE(html.find("id=\"bucket-plot\""), std::string::npos);
  EXPECT_NE(html.find("id=\"bucket-prediction-plot\""), std::string::npos);
  EXPECT_NE(html.find("not corrected"), std::string::npos);
}

TEST(ReportHtml, ThousandRanksKeepOneRowEachAndFewLabels) {
  const std::string html = report_html(test::sample_report(1024, 50, /*slow_rank=*/700));
  expect_well_formed_and_self_contained(html);
  EXPECT_EQ(count(html, "<g><title>rank "), 1024u);
  EXPECT_NE(html.find("<g><title>rank 1023 on gpu-node-255: exposed wait"), std::string::npos);
  EXPECT_NE(html.find("◀ straggler 700"), std::string::npos);
  // Rank labels every 20th row (one-pixel rows, labels 14 pixels apart at least).
  const size_t heatmap_begin = html.find("<svg id=\"wait-heatmap\"");
  const size_t heatmap_end = html.find("</svg>", heatmap_begin);
  const std::string heatmap = html.substr(heatmap_begin, heatmap_end - heatmap_begin);
  EXPECT_NE(heatmap.find(">1000</text>"), std::string::npos);
  EXPECT_EQ(heatmap.find(">1001</text>"), std::string::npos);
  EXPECT_LT(count(heatmap, "<text"), 120u);
  EXPECT_EQ(html.find("<details open>"), std::string::npos) << "a 1024-row table starts folded";
  EXPECT_LT(html.size(), size_t{4} << 20) << "a page to open, not a data dump";
}

}  // namespace
}  // namespace rankscope
