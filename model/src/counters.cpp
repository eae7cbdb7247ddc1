#include "rankscope/model/counters.h"

#include <vector>

namespace rankscope::counter {
namespace {

constexpr Definition kRegistry[] = {
    {kEventsDropped, "events dropped because the agent's buffers were full"},
    {kAgentErrors, "internal failures in the agent (capture was disabled on that rank)"},
    {kShardWriteErrors, "chunks the agent could not write to its shard"},
    {kShardReopened,
     "times the program closed the shard's descriptor (as a program closing the descriptors it did not open does) "
     "or put a file of its own in its place, and the agent opened the shard again; nothing was lost"},
    {kEventsUnwritten, "events captured but not written: the shard could not be written"},
    {kNamesDropped, "names not recorded: the agent's string table was full"},
    {kSourcesOff, "requested capture sources that could not start, or stopped part way (the run's stderr says why)"},
    {kNothingCaptured,
     "1: the rank ran but captured no event; `rankscope info` and the run's warning say why, from its other "
     "counters"},
    {kTerminatedBySignal,
     "the signal that ended the process; the agent closed the shard first (mpirun ends the other ranks this way when "
     "one dies)"},
    {kMpiAborted, "1: the rank called MPI_Abort; the agent closed its shard first"},
    {kMpiAbortCode, "the errorcode the rank gave MPI_Abort"},
    {kEndedByExitCall,
     "1: the process ended by _exit, which runs no exit handlers (Open MPI ends a rank so when MPI aborts it: an "
     "error under MPI_ERRORS_ARE_FATAL, a peer lost); the agent closed its shard first, with the calls it was inside"},
    {kExitStatus,
     "the status the process ended with: given to _exit (not 0 shows the rank as aborted), or to exit() or returned "
     "from main by a rank that never called MPI_Finalize"},
    {kMpiNotFinalized,
     "1: the rank started MPI and ended (exit, a return from main, _exit) without calling MPI_Finalize: peers may "
     "have waited for it in vain, and its last clock measurement is the one at MPI_Init (the rank's status is "
     "`exited`, unless a signal or MPI_Abort ended it)"},
    {kSidecarRefusedMpiInit,
     "1: the program called MPI_Init in sidecar mode, where `rankscope run` is the job's MPI process, and was "
     "stopped there with status 1 (`rankscope run --mode inprocess` profiles it)"},
    {kCrashSignal,
     "the fatal signal that ended the process: a crash (11 SIGSEGV, 7 SIGBUS, 8 SIGFPE, 4 SIGILL) or abort() (6 "
     "SIGABRT: an assert, std::terminate, a watchdog); the agent closed the shard first, with the calls it was inside "
     "(the rank's status is `crashed`)"},
    {kCrashSignalCode,
     "why the kernel raised that signal (its si_code: for SIGSEGV 1 address not mapped, 2 no permission); 0 where a "
     "process sent it (abort(), kill)"},
    {kCrashAddress, "the faulting address (SIGSEGV, SIGBUS) or instruction (SIGFPE, SIGILL) the kernel gave"},
    {kCrashThread, "the thread id (gettid) of the thread that crashed, its thread track's id"},
    {kCrashSenderPid,
     "the process that sent the crash signal, where a process did (crash_signal_code 0): the rank's own pid for "
     "abort(), raise() or a handler passing a fault on (Python's faulthandler), which leaves the address unknown"},
    {kHangDumps,
     "1: a rank of the job was inside one collective longer than --hang-timeout, and this rank wrote out its state "
     "(the calls it was inside, as incomplete events: `report`'s hangs)"},
    {kRingDumps,
     "times the flight recorder (--ring) wrote what it held: at the end, on a hang, on SIGUSR2; 0 where it never did"},
    {kRingEventsAgedOut, "events the flight recorder (--ring) let go unwritten: older than its window when it wrote"},
    {kRingEventsCrowdedOut,
     "events the flight recorder (--ring) let go unwritten within its window, for room: --buffer-mb held less than "
     "the window"},
    {kEventsOutsideWindow,
     "events not recorded: capture was paused (--delay, --duration, --paused, `rankscope trigger`); counted only"},
    {kCaptureWindows, "capture windows this rank opened (--delay, `rankscope trigger JOB start`), the first one included"},
    {kCaptureWindowsUnrecorded,
     "capture windows that opened and closed faster than the agent could note them (over 256 between two flushes): "
     "the report takes the steps inside them for cut"},
    {kMpiPollsUnrecorded, "MPI_Test* and Iprobe calls that found nothing: counted rather than recorded"},
    {kMpiPollNsUnrecorded, "the time spent in those polls, in ns, estimated from the timed ones"},
    {kMpiPollsTimed, "polls timed (one in 256 per thread) for that estimate"},
    {kMpiRequestsUntracked,
     "nonblocking requests posted while the agent's request table was full: their completions are not recorded"},
    {kClockMeasuredAtEndsOnly,
     "1 on a rank whose clock was measured at MPI_Init and MPI_Finalize alone in a run longer than the rounds' "
     "interval (its MPI gave the agent no thread for rounds: --clock-thread always asks for one): its correction "
     "between them is a straight line, whatever its clock did"},
    {kKilledBySignal,
     "the signal that ended the process before its shard was closed (9, SIGKILL: kill -9, the OOM killer, mpirun "
     "signalled twice; or a crash the agent does not catch), as `rankscope run` saw it: events after the last flush "
     "are lost"},
    {kStoppedBySignal,
     "the signal that last stopped the process (SIGSTOP, SIGTSTP), as its `rankscope run` saw it: frozen meanwhile, "
     "not hung (stopped_ns: for how long in all)"},
    {kStoppedNs, "the time in ns a signal kept the process stopped, in all, as its `rankscope run` saw it"},
    {kOomKills,
     "processes the kernel's OOM killer killed in the rank's memory cgroup while it ran (memory.events or "
     "memory.oom_control); beside killed_by_signal = 9, the likely killer"},
    {kCuptiRecordsDropped, "CUDA activity records CUPTI dropped because it had no buffer for them"},
    {kCuptiRecordsWithoutTimestamps,
     "CUDA activity records without timestamps (a kernel that had not run at the final flush), not recorded"},
    {kCuptiLeftToOtherClient,
     "1: CUDA capture stopped part way: another CUPTI client (torch.profiler, Nsight) subscribed, and rankscope left "
     "CUPTI to it; the rank's GPU work after that is not on the timeline"},
    {kNcclHandlesExhausted, "NCCL tasks not recorded: every ring slot tried was still being enqueued"},
    {kNcclEventsWithoutContext, "NCCL tasks of a communicator whose init gave no context (out of memory)"},
    {kNcclChannelsUnparented, "NCCL KernelCh events whose parent is not a recorded task (its start had no handle)"},
    {kNcclChannelsLate, "NCCL KernelCh starts or stops that came after their task's slot was reused"},
    {kNcclChannelsUnexpected, "NCCL KernelCh stops beyond the task's nChannels (after its GPU event was recorded)"},
    {kNcclGpuWindowsPartial, "NCCL GPU events recorded without the last of nChannels (at slot reuse or at the end)"},
    {kNcclGpuTimeAfterCallback, "NCCL GPU stop stamps that mapped later than their callback; each raised the offset"},
    {kNcclGpuOffsetRaisedMaxNs, "the largest total raise of one NCCL communicator's GPU clock offset, in ns"},
    {kPythonHookAttached, "1: rankscope's hook ran in the rank's Python interpreter"},
    {kPythonTorchHooked,
     "what the Python hook hooked in torch, as bits: 16 torch was imported, 1 steps (the optimizer's), 2 data "
     "loading, 4 forward and backward, 8 torch.distributed collectives; 0: torch was never imported"},
    {kPythonHookNotRun,
     "1: the rank's process is a Python interpreter the hook did not run in (python -I or -E ignores "
     "PYTHONPATH, -S imports no sitecustomize): its steps, phases and torch.distributed collectives were not "
     "captured"},
    {kPythonHookErrors,
     "exceptions inside the Python hook, caught and never raised into the program (the first is said on stderr): "
     "what they would have recorded is missing"},
    {kPythonCollectiveEndsUnknown,
     "torch.distributed collectives whose completion the hook could not see (no future, never waited on from "
     "Python before the next step): recorded ending where they began, with no time in flight"},
    {kPythonRangesLost,
     "ranges of the Python hook (steps, phases, data loading) not recorded: more were open at once than it "
     "holds (64)"},
    {kTorchelasticRestarts,
     "times torchelastic restarted this rank's worker before the run the timeline holds: each earlier run's shard "
     "is kept in the shard folder's restart-N/ (`rankscope merge` makes a timeline of it)"},
    {kChunksCorrupt, "shard chunks that failed their checksum and were skipped"},
    {kEventsLost, "events in shard chunks that were damaged or cut short"},
    {kBytesSkipped, "unreadable shard bytes skipped to reach the next whole chunk"},
    {kTruncatedBytes, "bytes of a last shard chunk cut short (process killed or disk full)"},
    {kNamesMissing, "events whose name string was lost with a damaged chunk"},
    {kClockViolations, "collectives this rank left before the last rank entered, beyond both clock bounds"},
    {kClockViolationsP2p, "point-to-point messages this rank received before their send began, beyond both clock bounds"},
    {kClockViolationWorstNs,
     "the largest gap beyond the bounds of this rank's violations, collectives and messages alike, in ns"},
    {kClockCheckSkipped, "collective and point-to-point events not checked: beyond merge --check-memory-mb"},
    {kP2pUnmatched,
     "sends and receives whose other half is in no shard: a dead or missing peer, or dropped events; not checked"},
    {kClockViolationsRepaired,
     "clock_violations found before merge --repair-clock shifted the clocks; clock_violations counts what is left"},
    {kClockViolationsP2pRepaired,
     "clock_violations_p2p found before merge --repair-clock shifted the clocks; clock_violations_p2p counts what is "
     "left"},
    {kKinetoMalformed, "trace events that are not valid JSON objects (or whose brackets do not balance), skipped"},
    {kKinetoMissingFields, "trace events without \"ph\", \"ts\" or \"dur\", skipped"},
    {kKinetoBadTimes,
     "trace events with a timestamp that is not a number, or a negative or absurd (over a day) duration, skipped"},
    {kKinetoIdsOutOfRange,
     "ids (correlation, External id, sizes) outside 0..INT64_MAX: dropped from their event, which is kept"},
    {kKinetoUnsupported, "trace events of phases not imported (B/E pairs, async events)"},
    {kKinetoTruncated, "1: the trace file ends early (cut short, or damaged gzip data)"},
    {kKinetoBytesSkipped, "bytes of the trace skipped to get past damaged events"},
    {kKinetoUnmatched, "communication kernels and c10d collectives matched to no other rank's"},
    {kKinetoUnaligned,
     "1: no clock offset could be estimated that the import could defend (no communication shared with an aligned "
     "rank, or see kineto_clock_doubtful): the rank's times are not on the reference rank's clock"},
    {kKinetoInconsistent,
     "1: the causality bounds of the rank's collectives contradict each other (clock drift, or mismatched kernels); "
     "its bound is the spread instead"},
    {kKinetoDoubtful,
     "1: collectives matched with an aligned rank did not support a bound (too few, ends scattered beyond the bound "
     "causality leaves, or an offset of over an hour), so the rank was not aligned; import-kineto said why"},
    {kKinetoClockHostContradicted,
     "1: the trace names an aligned rank's host, but causality in their collectives rules out one clock (hosts "
     "that share a name): aligned from its collectives instead"},
    {kKinetoC10dUnexecuted, "c10d collective calls with no gloo range to end them: each ends where its call does"},
    {kKinetoC10dGroupUnknown,
     "c10d collective calls of a rank that the trace lists in several process groups (or none), none named: not "
     "matched with other ranks' (comm_hash 0)"},
    {kKinetoC10dWaitsInferred,
     "waits for c10d work inferred, not read from the trace: the calling thread ran nothing from before its "
     "collective completed until just after"},
    {kKinetoCategoryUnknown,
     "trace events of a category rankscope does not know (neither the host's ops and runtime calls nor a device's "
     "kernels, copies, memsets, synchronisations or ranges), not imported; import-kineto named each category once"},
    {kKinetoKernelsMissing,
     "kernel launch calls (cudaLaunchKernel and the like) in a trace that recorded no kernel at all: the GPU's work "
     "is not in the timeline, whose figures are the host's alone"},
    {kCostCaptureNs, "capture cost: the agent's life in the process, from its start to the shard's close, in ns"},
    {kCostStartNs, "capture cost: starting the agent in the process, in ns"},
    {kCostMpiInitNs, "capture cost: the MPI shim's own work in MPI_Init (clock sync, communicator table), in ns"},
    {kCostMpiFinalizeNs, "capture cost: the MPI shim's own work in MPI_Finalize, in ns"},
    {kCostFinishNs, "capture cost: the last flush before the shard is closed, in ns"},
    {kCostFlusherCpuNs, "capture cost: the CPU time of the agent's writer thread, in ns"},
    {kCostEventPs, "capture cost: one recorded call, calibrated in the process, in ps"},
    {kCostPollPs, "capture cost: one poll that is only counted, calibrated in the process, in ps"},
    {kCostPollUnresolved,
     "capture cost: the calibration could not tell a counted poll's cost from MPI's own call on this machine "
     "(ranks outnumbering cores, mostly): the counted polls' part of the cost is not known"},
    {kCostBufferBytes, "capture cost: event buffer memory the agent used, in bytes"},
    {kCostPythonHookNs, "capture cost: the time the Python hook spent in its own code on the program's threads, in ns"},
    {kProcessPeakRssBytes, "the process's peak resident memory, in bytes (ru_maxrss)"},
    {kProcessUserCpuNs, "CPU time the process's threads ran in user mode, in ns"},
    {kProcessSystemCpuNs, "CPU time the kernel ran for the process's threads, in ns"},
    {kProcessInvoluntarySwitches,
     "times the kernel took a core from one of the process's threads to run another (ru_nivcsw): thousands a second "
     "mean more runnable threads than cores"},
    {kProcessMajorFaults, "page faults the process waited on a disk read for (ru_majflt): memory paged out, or files "
                          "mapped and read for the first time"},
};

}  // namespace

std::span<const Definition> registry() { return kRegistry; }

std::string_view meaning(std::string_view name) {
  for (const Definition& definition : kRegistry) {
    if (definition.name == name) return definition.meaning;
  }
  return {};
}

std::string nothing_captured_causes(const Counters& counters, std::string_view capture) {
  std::vector<std::string> causes;
  const bool sidecar = capture.find("mode=sidecar") != std::string_view::npos;
  const bool python = capture.find("python") != std::string_view::npos;
  if (capture.starts_with("kineto import")) {
    causes.push_back("its trace held no event rankscope imports (the import's warnings say what it left out)");
  } else if (counters.get(kSidecarRefusedMpiInit) != 0) {
    causes.push_back("its program calls MPI_Init, so sidecar mode stopped it there: profile it with `rankscope run "
                     "--mode inprocess`");
  } else if (counters.get(kPythonHookNotRun) != 0) {
    causes.push_back("its Python interpreter ignored PYTHONPATH or sitecustomize (python -I, -E or -S), so "
                     "rankscope's Python hook, which captures torch's steps and collectives, did not run");
  } else if (counters.get(kPythonHookAttached) != 0 && counters.get(kPythonTorchHooked) == 0) {
    causes.push_back("its Python program never imported torch, whose steps and collectives the Python hook captures");
  } else if (counters.get(kPythonHookAttached) != 0 && counters.get(kPythonTorchHooked) == kHookedTorchImported) {
    causes.push_back("its torch has none of the APIs the Python hook needs (the run's stderr names them)");
  } else if (counters.get(kPythonHookAttached) != 0 && counters.get(kEventsOutsideWindow) == 0) {
    causes.push_back("its Python program imported torch but never trained: no optimizer step, DataLoader batch, "
                     "forward, backward or torch.distributed collective");
  } else if (sidecar && !python) {
    causes.push_back("--capture leaves out python: a PyTorch job on gloo or the CPU shows only through the Python "
                     "hook");
  }
  if (const uint64_t outside = counters.get(kEventsOutsideWindow); outside > 0) {
    causes.push_back("its capture window took in none of its events (" + std::to_string(outside) +
                     " counted outside it: --delay, --duration, --paused, --steps or --capture-range)");
  }
  if (causes.empty()) {
    causes.push_back(sidecar ? "its program made no NVTX, CUDA or NCCL call that rankscope sees, and ran no Python "
                               "that the hook could see"
                             : "its program made no MPI call that rankscope sees (a static binary, or an MPI other "
                               "than the one rankscope was built with)");
  }
  std::string text;
  for (const std::string& cause : causes) text += (text.empty() ? "" : "; ") + cause;
  return text;
}

}  // namespace rankscope::counter
