// mpirun -n NODES rankscope accept [--level quick|full] [--format text|json|html] [-o FILE]
#include <cstdio>
#include <optional>

#include "command.h"
#include "outputs.h"
#include "rankscope/acceptance/acceptance.h"
#include "rankscope/acceptance/measure.h"
#include "rankscope/model/error.h"

namespace rankscope::cli {
namespace {

OutputKind accept_kind(const std::string& format) {
  return format == "json" ? OutputKind::kAcceptJson : format == "html" ? OutputKind::kAcceptHtml : OutputKind::kAcceptText;
}

std::string summary(const std::string& format, const acceptance::Acceptance& judged,
                    const acceptance::Measurements& measured) {
  return format == "json"   ? acceptance::summary_json(judged, measured)
         : format == "html" ? acceptance::summary_html(judged, measured)
                            : acceptance::summary_text(judged);
}

}  // namespace

Command add_accept(CLI::App& parent) {
  struct Options {
    std::string level = "quick";
    std::string format = "text";
    std::string output;  // stdout when empty
    bool overwrite = false;
    bool one_at_a_time = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* app = parent.add_subcommand(
      "accept", "Cluster acceptance: run under mpirun with one rank per node; measures every node and every link and "
                "judges them (exit status 1 when anything fails)");
  app->add_option("--level", options->level, "quick (a minute or less) or full")
      ->check(CLI::IsMember({"quick", "full"}));
  app->add_flag("--one-at-a-time", options->one_at_a_time,
               "Measure one node and one link at a time (slower): for nodes that share cores, memory or an uplink, "
               "such as virtual machines on one host or test hosts");
  add_document_options(*app, "summary", options->format, options->output, options->overwrite);
  return {app, [options] {
            int verdict = 0;
            const int status = run_under_mpi("accept", [&](int process, int processes) {
              // Before anything is measured, so that a wrong -o costs no measurement.
              std::optional<TextOutput> output;
              run_on_process_0(MPI_COMM_WORLD, [&] {
                if (options->output.empty()) return;
                check_files({}, {{"-o", options->output, accept_kind(options->format)}}, options->overwrite);
                output.emplace(options->output);
              });
              int local_size = 1;
              MPI_Comm node;
              MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, process, MPI_INFO_NULL, &node);
              MPI_Comm_size(node, &local_size);
              MPI_Comm_free(&node);
              int most_on_a_node = 0;
              MPI_Allreduce(&local_size, &most_on_a_node, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
              if (most_on_a_node > 1) {
                throw Error("accept runs one rank per node, but a node has " + std::to_string(most_on_a_node) +
                            " (mpirun --map-by ppr:1:node, or --npernode 1)");
              }
              acceptance::Level level = acceptance::level_named(options->level);
              level.one_at_a_time = options->one_at_a_time;
              const acceptance::Measurements measured =
                  acceptance::measure(MPI_COMM_WORLD, level, [&](const std::string& line) {
                    std::fprintf(stderr, "rankscope accept: %d nodes: %s\n", processes, line.c_str());
                  });
              run_on_process_0(MPI_COMM_WORLD, [&] {
                const acceptance::Acceptance judged = acceptance::judge(measured);
                const std::string text = summary(options->format, judged, measured);
                if (output) {
                  output->write(text);
                  std::fprintf(stderr, "rankscope accept: wrote %s\n", options->output.c_str());
                } else {
                  std::fputs(text.c_str(), stdout);
                  std::fflush(stdout);
                }
                verdict = judged.verdict == acceptance::Verdict::fail ? 1 : 0;
              });
              MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
            });
            return status != 0 ? status : verdict;
          }};
}

}  // namespace rankscope::cli
