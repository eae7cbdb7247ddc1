// rankscope report TIMELINE [--format text|json|html] [-o FILE] [--save-baseline FILE]
#include <cstdio>
#include <optional>

#include "command.h"
#include "outputs.h"
#include "rankscope/analysis/analysis.h"
#include "rankscope/analysis/diff.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {
namespace {

struct ReportOptions {
  std::string timeline;
  std::string format = "text";
  std::string output;  // stdout when empty
  bool overwrite = false;
  bool hta_compat = false;
  std::string save_baseline;  // analysis::baseline_text of the report's figures
};

OutputKind report_kind(const std::string& format) {
  return format == "json" ? OutputKind::kReportJson : format == "html" ? OutputKind::kReportHtml : OutputKind::kReportText;
}

int run_report(const ReportOptions& options) {
  std::vector<Output> outputs;
  if (!options.output.empty()) outputs.push_back({"-o", options.output, report_kind(options.format)});
  if (!options.save_baseline.empty()) outputs.push_back({"--save-baseline", options.save_baseline, OutputKind::kReportBaseline});
  check_files({options.timeline}, outputs, options.overwrite);
  std::optional<TextOutput> output, baseline;
  if (!options.output.empty()) output.emplace(options.output, options.overwrite);
  if (!options.save_baseline.empty()) baseline.emplace(options.save_baseline, options.overwrite);
  analysis::Report report;
  {
    const Timeline timeline(options.timeline);
    report = analysis::make_report(timeline, {options.hta_compat});
    warn_about_damage("report", timeline);
  }
  if (baseline) {
    baseline->write(analysis::baseline_text(analysis::run_figures(report)));
    std::fprintf(stderr, "rankscope report: wrote the baseline %s\n", options.save_baseline.c_str());
  }
  const std::string text = options.format == "json"   ? analysis::report_json(report)
                           : options.format == "html" ? analysis::report_html(report)
                                                      : analysis::report_text(report);
  if (!output) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  output->write(text);
  std::fprintf(stderr, "rankscope report: wrote %s\n", options.output.c_str());
  return 0;
}

}  // namespace

Command add_report(CLI::App& parent) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* app = parent.add_subcommand(
      "report", "Analyze a timeline: stragglers and why, overlap, exposed communication, DDP buckets, FSDP units");
  app->add_option("timeline", options->timeline, "The HDF5 timeline")->required()->check(kNonEmptyPath);
  add_document_options(*app, "report", options->format, options->output, options->overwrite);
  app->add_option("--save-baseline", options->save_baseline,
                  "Also write the report's figures with their per-step samples to this file, for `rankscope diff`")
      ->check(kNonEmptyPath);
  app->add_flag("--hta-compat", options->hta_compat,
                "Overlap as Holistic Trace Analysis defines it (kernel names, its window and rounding)");
  return {app, [options] {
            remove_temporary_paths_on_signals();
            return run_reporting_errors("report", [&] { return run_report(*options); });
          }};
}

}  // namespace rankscope::cli
