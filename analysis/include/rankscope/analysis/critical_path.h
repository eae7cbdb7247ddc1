// The step's critical path across ranks (docs/report-reference.md, "The
// critical path"): walked back from the step's end along threads and GPU
// streams, from a collective or a receive to the rank that held it up (the
// last to arrive, or the sender), from a synchronisation to the GPU work it
// waited for, and from a kernel to its launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analysis/buckets.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// What a stretch of the path was spent on.
enum class PathCategory : uint8_t {
  kCompute,                // the host's own work: its ranges, and its time outside any range and call
  kDataLoading,            // a range of the data-loading phase (model/host_phases.h)
  kLaunch,                 // a CUDA launch call, and the time from its end to its kernel's start
  kSync,                   // a synchronisation, from the end of the GPU work it waited for
  kCopy,                   // a GPU copy or memset
  kCommunicationTransfer,  // a collective after its last arrival, a message after it was sent
  kCount,
};
std::string_view path_category_name(PathCategory category);  // "compute", "data loading", ...

// One stretch of the path on one rank.
struct PathSegment {
  int32_t rank = -1;
  int64_t begin_ns = 0, end_ns = 0;
  PathCategory category = PathCategory::kCompute;
  uint32_t name_id = UINT32_MAX;  // the range or call; UINT32_MAX: outside any
  int64_t ns() const { return end_ns - begin_ns; }
};

// A cross-rank edge whose order the clocks' error bounds cannot decide: the
// last arrival and the one before it (or a send and its receive's post) lie
// closer than the two ranks' bounds added. The path follows the order the
// timeline recorded, and says so.
struct UndecidedEdge {
  int32_t from_rank = -1, to_rank = -1;
  int64_t apart_ns = 0, bound_ns = 0;
};

struct StepPath {
  size_t step = 0;                  // JobProfile step index
  std::string which;                // "median" or "slowest" (or both: "median, slowest")
  int64_t begin_ns = 0, end_ns = 0;  // the step on the job: its first rank's begin to its last rank's end
  std::vector<PathSegment> segments;  // latest first, as walked
  std::vector<UndecidedEdge> undecided;
  int hops = 0;  // cross-rank edges followed
  int64_t path_ns() const;
};

// Time on the path per rank, category and range, over the steps walked.
struct PathShare {
  int32_t rank = -1;
  int64_t ns = 0;
  int64_t by_category[static_cast<size_t>(PathCategory::kCount)] = {};
  // Per walked step, its share of the own time on that step's path (all
  // but communication transfer, which is the communication's, not a
  // rank's) less its fair share (one over the ranks that ran the step):
  // their mean, and the mean's standard error over the steps.
  double excess_mean = 0, excess_error = 0;
  // Above its fair share by more than the steps' spread: the mean excess
  // above three standard errors, over at least kFairShareSteps steps.
  bool above_fair_share = false;
};
inline constexpr size_t kFairShareSteps = 4;
inline constexpr size_t kSharedSteps = 16;
inline constexpr size_t kTiedWalks = 4;  // walks per step where ranks end it together

// Time on the path per node (host).
struct NodeShare {
  std::string host;
  int64_t ns = 0;
};
struct PathItem {
  uint32_t name_id = UINT32_MAX;
  int32_t rank = -1;
  PathCategory category = PathCategory::kCompute;
  int64_t ns = 0;
};

// A what-if of one walked step: the step replayed, from the step before,
// with one thing changed, as a graph of the step's instants: each rank's
// training thread is its own time between its blocking calls (those in
// which collectives or messages completed, or which waited for the GPU),
// each GPU stream its operations; a blocking call ends once what it waited
// for arrived and was transferred in the time it took as recorded
// (step_replay.cpp). Replayed unchanged, the step takes what it took but
// where clocks disagree (`replayed_ns`, the model's own error); replayed
// with the change, `predicted_ns`.
struct PathWhatIf {
  size_t step = 0;           // JobProfile step index
  std::string change;        // what was changed, in words
  int32_t rank = -1;         // the rank whose compute was scaled; -1: a change to every rank
  double factor = 1;         // its compute's scale: its own time on a CPU job, its kernels on a GPU job
  bool transfers = true;     // false: every collective's and message's transfer took no time
  int64_t recorded_ns = 0;   // the step on the job, first begin to last end
  int64_t replayed_ns = 0;   // replayed unchanged
  int64_t predicted_ns = 0;  // replayed with the change
};

// A rank asked for (a straggler's), its compute at the other ranks'
// median replayed on each walked step: the stragglers' what-if where the
// graph exists (stragglers.h).
struct RankReplay {
  int32_t rank = -1;
  size_t steps = 0;          // walked steps replayed
  int64_t replayed_ns = 0;   // their mean, replayed unchanged
  int64_t predicted_ns = 0;  // their mean, with the rank at the median
};

struct CriticalPath {
  // Why there is no path: no steps, clocks not aligned, no rank with the
  // step; empty when there is one.
  std::string unmeasured;
  std::vector<StepPath> steps;  // the median step's, and the slowest's where it is another
  // The steps walked for the shares: those, and others spread evenly over
  // the job, kSharedSteps in all where the job has as many.
  size_t steps_walked = 0;
  std::vector<PathShare> ranks;  // every rank on the path, most time first
  std::vector<NodeShare> nodes;  // every node on the path, most time first
  // Why no rank can be said to be above its fair share or not (fewer steps
  // walked than kFairShareSteps); empty when it can.
  std::string fair_share_unmeasured;
  int64_t total_ns = 0;          // the paths' time, all steps walked
  std::vector<PathItem> items;   // the longest ranges and calls on the path, ten at most
  // Per drawn step: its path's rank of most compute at the other ranks'
  // median compute, and every transfer taking no time. Empty with the
  // reason where the steps cannot be replayed.
  std::vector<PathWhatIf> what_if;
  std::string what_if_unmeasured;
  std::vector<RankReplay> rank_replays;  // per rank of `replayed_ranks` replayed on at least one step
  // Per bucket cap predicted by `buckets`, the walked steps replayed with
  // their gradient allreduces regrouped into that cap's buckets; empty,
  // with the reason, where they could not be. Walked steps that could not
  // be are counted, the first one's reason kept, also where others were.
  std::vector<BucketReplay> bucket_replays;
  std::string bucket_replays_unmeasured;
  size_t bucket_replays_left_out = 0;
};

// Reads, for each step walked, the events of that step of the ranks the
// walk comes to (found by a binary search over the rank's event blocks):
// memory follows one step's events. A pure function of the timeline and
// its profile. Each of `replayed_ranks` is also replayed at the other
// ranks' median compute on every walked step (`rank_replays`), and each
// bucket cap that `buckets` predicted, on every walked step too
// (`bucket_replays`).
CriticalPath critical_path(const Timeline& timeline, const JobProfile& job,
                           const std::vector<int32_t>& replayed_ranks = {}, const BucketReport* buckets = nullptr);

}  // namespace rankscope::analysis
