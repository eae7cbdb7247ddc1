// How each rank's process ended and what it used, from the counters its
// agent wrote as it closed the shard, or `rankscope run` after it was killed.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

#include "rankscope/analysis/rank_ends.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/format.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"

namespace rankscope::analysis {

RankEnd rank_end(int32_t rank, RankStatus status, const Counters& c, int64_t pid) {
  RankEnd end;
  end.rank = rank;
  end.status = status;
  // A killed rank's launcher writes the signal; a shard closed after all (a
  // later merge of a shard appended to by hand) is not a killed rank's.
  if (status == RankStatus::kDead) end.killed_by_signal = static_cast<int>(c.get(counter::kKilledBySignal));
  end.stopped_by_signal = static_cast<int>(c.get(counter::kStoppedBySignal));
  end.stopped_ns = c.get(counter::kStoppedNs);
  if (status == RankStatus::kCrashed) {
    Crash& crash = end.crash.emplace();
    crash.signal = static_cast<int>(c.get(counter::kCrashSignal));
    crash.code = static_cast<int>(c.get(counter::kCrashSignalCode));
    crash.address = c.get(counter::kCrashAddress);
    crash.thread = c.get(counter::kCrashThread);
    crash.sender_pid = static_cast<int64_t>(c.get(counter::kCrashSenderPid));
    crash.sent_by_itself = crash.sender_pid != 0 && crash.sender_pid == pid;
  }
  if (status == RankStatus::kAborted && c.get(counter::kMpiAborted) != 0)
    end.mpi_abort_code = static_cast<int>(c.get(counter::kMpiAbortCode));
  if (c.get(counter::kEndedByExitCall) != 0 || c.get(counter::kMpiNotFinalized) != 0) {
    // A rank ended by _exit, or one that exited unfinalized after its exit status was seen.
    for (const auto& [name, value] : c.entries())
      if (name == counter::kExitStatus) end.exit_status = static_cast<int>(value);
  }
  end.sidecar_refused_mpi_init = c.get(counter::kSidecarRefusedMpiInit) != 0;
  if (status == RankStatus::kTerminated) end.terminating_signal = static_cast<int>(c.get(counter::kTerminatedBySignal));
  end.oom_kills = c.get(counter::kOomKills);
  if (c.get(counter::kProcessPeakRssBytes) != 0) {
    end.usage = ProcessUsage{c.get(counter::kProcessPeakRssBytes), c.get(counter::kProcessUserCpuNs),
                             c.get(counter::kProcessSystemCpuNs), c.get(counter::kProcessInvoluntarySwitches),
                             c.get(counter::kProcessMajorFaults)};
  }
  return end;
}

std::vector<RankEnd> rank_ends(const Timeline& timeline) {
  std::vector<RankEnd> ends;
  for (const RankInfo& info : timeline.ranks()) {
    RankEnd& end = ends.emplace_back(rank_end(info.rank, info.status, info.counters, info.pid));
    if (!end.crash) continue;
    timeline.for_each_event_block(info.rank, [&](const std::vector<Event>& events) {
      for (const Event& e : events) {
        if (e.kind != EventKind::kInstant) continue;
        const std::string_view name = timeline.string(e.name_id);
        if (!name.starts_with(kCrashInstantPrefix)) continue;
        if (const size_t at = name.find(kCrashInstantWhere); at != std::string_view::npos) {
          end.crash->where = std::string(name.substr(at + kCrashInstantWhere.size()));
        }
      }
    });
  }
  return ends;
}

namespace {

// The kernel's reason (si_code) for a fault, as sigaction(2) lists them.
std::string_view fault_reason(int signal_number, int code) {
  static constexpr std::string_view kSegv[] = {"address not mapped",
                                               "no permission for the address",
                                               "outside the address bounds",
                                               "denied by a protection key",
                                               "application data integrity not enabled",
                                               "application data integrity error",
                                               "application data integrity error",
                                               "memory tag check, found later",
                                               "memory tag check",
                                               "control-flow protection (shadow stack)"};
  static constexpr std::string_view kBus[] = {"misaligned address",
                                              "no memory behind the address (a mapped file cut short, /dev/shm full)",
                                              "object-specific hardware error", "memory error (machine check)",
                                              "memory error (machine check)"};
  static constexpr std::string_view kFpe[] = {"integer divide by zero", "integer overflow", "floating-point divide by zero",
                                              "floating-point overflow", "floating-point underflow",
                                              "floating-point inexact result", "invalid floating-point operation",
                                              "subscript out of range"};
  static constexpr std::string_view kIll[] = {"illegal opcode",     "illegal operand",    "illegal addressing mode",
                                              "illegal trap",       "privileged opcode",  "privileged register",
                                              "coprocessor error",  "internal stack error"};
  const auto pick = [code](std::span<const std::string_view> reasons) {
    return code >= 1 && static_cast<size_t>(code) <= reasons.size() ? reasons[static_cast<size_t>(code) - 1]
                                                                    : std::string_view();
  };
  switch (signal_number) {
    case SIGSEGV: return pick(kSegv);
    case SIGBUS: return pick(kBus);
    case SIGFPE: return pick(kFpe);
    case SIGILL: return pick(kIll);
    default: return {};
  }
}

std::string describe_crash(const Crash& crash) {
  std::string out = "crashed with " + signal_name(crash.signal) + " (signal " + std::to_string(crash.signal);
  // x86's general protection fault (a non-canonical pointer) gives no address.
  const bool general_protection = crash.signal == SIGSEGV && crash.code == SI_KERNEL;
  if (crash.code == 0) {
    if (crash.sent_by_itself) {
      out += crash.signal == SIGABRT ? ": abort(), from an assert, std::terminate or the program itself"
                                     : ": raised by the process itself, by raise() or a handler passing a fault on, "
                                       "so the address is not known";
    } else {
      out += crash.sender_pid != 0 ? ": sent by process " + std::to_string(crash.sender_pid) : ": sent by a process";
    }
  } else if (general_protection) {
    out += ": general protection fault, a wild pointer, at an address not known";
  } else if (const std::string_view reason = fault_reason(crash.signal, crash.code); !reason.empty()) {
    out += ": " + std::string(reason);
  }
  out += ")";
  const bool data_address = (crash.signal == SIGSEGV && !general_protection) || crash.signal == SIGBUS;
  // The instruction's address says less than the code it is in, where that is known.
  if ((crash.address != 0 || (crash.code != 0 && data_address)) && (data_address || crash.where.empty())) {
    char address[32];
    std::snprintf(address, sizeof(address), "0x%llx", static_cast<unsigned long long>(crash.address));
    out += (data_address ? " at " : " at instruction ") + std::string(address);
  }
  if (!crash.where.empty()) out += " in " + crash.where;
  if (crash.thread != 0) out += " on thread " + std::to_string(crash.thread);
  return out + "; its shard was closed first, with the calls it was inside";
}

}  // namespace

// ", after SIGSTOP (signal 19) had stopped it for 5.12 s: ...", or nothing.
std::string while_stopped(const RankEnd& end) {
  if (end.stopped_by_signal <= 0) return "";
  return ", after " + signal_name(end.stopped_by_signal) + " (signal " + std::to_string(end.stopped_by_signal) +
         ") had stopped it for " + format_duration(static_cast<double>(end.stopped_ns)) +
         " in all: frozen meanwhile, not hung";
}

std::string describe_fatal_signal(const RankEnd& end) {
  std::string out;
  if (end.crash) {
    out = describe_crash(*end.crash);
  } else if (end.killed_by_signal > 0) {
    const std::string signal = signal_name(end.killed_by_signal) + " (signal " + std::to_string(end.killed_by_signal) + ")";
    out = end.crashed() ? "crashed with " + signal + " before its shard was closed, where its capture could not catch the crash"
                        : "killed by " + signal + " before its shard was closed";
    out += while_stopped(end);
  } else {
    return "";
  }
  if (end.oom_kills > 0) {
    out += "; the kernel's OOM killer killed " + std::to_string(end.oom_kills) + " process" +
           (end.oom_kills == 1 ? "" : "es") + " of its memory cgroup meanwhile";
  }
  if (end.usage) out += "; peak memory " + format_bytes(static_cast<double>(end.usage->peak_rss_bytes));
  return out;
}

std::string describe_early_end(const RankEnd& end) {
  switch (end.status) {
    case RankStatus::kExited:
      return (end.exit_status ? "exited with status " + std::to_string(*end.exit_status) + " (exit, a return from main or _exit)"
                              : std::string("exited (its status was not seen)")) +
             " without calling MPI_Finalize; its shard was closed at exit";
    case RankStatus::kAborted:
      if (end.mpi_abort_code || !end.exit_status) {
        return "called MPI_Abort with code " + std::to_string(end.mpi_abort_code.value_or(0)) +
               "; its shard was closed first";
      }
      if (end.sidecar_refused_mpi_init) {
        return "stopped at MPI_Init with status " + std::to_string(*end.exit_status) +
               ": sidecar mode runs no program that starts MPI itself (`rankscope run --mode inprocess` profiles "
               "it); its shard was closed first";
      }
      return "ended by _exit(" + std::to_string(*end.exit_status) +
             ") (MPI ends a rank so on a fatal error or a lost peer); its shard was closed first";
    case RankStatus::kTerminated:
      return "ended by " + signal_name(end.terminating_signal) + " (signal " + std::to_string(end.terminating_signal) +
             ")" + while_stopped(end) + "; its shard was closed first";
    default: return "";
  }
}

std::string peak_memory_summary(const std::vector<RankEnd>& ends) {
  std::vector<int64_t> peaks;
  const RankEnd* largest = nullptr;
  for (const RankEnd& end : ends) {
    if (!end.usage) continue;
    peaks.push_back(static_cast<int64_t>(end.usage->peak_rss_bytes));
    if (!largest || end.usage->peak_rss_bytes > largest->usage->peak_rss_bytes) largest = &end;
  }
  if (!largest) return "";
  return "peak memory per rank: median " + format_bytes(median(peaks)) + ", largest " +
         format_bytes(static_cast<double>(largest->usage->peak_rss_bytes)) + " (rank " + std::to_string(largest->rank) +
         ")" + (peaks.size() < ends.size() ? " of the " + std::to_string(peaks.size()) +
                                           (peaks.size() == 1 ? " rank that recorded it" : " ranks that recorded it")
                                     : "");
}

}  // namespace rankscope::analysis
