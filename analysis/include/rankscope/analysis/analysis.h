// What `rankscope report` knows about a job, and the analyses over it. The
// profile is built from a timeline in two streaming passes (memory grows with
// ranks × steps and ranks × collectives, never with events); every analysis is
// then a pure function of the profile. Definitions: docs/report.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analysis/device_work.h"
#include "rankscope/analysis/work_share.h"
#include "rankscope/model/event.h"
#include "rankscope/model/json.h"
#include "rankscope/model/signals.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope {
class JsonWriter;
}

namespace rankscope::analysis {

inline constexpr int64_t kUnknown = INT64_MIN;

// Where a collective was seen: MPI's calls, NCCL's, or torch.distributed's
// (c10d: any backend, from the Python hook or a torch.profiler trace).
enum class CollectiveSource : uint8_t { kMpi = 1, kNccl = 2, kTorch = 3 };

// One rank's part in one collective instance. Arrival is when the rank was
// ready to communicate: the post of an MPI call, the start of the NCCL
// kernel, the c10d call. Times are on the timeline's clock.
struct Participation {
  int32_t rank = -1;
  int64_t enqueue_ns = kUnknown;  // NCCL: when the host enqueued it; MPI: the call's begin
  int64_t arrival_ns = kUnknown;
  int64_t start_ns = kUnknown;    // execution start (NCCL: GPU; MPI: the call's or the post's begin)
  int64_t end_ns = kUnknown;      // execution end (MPI: when the call or the completing Wait/Test returned)
  int64_t wait_ns = 0;            // last arrival of all ranks − this rank's arrival
  int64_t exposed_wait_ns = 0;    // of [arrival, last arrival]: time this rank did not compute
  int64_t exposed_transfer_ns = 0;  // of [last arrival, end]: time this rank did not compute
};

// One instance of a collective, matched across ranks: NCCL by (communicator,
// function, sequence number), MPI by (communicator, operation, call order),
// c10d by (process group, its collectives' order).
struct CollectiveInstance {
  uint64_t comm_hash = 0;
  CommOp op = CommOp::kNone;
  uint64_t seq = 0;
  CollectiveSource source = CollectiveSource::kMpi;
  bool nonblocking = false;
  uint64_t bytes = 0;           // the collective's size as nccl-tests counts it
  DataType datatype = DataType::kNone;
  Algorithm algorithm = Algorithm::kNone;
  Protocol protocol = Protocol::kNone;
  uint32_t name_id = 0;         // the job's string table
  int32_t step = -1;            // index into JobProfile::steps, by the first rank's step; -1 outside steps
  std::vector<Participation> ranks;  // in rank order

  int64_t last_arrival_ns() const;
  int32_t last_arriver() const;             // -1 with fewer than two ranks
  int64_t arrival_skew_ns() const;          // last arrival − first arrival
  int64_t second_last_arrival_ns() const;
  int64_t transfer_ns() const;              // X(c) = min over ranks of (end − start)
};

// A step: the job's ProfilerStep#N ranges (torch.profiler's, and ddp_sim's);
// a job without them is one step from its first event to its last.
struct StepTimes {
  int64_t begin_ns = kUnknown;
  int64_t end_ns = kUnknown;
  int64_t duration() const { return end_ns - begin_ns; }
};

// A rank's time in one step, split by what it was doing.
struct RankStep {
  StepTimes times;               // this rank's step range
  int64_t compute_ns = 0;        // |compute|: GPU compute kernels; on CPU jobs the step's time outside MPI calls
  int64_t comm_ns = 0;           // |communication|: NCCL and MPI operations, nonblocking ones while in flight
  int64_t overlap_ns = 0;        // |compute ∩ communication|
  int64_t exposed_wait_ns = 0;   // exposed communication spent waiting for the last rank
  int64_t exposed_transfer_ns = 0;  // the rest of the exposed communication
  int64_t idle_ns = 0;           // neither computing nor communicating
  // The host's phases (model/host_phases.h), outside exposed communication,
  // each ns booked once: data loading before optimizer, backward, forward.
  int64_t data_loading_ns = 0;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t optimizer_ns = 0;
  StepDeviceWork device;         // by the TensorBoard profiler's order, GPU idle by cause, launches, syncs, copies
  int64_t exposed_comm_ns() const { return comm_ns - overlap_ns; }
};

// Whether a rank with a shard or trace has events to measure it by.
enum class RankEvents : uint8_t {
  kRead,          // at least one of its events was read
  kNoneCaptured,  // its shard or trace holds not one event
  kAllDamaged,    // it has events, but every one lies in rows of the timeline left out as damaged
};

struct RankProfile {
  int32_t rank = -1;
  std::string host;
  int32_t node_id = -1;
  RankStatus status = RankStatus::kComplete;
  RankEvents events = RankEvents::kRead;
  std::vector<RankStep> steps;  // index = JobProfile::steps index; a step this rank lacks has kUnknown times
  int32_t step_track = -1;      // the track of its ProfilerStep ranges (its training thread); -1: none
  uint32_t phases_seen = 0;     // bit 1 << HostPhase of each phase any of its ranges marked
  bool communicated = false;    // it took part in a collective, or waited for one
  // Why its arrivals cannot be compared with other ranks' (no other rank has
  // data, none of its collectives was matched with another rank's, or the
  // clocks were not aligned); empty when they can. Waiting for the last rank
  // then cannot be told from transfer.
  std::string arrivals_unmeasured;
  // Why its communication was not measured at all: its --capture left out
  // every source that records communication. Empty where one was captured,
  // or where the capture is not known (an imported trace).
  std::string communication_uncaptured;
  RankDeviceWork device;        // its GPUs' kernels, idle gaps, launches, syncs and memory
};

// A step that lay partly outside the capture windows of some ranks
// (RankInfo::capture_windows): what it did outside them was not recorded,
// so those ranks' figures of it are n/a and their step reads as not run.
struct StepCut {
  uint64_t step = 0;           // N of ProfilerStep#N
  std::vector<int32_t> ranks;  // in rank order
};

struct JobProfile {
  std::string path;
  int32_t world_size = 0;
  bool gpu = false;             // GPU events exist: compute is GPU kernels; otherwise CPU threads
  bool clock_corrected = false;
  std::shared_ptr<const std::vector<std::string>> strings;  // the job's string table, shared with its Timeline
  std::vector<uint64_t> step_numbers;  // N of ProfilerStep#N, per step
  // No ProfilerStep#N range was captured and the capture was windowed: each
  // window is one step (numbered from 1), so that the time between windows,
  // which was not recorded, is in none.
  bool steps_are_windows = false;
  std::vector<StepCut> steps_cut;   // by step number
  std::vector<int32_t> windowed_ranks;  // ranks whose capture was windowed
  std::vector<RankProfile> ranks;
  std::vector<CollectiveInstance> collectives;  // sorted by (first arrival)
  std::vector<RankClock> clocks;               // per rank, from the timeline
  std::optional<int32_t> clock_reference;      // clock_reference(timeline)

  const std::string& name(uint32_t id) const { return strings->at(id); }
  std::vector<int32_t> ranks_with_data() const;  // every rank but the missing ones
};

// Why a rank whose shard says it captured `capture` ("nvtx,cuda mode=...")
// has no measured communication: every source that records communication
// (mpi, nccl, cuda's NCCL kernels, python's torch.distributed) left out.
// Empty where one was captured or the capture is not a list of sources.
std::string communication_uncaptured(std::string_view capture);

// kNoCollectivesReason or kNoMatchedCollectivesReason where it holds for
// `job`, or where no rank with data captured communication, why; empty otherwise.
std::string collectives_unmeasured(const JobProfile& job);

// The rank whose clock a timeline's times are on: the lowest rank with data
// that is synchronised at offset 0 and drift 0. `rankscope run` measures
// every clock against rank 0's, `import-kineto` against its reference rank's;
// ranks reading that very clock have offset 0 too. Nothing when no rank with
// data is on it (rank 0 of a captured job missing).
std::optional<int32_t> clock_reference(const Timeline& timeline);
// "rank 3's clock", or what is known of a reference no rank with data is on.
std::string clock_reference_text(std::optional<int32_t> reference);

// Why figures that need collectives are null: none was seen, or none on two ranks.
inline constexpr const char* kNoCollectivesReason =
    "no collective was seen: no MPI, NCCL or torch.distributed (c10d) collective on any rank (a PyTorch job's "
    "come from the Python hook of `rankscope run`, or from its torch.profiler traces)";
inline constexpr const char* kNoMatchedCollectivesReason =
    "no collective was matched across ranks: each one was seen on one rank only";
// Why a figure of a missing rank is null.
inline constexpr const char* kNoDataReason = "missing: the rank has no shard or trace";
// Why a figure of a rank with a shard or trace but not one event is null.
inline constexpr const char* kNoEventsReason = "the rank captured no event: `rankscope info` shows its counters";
// Why a figure of a rank whose every event was left out as damaged is null.
inline constexpr const char* kEventsDamagedReason =
    "every event of the rank lies in damaged rows of the timeline: `rankscope info --check` names them";
// Why a windowed rank's figures of a step are null (StepCut).
inline constexpr const char* kStepCutReason =
    "the step lay partly outside the rank's capture windows (--delay, --duration, triggers, --steps, "
    "--capture-range, --ring): what it did outside them was not recorded";
// Why step times are null: no rank of the job has an event to time a step by.
inline constexpr const char* kNoStepTimesReason =
    "no rank has an event to time a step by: `rankscope info` shows each rank's counters";
// kNoDataReason, kNoEventsReason, kEventsDamagedReason, or empty for a rank with figures.
inline const char* rank_unmeasured(const RankProfile& rank) {
  if (rank.status == RankStatus::kMissing) return kNoDataReason;
  switch (rank.events) {
    case RankEvents::kNoneCaptured: return kNoEventsReason;
    case RankEvents::kAllDamaged: return kEventsDamagedReason;
    case RankEvents::kRead: break;
  }
  return "";
}
// Why arrivals of different ranks cannot be compared on a timeline whose clocks were not aligned.
inline constexpr const char* kClocksNotAlignedReason =
    "the ranks' clocks were not aligned, so their arrival times cannot be compared";

// Reads the timeline twice, rank by rank, each process of `share` its part of
// the ranks; every process gets the whole profile and the timeline's damage
// as one process reading all would. Throws Error naming the file.
JobProfile build_profile(const Timeline& timeline, const WorkShare& share = {});

// ------------------------------------------------------------ analyses ---

// The step breakdown (docs/report.md, "Step breakdown"): each rank's step
// time by what it was spent on, each ns booked once, in this order: exposed
// communication (waiting for the last rank, or transfer nothing hid), then
// the host's phases (data loading, optimizer, backward, forward: the ranges
// of model/host_phases.h), then other.
enum class StepCategory : uint8_t { kCommunication, kDataLoading, kOptimizer, kBackward, kForward, kOther };
inline constexpr int kStepCategoryCount = 6;
const char* step_category_key(StepCategory category);    // JSON: "communication", "data_loading", ...
const char* step_category_label(StepCategory category);  // text: "communication", "data loading", ...

struct StepSplit {
  int64_t ns[kStepCategoryCount] = {};
  int64_t comm_wait_ns = 0, comm_transfer_ns = 0;  // communication's two parts
  int64_t total_ns = 0;                            // the step time split
};
struct RankBreakdown {
  int32_t rank = -1;
  std::string unmeasured;  // why the rank has no figures at all (missing, no event); empty when it has
  // Why a category was not measured (its time is then in other); empty when it was.
  std::string category_unmeasured[kStepCategoryCount];
  std::string split_unmeasured;  // why communication's wait and transfer cannot be told apart
  StepSplit total;               // over the steps it ran
  std::vector<std::optional<StepSplit>> steps;  // by JobProfile step; nothing for a step it did not run
};
std::vector<RankBreakdown> step_breakdown(const JobProfile& job);

// Holistic Trace Analysis' figures for one rank, by its definitions
// (docs/report.md, "--hta-compat"): GPU events classified by kernel name,
// HTA's window and its whole-µs rounding.
// HTA's idle time breakdown of one stream: each gap before a GPU operation
// (the previous operation's end to its start) is host wait where its
// launching call began after that end, else kernel wait below 30 µs, else other.
struct HtaStreamIdle {
  int64_t stream = 0;
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
};
// HTA's GPU kernel breakdown: the time of each kernel type alone and of each
// overlap of types ("COMPUTATION overlapping COMMUNICATION"), from the types'
// merged intervals.
struct HtaKernelType {
  std::string kernel_type;
  int64_t sum_ns = 0;
};
// HTA's CUDA kernel launch statistics (its cutoffs: 50 µs on the launch
// call, 100 µs on the launch delay).
struct HtaLaunchStats {
  uint64_t events = 0;                 // GPU operations joined to their launch call
  uint64_t short_kernels = 0;          // launch call ≤ 50 µs and the GPU's time shorter than the call's
  uint64_t runtime_outliers = 0;       // launch call > 50 µs
  uint64_t launch_delay_outliers = 0;  // GPU start − launch call end > 100 µs
};
struct HtaFigures {
  double comm_comp_overlap_pct = 0;  // NaN without communication kernels
  int64_t kernel_time_ns = 0;        // first GPU event's start to last one's end; 0: no GPU event, no breakdown
  double idle_pct = 0, compute_pct = 0, non_compute_pct = 0;
  std::vector<HtaStreamIdle> idle_breakdown;    // by stream
  std::vector<HtaKernelType> kernel_breakdown;  // in HTA's order of types
  HtaLaunchStats launch_stats;
};

struct RankOverlap {
  int32_t rank = -1;
  RankStatus status = RankStatus::kComplete;
  double comm_comp_overlap_pct = 0;  // 100 · |compute ∩ comm| / |comm|; NaN without communication
  int64_t compute_ns = 0, comm_ns = 0, overlap_ns = 0, exposed_wait_ns = 0, exposed_transfer_ns = 0, idle_ns = 0;
  // Why exposed wait and exposed transfer cannot be told apart (the rank
  // communicated, but its arrivals cannot be compared); empty when they can.
  std::string wait_unmeasured;
  // RankProfile::communication_uncaptured: communication, overlap and
  // exposed figures are then none of them measured.
  std::string comm_unmeasured;
  double idle_pct = 0;  // of the steps' time
  std::optional<HtaFigures> hta;  // with --hta-compat
};
std::vector<RankOverlap> overlap_by_rank(const JobProfile& job);

// A trace timestamp of `ns` nanoseconds as HTA reads it: the µs the trace
// writes, parsed to the nearest float64 (correctly rounded, as Python does).
double hta_microseconds(int64_t ns);

// HTA's overlap and temporal breakdown per rank, streamed from the timeline.
std::vector<std::optional<HtaFigures>> hta_figures(const Timeline& timeline);  // nothing for missing ranks

struct Straggler {
  int32_t rank = -1;
  double score = 0;        // 0..1: how sure, and how much it costs
  std::string cause;       // "slow compute", "slow link or node network", "workload imbalance", "rotating"
  std::string evidence;    // the figures that decided it, in one paragraph
  double last_arriver_rate = 0;    // share of its collectives it arrived last to
  double baseline_rate = 0;        // 1/n for its collectives
  int64_t blame_ns = 0;            // time others waited for it
  double blame_fraction = 0;       // blame over the job's total step time
  double compute_score_relative = 0;  // its compute per step against the fastest peer's (1 = as fast)
  double compute_score_individual = 0;  // against its own best step
  int64_t what_if_step_ns = 0;     // mean step time had it been as fast as the median rank
  int64_t actual_step_ns = 0;      // mean step time as measured
};
struct RankScores {
  int32_t rank = -1;
  double last_arriver_rate = 0;
  double baseline_rate = 0;
  int64_t blame_ns = 0;
  int64_t mean_wait_ns = 0;
  double compute_score_relative = 0;
  double compute_score_individual = 0;
  int64_t median_compute_ns = 0;   // per step
};
struct StragglerReport {
  std::vector<RankScores> ranks;
  std::vector<Straggler> stragglers;  // most likely first; empty when none
  std::string unmeasured;  // why no rank could be compared with another (fewer than two have data); else empty
};
StragglerReport find_stragglers(const JobProfile& job);

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

// ------------------------------------------------- what is slow in a step ---

// The job's bottlenecks (docs/report.md, "What is slow in a step"): each
// class's cost is the step time it took on the rank it cost most, per step
// on average, which fixing it would give back; ranked by that cost.
inline constexpr const char* kBottleneckClasses[] = {"data_loading", "launch_overhead", "sync_stall", "communication",
                                                     "transfer",     "memory",          "gpu_idle",   "straggler"};
struct Bottleneck {
  std::string klass;           // one of kBottleneckClasses
  int64_t cost_ns_per_step = 0;
  double step_share = 0;       // of the median step time of the rank it cost most
  std::vector<int32_t> ranks;  // the ranks where it costs at least its threshold
  std::string evidence;        // the figures that decided it
  std::string fix;             // what to change, from the decision workflow
};
struct KernelAcrossRanks {
  uint32_t name_id = 0;
  uint64_t count = 0;          // launches on every rank
  int64_t total_ns = 0;        // their time on every rank
  int32_t ranks = 0;           // ranks that ran it
  int64_t min_ns = 0, max_ns = 0;  // one launch's shortest and longest
  int64_t rank_min_ns = 0, rank_median_ns = 0, rank_max_ns = 0;  // its time on each rank that ran it
  int32_t rank_min = -1, rank_max = -1;
  std::array<uint64_t, KernelTotals::kBuckets> histogram{};  // launches by duration (device_work.h)
};
struct RankIdleGap {
  int32_t rank = -1;
  IdleGap gap;
};
struct BottleneckReport {
  std::vector<Bottleneck> found;  // ranked by cost, largest first; empty when none reached its threshold
  // Classes that could not be measured, with why (no GPU events, no data-loading ranges, ...).
  std::vector<std::pair<std::string, std::string>> unmeasured;
  std::vector<KernelAcrossRanks> top_by_time, top_by_count;  // kTopKernels each
  static constexpr size_t kTopKernels = 10;
  std::vector<RankIdleGap> largest_gaps;  // over every rank, longest first
};
struct RankEnd;  // below, "How each rank's process ended"
// `ends`: a rank the OOM killer ended makes the memory class, with its step.
BottleneckReport find_bottlenecks(const JobProfile& job, const std::vector<RankBreakdown>& breakdown,
                                  const StragglerReport& stragglers, const BucketReport& buckets,
                                  const std::vector<RankEnd>& ends);

// What capture cost one rank's process, from its agent's counters: the fixed
// parts measured, the per-call part estimated (recorded calls times the cost
// of one, calibrated on the rank's machine when it started).
struct CaptureCost {
  int32_t rank = -1;
  int64_t capture_ns = 0;       // agent start to shard close: the time the costs are a share of
  int64_t start_ns = 0;         // starting the agent in the process
  int64_t mpi_init_ns = 0;      // the MPI shim's own work in MPI_Init (clock sync round included)
  int64_t mpi_finalize_ns = 0;  // ... in MPI_Finalize, before the shard's last flush
  int64_t finish_ns = 0;        // the last flush of the shard
  int64_t flusher_cpu_ns = 0;   // CPU time of the agent's writer thread, beside the application
  uint64_t host_events = 0;     // calls recorded on the application's threads (timed polls included)
  uint64_t polls_counted = 0;   // MPI polls counted, not recorded
  int64_t events_ns = 0;        // estimated: host_events and polls_counted times the calibrated cost of each
  uint64_t buffer_bytes = 0;    // event buffer memory the rank used (of --buffer-mb)
  int64_t python_hook_ns = 0;   // measured: the Python hook's own code on the program's threads
  int64_t total_ns() const {
    return start_ns + mpi_init_ns + mpi_finalize_ns + finish_ns + flusher_cpu_ns + events_ns + python_hook_ns;
  }
  double share_pct() const { return capture_ns > 0 ? 100.0 * static_cast<double>(total_ns()) / static_cast<double>(capture_ns) : 0; }
};
// Ranks whose agent measured its cost (not imported traces), in rank order.
std::vector<CaptureCost> capture_cost(const Timeline& timeline);
// The rank capture cost the largest share of its run; `costs` is not empty.
const CaptureCost& largest_share(const std::vector<CaptureCost>& costs);

// A collective some ranks entered and never left: what a hang's dump wrote
// (run --hang-timeout), or what ranks ended by a signal were inside of.
struct HangEntry {
  int32_t rank = -1;
  int64_t since_ns = 0;   // when it entered, on the timeline's clock
  int64_t waited_ns = 0;  // until its state was written
};
// What a rank that never entered was doing when last heard from.
struct MissingRank {
  int32_t rank = -1;
  std::string status;        // the rank's status ("complete", "terminated", "dead", ...)
  std::string killed;        // describe_fatal_signal of the rank, or ""
  std::string inside;        // the collective it was inside of instead ("MPI_Bcast #4 of MPI_COMM_WORLD"), or ""
  std::vector<std::string> open_ranges;  // NVTX ranges open in its written state, outermost first
  std::string last_call;     // its last call that ended before the state was written ("MPI_Barrier"), or ""
  int64_t last_call_end_ns = 0;
  bool wrote_state = false;  // it wrote out its state (hang_dumps); false: only what it had flushed
  int64_t entered_at_ns = 0;  // when it entered the collective after all (the hang resolved); 0: never
};
struct Hang {
  std::string call;          // "MPI_Allreduce"
  CommOp op = CommOp::kNone;
  uint64_t comm_hash = 0;
  std::string comm;          // the communicator's name ("MPI_COMM_WORLD", "NCCL dp (8 ranks)")
  uint64_t seq = 0;
  // A NCCL send or receive, not a collective: one rank's, waiting for one
  // member, `peer` (its world rank; kNoPeer where it is not in the timeline).
  // Where the peer's kernel for the other half had begun too, the transfer
  // itself did not complete: the send's rank is in `entered` first, the peer after it.
  bool point_to_point = false;
  int32_t peer = kNoPeer;
  std::vector<HangEntry> entered;  // by rank
  std::vector<int32_t> missing_ranks;
  std::vector<MissingRank> missing;  // one per missing rank
  bool members_known = true;  // false: some members of the communicator are not in the timeline
};
// Every unfinished collective, and every NCCL send or receive whose kernel
// waited for its peer, or with its peer's for the transfer (the send's
// alone), but is no part of a deadlock (find_deadlocks has those), the
// longest waited first. Reads events only of jobs where a rank
// wrote a hang's state or did not end normally.
std::vector<Hang> find_hangs(const Timeline& timeline);
// A hang in a few lines: "HANG: MPI_Allreduce #3 of MPI_COMM_WORLD: ...", then one line per missing rank.
std::string describe_hang(const Hang& hang);

// Ranks that ended, or wrote a hang's state, each inside a point-to-point
// call that waits for one peer (a receive from it, a send to it), in a
// cycle: none of them could go on. A hang with no collective in it.
struct MessageWait {
  int32_t rank = -1;
  int32_t peer = -1;      // the world rank it waited for
  std::string inside;     // "MPI_Recv from rank 1, tag 5"
  int64_t since_ns = 0;   // when it entered the call, on the timeline's clock
  int64_t waited_ns = 0;  // until its state was written
};
struct Deadlock {
  std::vector<MessageWait> waits;  // each waits for the next one's rank, the last for the first's; the lowest rank first
};
// Every such cycle, the one with the longest wait first. Reads events only
// of jobs where a rank wrote a hang's state or did not end normally.
std::vector<Deadlock> find_deadlocks(const Timeline& timeline);
// "DEADLOCK: ranks 0 > 1 > 2 > 0 each wait for the next: ...", then one line per rank.
std::string describe_deadlock(const Deadlock& deadlock);

// How each rank's process ended and what it used (docs/report.md, "How
// ranks ended"): the process_* counters of the agent or, for a process
// killed before its shard was closed, of `rankscope run`.
struct ProcessUsage {
  uint64_t peak_rss_bytes = 0;
  uint64_t user_cpu_ns = 0;
  uint64_t system_cpu_ns = 0;
  uint64_t involuntary_switches = 0;
  uint64_t major_faults = 0;
};
// A fatal signal the agent caught, the shard closed first (the crash_* counters).
struct Crash {
  int signal = 0;
  int code = 0;           // the kernel's si_code; 0: a process sent it (abort(), kill)
  uint64_t address = 0;   // the fault's address (SIGSEGV, SIGBUS) or instruction (SIGFPE, SIGILL); 0: none given
  uint64_t thread = 0;    // the crashing thread's id, its thread track's
  int64_t sender_pid = 0;  // the process that sent it, where one did (code 0); 0: not known
  bool sent_by_itself = false;  // sender_pid is the rank's own (abort(), raise(), a handler passing a fault on)
  std::string where;      // the code it faulted in ("crash_app+0x12a4"), from its crash instant; "" where not known
};
struct RankEnd {
  int32_t rank = -1;
  RankStatus status = RankStatus::kMissing;
  int killed_by_signal = 0;  // 0: not killed before its shard was closed (or not known)
  uint64_t oom_kills = 0;    // in its memory cgroup while it ran
  int stopped_by_signal = 0;  // the signal that last stopped it (SIGSTOP, SIGTSTP); 0: never stopped
  uint64_t stopped_ns = 0;    // the time it spent stopped, in all
  std::optional<Crash> crash;  // a `crashed` rank's
  std::optional<ProcessUsage> usage;
  std::optional<int> mpi_abort_code;  // an `aborted` rank's that called MPI_Abort
  std::optional<int> exit_status;  // where the agent saw it (exit, main's return, _exit)
  int terminating_signal = 0;  // a `terminated` rank's

  // A crash, caught by the agent or only seen by `rankscope run` (one before
  // the agent's handlers were in place, or under a handler the program set first).
  bool crashed() const { return crash.has_value() || is_crash_signal(killed_by_signal); }
};
// One rank's end from its counters: a timeline's, or those `rankscope run`
// writes for the process it saw killed.
RankEnd rank_end(int32_t rank, RankStatus status, const Counters& counters, int64_t pid);
std::vector<RankEnd> rank_ends(const Timeline& timeline);  // by rank
// How a rank that was neither killed nor crashed ended early, said once for
// info and report: "exited with status 3 (exit or a return from main)
// without calling MPI_Finalize; its shard was closed at exit", "called
// MPI_Abort with code 2", "ended by _exit(1) ...", "ended by SIGTERM
// (signal 15); its shard was closed first". Empty for other ends.
std::string describe_early_end(const RankEnd& end);
// The steps capture windows cut and on which ranks (JobProfile::steps_cut),
// up to four named: "step 12 on ranks 0-3: it lay partly outside ...".
std::string describe_steps_cut(const JobProfile& job);
// How a fatal signal ended the rank: "killed by SIGKILL (signal 9) before
// its shard was closed; the kernel's OOM killer killed 1 process of its
// memory cgroup meanwhile; peak memory 310 MiB", or "crashed with SIGSEGV
// (signal 11: address not mapped) at 0x0 on thread 4242; its shard was
// closed first, with the calls it was inside; peak memory 40 MiB" (one the
// agent never caught: "crashed with SIGSEGV (signal 11) before its shard was
// closed, where its capture could not catch the crash"); "" for a rank
// neither killed nor crashed.
std::string describe_fatal_signal(const RankEnd& end);
// "peak memory per rank: median 42 MiB, largest 310 MiB (rank 2)"; "" when no rank recorded it.
std::string peak_memory_summary(const std::vector<RankEnd>& ends);

// Events a rank's capture saw that its timeline lacks, by the counter that
// counted them (counter::kEventLossCounters): its figures undercount.
struct EventLoss {
  int32_t rank = -1;
  std::vector<std::pair<std::string, uint64_t>> counted;  // counter, events; in kEventLossCounters' order, none 0
  uint64_t events() const;  // their sum
};
std::vector<EventLoss> event_losses(const Timeline& timeline);  // the ranks that lost events, by rank
// "1210 events captured are not in the timeline (rank 0: 1200 events_dropped,
// 10 cupti_records_dropped; ...)"; "" for no loss.
std::string event_loss_summary(const std::vector<EventLoss>& losses);

struct Report {
  JobProfile profile;
  std::vector<RankBreakdown> breakdown;
  std::vector<RankOverlap> overlap;
  StragglerReport stragglers;
  BucketReport buckets;
  std::vector<CaptureCost> capture_cost;
  std::vector<Hang> hangs;
  std::vector<Deadlock> deadlocks;
  std::vector<RankEnd> ends;
  TimelineDamage damage;  // rows the analyses left out, found while reading
  std::vector<EventLoss> losses;
  BottleneckReport bottlenecks;
};
struct ReportOptions {
  bool hta_compat = false;  // overlap and the temporal breakdown by HTA's definitions (docs/report.md)
};
Report make_report(const Timeline& timeline, const ReportOptions& options = {}, const WorkShare& share = {});

std::string report_text(const Report& report);   // fits one screen
std::string report_json(const Report& report);   // docs/report.md
std::string report_html(const Report& report);   // one self-contained page

// The damage object of `report --format json` and `info --json` (docs/format.md).
void write_damage_json(JsonWriter& json, const TimelineDamage& damage);

// The JSON of clocks, the same in report and info: inside an open object,
// `corrected` and `reference_rank`; and one rank's `rank`, `status`,
// `synced`, `offset_ns`, `drift_ppm`, `bound_ns` (null with a reason where
// nothing was measured).
void write_clock_reference_json(JsonWriter& json, bool corrected, std::optional<int32_t> reference);
void write_clock_json(JsonWriter& json, int32_t rank, RankStatus status, const RankClock& clock);

// Writes the matched collectives into the timeline as /collectives (docs/format.md).
void write_collectives_table(const std::string& timeline_path, const JobProfile& job);

}  // namespace rankscope::analysis
