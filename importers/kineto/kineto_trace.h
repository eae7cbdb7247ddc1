// One Kineto trace file turned into one rank's shard.
//
// Events are written as they are read, in chunks per track (a track's events
// come nearly in time order, so the merge holds few chunks at once). The
// communication kernels are held back: their instance numbers are known only
// once every rank is read and matched (kineto_align.h), so finish() writes them
// last, with the clock offset found for the rank.
//
// torch.distributed's collectives on gloo (CPU) have no kernel: each shows as
// a c10d call on the calling thread (c10d::allreduce_, its arrival) and, with
// no link between them, as a gloo range on one of gloo's worker threads
// (gloo:all_reduce, its execution). The calls and ranges are held until the
// trace is read, then paired in order: the k-th call with the k-th range that
// begins after it, as gloo runs a group's work in the order it was called.
// Each pair becomes one torch collective on its process group's track, and a
// calling thread silent until just after a completion, a wait for it.
#pragma once

#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "kineto_align.h"
#include "kineto_reader.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/event.h"
#include "rankscope/model/metadata.h"

namespace rankscope::kineto {

// Durations beyond this are damage, not measurements (a 236-year one has been seen).
inline constexpr int64_t kMaxDurationNs = 24LL * 3600 * 1'000'000'000;
// Timestamps and bases beyond ±2^62 ns are damage too; within it, sums and
// differences of two never overflow.
inline constexpr int64_t kMaxTimeNs = int64_t{1} << 62;

struct ImportSettings {
  // Kernels that communicate though nothing in the trace says so (DeepEP,
  // NVSHMEM, ...): ECMAScript regexes searched in kernel names.
  std::vector<std::string> comm_kernel_patterns;
  size_t max_problems_kept = 20;  // per file; the rest are only counted
};

// A process group as distributedInfo.pg_config describes it.
struct ProcessGroup {
  std::string name;     // pg_name
  std::string members;  // "size 2, ranks 0-1": equal text, equal groups
};

struct TraceSummary {
  std::string path;
  int32_t rank = -1;          // from distributedInfo, else the file name; -1: neither says
  int32_t world_size = 0;     // 0 when the trace does not say
  std::string backend;        // distributedInfo.backend; empty when the trace does not say
  std::string host;           // host_name: whose clock stamped the trace; empty when the trace does not say
  std::vector<ProcessGroup> process_groups;  // distributedInfo.pg_config, where given
  int64_t base_ns = 0;        // baseTimeNanoseconds (0 for traces stamped in absolute µs)
  int64_t first_ns = INT64_MAX, last_ns = INT64_MIN;  // on the file's clock
  uint64_t events = 0;        // written to the shard
  uint64_t bytes = 0;         // uncompressed JSON read
  uint64_t problems = 0;
  std::vector<std::string> problem_lines;  // the first max_problems_kept
};

// What the import settled for the job as a whole, the same for every trace.
struct ImportedJob {
  int32_t world_size = 0;
  int64_t reference_base_ns = 0;  // baseTimeNanoseconds of the reference rank's trace
  JobIdentity identity;           // recorded in every rank's shard
};

class TraceImport {
 public:
  TraceImport(std::string trace_path, std::string shard_path, const ImportSettings& settings);
  ~TraceImport();
  TraceImport(const TraceImport&) = delete;
  TraceImport& operator=(const TraceImport&) = delete;

  // Reads the whole trace into the shard, except the held-back kernels.
  // Throws Error when the file cannot be read as a trace at all.
  void read();
  // Reads a trace held in memory (tests and the fuzzer); no shard is written
  // when shard_path is empty.
  void read_text(std::string_view text);

  const TraceSummary& summary() const;
  // The communication kernels, times on the file's clock plus base_ns.
  const RankCollectives& collectives() const;
  // Counters so far (the shard gets them at finish).
  const Counters& counters() const;
  // Per --comm-kernel pattern: whether some kernel's name in the trace matched it.
  const std::vector<bool>& patterns_matched() const;

  // Writes the held-back kernels with their instance numbers, the clock
  // offset to the reference rank (nothing when `alignment.aligned` is false),
  // names, tracks, metadata and counters, and closes the shard. Throws Error
  // when the shard cannot be written.
  void finish(const ImportedJob& job, const RankAlignment& alignment, const std::vector<uint64_t>& instances,
              uint64_t unmatched);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The rank a file name states ("rank-3", "rank_3", "rank3", any case); -1 if none.
int32_t rank_from_file_name(const std::string& path);

}  // namespace rankscope::kineto
