// DDP's gradient buckets and FSDP's units (docs/report-reference.md, "Buckets (DDP)
// and units (FSDP)"): each bucket's transfer and exposed time, an α–β fit of
// the collectives, and the bucket size it predicts is best.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analysis/overlap.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/model/event.h"

namespace rankscope::analysis {

struct BucketStats {
  int32_t index = -1;            // position in the step's order of gradient allreduces
  uint64_t bytes = 0;
  int64_t transfer_ns = 0;       // median over steps of X(c)
  double bus_bandwidth_gbps = 0; // S/X · 2(n−1)/n, GB = 1e9 B
  Algorithm algorithm = Algorithm::kNone;
  double overlap_pct = 0;        // of its time in flight, the share overlapped by compute (median over ranks and steps)
  int64_t exposed_ns = 0;        // median exposed time per step
};
struct AlphaBetaFit {
  double alpha_ns = 0;           // per-operation latency
  double ns_per_byte = 0;        // 1/β
  double r_squared = 0;
  int samples = 0;
};
struct BucketPrediction {
  uint64_t bucket_bytes = 0;
  int64_t step_ns = 0;
};
// Why buckets' and units' sizes are null: the collectives carry none.
inline constexpr const char* kSizesUnknownReason =
    "the collectives' sizes are not in the timeline (torch.profiler records them only with record_shapes=True)";

struct BucketReport {
  std::string unmeasured;        // why no bucket or unit could be looked for (no collective seen); empty when they could
  std::string sizes_unmeasured;  // kSizesUnknownReason where the buckets' or units' sizes are not known; else empty
  bool ddp = false;              // gradient allreduces found
  bool fsdp = false;             // allgather / reduce-scatter units found
  std::vector<BucketStats> buckets;
  int64_t exposed_tail_ns = 0;   // median over steps: last gradient allreduce end − backward compute end
  AlphaBetaFit fit;
  std::vector<BucketPrediction> predictions;
  uint64_t recommended_bucket_bytes = 0;
  std::string recommendation;    // one sentence
  struct Unit {
    int32_t index = -1;
    uint64_t allgather_bytes = 0, reduce_scatter_bytes = 0;
    int64_t allgather_exposed_ns = 0, reduce_scatter_exposed_ns = 0;  // median per step
  };
  std::vector<Unit> units;       // FSDP
  std::string prefetch_note;     // FSDP: what prefetch saved, or why it could not
};
BucketReport analyze_buckets(const JobProfile& job, const std::vector<RankOverlap>& overlap);

}  // namespace rankscope::analysis
