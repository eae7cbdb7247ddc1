// Merging per-rank shards into one HDF5 timeline, in parallel over MPI-IO.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rankscope {

struct MergeOptions {
  std::vector<std::string> inputs;  // shard files, or folders whose *.shard files are taken
  std::string output;               // the timeline; written as OUTPUT.partial, renamed when complete
  // Whether an OUTPUT that exists when the timeline is complete is replaced
  // (--overwrite); else one that appeared meanwhile fails the merge.
  bool replace_output = false;
  uint64_t block_events = 1 << 18;  // events per write
  // Memory per process for the happens-before check: collectives (32 bytes
  // per instance) and point-to-point messages (40 bytes per send or receive,
  // in at most half of it); collectives and messages beyond it are counted
  // as unchecked (docs/design/clock-sync.md).
  uint64_t check_memory_bytes = 32u << 20;
  // Moves each rank whose collectives or messages break causality by the
  // smallest constant shift that removes the violations (docs/design/clock-sync.md).
  // Off by default: it changes measured times, on the assumption that the
  // clock correction was off by a constant.
  bool repair_clock = false;
  // Called on process 0 once every event is written, before the timeline
  // takes its name: adds what is derived from the whole timeline (the
  // matched collectives, which the analyses above this library compute), so
  // that no reader ever has to write into a finished timeline. Empty: nothing.
  std::function<void(const std::string& partial_timeline)> derive_tables;
};

struct MergeResult {
  uint64_t events = 0;          // written by every process together
  uint64_t bytes = 0;           // size of the finished timeline
  uint64_t shard_bytes = 0;     // size of the shards read, all processes together
  int32_t world_size = 0;
  std::vector<int32_t> missing_ranks;
  std::vector<int32_t> dead_ranks;
  std::vector<std::string> problems;  // damage found in shards, every process's; what the clock repair did
  double seconds = 0;           // derived_seconds included
  double derived_seconds = 0;   // in MergeOptions::derive_tables
};

// Collective over `comm`: every process passes the same options and takes a
// share of the shards. Throws Error (on every process, with the same message)
// when the job cannot be merged; the shards are never modified.
MergeResult merge_shards(MPI_Comm comm, const MergeOptions& options);

// Expands folders to the *.shard files inside them, sorted by name.
std::vector<std::string> expand_shard_inputs(const std::vector<std::string>& inputs);

}  // namespace rankscope
