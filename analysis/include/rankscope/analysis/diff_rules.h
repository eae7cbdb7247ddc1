// --fail-on: the thresholds a comparison must keep for CI to pass, written as
// accept's rules (model/threshold_rules.h) on diff's figures. Semantics:
// docs/diff.md, "Gating".
#pragma once

#include <string>
#include <vector>

#include "rankscope/analysis/diff.h"
#include "rankscope/model/threshold_rules.h"

namespace rankscope::analysis {

// A rule file; throws Error naming FILE:LINE where a line is no rule or names
// no figure of diff's (a metric may end in '*' for every figure it begins).
std::vector<ThresholdRule> read_diff_rules(const std::string& path);

// The rules of `--fail-on default`: the job's step time and what it is spent
// waiting on must not regress significantly.
std::vector<ThresholdRule> default_diff_rules();

// Judges each rule on every figure it names: the job's, or each rank's where
// the job has none (peak memory, capture cost). A rule with `baseline` holds
// the new figure against the base's and, where the figure is measured per
// step, breaks only on a significant change; one without holds the new
// figure alone. A named figure missing from the new run breaks its rule.
// Fills diff's rules_source, verdicts and rules_kept.
void judge_rules(DiffReport& diff, const std::vector<ThresholdRule>& rules, const std::string& source);

}  // namespace rankscope::analysis
