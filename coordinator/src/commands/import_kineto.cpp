// rankscope import-kineto TRACES -o TIMELINE
#include <chrono>
#include <cstdio>

#include "command.h"
#include "outputs.h"
#include "rankscope/importers/kineto.h"
#include "rankscope/merge/merge.h"
#include "rankscope/merge/problems_text.h"

namespace rankscope::cli {
namespace {

void print_import(const KinetoImportResult& result, const MergeResult& merged, const std::string& output,
                  double seconds, int processes, double peak_mib) {
  for (const auto& file : result.files) {
    for (const auto& line : file.problem_lines) std::fprintf(stderr, "rankscope import-kineto: warning: %s\n", line.c_str());
    if (file.problems > file.problem_lines.size()) {
      std::fprintf(stderr, "rankscope import-kineto: warning: %s: %llu more problems, counted in rankscope info\n",
                   file.path.c_str(), static_cast<unsigned long long>(file.problems - file.problem_lines.size()));
    }
  }
  for (const auto& line : result.warnings) std::fprintf(stderr, "rankscope import-kineto: warning: %s\n", line.c_str());
  for (const auto& pattern : result.unmatched_patterns) {
    std::fprintf(stderr, "rankscope import-kineto: warning: --comm-kernel \"%s\" matches no kernel name in the traces\n",
                 pattern.c_str());
  }
  std::fputs(merge_warnings_text(merged, "import-kineto").c_str(), stderr);
  std::fputs(missing_and_dead_ranks_text(merged, "trace").c_str(), stdout);
  std::printf("%-6s %12s %9s %16s %12s %8s %10s  %s\n", "rank", "events", "problems", "clock offset ns", "bound ns",
              "matched", "unmatched", "trace");
  for (const auto& file : result.files) {
    std::string offset = "-", bound = "not aligned";
    if (file.aligned) {
      offset = std::to_string(file.offset_ns);
      bound = std::to_string(file.bound_ns) + (file.consistent ? "" : "!");
    }
    std::printf("%-6d %12llu %9llu %16s %12s %8llu %10llu  %s\n", file.rank, static_cast<unsigned long long>(file.events),
                static_cast<unsigned long long>(file.problems), offset.c_str(), bound.c_str(),
                static_cast<unsigned long long>(file.matched), static_cast<unsigned long long>(file.unmatched),
                file.path.c_str());
  }
  std::printf("imported %zu traces (%.1f MB of JSON), %llu events into %s in %.3f s (%.3f s reading, %.3f s "
              "merging) with %d process%s: %.0f MB/s of JSON, peak memory %.1f MiB per process; clocks on rank %d's\n",
              result.files.size(), static_cast<double>(result.json_bytes) * 1e-6,
              static_cast<unsigned long long>(merged.events), output.c_str(), seconds, result.read_seconds,
              merged.seconds, processes, processes == 1 ? "" : "es",
              static_cast<double>(result.json_bytes) / seconds * 1e-6, peak_mib, result.reference_rank);
}

}  // namespace

// More reading threads than this only add memory.
constexpr unsigned kMaxThreads = 1024;

Command add_import_kineto(CLI::App& parent) {
  auto options = std::make_shared<KinetoImportOptions>();
  auto replace_output = std::make_shared<bool>(false);
  CLI::App* app = parent.add_subcommand(
      "import-kineto", "Import torch.profiler traces, one per rank, into a timeline with aligned clocks (docs/import.md)");
  app->add_option("traces", options->inputs, "Trace files (.json, .json.gz), or folders holding them")
      ->required()
      ->check(kNonEmptyPath);
  app->add_option("-o,--output", options->output, "The timeline to write (HDF5)")->required()->check(kNonEmptyPath);
  add_overwrite_flag(*app, *replace_output);
  // One pattern per --comm-kernel, so that traces may follow it.
  app->add_option("--comm-kernel", options->comm_kernel_patterns,
                  "Regex for kernels that communicate though the trace does not say so (e.g. DeepEP's); repeatable")
      ->allow_extra_args(false)
      ->check(CLI::Validator(
          [](const std::string& pattern) {
            const std::string problem = comm_kernel_pattern_problem(pattern);
            return problem.empty() ? problem : "\"" + pattern + "\" " + problem;
          },
          "REGEX"));
  app->add_option("--threads", options->threads, "Traces read at once per process (0: one per core)")
      ->check(CLI::Range(0u, kMaxThreads))
      ->capture_default_str();
  app->add_flag("--same-job", options->same_job,
                "Import traces as one job even where their distributedInfo disagrees or they were recorded hours "
                "apart (with a warning)");
  return {app, [options, replace_output] {
            return run_under_mpi("import-kineto", LoneRankZero::kGoesOn, [&](int process, int processes) {
              const auto started = std::chrono::steady_clock::now();
              const auto partial = prepare_timeline_output(MPI_COMM_WORLD, expand_trace_inputs(options->inputs),
                                                           "-o", options->output, *replace_output);
              KinetoImportResult result = import_kineto(MPI_COMM_WORLD, *options);
              MergeOptions merge;
              merge.inputs = result.shards;
              merge.output = options->output;
              merge.replace_output = *replace_output;
              merge.derive_tables = matched_collectives_writer("import-kineto");
              const MergeResult merged = merge_shards(MPI_COMM_WORLD, merge);
              // Process 0 removes the shards once every process has merged its share.
              MPI_Barrier(MPI_COMM_WORLD);
              result.shard_folder.reset();
              const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
              const double peak_mib = job_peak_mib(MPI_COMM_WORLD);
              if (process == 0) print_import(result, merged, options->output, seconds, processes, peak_mib);
            });
          }};
}

}  // namespace rankscope::cli
