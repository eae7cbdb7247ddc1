// How each rank's process ended and what it used, from the counters its
// agent wrote as it closed the shard, or `rankscope run` after it was killed.
#include <signal.h>

#include <algorithm>
#include <cstring>

#include "rankscope/analysis/analysis.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/format.h"
#include "rankscope/model/statistics.h"

namespace rankscope::analysis {

RankEnd rank_end(int32_t rank, RankStatus status, const Counters& c) {
  RankEnd end;
  end.rank = rank;
  end.status = status;
  // A killed rank's launcher writes the signal; a shard closed after all (a
  // later merge of a shard appended to by hand) is not a killed rank's.
  if (status == RankStatus::kDead) end.killed_by_signal = static_cast<int>(c.get(counter::kKilledBySignal));
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
  for (const RankInfo& info : timeline.ranks()) ends.push_back(rank_end(info.rank, info.status, info.counters));
  return ends;
}

std::string describe_kill(const RankEnd& end) {
  if (end.killed_by_signal <= 0) return "";
  const char* abbreviation = sigabbrev_np(end.killed_by_signal);
  std::string out = "killed by " + (abbreviation ? "SIG" + std::string(abbreviation) + " " : std::string()) +
                    "(signal " + std::to_string(end.killed_by_signal) + ") before its shard was closed";
  if (end.oom_kills > 0) {
    out += "; the kernel's OOM killer killed " + std::to_string(end.oom_kills) + " process" +
           (end.oom_kills == 1 ? "" : "es") + " of its memory cgroup meanwhile";
  }
  if (end.usage) out += "; peak memory " + format_bytes(static_cast<double>(end.usage->peak_rss_bytes));
  return out;
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
