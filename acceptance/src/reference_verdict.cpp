// The reference job's verdicts and its section of the summary: pure
// functions of what the job profile and the straggler analysis found.
#include <algorithm>

#include "fleet.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/json.h"
#include "rankscope/model/text.h"

namespace rankscope::acceptance {
namespace {

double milliseconds(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// A job-wide finding (rotating stragglers, workload imbalance) names no node.
std::string host_of(const NamedStraggler& named, const std::vector<NodeVerdict>& nodes) {
  return named.node >= 0 && static_cast<size_t>(named.node) < nodes.size() ? nodes[static_cast<size_t>(named.node)].host
                                                                            : "no single node";
}

const NamedStraggler* straggler_of(const ReferenceJob& job, int node) {
  for (const NamedStraggler& named : job.stragglers)
    if (named.node == node) return &named;
  return nullptr;
}

}  // namespace

std::vector<Check> reference_job_checks(const Measurements& in, const Rules& rules) {
  std::vector<Check> checks;
  // Speeds, so that higher is better as Fleet wants: steps per second of the node's own work.
  std::vector<double> speeds;
  for (const NodeMeasurements& node : in.nodes)
    if (node.reference_job.measured && node.reference_job.own_step_ns > 0)
      speeds.push_back(1e9 / static_cast<double>(node.reference_job.own_step_ns));
  if (speeds.empty()) return checks;
  const Fleet fleet(speeds);
  const double median_ms = fleet.median > 0 ? 1e3 / fleet.median : 0;
  const std::string rule = "named a straggler by the straggler analysis (docs/report-stragglers.md) and " +
                           rule_text(rules, "the fleet median") + ": fail; named within noise, or slow without being "
                           "named: retest";
  for (size_t n = 0; n < in.nodes.size(); ++n) {
    const ReferenceJobNode& node = in.nodes[n].reference_job;
    Check check{"reference_job", "", printf_string("%.2f ms", median_ms) + " (fleet median)", 0, rule, Verdict::fail};
    if (!node.measured || node.own_step_ns <= 0) {
      check.value = "no steps of the reference job recorded";
      checks.push_back(check);
      continue;
    }
    const auto [verdict, ratio] = fleet.judge(1e9 / static_cast<double>(node.own_step_ns), rules);
    check.ratio = ratio;
    check.value = printf_string("%.2f ms", milliseconds(node.own_step_ns)) + " own time per step" +
                  printf_string(", last to %.0f %%", 100 * node.last_arriver_rate) +
                  " of the gradient allreduces" + printf_string(", others waited %.1f ms for it", milliseconds(node.blame_ns));
    const NamedStraggler* named = straggler_of(in.reference_job, static_cast<int>(n));
    if (named) {
      check.value += "; straggler: " + named->cause + printf_string(" (score %.3f)", named->score);
      check.verdict = verdict == Verdict::fail ? Verdict::fail : Verdict::retest;
    } else {
      check.verdict = verdict == Verdict::pass ? Verdict::pass : Verdict::retest;
    }
    checks.push_back(check);
  }
  return checks;
}

std::string reference_job_text(const ReferenceJob& job, const std::vector<NodeVerdict>& nodes) {
  if (job.steps == 0) return "";
  std::string text = "\nreference job: " + std::to_string(job.steps) + " steps, median step " +
                     printf_string("%.2f ms", milliseconds(job.median_step_ns)) + printf_string(", CV %.3f", job.step_cv) +
                     ", straggler: ";
  if (!job.unmeasured.empty()) return text + "n/a (" + job.unmeasured + ")\n";
  if (job.stragglers.empty()) return text + "none\n";
  for (size_t i = 0; i < job.stragglers.size(); ++i) {
    const NamedStraggler& named = job.stragglers[i];
    text += (i > 0 ? "; " : "") + host_of(named, nodes) + " (" + named.cause + ")";
  }
  return text + "\n";
}

void write_reference_job_json(JsonWriter& json, const ReferenceJob& job, const std::vector<NodeVerdict>& nodes) {
  json.begin_object().key("steps").value(job.steps).key("median_step_ms").value(milliseconds(job.median_step_ns))
      .key("step_cv").value(job.step_cv).key("straggler");
  if (!job.unmeasured.empty()) {
    json.null().key("straggler_reason").value(job.unmeasured);
  } else if (job.stragglers.empty()) {
    json.value("none");
  } else {
    const NamedStraggler& first = job.stragglers.front();
    json.begin_object().key("host").value(host_of(first, nodes)).key("cause").value(first.cause)
        .key("score").value(first.score).key("evidence").value(first.evidence).end_object();
  }
  json.end_object();
}

}  // namespace rankscope::acceptance
