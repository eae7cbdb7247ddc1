// rankscope merge SHARDS -o TIMELINE
#include <cstdio>

#include "command.h"
#include "outputs.h"
#include "rankscope/merge/merge.h"
#include "rankscope/merge/problems_text.h"

namespace rankscope::cli {

Command add_merge(CLI::App& parent) {
  auto options = std::make_shared<MergeOptions>();
  auto check_memory_mb = std::make_shared<uint64_t>(options->check_memory_bytes >> 20);
  CLI::App* app = parent.add_subcommand("merge", "Merge per-rank shards into one HDF5 timeline (runs under mpirun too)");
  app->add_option("shards", options->inputs, "Shard files, or folders holding *.shard files")
      ->required()
      ->check(kNonEmptyPath);
  app->add_option("-o,--output", options->output, "The timeline to write (HDF5)")->required()->check(kNonEmptyPath);
  add_overwrite_flag(*app, options->replace_output);
  app->add_option("--block-events", options->block_events, "Events per write")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app->add_option("--check-memory-mb", *check_memory_mb,
                  "Memory per process for the happens-before check of collectives and messages (about 32 bytes each)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
  app->add_flag("--repair-clock", options->repair_clock,
                "Move each rank whose collectives or messages break causality by the smallest constant shift that removes "
                "the violations (changes measured times; off by default)");
  return {app, [options, check_memory_mb] {
            options->check_memory_bytes = *check_memory_mb << 20;
            options->derive_tables = matched_collectives_writer("merge");
            return run_under_mpi("merge", LoneRankZero::kGoesOn, [&](int process, int processes) {
              const auto partial = prepare_timeline_output(MPI_COMM_WORLD, expand_shard_inputs(options->inputs),
                                                           "-o", options->output, options->replace_output);
              const MergeResult result = merge_shards(MPI_COMM_WORLD, *options);
              const double peak_mib = job_peak_mib(MPI_COMM_WORLD);
              if (process != 0) return;
              std::printf("merged %d ranks, %llu events into %s (%.1f MiB) in %.3f s (%.3f s of it matching "
                          "collectives) with %d process%s: %.2f M events/s, %.0f MB/s of shards, peak memory %.1f MiB "
                          "per process\n",
                          result.world_size, static_cast<unsigned long long>(result.events), options->output.c_str(),
                          static_cast<double>(result.bytes) / (1 << 20), result.seconds, result.derived_seconds, processes,
                          processes == 1 ? "" : "es", static_cast<double>(result.events) / result.seconds * 1e-6,
                          static_cast<double>(result.shard_bytes) / result.seconds * 1e-6, peak_mib);
              std::fputs(merge_warnings_text(result, "merge").c_str(), stderr);
              std::fputs(missing_and_dead_ranks_text(result, "shard").c_str(), stdout);
            });
          }};
}

}  // namespace rankscope::cli
