// Rule files and baselines: reading them, writing a baseline, and judging a
// run by them.
#include "rankscope/acceptance/rules.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "figures.h"
#include "group_testing.h"
#include "rankscope/model/error.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"

namespace rankscope::acceptance {
namespace {

constexpr std::string_view kBaselineHeader = "rankscope-accept-baseline";
constexpr int kBaselineVersion = 1;
// SuperBench's defect rule: a figure more than 5 % worse than its baseline.
constexpr double kDefaultBaselineTolerance = 0.05;

const MetricInfo* metric_named(std::string_view name) {
  for (const MetricInfo& info : known_metrics())
    if (info.name == name) return &info;
  return nullptr;
}

std::string metric_list() {
  std::string names;
  for (const MetricInfo& info : known_metrics()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

std::string figure(double value, const MetricInfo& info) { return printf_string("%.4g ", value) + std::string(info.unit); }

}  // namespace

const std::vector<MetricInfo>& known_metrics() {
  static const std::vector<MetricInfo> metrics = {
      {"compute_gflops", Subject::node, true, "GFLOP/s", "a node's GEMM throughput, the upper quartile of its repeats"},
      {"memory_gbps", Subject::node, true, "GB/s", "a node's triad bandwidth, the upper quartile of its repeats"},
      {"gpu.compute_tflops", Subject::node, true, "TFLOP/s", "the slowest GPU of a node: its bf16 GEMM throughput, the upper quartile of its repeats"},
      {"gpu.memory_gbps", Subject::node, true, "GB/s", "the slowest GPU of a node: its device-memory triad bandwidth, the upper quartile of its repeats"},
      {"gpu.sustained_tflops", Subject::node, true, "TFLOP/s", "the slowest GPU of a node: its bf16 GEMM held on every GPU at once, the median of the last half of its one-second slices"},
      {"link.bandwidth_gbps", Subject::link, true, "GB/s", "a link's bandwidth, the slower direction, the upper quartile of its repeats"},
      {"link.latency_us", Subject::link, false, "us", "a link's latency, half its shortest round trip, the lower quartile of its repeats"},
  };
  return metrics;
}

std::vector<MetricValue> metric_values(const Measurements& in) {
  std::vector<MetricValue> values;
  for (size_t n = 0; n < in.nodes.size(); ++n) {
    if (!in.nodes[n].gemm_gflops.empty()) values.push_back({"compute_gflops", n, upper_quartile(in.nodes[n].gemm_gflops)});
    if (!in.nodes[n].triad_gbps.empty()) values.push_back({"memory_gbps", n, upper_quartile(in.nodes[n].triad_gbps)});
    const auto slowest_gpu = [&](std::string_view metric, std::vector<double> GpuMeasurements::*repeats,
                                 double (*figure)(const std::vector<double>&)) {
      std::optional<double> slowest;
      for (const GpuMeasurements& gpu : in.nodes[n].gpus)
        if (!(gpu.*repeats).empty()) slowest = std::min(slowest.value_or(INFINITY), figure(gpu.*repeats));
      if (slowest) values.push_back({metric, n, *slowest});
    };
    slowest_gpu("gpu.compute_tflops", &GpuMeasurements::gemm_tflops, upper_quartile);
    slowest_gpu("gpu.memory_gbps", &GpuMeasurements::triad_gbps, upper_quartile);
    slowest_gpu("gpu.sustained_tflops", &GpuMeasurements::sustained_tflops, held_figure);
  }
  for (size_t l = 0; l < in.links.size(); ++l) {
    if (!in.links[l].bandwidth_gbps.empty()) values.push_back({"link.bandwidth_gbps", l, upper_quartile(in.links[l].bandwidth_gbps)});
    if (!in.links[l].latency_us.empty()) values.push_back({"link.latency_us", l, lower_quartile(in.links[l].latency_us)});
  }
  return values;
}

RuleFile read_rule_file(const std::string& path) {
  RuleFile file;
  for (const WordLine& line : read_word_lines(path, "rule file")) {
    const std::vector<std::string>& w = line.words;
    const auto fail = [&](const std::string& why) { throw Error(line.where + ": " + why); };
    if (w[0].starts_with("fleet.")) {
      if (w.size() != 2) fail("a fleet setting is NAME VALUE, as in 'fleet.fail_below 0.8'");
      const std::optional<double> value = parse_finite_number(w[1]);
      if (!value || *value <= 0) fail("'" + w[1] + "' is no positive number");
      if (w[0] == "fleet.fail_below") file.fleet.fail_below = *value;
      else if (w[0] == "fleet.retest_below") file.fleet.retest_below = *value;
      else if (w[0] == "fleet.robust_z") file.fleet.robust_z = *value;
      else fail("unknown fleet setting '" + w[0] + "' (fleet.fail_below, fleet.retest_below, fleet.robust_z)");
      continue;
    }
    ThresholdRule rule = parse_threshold_rule(line);
    if (!metric_named(rule.metric)) fail("unknown metric '" + rule.metric + "' (known: " + metric_list() + ")");
    file.rules.push_back(std::move(rule));
  }
  if (file.fleet.fail_below > file.fleet.retest_below) {
    throw Error(path + ": fleet.fail_below " + printf_string("%g", file.fleet.fail_below) +
                " lies above fleet.retest_below " + printf_string("%g", file.fleet.retest_below));
  }
  return file;
}

Baseline read_baseline(const std::string& path) {
  Baseline baseline;
  baseline.path = path;
  const std::vector<WordLine> lines = read_word_lines(path, "baseline");
  if (lines.empty() || lines[0].words.size() != 2 || lines[0].words[0] != kBaselineHeader) {
    throw Error(path + ": not a baseline of rankscope accept (it starts with '" + std::string(kBaselineHeader) +
                " " + std::to_string(kBaselineVersion) + "', written by --save-baseline)");
  }
  if (lines[0].words[1] != std::to_string(kBaselineVersion)) {
    throw Error(lines[0].where + ": baseline version " + lines[0].words[1] + ", this rankscope reads version " +
                std::to_string(kBaselineVersion));
  }
  std::map<std::string, std::string> named_at;  // each name's line: a name given twice is a mistake, not an update
  for (size_t i = 1; i < lines.size(); ++i) {
    const WordLine& line = lines[i];
    if (line.words.size() != 2) throw Error(line.where + ": expected NAME VALUE");
    const std::string& name = line.words[0];
    if (const auto [earlier, first] = named_at.emplace(name, line.where); !first) {
      throw Error(line.where + ": '" + name + "' again (first at " + earlier->second + "): a baseline holds each figure once");
    }
    if (name == "level") {
      baseline.level = line.words[1];
    } else if (name == "nodes") {
      const std::optional<int> nodes = parse_integer<int>(line.words[1]);
      if (!nodes || *nodes < 1) throw Error(line.where + ": '" + line.words[1] + "' is no number of nodes");
      baseline.nodes = *nodes;
    } else {
      if (name != "ring_gbps" && !metric_named(name)) {
        throw Error(line.where + ": unknown metric '" + name + "' (known: " + metric_list() + ", ring_gbps)");
      }
      const std::optional<double> value = parse_finite_number(line.words[1]);
      if (!value || *value <= 0) throw Error(line.where + ": '" + line.words[1] + "' is no positive figure");
      (name == "ring_gbps" ? baseline.ring_gbps : baseline.metrics[name]) = *value;
    }
  }
  if (baseline.level.empty()) throw Error(path + ": the baseline names no level");
  if (baseline.metrics.empty() && baseline.ring_gbps <= 0) {
    throw Error(path + ": the baseline holds no figure (" + metric_list() + ", ring_gbps): it would judge nothing");
  }
  return baseline;
}

std::string baseline_text(const Measurements& measurements, std::string_view level) {
  std::map<std::string_view, std::vector<double>> figures;
  for (const MetricValue& value : metric_values(measurements)) figures[value.metric].push_back(value.value);
  std::string text = "# The fleet's median of each metric of a healthy run; rankscope accept --baseline reads it.\n" +
                     std::string(kBaselineHeader) + " " + std::to_string(kBaselineVersion) + "\nlevel " +
                     std::string(level) + "\nnodes " + std::to_string(measurements.nodes.size()) + "\n";
  for (const MetricInfo& info : known_metrics()) {
    const auto found = figures.find(info.name);
    if (found != figures.end()) text += std::string(info.name) + " " + printf_string("%.6g", median(found->second, 0)) + "\n";
  }
  if (!measurements.ring_tests.empty())
    text += "ring_gbps " + printf_string("%.6g", ring_reference(measurements.ring_tests, {}).median_gbps()) + "\n";
  return text;
}

std::vector<ThresholdRule> default_baseline_rules(const Baseline& baseline) {
  std::vector<ThresholdRule> rules;
  for (const MetricInfo& info : known_metrics()) {
    if (!baseline.metrics.contains(std::string(info.name))) continue;
    const double threshold = info.higher_is_better ? 1 - kDefaultBaselineTolerance : 1 + kDefaultBaselineTolerance;
    rules.push_back({std::string(info.name), info.higher_is_better, threshold, true,
                     std::string(info.name) + (info.higher_is_better ? " >= " : " <= ") + printf_string("%.2f", threshold) +
                         " baseline",
                     "default"});
  }
  return rules;
}

void check_rules(const std::vector<ThresholdRule>& rules, const Baseline* baseline, std::string_view level) {
  if (baseline && baseline->level != level) {
    throw Error(baseline->path + ": a baseline of level " + baseline->level + " cannot judge a run of level " +
                std::string(level));
  }
  for (const ThresholdRule& rule : rules) {
    if (!rule.of_baseline) continue;
    if (!baseline) throw Error(rule.where + ": '" + rule.text + "' needs a baseline (--baseline FILE)");
    if (!baseline->metrics.contains(rule.metric)) {
      throw Error(rule.where + ": '" + rule.text + "': the baseline " + baseline->path + " has no " + rule.metric);
    }
  }
}

void apply_rules(Acceptance& out, const Measurements& in, const std::vector<ThresholdRule>& rules, const Baseline* baseline) {
  const std::vector<MetricValue> values = metric_values(in);
  for (const ThresholdRule& rule : rules) {
    const MetricInfo& info = *metric_named(rule.metric);
    const double reference = rule.of_baseline ? baseline->metrics.at(rule.metric) : 1;
    const double limit = rule.threshold * reference;
    const std::string rule_text = rule.text + " (" + rule.where + ")";
    const std::string limit_text = rule.of_baseline ? figure(reference, info) + " (baseline " + baseline->path + ")"
                                                    : figure(limit, info);
    const size_t subjects = info.subject == Subject::node ? in.nodes.size() : in.links.size();
    std::vector<const MetricValue*> figure_of(subjects, nullptr);
    for (const MetricValue& value : values)
      if (value.metric == rule.metric) figure_of[value.index] = &value;
    for (size_t s = 0; s < subjects; ++s) {
      const MetricValue* measured = figure_of[s];
      const bool broken = !measured || !keeps_rule(rule, measured->value, reference);
      const double ratio = !measured || reference <= 0 ? 0
                           : info.higher_is_better   ? measured->value / reference
                                                     : reference / std::max(measured->value, 1e-300);
      const std::string value = measured ? figure(measured->value, info) : "not measured";
      if (info.subject == Subject::node) {
        out.nodes[s].checks.push_back({"rule " + rule.metric, value, limit_text, rule.of_baseline ? ratio : 1, rule_text,
                                       broken ? Verdict::fail : Verdict::pass});
        if (broken) out.nodes[s].verdict = Verdict::fail;
      } else if (broken) {
        LinkVerdict& link = out.links[s];
        link.verdict = Verdict::fail;
        link.cause += (link.cause.empty() ? "" : "; ") + std::string("rule ") + rule_text + ": " + value + " against " + limit_text;
      }
      if (broken) out.verdict = Verdict::fail;
    }
  }
}

}  // namespace rankscope::acceptance
