// mpirun -n NODES rankscope accept [--level quick|full] [--format text|json] [--timeline FILE]
#include <cstdio>

#include "command.h"
#include "outputs.h"
#include "rankscope/acceptance/acceptance.h"
#include "rankscope/acceptance/measure.h"
#include "rankscope/acceptance/reference_job.h"
#include "rankscope/acceptance/run_timeline.h"
#include "rankscope/merge/mpi_gather.h"
#include "rankscope/model/error.h"
#include "rankscope/model/temporary_paths.h"

namespace rankscope::cli {

Command add_accept(CLI::App& parent) {
  struct Options {
    std::string level = "quick";
    std::string format = "text";
    bool one_at_a_time = false;
    std::string timeline;  // a temporary file when not given
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
  app->add_option("--format", options->format, "What is printed: text or json")->check(CLI::IsMember({"text", "json"}));
  app->add_option("--timeline", options->timeline,
                  "Also write the run as an HDF5 timeline (every stage, transfer and the reference job's steps) for "
                  "`rankscope report` and `export`")
      ->check(kNonEmptyPath);
  return {app, [options] {
            int verdict = 0;
            const int status = run_under_mpi("accept", [&](int process, int processes) {
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
              std::unique_ptr<TemporaryPath> partial;
              if (!options->timeline.empty()) {
                partial = prepare_timeline_output(MPI_COMM_WORLD, {}, options->timeline, false);
              }
              const auto progress = [&](const std::string& line) {
                std::fprintf(stderr, "rankscope accept: %d nodes: %s\n", processes, line.c_str());
              };
              // The reference job is analysed on the timeline, so there is always one (a temporary file
              // when none was asked for).
              acceptance::RunTimeline timeline(MPI_COMM_WORLD, options->timeline);
              acceptance::Measurements measured = acceptance::measure(MPI_COMM_WORLD, level, timeline, progress);
              timeline.sync_clock();
              acceptance::run_reference_job(MPI_COMM_WORLD, acceptance::reference_job_size(options->level),
                                            acceptance::take_inventory().cpus, timeline, progress);
              const MergeResult merged = timeline.write(measured);
              std::string error;
              if (process == 0) {
                print_merge_problems("accept", merged, "shard", stderr);
                try {
                  acceptance::analyse_reference_job(timeline.path(), measured);
                  const acceptance::Acceptance judged = acceptance::judge(measured);
                  std::fputs(options->format == "json" ? acceptance::summary_json(judged, measured).c_str()
                                                       : acceptance::summary_text(judged).c_str(),
                             stdout);
                  std::fflush(stdout);
                  verdict = judged.verdict == acceptance::Verdict::fail ? 1 : 0;
                } catch (const Error& e) {
                  error = e.what();
                }
              }
              check_all(MPI_COMM_WORLD, error);
              MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
            });
            return status != 0 ? status : verdict;
          }};
}

}  // namespace rankscope::cli
