// rankscope report TIMELINE [--format text|json|html] [-o FILE]
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "command.h"
#include "rankscope/analysis/analysis.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {
namespace {

struct ReportOptions {
  std::string timeline;
  std::string format = "text";
  std::string output;  // stdout when empty
  bool hta_compat = false;
};

int run_report(const ReportOptions& options) {
  analysis::Report report;
  {
    const Timeline timeline(options.timeline);
    report = analysis::make_report(timeline, {options.hta_compat});
    warn_about_damage("report", timeline);
  }
  try {
    analysis::write_collectives_table(options.timeline, report.profile);
  } catch (const Error& e) {
    std::fprintf(stderr, "rankscope report: warning: the collectives table was not written: %s\n", e.what());
  }
  const std::string text = options.format == "json"   ? analysis::report_json(report)
                           : options.format == "html" ? analysis::report_html(report)
                                                      : analysis::report_text(report);
  if (options.output.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  std::FILE* file = std::fopen(options.output.c_str(), "w");
  if (!file || std::fwrite(text.data(), 1, text.size(), file) != text.size() || std::fclose(file) != 0) {
    throw Error("cannot write " + options.output + ": " + std::strerror(errno));
  }
  std::fprintf(stderr, "rankscope report: wrote %s\n", options.output.c_str());
  return 0;
}

}  // namespace

Command add_report(CLI::App& parent) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* app = parent.add_subcommand(
      "report", "Analyze a timeline: stragglers and why, overlap, exposed communication, DDP buckets, FSDP units");
  app->add_option("timeline", options->timeline, "The HDF5 timeline")->required();
  app->add_option("--format", options->format, "text (one screen), json or html (one self-contained page)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  app->add_option("-o,--output", options->output, "Write the report to this file instead of stdout");
  app->add_flag("--hta-compat", options->hta_compat,
                "Overlap as Holistic Trace Analysis defines it (kernel names, its window and rounding)");
  return {app, [options] { return run_reporting_errors("report", [&] { return run_report(*options); }); }};
}

}  // namespace rankscope::cli
