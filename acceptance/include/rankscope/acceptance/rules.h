// Rules as data: a rule file of thresholds on the acceptance run's metrics,
// absolute or against a baseline, and the baseline itself, written from a
// healthy run (`--save-baseline`) as the fleet's median of each metric.
// Formats: docs/accept.md, "Rules and baselines".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/threshold_rules.h"

namespace rankscope::acceptance {

// What a metric is measured on, so that a rule on it judges every node or link
// it belongs to.
enum class Subject { node, link };

struct MetricInfo {
  std::string_view name;  // e.g. "compute_gflops"
  Subject subject;
  bool higher_is_better;
  std::string_view unit;
  std::string_view what;  // for the documentation and for errors listing the metrics
};
const std::vector<MetricInfo>& known_metrics();

// One figure of a metric: its subject's index (into Measurements::nodes
// or links), and the figure the verdicts use (a node's best
// repeat, a link's best bandwidth and shortest latency).
struct MetricValue {
  std::string_view metric;
  size_t index = 0;
  double value = 0;
};
std::vector<MetricValue> metric_values(const Measurements& measurements);

struct RuleFile {
  Rules fleet;                // the fleet comparison's thresholds ("fleet.fail_below 0.8", ...)
  std::vector<ThresholdRule> rules;
};
// Throws Error naming FILE:LINE and what is wrong there.
RuleFile read_rule_file(const std::string& path);

struct Baseline {
  std::string path;
  std::string level;                      // quick or full: figures of one level only compare with that level
  int nodes = 0;
  std::map<std::string, double> metrics;  // the fleet's median of each metric
  // Group testing's median ring of the first round (GB/s), from a run that
  // tested groups; 0 when it did not. It judges the rings of later runs
  // (Rules::ring_baseline_gbps).
  double ring_gbps = 0;
};
// Throws Error naming FILE:LINE and what is wrong there.
Baseline read_baseline(const std::string& path);
std::string baseline_text(const Measurements& measurements, std::string_view level);

// The rules that hold when a baseline is given and no rule on a metric is:
// every metric of the baseline within 5 % of it (SuperBench's defect rule).
std::vector<ThresholdRule> default_baseline_rules(const Baseline& baseline);

// Refuses rules against a baseline that is absent or lacks their metric, and a
// baseline of another level. Throws Error naming the rule's FILE:LINE or the baseline.
void check_rules(const std::vector<ThresholdRule>& rules, const Baseline* baseline, std::string_view level);

// Judges every subject of every rule's metric: a figure beyond the threshold
// fails, and so does a figure the rule needs that was not measured (a missing
// measurement is no pass). The failures join the verdicts' evidence.
void apply_rules(Acceptance& acceptance, const Measurements& measurements, const std::vector<ThresholdRule>& rules,
                 const Baseline* baseline);

}  // namespace rankscope::acceptance
