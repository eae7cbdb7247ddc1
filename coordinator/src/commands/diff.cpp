// rankscope diff BASE NEW [--format text|json|html] [-o FILE] [--fail-on default]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "command.h"
#include "outputs.h"
#include "rankscope/analysis/analysis.h"
#include "rankscope/analysis/diff.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {
namespace {

struct DiffCommandOptions {
  std::string base, now;
  std::string format = "text";
  std::string output;
  bool overwrite = false;
  std::string fail_on;  // "default", or empty: the exit status says nothing of regressions
};

// The figures the default --fail-on gates on: the job's step and what it is spent waiting on.
constexpr const char* kGatedMetrics[] = {"step_ns", "exposed_wait_ns", "exposed_transfer_ns", "idle_ns",
                                         "data_loading_ns"};

bool is_baseline(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  in >> first;
  return first == "rankscope-baseline";
}

// A run's figures: a baseline's, or a timeline's report's.
analysis::RunFigures figures_of(const std::string& path) {
  if (is_baseline(path)) return analysis::read_baseline_file(path);
  const Timeline timeline(path);
  const analysis::Report report = analysis::make_report(timeline);
  warn_about_damage("diff", timeline);
  return analysis::run_figures(report);
}

int run_diff(const DiffCommandOptions& options) {
  std::vector<Output> outputs;
  if (!options.output.empty()) {
    outputs.push_back({"-o", options.output,
                       options.format == "json"   ? OutputKind::kDiffJson
                       : options.format == "html" ? OutputKind::kDiffHtml
                                                  : OutputKind::kDiffText});
  }
  check_files({options.base, options.now}, outputs, options.overwrite);
  std::error_code ignored;
  if (std::filesystem::equivalent(options.base, options.now, ignored)) {
    throw Error(options.now + " is " + options.base + " again: a run compared with itself changes nothing");
  }
  if (is_baseline(options.now)) throw Error(options.now + " is a baseline: the new run must be a timeline");
  std::optional<TextOutput> output;
  if (!options.output.empty()) output.emplace(options.output, options.overwrite);
  const analysis::DiffReport diff = analysis::diff_runs(figures_of(options.base), figures_of(options.now));
  const std::string text = options.format == "json"   ? analysis::diff_json(diff)
                           : options.format == "html" ? analysis::diff_html(diff)
                                                      : analysis::diff_text(diff);
  if (output) {
    output->write(text);
    std::fprintf(stderr, "rankscope diff: wrote %s\n", options.output.c_str());
  } else {
    std::fputs(text.c_str(), stdout);
  }
  if (options.fail_on.empty()) return 0;
  for (const analysis::Change& c : diff.changes) {
    if (!c.regression || c.rank >= 0) continue;
    for (const char* gated : kGatedMetrics) {
      if (c.metric == gated || c.metric.starts_with("gpu.idle.")) {
        std::fprintf(stderr, "rankscope diff: regression: %s from %.6g to %.6g %s (x%.3f, p = %.2g)\n", c.metric.c_str(),
                     c.base, c.now, c.unit.c_str(), c.ratio, c.p_value);
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

Command add_diff(CLI::App& parent) {
  auto options = std::make_shared<DiffCommandOptions>();
  CLI::App* app = parent.add_subcommand(
      "diff", "Compare two runs: every figure of the report, each change tested against the runs' step-to-step "
              "variation");
  app->add_option("base", options->base, "The base run: a timeline, or a baseline from `report --save-baseline`")
      ->required()
      ->check(kNonEmptyPath);
  app->add_option("new", options->now, "The new run: a timeline")->required()->check(kNonEmptyPath);
  app->add_option("--format", options->format, "text (one screen), json or html (one self-contained page)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  app->add_option("-o,--output", options->output, "Write the comparison to this file instead of stdout")
      ->check(kNonEmptyPath);
  add_overwrite_flag(*app, options->overwrite);
  app->add_option("--fail-on", options->fail_on,
                  "default: exit 1 when the job's step time, exposed wait or transfer, idle time, data loading or a "
                  "GPU idle cause regressed significantly")
      ->check(CLI::IsMember({"default"}));
  return {app, [options] {
            remove_temporary_paths_on_signals();
            return run_reporting_errors("diff", [&] { return run_diff(*options); }, 2);
          }};
}

}  // namespace rankscope::cli
