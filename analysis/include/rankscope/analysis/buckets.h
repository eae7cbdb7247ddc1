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
// A bucket cap replayed on the critical path's graph (critical_path.h): the
// walked steps' gradient allreduces regrouped into the buckets of that cap,
// each taking the fit's time, one after another.
struct BucketReplay {
  uint64_t bucket_bytes = 0;
  size_t steps = 0;          // walked steps replayed
  int64_t replayed_ns = 0;   // their mean, replayed unchanged
  int64_t regrouped_ns = 0;  // their mean, regrouped (the current buckets too: the model's own error)
  int64_t predicted_ns = 0;  // replayed_ns plus what this cap's regrouping changed against the current buckets'
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
  std::string tail_unmeasured;   // why exposed_tail_ns is not known; empty when it is
  AlphaBetaFit fit;
  bool fit_on_bus_bytes = false;  // the fit's sizes are bus bytes (the ring model), not bytes
  int64_t measured_step_ns = 0;   // the median step the predictions start from; 0: not measured
  std::vector<BucketPrediction> predictions;
  // What predicted them: "replay" (the critical path's graph, over
  // `replayed_steps` walked steps) where the graph regrouped the buckets,
  // else "model" (the backward model below); `replay_unmeasured` says why
  // not where the graph could not.
  std::string predicted_by;
  size_t replayed_steps = 0;
  std::string replay_unmeasured;
  std::string replay_left_out;  // how many walked steps were not replayed beside those that were, and why
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

// DDP's gradient allreduces: nonblocking MPI or c10d calls, or NCCL's.
bool is_gradient_allreduce(const CollectiveInstance& c);

// The buckets DDP would form with this cap out of a stream of gradients:
// a first bucket of at most 1 MiB, then full buckets, then what is left.
std::vector<uint64_t> buckets_for_cap(uint64_t gradient_bytes, uint64_t cap);

// The current buckets' label in `predictions`: the largest bucket, which is
// the cap plus at most one layer.
uint64_t current_bucket_cap(const BucketReport& report);

// The fit's time for an allreduce of `bytes` over `ranks` ranks.
int64_t fitted_allreduce_ns(const BucketReport& report, uint64_t bytes, size_t ranks);

// The predictions taken from the replays where there is one for each
// (the replay's saving against the current buckets, from the measured
// step), and the recommendation made again from them; `unmeasured` says
// why there are none, kept in `replay_unmeasured`, or, with `left_out`
// walked steps not replayed beside those that were, why the first was not,
// kept in `replay_left_out`.
void take_replayed_predictions(BucketReport& report, const std::vector<BucketReplay>& replays,
                               const std::string& unmeasured, size_t left_out = 0);

}  // namespace rankscope::analysis
