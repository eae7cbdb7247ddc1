// rankscope diff BASE NEW [--format text|json|html] [-o FILE] [--fail-on default|RULES]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "command.h"
#include "outputs.h"
#include "rankscope/analysis/report.h"
#include "rankscope/analysis/diff.h"
#include "rankscope/analysis/diff_rules.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {
namespace {

struct DiffCommandOptions {
  std::string base, now;
  std::string format = "text";
  std::string output;
  bool overwrite = false;
  std::string fail_on;  // "default", a rule file, or empty: the exit status says nothing of regressions
};

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
  keep_freed_memory_for_the_analyses();
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
  std::vector<std::string> inputs = {options.base, options.now};
  if (!options.fail_on.empty() && options.fail_on != "default") inputs.push_back(options.fail_on);
  check_files(inputs, outputs, options.overwrite);
  std::error_code ignored;
  if (std::filesystem::equivalent(options.base, options.now, ignored)) {
    throw Error(options.now + " is " + options.base + " again: a run compared with itself changes nothing");
  }
  if (is_baseline(options.now)) throw Error(options.now + " is a baseline: the new run must be a timeline");
  // The rules first: a mistake in them is found before the runs are read.
  std::vector<ThresholdRule> rules;
  if (options.fail_on == "default") rules = analysis::default_diff_rules();
  else if (!options.fail_on.empty()) rules = analysis::read_diff_rules(options.fail_on);
  std::optional<TextOutput> output;
  if (!options.output.empty()) output.emplace(options.output, options.overwrite);
  analysis::DiffReport diff = analysis::diff_runs(figures_of(options.base), figures_of(options.now));
  if (!rules.empty()) analysis::judge_rules(diff, rules, options.fail_on);
  const std::string text = options.format == "json"   ? analysis::diff_json(diff)
                           : options.format == "html" ? analysis::diff_html(diff)
                                                      : analysis::diff_text(diff);
  if (output) {
    output->write(text);
    std::fprintf(stderr, "rankscope diff: wrote %s\n", options.output.c_str());
  } else {
    std::fputs(text.c_str(), stdout);
  }
  for (const analysis::RuleVerdict& v : diff.verdicts) {
    if (v.outcome != analysis::RuleVerdict::Outcome::broken) continue;
    std::fprintf(stderr, "rankscope diff: rule broken: %s: %s%s: %s\n", v.rule.c_str(), v.metric.c_str(),
                 v.rank < 0 ? "" : (" (rank " + std::to_string(v.rank) + ")").c_str(), v.why.c_str());
  }
  return diff.rule_broken() ? 1 : 0;
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
                  "Exit 1 when a rule breaks. default: the job's step time, exposed wait or transfer, idle time, "
                  "data loading or a GPU idle cause regressed significantly; or a rule file, one "
                  "'METRIC <= VALUE [baseline]' a line (docs/diff.md, \"Gating\")")
      ->check(kNonEmptyPath);
  return {app, [options] {
            remove_temporary_paths_on_signals();
            return run_reporting_errors("diff", [&] { return run_diff(*options); }, 2);
          }};
}

}  // namespace rankscope::cli
