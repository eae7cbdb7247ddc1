// mpirun -n N rankscope run [OPTIONS] -- APP [ARGS...]
#include <cstdio>
#include <cstdlib>

#include "command.h"
#include "outputs.h"
#include "rankscope/coordinator/launcher.h"
#include "rankscope/model/error.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::cli {
namespace {

const CLI::Validator kCaptureList(
    [](const std::string& list) {
      const std::string known = " (known: " + std::string(agent::kKnownCaptureSources) + ")";
      if (list.empty()) return "names no capture source" + known;
      std::string_view unknown;
      agent::parse_capture_list(list, &unknown);
      if (unknown.empty()) return std::string();
      return "unknown source '" + std::string(unknown) + "'" + known;
    },
    "");

}  // namespace

Command add_run(CLI::App& parent, std::shared_ptr<std::vector<std::string>> application) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* app =
      parent.add_subcommand("run", "Profile one rank of a job: mpirun -n N rankscope run [OPTIONS] -- APP [ARGS...]");
  app->add_option("-o,--output", options->output, "The job's timeline (HDF5); shards go to OUTPUT.shards/ meanwhile")
      ->check(kNonEmptyPath)
      ->capture_default_str();
  add_overwrite_flag(*app, options->overwrite);
  app->add_option("--capture", options->agent.capture, "Capture sources, comma-separated: " + std::string(agent::kKnownCaptureSources))
      ->check(kCaptureList)
      ->capture_default_str();
  app->add_option("--mode", options->mode,
                  "inprocess (MPI applications), sidecar (others: rankscope is the MPI process), or auto")
      ->check(CLI::IsMember({"auto", "inprocess", "sidecar"}))
      ->capture_default_str();
  app->add_option("--buffer-mb", options->agent.buffer_mb, "Event buffer memory per rank; full buffers drop events, counted")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 16))
      ->capture_default_str();
  app->add_option("--flush-ms", options->agent.flush_ms, "How often each rank writes its events to its shard")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app->add_option("--sync-interval", options->agent.sync_interval_s,
                  "Seconds between clock sync rounds while the application runs")
      ->check(finite_range(kMinSyncIntervalS, kMaxSyncIntervalS))
      ->capture_default_str();
  app->add_option("--clock-thread", options->agent.clock_thread,
                  "In-process mode: clock sync rounds on a thread of the agent's where the program's MPI runs with "
                  "MPI_THREAD_MULTIPLE (auto), there after asking MPI_Init for it (always), or only at MPI_Init and "
                  "MPI_Finalize (never)")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app->add_option("--hang-timeout", options->agent.hang_timeout_s,
                  "Seconds a rank may be inside one collective (MPI, or NCCL on its GPU), or one NCCL send or receive on its GPU, before every rank writes out its state (0: off)")
      ->check(finite_range(0, kMaxHangTimeoutS) &
              CLI::Validator(
                  [](const std::string& text) {
                    const double seconds = std::strtod(text.c_str(), nullptr);
                    return seconds > 0 && seconds < kMinHangTimeoutS
                               ? "Value " + text + " is neither 0 (off) nor 1 s or more"
                               : std::string();
                  },
                  ""))
      ->capture_default_str();
  app->add_option("--hang-action", options->agent.hang_action,
                  "After a hang's state is written: report (the job goes on) or abort (the job ends)")
      ->check(CLI::IsMember({"report", "abort"}))
      ->capture_default_str();
  app->add_option("--ring", options->agent.ring_s,
                  "Flight recorder: keep only the last this many seconds of each rank's events, in memory (within "
                  "--buffer-mb), and write them when the rank ends, on a hang, or on SIGUSR2 (0: write everything)")
      ->check(finite_range(0, kMaxRunSeconds))
      ->capture_default_str();
  CLI::Option* delay = app->add_option("--delay", options->agent.delay_s,
                  "Capture window: record events from this many seconds after the job started (the wall clock, "
                  "the same instant on every rank); counted, not recorded, before")
      ->check(finite_range(0, kMaxRunSeconds));
  CLI::Option* duration = app->add_option("--duration", options->agent.duration_s,
                  "Capture window: record events for this many seconds (after --delay, or from the start)")
      ->check(finite_range(0, kMaxRunSeconds));
  // Paused until a trigger, or windowed by time, by steps or by ranges: one of them.
  CLI::Option* paused =
      app->add_flag("--paused", options->agent.paused,
                    "Start with capture paused, until `rankscope trigger OUTPUT start` (then stop, start...)")
          ->excludes(delay)
          ->excludes(duration);
  CLI::Option* steps =
      app->add_option("--steps", options->agent.steps,
                      "Capture window by step: record ProfilerStep#A to #B, both included (A:B, A, A:, :B), and with "
                      "/PERIOD the same steps again every PERIOD steps (100:109/1000); counted, not recorded, between")
          ->check(step_selection_check(true))
          ->excludes(delay)
          ->excludes(duration)
          ->excludes(paused);
  app->add_option("--capture-range", options->agent.capture_range,
                  "Capture window by range: nvtx:NAME[@DOMAIN] records while an NVTX range named NAME is open; "
                  "cudaProfilerApi from cudaProfilerStart to cudaProfilerStop")
      ->check(CLI::Validator(
          [](const std::string& text) {
            agent::CaptureRange range;
            return agent::parse_capture_range(text, range)
                       ? std::string()
                       : "'" + text + "' is neither nvtx:NAME, nvtx:NAME@DOMAIN nor " + std::string(agent::kCudaProfilerApi);
          },
          "nvtx:NAME[@DOMAIN]|cudaProfilerApi"))
      ->excludes(delay)
      ->excludes(duration)
      ->excludes(paused)
      ->excludes(steps);
  app->footer("The application and its arguments follow --, and reach it byte for byte.");
  app->callback([application, options] {
    if (application->empty()) throw CLI::ValidationError("no application given: rankscope run [OPTIONS] -- APP [ARGS...]");
    // The ranges that steer a window come from a capture source that must be on.
    const uint32_t capture = agent::parse_capture_list(options->agent.capture);
    agent::CaptureRange range;
    const bool by_profiler_api = agent::parse_capture_range(options->agent.capture_range, range) &&
                                 range.kind == agent::CaptureRange::Kind::kCudaProfilerApi;
    // Steps come from NVTX ranges or from the Python hook (the optimizer's steps).
    const bool by_steps = !options->agent.steps.empty();
    const char* needs = by_steps ? "nvtx or python" : by_profiler_api ? "cuda" : "nvtx";
    const uint32_t sources = by_steps          ? agent::kCaptureNvtx | agent::kCapturePython
                             : by_profiler_api ? agent::kCaptureCuda
                                               : agent::kCaptureNvtx;
    if ((by_steps || !options->agent.capture_range.empty()) && !(capture & sources)) {
      throw CLI::ValidationError(std::string(by_steps ? "--steps" : "--capture-range") + " needs " + needs +
                                 " in --capture (it is " + options->agent.capture + ")");
    }
  });
  return {app, [options, application] {
            options->command = *application;
            return run_reporting_errors(
                "run",
                [&] {
                  check_files({}, {{"-o", options->output, OutputKind::kTimeline}}, options->overwrite);
                  return run_application(*options);
                },
                kRunErrorStatus);
          }};
}

}  // namespace rankscope::cli
