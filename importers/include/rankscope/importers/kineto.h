// Importing torch.profiler (Kineto) traces, one per rank, for a timeline:
// `rankscope import-kineto`. Each trace becomes a rank's shard, with the
// ranks' communication kernels matched and their clocks aligned; the command
// merges the shards as a captured job's are (merge_shards). Format facts and
// limits: docs/import.md.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/model/temporary_paths.h"

namespace rankscope {

struct KinetoImportOptions {
  std::vector<std::string> inputs;  // trace files (.json, .json.gz), or folders holding them
  std::string output;               // the timeline the shards are for: their folder goes beside it
  // Kernels that communicate though neither NCCL's arguments nor a
  // record_param_comms says so (DeepEP, NVSHMEM, ...): ECMAScript regexes
  // searched in kernel names.
  std::vector<std::string> comm_kernel_patterns;
  unsigned threads = 0;  // traces read at once per process; 0: one per CPU it may run on
  // Imports traces that do not look like one job's (distributedInfo
  // disagrees, recorded hours apart) as one all the same, with a warning.
  bool same_job = false;
};

struct KinetoFileResult {
  std::string path;
  int32_t rank = -1;
  uint64_t events = 0;
  uint64_t bytes = 0;          // uncompressed JSON
  uint64_t problems = 0;       // events skipped or damaged, all counted in the timeline
  std::vector<std::string> problem_lines;  // the first few, naming file, event index and byte
  bool aligned = false;
  int64_t offset_ns = 0;       // this rank's clock minus the reference rank's
  int64_t bound_ns = 0;
  int32_t anchor = -1;         // the rank its offset was measured against
  uint64_t matched = 0;        // communication kernels it shares with the anchor
  uint64_t unmatched = 0;      // communication kernels shared with no rank
  bool consistent = true;
};

struct KinetoImportResult {
  std::vector<KinetoFileResult> files;  // every process's, by rank
  int32_t reference_rank = -1;
  std::vector<std::string> unmatched_patterns;  // --comm-kernel patterns no kernel name of any trace matched
  uint64_t json_bytes = 0;
  double read_seconds = 0;              // parsing, matching and writing the shards
  // What --same-job overrode, ranks whose matched collectives defended no clock
  // bound, and ranks whose collectives ruled out the clock of the host their trace names.
  std::vector<std::string> warnings;
  std::vector<std::string> shards;  // one per trace, for merge_shards
  // The shards' folder, on process 0 (null on the others): letting go of it
  // removes the shards, which every process must have merged by then.
  std::unique_ptr<TemporaryPath> shard_folder;
};

// Collective over `comm`: the traces are shared among the processes (and read
// on threads within each), and every process ends with the same shards to
// merge. Throws Error, the same on every process, when a trace cannot be read
// at all, when no rank can be told for one, when a rank or world size is
// beyond the job (or kMaxWorldSize), when two traces are of the same rank, or
// (without same_job) when the traces cannot be one job's. Damage inside a
// trace is counted, not thrown.
KinetoImportResult import_kineto(MPI_Comm comm, const KinetoImportOptions& options);

// What is wrong with a --comm-kernel pattern ("" for nothing): empty, it
// would match every kernel; else it must be an ECMAScript regex.
std::string comm_kernel_pattern_problem(const std::string& pattern);

// Expands folders to the trace files inside them, sorted by name.
std::vector<std::string> expand_trace_inputs(const std::vector<std::string>& inputs);

}  // namespace rankscope
