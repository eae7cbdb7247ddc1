// --fail-on's rules judged on a comparison's figures (docs/diff.md, "Gating").
#include "rankscope/analysis/diff_rules.h"

#include <algorithm>
#include <cmath>

#include "rankscope/model/error.h"
#include "rankscope/model/text.h"

namespace rankscope::analysis {
namespace {

bool is_pattern(const std::string& metric) { return !metric.empty() && metric.back() == '*'; }

bool names(const ThresholdRule& rule, const std::string& metric) {
  if (!is_pattern(rule.metric)) return metric == rule.metric;
  return metric.starts_with(std::string_view(rule.metric).substr(0, rule.metric.size() - 1));
}

// Whether a metric (or the figures a pattern begins) can be one of diff's.
bool known_metric(const std::string& metric, const std::vector<std::string>& families) {
  const bool pattern = is_pattern(metric);
  const std::string_view stem = pattern ? std::string_view(metric).substr(0, metric.size() - 1) : metric;
  return std::any_of(families.begin(), families.end(), [&](const std::string& family) {
    const bool of_many = family.back() == ':';
    if (pattern) return family.starts_with(stem) || (of_many && stem.starts_with(family));
    return of_many ? stem.size() > family.size() && stem.starts_with(family) : stem == family;
  });
}

std::string figures_of(const Change& c) {
  std::string text = figure_text(c.base, c.unit) + " -> " + figure_text(c.now, c.unit);
  if (std::isfinite(c.ratio)) text += printf_string(" (x%.3f", c.ratio);
  else text += " (";
  if (c.p_value >= 0) text += printf_string("%sp = %.2g", std::isfinite(c.ratio) ? ", " : "", c.p_value);
  return text + ")";
}

// One rule on one figure; kept when nothing is to be said.
RuleVerdict judge(const ThresholdRule& rule, const Change& c) {
  using Outcome = RuleVerdict::Outcome;
  RuleVerdict v{rule.text + " (" + rule.where + ")", c.metric, c.rank, Outcome::kept, {}};
  const auto verdict = [&](Outcome outcome, std::string why) {
    v.outcome = outcome;
    v.why = std::move(why);
    return v;
  };
  if (!std::isfinite(c.now)) {
    return verdict(Outcome::broken, "not measured in the new run (" + figure_text(c.base, c.unit) + " in the base run)");
  }
  if (!rule.of_baseline) {
    if (keeps_rule(rule, c.now)) return v;
    return verdict(Outcome::broken, figure_text(c.now, c.unit) + " against " +
                                        (rule.at_least ? "at least " : "at most ") + figure_text(rule.threshold, c.unit));
  }
  if (!std::isfinite(c.base)) {
    return verdict(Outcome::not_judged, "only in the new run, nothing to hold it against");
  }
  // A figure measured per step must have changed beyond the runs' own noise
  // too; one of one value a run has only its threshold to judge it.
  if (!c.single_value && !c.untested.empty()) return verdict(Outcome::not_judged, c.untested);
  if (keeps_rule(rule, c.now, c.base) || (!c.single_value && !c.significant)) return v;
  return verdict(Outcome::broken, figures_of(c) + (c.single_value ? ", one value a run: not tested" : ""));
}

}  // namespace

std::vector<ThresholdRule> read_diff_rules(const std::string& path) {
  const std::vector<std::string> families = figure_families();
  std::vector<ThresholdRule> rules;
  for (const WordLine& line : read_word_lines(path, "rule file")) {
    ThresholdRule rule = parse_threshold_rule(line);
    if (!known_metric(rule.metric, families)) {
      std::string known;
      for (const std::string& family : families) known += (known.empty() ? "" : ", ") + family + (family.back() == ':' ? "NAME" : "");
      throw Error(line.where + ": no figure of diff's is named '" + rule.metric + "' (known: " + known +
                  "; a name may end in '*')");
    }
    rules.push_back(std::move(rule));
  }
  if (rules.empty()) throw Error(path + ": no rule in the file (a rule is METRIC <= VALUE [baseline])");
  return rules;
}

std::vector<ThresholdRule> default_diff_rules() {
  std::vector<ThresholdRule> rules;
  for (const char* metric :
       {"step_ns", "exposed_wait_ns", "exposed_transfer_ns", "idle_ns", "data_loading_ns", "gpu.idle.*"}) {
    rules.push_back({metric, false, 1.0, true, std::string(metric) + " <= 1 baseline", "default"});
  }
  return rules;
}

void judge_rules(DiffReport& diff, const std::vector<ThresholdRule>& rules, const std::string& source) {
  using Outcome = RuleVerdict::Outcome;
  diff.rules_source = source;
  diff.verdicts.clear();
  diff.rules_kept = 0;
  for (const ThresholdRule& rule : rules) {
    // The job's figure where there is one; each rank's where only ranks have it (peak memory).
    std::vector<const Change*> named;
    for (bool job : {true, false}) {
      for (const Change& c : diff.changes)
        if ((c.rank < 0) == job && names(rule, c.metric)) named.push_back(&c);
      if (!named.empty()) break;
    }
    if (named.empty()) {
      diff.verdicts.push_back({rule.text + " (" + rule.where + ")", rule.metric, -1,
                               is_pattern(rule.metric) ? Outcome::not_judged : Outcome::broken,
                               is_pattern(rule.metric) ? "no figure of either run begins with " +
                                                             rule.metric.substr(0, rule.metric.size() - 1)
                                                       : "not measured in either run"});
      continue;
    }
    for (const Change* c : named) {
      RuleVerdict v = judge(rule, *c);
      if (v.outcome == Outcome::kept) ++diff.rules_kept;
      else diff.verdicts.push_back(std::move(v));
    }
  }
  std::stable_sort(diff.verdicts.begin(), diff.verdicts.end(), [](const RuleVerdict& a, const RuleVerdict& b) {
    return (a.outcome == Outcome::broken) > (b.outcome == Outcome::broken);
  });
}

}  // namespace rankscope::analysis
