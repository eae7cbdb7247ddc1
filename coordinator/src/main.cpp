// The `rankscope` command: parses arguments and hands each subcommand to its library.
#include <mpi.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "rankscope/analysis.h"
#include "rankscope/error.h"
#include "rankscope/export.h"
#include "rankscope/info.h"
#include "rankscope/kineto.h"
#include "rankscope/merge.h"
#include "rankscope/run.h"
#include "rankscope/timeline.h"
#include "rankscope/version.h"

namespace {

// The largest peak resident memory of the processes, in MiB, on process 0.
double job_peak_mib(MPI_Comm comm) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  long peak_kib = usage.ru_maxrss, job_peak_kib = 0;
  MPI_Reduce(&peak_kib, &job_peak_kib, 1, MPI_LONG, MPI_MAX, 0, comm);
  return static_cast<double>(job_peak_kib) / 1024.0;
}

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string text;
  for (int32_t r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

void print_merge_warnings(const char* command, const rankscope::MergeResult& result) {
  for (const auto& problem : result.problems) std::fprintf(stderr, "rankscope %s: warning: %s\n", command, problem.c_str());
  if (!result.missing_ranks.empty()) {
    std::printf("missing ranks (no %s): %s\n", std::strcmp(command, "merge") == 0 ? "shard" : "trace",
                rank_list(result.missing_ranks).c_str());
  }
  if (!result.dead_ranks.empty()) {
    std::printf("dead ranks (shard without its end record): %s\n", rank_list(result.dead_ranks).c_str());
  }
}

// Runs `body` on every process of MPI_COMM_WORLD; errors are printed once,
// by process 0, as "rankscope COMMAND: error: ...".
int run_under_mpi(const char* command, const std::function<void(int process, int processes)>& body) {
  // A lone process, not started by mpirun, needs no network: Open MPI's UCX
  // start-up alone would take 0.2 s of a command that takes less. Settings
  // the user made win.
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK") && !std::getenv("PMI_RANK")) {
    setenv("OMPI_MCA_pml", "ob1", 0);
    setenv("OMPI_MCA_btl", "self", 0);
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
  }
  MPI_Init(nullptr, nullptr);
  int process = 0, processes = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  int status = 0;
  try {
    body(process, processes);
  } catch (const rankscope::UnrecoverableError& e) {
    if (process == 0) std::fprintf(stderr, "rankscope %s: error: %s\n", command, e.what());
    std::fflush(nullptr);
    std::_Exit(1);
  } catch (const rankscope::Error& e) {
    if (process == 0) std::fprintf(stderr, "rankscope %s: error: %s\n", command, e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}

int run_merge(const rankscope::MergeOptions& options) {
  return run_under_mpi("merge", [&](int process, int processes) {
    const rankscope::MergeResult result = rankscope::merge_shards(MPI_COMM_WORLD, options);
    const double peak_mib = job_peak_mib(MPI_COMM_WORLD);
    if (process == 0) {
      std::printf("merged %d ranks, %llu events into %s (%.1f MiB) in %.3f s with %d process%s: %.2f M events/s, "
                  "%.0f MB/s of shards, peak memory %.1f MiB per process\n",
                  result.world_size, static_cast<unsigned long long>(result.events), options.output.c_str(),
                  static_cast<double>(result.bytes) / (1 << 20), result.seconds, processes,
                  processes == 1 ? "" : "es", static_cast<double>(result.events) / result.seconds * 1e-6,
                  static_cast<double>(result.shard_bytes) / result.seconds * 1e-6, peak_mib);
      print_merge_warnings("merge", result);
    }
  });
}

int run_import_kineto(const rankscope::KinetoImportOptions& options) {
  return run_under_mpi("import-kineto", [&](int process, int processes) {
    const auto started = std::chrono::steady_clock::now();
    const rankscope::KinetoImportResult result = rankscope::import_kineto(MPI_COMM_WORLD, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double peak_mib = job_peak_mib(MPI_COMM_WORLD);
    if (process == 0) {
      for (const auto& file : result.files) {
        for (const auto& line : file.problem_lines) std::fprintf(stderr, "rankscope import-kineto: warning: %s\n", line.c_str());
        if (file.problems > file.problem_lines.size()) {
          std::fprintf(stderr, "rankscope import-kineto: warning: %s: %llu more problems, counted in rankscope info\n",
                       file.path.c_str(), static_cast<unsigned long long>(file.problems - file.problem_lines.size()));
        }
      }
      print_merge_warnings("import-kineto", result.merge);
      std::printf("%-6s %12s %9s %16s %12s %8s %10s  %s\n", "rank", "events", "problems", "clock offset ns",
                  "bound ns", "matched", "unmatched", "trace");
      for (const auto& file : result.files) {
        std::string offset = "-", bound = "not aligned";
        if (file.aligned) {
          offset = std::to_string(file.offset_ns);
          bound = std::to_string(file.bound_ns) + (file.consistent ? "" : "!");
        }
        std::printf("%-6d %12llu %9llu %16s %12s %8llu %10llu  %s\n", file.rank,
                    static_cast<unsigned long long>(file.events), static_cast<unsigned long long>(file.problems),
                    offset.c_str(), bound.c_str(), static_cast<unsigned long long>(file.matched),
                    static_cast<unsigned long long>(file.unmatched), file.path.c_str());
      }
      std::printf("imported %zu traces (%.1f MB of JSON), %llu events into %s in %.3f s (%.3f s reading, %.3f s "
                  "merging) with %d process%s: %.0f MB/s of JSON, peak memory %.1f MiB per process; clocks on rank "
                  "%d's\n",
                  result.files.size(), static_cast<double>(result.json_bytes) * 1e-6,
                  static_cast<unsigned long long>(result.merge.events), options.output.c_str(), seconds,
                  result.read_seconds, result.merge.seconds, processes, processes == 1 ? "" : "es",
                  static_cast<double>(result.json_bytes) / seconds * 1e-6, peak_mib, result.reference_rank);
    }
  });
}

int run_info(const std::string& path, bool json) {
  try {
    const rankscope::Timeline timeline(path);
    std::fputs((json ? rankscope::info_json(timeline) : rankscope::info_text(timeline)).c_str(), stdout);
    return 0;
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "rankscope info: error: %s\n", e.what());
    return 1;
  }
}

struct ReportOptions {
  std::string timeline;
  std::string format = "text";
  std::string output;  // stdout when empty
  bool hta_compat = false;
};

int run_report(const ReportOptions& options) {
  namespace analysis = rankscope::analysis;
  try {
    analysis::Report report;
    {
      const rankscope::Timeline timeline(options.timeline);
      report = analysis::make_report(timeline, {options.hta_compat});
    }
    try {
      analysis::write_collectives_table(options.timeline, report.profile);
    } catch (const rankscope::Error& e) {
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
      std::fprintf(stderr, "rankscope report: error: cannot write %s: %s\n", options.output.c_str(), std::strerror(errno));
      return 1;
    }
    std::fprintf(stderr, "rankscope report: wrote %s\n", options.output.c_str());
    return 0;
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "rankscope report: error: %s\n", e.what());
    return 1;
  }
}

struct ExportCommand {
  std::string timeline, perfetto, chrome, ranks, time, steps;
  uint64_t warn_size_mb = 1000;
};

// Prints what one export wrote, with the counts a checker can compare (docs/export.md).
void print_export(const rankscope::ExportResult& r) {
  const rankscope::ExportCounts& c = r.counts;
  std::string ranks;
  for (size_t i = 0; i < r.ranks.size();) {
    size_t j = i;
    while (j + 1 < r.ranks.size() && r.ranks[j + 1] == r.ranks[j] + 1) ++j;
    ranks += (ranks.empty() ? "" : ",") + std::to_string(r.ranks[i]) + (j > i ? "-" + std::to_string(r.ranks[j]) : "");
    i = j + 1;
  }
  auto bound = [](int64_t ns, bool open) { return open ? std::string("open") : std::to_string(ns); };
  const double events = static_cast<double>(r.events_written);
  std::printf("wrote %s (%s): %llu processes, %llu thread tracks, %llu other tracks, %llu counter tracks, %llu slices, "
              "%llu instants, %llu counter samples, %llu flows (%llu collective, %llu launch)\n"
              "  ranks %s, window %s to %s ns; %llu events in %.3f s (%.2f M events/s), %llu bytes (%.1f bytes per "
              "event, estimated %llu)\n",
              r.output.c_str(), rankscope::export_format_name(r.format), static_cast<unsigned long long>(c.processes),
              static_cast<unsigned long long>(c.thread_tracks), static_cast<unsigned long long>(c.other_tracks),
              static_cast<unsigned long long>(c.counter_tracks), static_cast<unsigned long long>(c.slices),
              static_cast<unsigned long long>(c.instants), static_cast<unsigned long long>(c.counter_samples),
              static_cast<unsigned long long>(c.flows), static_cast<unsigned long long>(c.collective_flows),
              static_cast<unsigned long long>(c.launch_flows), ranks.c_str(),
              bound(r.window_begin_ns, r.window_begin_ns == INT64_MIN).c_str(),
              bound(r.window_end_ns, r.window_end_ns == INT64_MAX).c_str(),
              static_cast<unsigned long long>(r.events_written), r.seconds, events / r.seconds * 1e-6,
              static_cast<unsigned long long>(r.bytes), events > 0 ? static_cast<double>(r.bytes) / events : 0.0,
              static_cast<unsigned long long>(r.estimated_bytes));
}

int run_export(const ExportCommand& command) {
  try {
    rankscope::ExportOptions options;
    if (!command.ranks.empty()) options.ranks = rankscope::parse_rank_list(command.ranks);
    if (!command.time.empty()) options.time = rankscope::parse_time_selection(command.time);
    if (!command.steps.empty()) options.steps = rankscope::parse_step_selection(command.steps);
    options.warn_bytes = command.warn_size_mb * 1'000'000;
    options.warn = [](const std::string& text) { std::fprintf(stderr, "rankscope export: warning: %s\n", text.c_str()); };
    const rankscope::Timeline timeline(command.timeline);
    if (!command.perfetto.empty()) {
      print_export(rankscope::export_timeline(timeline, rankscope::ExportFormat::kPerfetto, command.perfetto, options));
    }
    if (!command.chrome.empty()) {
      print_export(rankscope::export_timeline(timeline, rankscope::ExportFormat::kChromeJson, command.chrome, options));
    }
    return 0;
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "rankscope export: error: %s\n", e.what());
    return 1;
  }
}

int run_job(const rankscope::RunOptions& options) {
  try {
    return rankscope::run_application(options);
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "rankscope run: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rankscope: profile multi-node GPU jobs on one clock-aligned timeline"};
  app.set_version_flag("--version", std::string("rankscope ") + rankscope::kRankscopeVersion);
  app.require_subcommand(1);

  rankscope::MergeOptions merge_options;
  CLI::App* merge = app.add_subcommand("merge", "Merge per-rank shards into one HDF5 timeline (runs under mpirun too)");
  merge->add_option("shards", merge_options.inputs, "Shard files, or folders holding *.shard files")->required();
  merge->add_option("-o,--output", merge_options.output, "The timeline to write (HDF5)")->required();
  merge->add_option("--block-events", merge_options.block_events, "Events per write")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  uint64_t check_memory_mb = merge_options.check_memory_bytes >> 20;
  merge->add_option("--check-memory-mb", check_memory_mb,
                    "Memory per process for the happens-before check of collectives and messages (about 32 bytes each)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
  merge->add_flag("--repair-clock", merge_options.repair_clock,
                  "Move each rank whose collectives or messages break causality by the smallest constant shift that removes "
                  "the violations (changes measured times; off by default)");

  rankscope::KinetoImportOptions import_options;
  CLI::App* import_kineto = app.add_subcommand(
      "import-kineto", "Import torch.profiler traces, one per rank, into a timeline with aligned clocks (docs/import.md)");
  import_kineto->add_option("traces", import_options.inputs, "Trace files (.json, .json.gz), or folders holding them")
      ->required();
  import_kineto->add_option("-o,--output", import_options.output, "The timeline to write (HDF5)")->required();
  // One pattern per --comm-kernel, so that traces may follow it.
  import_kineto
      ->add_option("--comm-kernel", import_options.comm_kernel_patterns,
                   "Regex for kernels that communicate though the trace does not say so (e.g. DeepEP's); repeatable")
      ->allow_extra_args(false);
  import_kineto->add_option("--threads", import_options.threads, "Traces read at once per process (0: one per core)")
      ->capture_default_str();

  std::string info_path;
  bool info_json = false;
  CLI::App* info = app.add_subcommand("info", "Summarize a timeline: ranks, events, drops, missing or dead ranks");
  info->add_option("timeline", info_path, "The HDF5 timeline")->required();
  info->add_flag("--json", info_json, "Print JSON instead of text");

  ReportOptions report_options;
  CLI::App* report = app.add_subcommand(
      "report", "Analyze a timeline: stragglers and why, overlap, exposed communication, DDP buckets, FSDP units");
  report->add_option("timeline", report_options.timeline, "The HDF5 timeline")->required();
  report->add_option("--format", report_options.format, "text (one screen), json or html (one self-contained page)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  report->add_option("-o,--output", report_options.output, "Write the report to this file instead of stdout");
  report->add_flag("--hta-compat", report_options.hta_compat,
                   "Overlap as Holistic Trace Analysis defines it (kernel names, its window and rounding)");

  ExportCommand export_command;
  CLI::App* export_app = app.add_subcommand(
      "export", "Write a timeline for trace viewers: native Perfetto protobuf and/or Chrome JSON (docs/export.md)");
  export_app->add_option("timeline", export_command.timeline, "The HDF5 timeline")->required();
  export_app->add_option("--perfetto", export_command.perfetto, "Write native Perfetto protobuf here (.pftrace)");
  export_app->add_option("--chrome", export_command.chrome, "Write Chrome trace-event JSON here (.json)");
  export_app->add_option("--ranks", export_command.ranks, "Only these ranks, e.g. 0-3,8");
  export_app->add_option("--time", export_command.time,
                         "Only events overlapping START:END: ns on the timeline, or +N[ns|us|ms|s] from the job's "
                         "first event; either end may be empty (e.g. +1.5s:+2s)");
  export_app->add_option("--steps", export_command.steps,
                         "Only the time of ProfilerStep#A to #B, both included: A:B, A, A: or :B");
  export_app->add_option("--warn-size-mb", export_command.warn_size_mb,
                         "Warn, with a smaller selection, when the output is estimated beyond this many MB")
      ->capture_default_str();
  export_app->callback([&] {
    if (export_command.perfetto.empty() && export_command.chrome.empty()) {
      throw CLI::ValidationError("export", "give --perfetto FILE, --chrome FILE or both");
    }
  });

  rankscope::RunOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run", "Profile one rank of a job: mpirun -n N rankscope run [OPTIONS] -- APP [ARGS...]");
  run->add_option("-o,--output", run_options.output, "The job's timeline (HDF5); shards go to OUTPUT.shards/ meanwhile")
      ->capture_default_str();
  run->add_option("--capture", run_options.capture, "Capture sources, comma-separated: mpi, nvtx, cuda, nccl")
      ->capture_default_str();
  run->add_option("--mode", run_options.mode,
                  "inprocess (MPI applications), sidecar (others: rankscope is the MPI process), or auto")
      ->capture_default_str();
  run->add_option("--buffer-mb", run_options.buffer_mb, "Event buffer memory per rank; full buffers drop events, counted")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 16))
      ->capture_default_str();
  run->add_option("--flush-ms", run_options.flush_ms, "How often each rank writes its events to its shard")
      ->check(CLI::Range(10u, 60000u))
      ->capture_default_str();
  run->add_option("--sync-interval", run_options.sync_interval_s,
                  "Sidecar mode: seconds between clock sync rounds while the application runs")
      ->capture_default_str();
  run->footer("The application and its arguments follow --, and reach it byte for byte.");

  // `run`'s application starts after the first `--` and is never parsed: its
  // arguments are its own, whatever they look like.
  int parsed_argc = argc;
  if (argc > 1 && std::strcmp(argv[1], "run") == 0) {
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--") != 0) continue;
      run_options.command.assign(argv + i + 1, argv + argc);
      parsed_argc = i;
      break;
    }
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;  // a usage error, as for any command-line tool
  }
  if (*run) return run_job(run_options);
  merge_options.check_memory_bytes = check_memory_mb << 20;
  if (*merge) return run_merge(merge_options);
  if (*import_kineto) return run_import_kineto(import_options);
  if (*info) return run_info(info_path, info_json);
  if (*report) return run_report(report_options);
  if (*export_app) return run_export(export_command);
  return 2;
}
