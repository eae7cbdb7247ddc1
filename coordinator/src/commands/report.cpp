// rankscope report TIMELINE [--format text|json|html] [-o FILE] [--save-baseline FILE],
// under mpirun too: the processes share the reading of the ranks.
#include <cstdio>
#include <optional>

#include "command.h"
#include "outputs.h"
#include "rankscope/analysis/report.h"
#include "rankscope/analysis/diff.h"
#include "rankscope/model/error.h"
#include "rankscope/mpi_exchange/gather.h"
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

// The processes of `mpirun -n K rankscope report` exchange their parts of the profile through MPI.
analysis::WorkShare mpi_work_share(int process, int processes) {
  if (processes == 1) return {};
  return {process, processes, [](const std::string& local) { return allgather_strings(MPI_COMM_WORLD, {local}); }};
}

// Every process reads its share of the ranks; process 0 alone checks and
// writes the outputs, with what every process then holds.
void run_report(const ReportOptions& options, const analysis::WorkShare& share) {
  std::vector<Output> outputs;
  if (!options.output.empty()) outputs.push_back({"-o", options.output, report_kind(options.format)});
  if (!options.save_baseline.empty()) outputs.push_back({"--save-baseline", options.save_baseline, OutputKind::kReportBaseline});
  std::optional<TextOutput> output, baseline;
  analysis::exchange(share, [&] {
    if (share.process != 0) return std::string();
    check_files({options.timeline}, outputs, options.overwrite);
    if (!options.output.empty()) output.emplace(options.output, options.overwrite);
    if (!options.save_baseline.empty()) baseline.emplace(options.save_baseline, options.overwrite);
    return std::string();
  });
  analysis::Report report;
  keep_freed_memory_for_the_analyses();
  {
    const Timeline timeline(options.timeline);
    report = analysis::make_report(timeline, {options.hta_compat}, share);
    if (share.process == 0) warn_about_damage("report", timeline);
  }
  if (share.process != 0) return;
  if (baseline) {
    baseline->write(analysis::baseline_text(analysis::run_figures(report)));
    std::fprintf(stderr, "rankscope report: wrote the baseline %s\n", options.save_baseline.c_str());
  }
  const std::string text = options.format == "json"   ? analysis::report_json(report)
                           : options.format == "html" ? analysis::report_html(report)
                                                      : analysis::report_text(report);
  if (!output) {
    std::fputs(text.c_str(), stdout);
    return;
  }
  output->write(text);
  std::fprintf(stderr, "rankscope report: wrote %s\n", options.output.c_str());
}

}  // namespace

Command add_report(CLI::App& parent) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* app = parent.add_subcommand(
      "report", "Analyze a timeline: stragglers and why, overlap, exposed communication, DDP buckets, FSDP units (runs under mpirun too)");
  app->add_option("timeline", options->timeline, "The HDF5 timeline")->required()->check(kNonEmptyPath);
  add_document_options(*app, "report", options->format, options->output, options->overwrite);
  app->add_option("--save-baseline", options->save_baseline,
                  "Also write the report's figures with their per-step samples to this file, for `rankscope diff`")
      ->check(kNonEmptyPath);
  app->add_flag("--hta-compat", options->hta_compat,
                "Overlap as Holistic Trace Analysis defines it (kernel names, its window and rounding)");
  return {app, [options] {
            // Alone, it needs no MPI, whose start would cost a small report more than the report.
            if (!started_by_mpi_launcher()) {
              remove_temporary_paths_on_signals();
              return run_reporting_errors("report", [&] {
                run_report(*options, {});
                return 0;
              });
            }
            return run_under_mpi("report", LoneRankZero::kGoesOn, [&](int process, int processes) {
              run_report(*options, mpi_work_share(process, processes));
            });
          }};
}

}  // namespace rankscope::cli
