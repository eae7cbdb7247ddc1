// What `rankscope report` knows about a job: its profile, the ground every
// analysis stands on. The profile is built from a timeline in two streaming
// passes (memory grows with ranks × steps and ranks × collectives, never with
// events); every analysis is then a pure function of the profile.
// Definitions: docs/report-reference.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analysis/device_work.h"
#include "rankscope/analysis/work_share.h"
#include "rankscope/model/event.h"
#include "rankscope/timeline/timeline.h"

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
  int64_t second_last_arrival_ns() const;
  int64_t transfer_ns() const;              // X(c) = min over ranks of (end − start)
};
// transfer_ns() one participation at a time: the shorter of `shortest` and
// p's execution, where p's is known (kUnknown: none seen yet).
int64_t shorter_execution(int64_t shortest, const Participation& p);

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
  // HTA's window of its GPU work (hta.h): its ProfilerStep# ranges on any
  // thread, unfinished ones too, and when the last of them began.
  uint64_t profiler_step_ranges = 0;
  int64_t last_profiler_step_begin_ns = kUnknown;
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

// Writes the matched collectives into the timeline as /collectives (docs/format.md).
void write_collectives_table(const std::string& timeline_path, const JobProfile& job);

// The steps capture windows cut and on which ranks (JobProfile::steps_cut),
// up to four named: "step 12 on ranks 0-3: it lay partly outside ...".
std::string describe_steps_cut(const JobProfile& job);

}  // namespace rankscope::analysis
