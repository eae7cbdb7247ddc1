#include <gtest/gtest.h>

#include "fleet_fixtures.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/acceptance/measure.h"

namespace rankscope::acceptance {
namespace {

TEST(RunRecord, NamesWhomRankZeroWaitsFor) {
  std::vector<std::string> lines;
  RunRecord record([&](const std::string& line) { lines.push_back(line); });
  record.measured(healthy_fleet(4));
  record.begin_stage("compute: repeat 2 of 9");
  EXPECT_EQ(lines, std::vector<std::string>{"compute: repeat 2 of 9"});

  // Between roll calls, no one is known to be silent.
  std::optional<Measurements> cut = record.cut_short("ended");
  ASSERT_TRUE(cut && cut->cut_short);
  EXPECT_EQ(cut->cut_short->stage, "compute: repeat 2 of 9");
  EXPECT_EQ(cut->cut_short->why, "ended");
  EXPECT_TRUE(cut->cut_short->silent_nodes.empty());
  EXPECT_EQ(cut->nodes.size(), 4u);

  record.call_roll(4);
  record.answered(2);
  EXPECT_EQ(record.cut_short("ended")->cut_short->silent_nodes, (std::vector<int>{1, 3}));
  record.answered(1);
  record.answered(3);
  EXPECT_TRUE(record.cut_short("ended")->cut_short->silent_nodes.empty()) << "a full roll call names no one";

  // Rank 0 stuck on its own link: its peer is the silent one.
  record.begin_stage("links: repeat 1 of 9");
  record.measuring_pairs({{0, 2}, {1, 3}});
  record.waiting_on(2);
  EXPECT_EQ(record.cut_short("ended")->cut_short->silent_nodes, std::vector<int>{2});
  record.waiting_on(-1);

  // Two ends of one link silent: either may be the lost one.
  record.call_roll(4);
  record.answered(2);
  const CutShort pair = *record.cut_short("ended")->cut_short;
  EXPECT_EQ(pair.silent_nodes, (std::vector<int>{1, 3}));
  EXPECT_EQ(pair.silent_pairs, (std::vector<std::pair<int, int>>{{1, 3}}));

  record.finish();
  EXPECT_FALSE(record.cut_short("ended")) << "a run whose verdict is given is not cut short";
}

TEST(Judge, ASilentNodeFailsAndTheRestIsJudgedOnWhatWasMeasured) {
  Measurements m = healthy_fleet(4);
  for (NodeMeasurements& node : m.nodes) node.triad_gbps.clear();  // the memory stage never came
  m.links.clear();
  m.cut_short = CutShort{"compute: repeat 3 of 9", "the job was ended by SIGTERM", {3}, {}};
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail);
  EXPECT_EQ(failed_nodes(a), std::set<std::string>{"node3"});
  const Check& answered = check_named(a.nodes[3], "answered");
  EXPECT_EQ(answered.value, "no answer");
  EXPECT_EQ(answered.reference, "stage compute: repeat 3 of 9 (the job was ended by SIGTERM)");
  for (size_t n = 0; n < 3; ++n) {
    EXPECT_EQ(a.nodes[n].verdict, Verdict::pass) << n;
    EXPECT_EQ(check_named(a.nodes[n], "compute").verdict, Verdict::pass);
  }
  const std::string text = summary_text(a);
  EXPECT_NE(text.find("acceptance: FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("run cut short in stage compute: repeat 3 of 9 (the job was ended by SIGTERM): no answer from node3;"),
            std::string::npos) << text;
  const std::string json = summary_json(a, m);
  EXPECT_NE(json.find(R"("cut_short":{"stage":"compute: repeat 3 of 9","why":"the job was ended by SIGTERM","silent_hosts":["node3"]})"),
            std::string::npos) << json;
}

TEST(Judge, TwoSilentEndsOfALinkAreBothRetested) {
  Measurements m = healthy_fleet(4);
  m.cut_short = CutShort{"links: repeat 2 of 9", "the job was ended by SIGTERM", {1, 3}, {{1, 3}}};
  const Acceptance a = judge(m);
  EXPECT_EQ(a.verdict, Verdict::fail) << "a run cut short is no pass";
  EXPECT_TRUE(failed_nodes(a).empty());
  for (const size_t n : {1u, 3u}) {
    const Check& answered = check_named(a.nodes[n], "answered");
    EXPECT_EQ(answered.verdict, Verdict::retest);
    EXPECT_NE(answered.rule.find("either may be the one lost"), std::string::npos) << answered.rule;
  }
  EXPECT_NE(summary_json(judge(healthy_fleet(2)), healthy_fleet(2)).find(R"("cut_short":null)"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::acceptance
