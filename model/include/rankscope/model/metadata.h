// Per-rank facts (who, where, with what settings) and named counters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rankscope {

// One measurement of a rank's clock against the reference (rank 0's) clock.
struct SyncPoint {
  int64_t local_ns;   // the rank's clock when it was taken
  int64_t offset_ns;  // local clock minus reference clock at that moment
  int64_t bound_ns;   // |true offset - offset_ns| <= bound_ns
};
static_assert(sizeof(SyncPoint) == 24, "SyncPoint layout is part of the shard format");

// A bound this large says that nothing is known of the rank's offset: its
// times were moved by a known conversion (an imported trace's base time),
// not by a measurement, so they are not on the reference clock.
inline constexpr int64_t kUnknownClockBoundNs = int64_t{1} << 61;

// The largest job rankscope takes. A world size or rank beyond it in a shard
// or a trace is damage or a stranger's file, refused before anything is sized
// by it; GPU jobs run so far have had at most about 10^5 ranks.
inline constexpr int32_t kMaxWorldSize = 1 << 20;

// Which job a rank belongs to, the same in every rank of one job: the
// launcher's name for it and when it started. Either part may be unknown
// (empty, 0): a shard from before rankscope recorded it, a launcher that
// names no job, a rank that died before MPI_Init.
struct JobIdentity {
  std::string id;              // e.g. "openmpi:1399717889", "slurm:4242.0"
  int64_t start_wall_ns = 0;   // CLOCK_REALTIME, ns since the epoch

  bool known() const { return !id.empty() || start_wall_ns != 0; }
  // Whether a part known in both differs: then they are different jobs.
  bool contradicts(const JobIdentity& other) const;
  // "openmpi:1399717889, started 2024-05-22T17:15:22.123456789Z", each part
  // "unknown" when it is.
  std::string text() const;
};

struct RankMetadata {
  int32_t rank = -1;
  int32_t world_size = 0;
  int32_t local_rank = -1;
  int32_t local_size = 0;
  int32_t node_id = -1;
  int64_t pid = 0;
  std::string host;
  std::string gpu_uuids;      // comma-separated
  std::string launcher;       // e.g. "openmpi"
  std::string agent_version;
  std::string capture;        // capture settings, e.g. "mpi,nvtx buffer_mb=64"
  int64_t start_wall_ns = 0;  // CLOCK_REALTIME when capture started
  int64_t start_local_ns = 0; // the local event clock at the same moment
  JobIdentity job;

  // One "key=value" line per field; unknown keys are ignored on decode so
  // newer writers stay readable.
  std::string encode() const;
  static RankMetadata decode(std::string_view text);
};

// Named data-quality counters (their names and meanings: counters.h). A name
// appears at most once.
class Counters {
 public:
  void set(std::string_view name, uint64_t value);
  void add(std::string_view name, uint64_t value);
  uint64_t get(std::string_view name) const;  // 0 when absent
  const std::vector<std::pair<std::string, uint64_t>>& entries() const { return entries_; }

  std::string encode() const;
  static Counters decode(std::string_view text);

 private:
  std::vector<std::pair<std::string, uint64_t>> entries_;
};


}  // namespace rankscope
