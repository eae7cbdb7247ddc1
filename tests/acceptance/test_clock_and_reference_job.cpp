#include <gtest/gtest.h>

#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"

namespace rankscope::acceptance {
namespace {

TEST(ClockCheck, ABoundWithinTheLimitPasses) {
  const Check check = clock_check({.offset_ns = 3'000'000'000, .bound_ns = 40'000, .error = ""});
  EXPECT_EQ(check.name, "clock");
  EXPECT_EQ(check.verdict, Verdict::pass);
  EXPECT_EQ(check.ratio, 1);
  EXPECT_NE(check.value.find("bound 40.0 us"), std::string::npos) << check.value;
  EXPECT_EQ(clock_check({}).verdict, Verdict::pass) << "rank 0: its own clock, bound 0";
}

TEST(ClockCheck, ABoundAboveTheLimitFails) {
  const Check check = clock_check({.offset_ns = 0, .bound_ns = 4'000'000, .error = ""});
  EXPECT_EQ(check.verdict, Verdict::fail);
  EXPECT_DOUBLE_EQ(check.ratio, 0.25);
  Rules strict;
  strict.clock_bound_limit_ns = 20'000;
  EXPECT_EQ(clock_check({.offset_ns = 0, .bound_ns = 40'000, .error = ""}, strict).verdict, Verdict::fail);
}

TEST(ClockCheck, AFailedSyncFailsWithItsReason) {
  const Check check = clock_check({.offset_ns = 0, .bound_ns = 0, .error = "clock sync round 2: rank 1 fell silent"});
  EXPECT_EQ(check.verdict, Verdict::fail);
  EXPECT_NE(check.value.find("rank 1 fell silent"), std::string::npos) << check.value;
}

// Four nodes alike in the reference job (own time 60-62 ms per step), to be spoiled by each test.
Measurements reference_fleet() {
  Measurements m;
  for (int n = 0; n < 4; ++n) {
    NodeMeasurements node;
    node.inventory.host = "node" + std::to_string(n);
    node.reference_job = {true, 60'000'000 + n * 700'000, 5'000'000, 0.25};
    m.nodes.push_back(node);
  }
  m.reference_job.steps = 12;
  m.reference_job.median_step_ns = 70'000'000;
  return m;
}

TEST(ReferenceJobChecks, AHealthyFleetPasses) {
  const std::vector<Check> checks = reference_job_checks(reference_fleet());
  ASSERT_EQ(checks.size(), 4u);
  for (const Check& check : checks) {
    EXPECT_EQ(check.name, "reference_job");
    EXPECT_EQ(check.verdict, Verdict::pass) << check.value;
  }
}

TEST(ReferenceJobChecks, ANamedStragglerBeyondNoiseFailsWithItsCause) {
  Measurements m = reference_fleet();
  m.nodes[2].reference_job = {true, 240'000'000, 900'000'000, 1.0};
  m.reference_job.stragglers = {{2, "slow compute", 0.97, "rank 2 arrived last ..."}};
  const std::vector<Check> checks = reference_job_checks(m);
  EXPECT_EQ(checks[2].verdict, Verdict::fail);
  EXPECT_NEAR(checks[2].ratio, 60.7 / 240, 0.01);
  EXPECT_NE(checks[2].value.find("straggler: slow compute"), std::string::npos) << checks[2].value;
  for (int n : {0, 1, 3}) EXPECT_EQ(checks[static_cast<size_t>(n)].verdict, Verdict::pass) << n;
  const Acceptance judged = judge(m);
  EXPECT_EQ(judged.verdict, Verdict::fail);
  EXPECT_NE(summary_text(judged).find("straggler: node2 (slow compute)"), std::string::npos) << summary_text(judged);
  EXPECT_NE(summary_json(judged, m).find(R"("straggler":{"host":"node2","cause":"slow compute")"), std::string::npos);
}

TEST(ReferenceJobChecks, NamedWithinNoiseOrSlowUnnamedIsARetest) {
  Measurements m = reference_fleet();
  m.reference_job.stragglers = {{1, "slow compute", 0.2, ""}};
  EXPECT_EQ(reference_job_checks(m)[1].verdict, Verdict::retest);
  m = reference_fleet();
  m.nodes[3].reference_job.own_step_ns = 200'000'000;
  EXPECT_EQ(reference_job_checks(m)[3].verdict, Verdict::retest) << "slow, but the analysis names no straggler";
}

TEST(ReferenceJobChecks, ANodeWithoutStepsFailsAndNoJobMeansNoCheck) {
  Measurements m = reference_fleet();
  m.nodes[0].reference_job = {};
  const std::vector<Check> checks = reference_job_checks(m);
  EXPECT_EQ(checks[0].verdict, Verdict::fail);
  EXPECT_EQ(checks[0].value, "no steps of the reference job recorded");
  for (NodeMeasurements& node : m.nodes) node.reference_job = {};
  EXPECT_TRUE(reference_job_checks(m).empty());
}

TEST(ReferenceJobSummary, NoStragglerIsNoneAndOneNodeSaysWhy) {
  Measurements m = reference_fleet();
  const Acceptance judged = judge(m);
  EXPECT_NE(summary_text(judged).find("reference job: 12 steps, median step 70.00 ms, CV 0.000, straggler: none"),
            std::string::npos) << summary_text(judged);
  EXPECT_NE(summary_json(judged, m).find(R"("reference_job":{"steps":12,"median_step_ms":70,"step_cv":0,"straggler":"none"})"),
            std::string::npos) << summary_json(judged, m);
  m.reference_job.unmeasured = "only rank 0 has data: there is no other rank to compare it with";
  EXPECT_NE(summary_json(judge(m), m).find(R"("straggler":null,"straggler_reason":"only rank 0 has data)"),
            std::string::npos);
}

}  // namespace
}  // namespace rankscope::acceptance
