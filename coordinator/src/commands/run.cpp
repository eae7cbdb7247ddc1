// mpirun -n N rankscope run [OPTIONS] -- APP [ARGS...]
#include <cstdio>

#include "command.h"
#include "rankscope/coordinator/launcher.h"
#include "rankscope/model/error.h"

namespace rankscope::cli {

Command add_run(CLI::App& parent, std::shared_ptr<std::vector<std::string>> application) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* app =
      parent.add_subcommand("run", "Profile one rank of a job: mpirun -n N rankscope run [OPTIONS] -- APP [ARGS...]");
  app->add_option("-o,--output", options->output, "The job's timeline (HDF5); shards go to OUTPUT.shards/ meanwhile")
      ->capture_default_str();
  app->add_option("--capture", options->capture, "Capture sources, comma-separated: mpi, nvtx, cuda, nccl")
      ->capture_default_str();
  app->add_option("--mode", options->mode,
                  "inprocess (MPI applications), sidecar (others: rankscope is the MPI process), or auto")
      ->capture_default_str();
  app->add_option("--buffer-mb", options->buffer_mb, "Event buffer memory per rank; full buffers drop events, counted")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 16))
      ->capture_default_str();
  app->add_option("--flush-ms", options->flush_ms, "How often each rank writes its events to its shard")
      ->check(CLI::Range(10u, 60000u))
      ->capture_default_str();
  app->add_option("--sync-interval", options->sync_interval_s,
                  "Sidecar mode: seconds between clock sync rounds while the application runs")
      ->capture_default_str();
  app->footer("The application and its arguments follow --, and reach it byte for byte.");
  return {app, [options, application] {
            options->command = *application;
            // Status 2, as for any usage error: 1 may be the application's own.
            return run_reporting_errors("run", [&] { return run_application(*options); }, 2);
          }};
}

}  // namespace rankscope::cli
