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
