// Importing torch.profiler (Kineto) traces, one per rank, into a timeline:
// `rankscope import-kineto`. Each trace becomes a rank's shard, the ranks'
// communication kernels are matched and their clocks aligned, and the shards
// are merged as a captured job's are. Format facts and limits: docs/import.md.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rankscope/merge/merge.h"

namespace rankscope {

struct KinetoImportOptions {
  std::vector<std::string> inputs;  // trace files (.json, .json.gz), or folders holding them
  std::string output;               // the timeline
  bool replace_output = false;      // as MergeOptions::replace_output
  // Kernels that communicate though neither NCCL's arguments nor a
  // record_param_comms says so (DeepEP, NVSHMEM, ...): ECMAScript regexes
  // searched in kernel names.
  std::vector<std::string> comm_kernel_patterns;
  unsigned threads = 0;  // traces read at once per process; 0: one per CPU it may run on
  // Imports traces that do not look like one job's (distributedInfo
  // disagrees, recorded hours apart) as one all the same, with a warning.
  bool same_job = false;
  // As MergeOptions::derive_tables: what the new timeline's analyses add.
  std::function<void(const std::string& partial_timeline)> derive_tables;
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
  MergeResult merge;
};

// Collective over `comm`: the traces are shared among the processes (and read
// on threads within each). Throws Error, the same on every process, when a
// trace cannot be read at all, when no rank can be told for one, when a rank
// or world size is beyond the job (or kMaxWorldSize), when two traces are of
// the same rank, or (without same_job) when the traces cannot be one job's.
// Damage inside a trace is counted, not thrown.
KinetoImportResult import_kineto(MPI_Comm comm, const KinetoImportOptions& options);

// What is wrong with a --comm-kernel pattern ("" for nothing): empty, it
// would match every kernel; else it must be an ECMAScript regex.
std::string comm_kernel_pattern_problem(const std::string& pattern);

// Expands folders to the trace files inside them, sorted by name.
std::vector<std::string> expand_trace_inputs(const std::vector<std::string>& inputs);

}  // namespace rankscope
