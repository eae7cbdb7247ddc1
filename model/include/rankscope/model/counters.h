// Every data-quality counter by name, with what it means: the one registry
// the agent, the merge and the importers name their counters from and
// `rankscope info` explains them with (`rankscope info --counters` lists it).
// Counters whose names start with kCostPrefix are what capture cost, and
// those that start with kProcessPrefix what the rank's process used; neither
// is a problem with the data.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "rankscope/model/metadata.h"

namespace rankscope::counter {

// The capture (agent, MPI shim):
inline constexpr std::string_view kEventsDropped = "events_dropped";
inline constexpr std::string_view kAgentErrors = "agent_errors";
inline constexpr std::string_view kShardWriteErrors = "shard_write_errors";
inline constexpr std::string_view kShardReopened = "shard_reopened";
inline constexpr std::string_view kStoppedBySignal = "stopped_by_signal";
inline constexpr std::string_view kStoppedNs = "stopped_ns";
inline constexpr std::string_view kEventsUnwritten = "events_unwritten";
inline constexpr std::string_view kNamesDropped = "names_dropped";
inline constexpr std::string_view kSourcesOff = "capture_sources_off";
inline constexpr std::string_view kNothingCaptured = "nothing_captured";
inline constexpr std::string_view kTerminatedBySignal = "terminated_by_signal";
inline constexpr std::string_view kMpiAborted = "mpi_aborted";
inline constexpr std::string_view kMpiAbortCode = "mpi_abort_code";
inline constexpr std::string_view kEndedByExitCall = "ended_by_exit_call";
inline constexpr std::string_view kExitStatus = "exit_status";
inline constexpr std::string_view kMpiNotFinalized = "mpi_not_finalized";
inline constexpr std::string_view kSidecarRefusedMpiInit = "sidecar_refused_mpi_init";
// A fatal signal the agent caught, its shard closed first (docs/agent-reference.md, "How each rank ended"):
inline constexpr std::string_view kCrashSignal = "crash_signal";
inline constexpr std::string_view kCrashSignalCode = "crash_signal_code";
inline constexpr std::string_view kCrashAddress = "crash_address";
inline constexpr std::string_view kCrashThread = "crash_thread";
inline constexpr std::string_view kCrashSenderPid = "crash_sender_pid";
inline constexpr std::string_view kHangDumps = "hang_dumps";
inline constexpr std::string_view kRingDumps = "ring_dumps";
inline constexpr std::string_view kRingEventsAgedOut = "ring_events_aged_out";
inline constexpr std::string_view kRingEventsCrowdedOut = "ring_events_crowded_out";
inline constexpr std::string_view kEventsOutsideWindow = "events_outside_window";
inline constexpr std::string_view kCaptureWindows = "capture_windows";
inline constexpr std::string_view kCaptureWindowsUnrecorded = "capture_windows_unrecorded";
inline constexpr std::string_view kMpiPollsUnrecorded = "mpi_polls_unrecorded";
inline constexpr std::string_view kMpiPollNsUnrecorded = "mpi_poll_ns_unrecorded";
inline constexpr std::string_view kMpiPollsTimed = "mpi_polls_timed";
inline constexpr std::string_view kMpiRequestsUntracked = "mpi_requests_untracked";
inline constexpr std::string_view kClockMeasuredAtEndsOnly = "clock_measured_at_ends_only";
// How a process ended that could not close its shard, as `rankscope run`,
// its parent, saw it (docs/agent-reference.md, "How each rank ended"):
inline constexpr std::string_view kKilledBySignal = "killed_by_signal";
inline constexpr std::string_view kOomKills = "oom_kills";
// CUDA capture (CUPTI) and NCCL's profiler plugin:
inline constexpr std::string_view kCuptiRecordsDropped = "cupti_records_dropped";
inline constexpr std::string_view kCuptiRecordsWithoutTimestamps = "cupti_records_without_timestamps";
inline constexpr std::string_view kCuptiLeftToOtherClient = "cupti_left_to_other_client";
inline constexpr std::string_view kNcclHandlesExhausted = "nccl_handles_exhausted";
inline constexpr std::string_view kNcclEventsWithoutContext = "nccl_events_without_context";
inline constexpr std::string_view kNcclChannelsUnparented = "nccl_kernel_channels_unparented";
inline constexpr std::string_view kNcclChannelsLate = "nccl_kernel_channels_late";
inline constexpr std::string_view kNcclChannelsUnexpected = "nccl_kernel_channels_unexpected";
inline constexpr std::string_view kNcclGpuWindowsPartial = "nccl_gpu_windows_partial";
inline constexpr std::string_view kNcclGpuTimeAfterCallback = "nccl_gpu_time_after_callback";
inline constexpr std::string_view kNcclGpuOffsetRaisedMaxNs = "nccl_gpu_offset_raised_max_ns";
// rankscope's hook in a Python interpreter (docs/pytorch.md):
inline constexpr std::string_view kPythonPrefix = "python_";
inline constexpr std::string_view kPythonHookAttached = "python_hook_attached";
inline constexpr std::string_view kPythonTorchHooked = "python_torch_hooked";
// python_torch_hooked's bits: what the hook could hook in torch.
enum PythonTorchHooked : uint32_t {
  kHookedSteps = 1 << 0,          // the optimizer's global step hooks
  kHookedDataLoading = 1 << 1,    // DataLoader's __next__
  kHookedPhases = 1 << 2,         // forward on DDP and FSDP modules, torch.autograd.backward
  kHookedCollectives = 1 << 3,    // ProcessGroup pre and post hooks (torch 2.15 on)
  kHookedTorchImported = 1 << 4,  // torch was imported, and the hook looked at it
};
inline constexpr std::string_view kPythonHookNotRun = "python_hook_not_run";
inline constexpr std::string_view kPythonHookErrors = "python_hook_errors";
inline constexpr std::string_view kPythonCollectiveEndsUnknown = "python_collective_ends_unknown";
inline constexpr std::string_view kPythonRangesLost = "python_ranges_lost";
inline constexpr std::string_view kTorchelasticRestarts = "torchelastic_restarts";
// The merge, reading shards and checking clocks:
inline constexpr std::string_view kChunksCorrupt = "shard_chunks_corrupt";
inline constexpr std::string_view kEventsLost = "shard_events_lost";
inline constexpr std::string_view kBytesSkipped = "shard_bytes_skipped";
inline constexpr std::string_view kTruncatedBytes = "shard_truncated_bytes";
inline constexpr std::string_view kNamesMissing = "event_names_missing";
inline constexpr std::string_view kClockViolations = "clock_violations";
inline constexpr std::string_view kClockViolationsP2p = "clock_violations_p2p";
inline constexpr std::string_view kClockViolationWorstNs = "clock_violation_worst_ns";
inline constexpr std::string_view kClockCheckSkipped = "clock_check_skipped";
inline constexpr std::string_view kP2pUnmatched = "p2p_unmatched";
inline constexpr std::string_view kClockViolationsRepaired = "clock_violations_repaired";
inline constexpr std::string_view kClockViolationsP2pRepaired = "clock_violations_p2p_repaired";
// torch.profiler traces read by `rankscope import-kineto`:
inline constexpr std::string_view kKinetoMalformed = "kineto_events_malformed";
inline constexpr std::string_view kKinetoMissingFields = "kineto_events_missing_fields";
inline constexpr std::string_view kKinetoBadTimes = "kineto_events_bad_times";
inline constexpr std::string_view kKinetoIdsOutOfRange = "kineto_ids_out_of_range";
inline constexpr std::string_view kKinetoUnsupported = "kineto_events_unsupported";
inline constexpr std::string_view kKinetoTruncated = "kineto_file_truncated";
inline constexpr std::string_view kKinetoBytesSkipped = "kineto_bytes_skipped";
inline constexpr std::string_view kKinetoUnmatched = "kineto_collectives_unmatched";
inline constexpr std::string_view kKinetoUnaligned = "kineto_clock_unaligned";
inline constexpr std::string_view kKinetoInconsistent = "kineto_clock_inconsistent";
inline constexpr std::string_view kKinetoDoubtful = "kineto_clock_doubtful";
inline constexpr std::string_view kKinetoClockHostContradicted = "kineto_clock_host_contradicted";
inline constexpr std::string_view kKinetoC10dUnexecuted = "kineto_c10d_unexecuted";
inline constexpr std::string_view kKinetoC10dGroupUnknown = "kineto_c10d_group_unknown";
inline constexpr std::string_view kKinetoC10dWaitsInferred = "kineto_c10d_waits_inferred";
inline constexpr std::string_view kKinetoCategoryUnknown = "kineto_events_category_unknown";
inline constexpr std::string_view kKinetoKernelsMissing = "kineto_kernels_missing";
// What capture cost the rank (docs/agent-reference.md, "What capture costs"):
inline constexpr std::string_view kCostPrefix = "agent_cost_";
inline constexpr std::string_view kCostCaptureNs = "agent_cost_capture_ns";
inline constexpr std::string_view kCostStartNs = "agent_cost_start_ns";
inline constexpr std::string_view kCostMpiInitNs = "agent_cost_mpi_init_ns";
inline constexpr std::string_view kCostMpiFinalizeNs = "agent_cost_mpi_finalize_ns";
inline constexpr std::string_view kCostFinishNs = "agent_cost_finish_ns";
inline constexpr std::string_view kCostFlusherCpuNs = "agent_cost_flusher_cpu_ns";
inline constexpr std::string_view kCostEventPs = "agent_cost_event_ps";
inline constexpr std::string_view kCostPollPs = "agent_cost_poll_ps";
// 1 where the calibration could not tell a poll's cost from MPI's own call:
// kCostPollPs is then 0, and the counted polls' share is not known.
inline constexpr std::string_view kCostPollUnresolved = "agent_cost_poll_unresolved";
inline constexpr std::string_view kCostBufferBytes = "agent_cost_buffer_bytes";
inline constexpr std::string_view kCostPythonHookNs = "agent_cost_python_hook_ns";

// What the rank's process used, as the kernel counted it (getrusage): the
// agent's figures as it closed the shard, `rankscope run`'s where the
// process was killed.
inline constexpr std::string_view kProcessPrefix = "process_";
inline constexpr std::string_view kProcessPeakRssBytes = "process_peak_rss_bytes";
inline constexpr std::string_view kProcessUserCpuNs = "process_user_cpu_ns";
inline constexpr std::string_view kProcessSystemCpuNs = "process_system_cpu_ns";
inline constexpr std::string_view kProcessInvoluntarySwitches = "process_involuntary_switches";
inline constexpr std::string_view kProcessMajorFaults = "process_major_faults";

// The counters of events a rank's capture saw (or a trace held) that its
// timeline lacks: that rank's figures undercount what it did (`report`'s
// INCOMPLETE line). Events left out by choice (a paused capture, the flight
// recorder's window, polls only counted) are not among them.
inline constexpr std::string_view kEventLossCounters[] = {
    kEventsDropped,       kEventsUnwritten,      kRingEventsCrowdedOut,          kMpiRequestsUntracked,
    kCuptiRecordsDropped, kNcclHandlesExhausted, kCuptiRecordsWithoutTimestamps, kNcclEventsWithoutContext,
    kEventsLost,          kKinetoMalformed,      kKinetoMissingFields,           kKinetoBadTimes};

struct Definition {
  std::string_view name;
  std::string_view meaning;  // one line, as `rankscope info` prints it
};

// Every counter above, in that order.
std::span<const Definition> registry();

// What a counter means; "" for a name not in the registry.
std::string_view meaning(std::string_view name);

// Why a rank captured nothing (nothing_captured = 1), as its counters and its
// capture setting ("mpi,nvtx,python mode=sidecar ...", RankMetadata::capture)
// tell: each cause that holds, in a sentence joined by "; ".
std::string nothing_captured_causes(const Counters& counters, std::string_view capture);

// Whether a counter states what capture cost rather than a problem.
constexpr bool is_cost(std::string_view name) { return name.starts_with(kCostPrefix); }
// Whether a counter states what the rank's process used rather than a problem.
constexpr bool is_process_usage(std::string_view name) { return name.starts_with(kProcessPrefix); }

}  // namespace rankscope::counter
