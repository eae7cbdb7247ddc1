#include "kineto_job.h"

#include <cstdio>
#include <map>
#include <optional>

#include "rankscope/model/text.h"

namespace rankscope::kineto {
namespace {

std::string different(const TraceSummary& a, const TraceSummary& b, const std::string& why) {
  return a.path + " and " + b.path + " are traces of different jobs: " + why;
}

// A fact of the job as the first trace that states it states it; every later
// trace that states it must agree.
class Fact {
 public:
  explicit Fact(std::string what) : what_(std::move(what)) {}
  // The disagreement of `trace`, which says `value`, with the first; nothing when it agrees.
  std::optional<std::string> disagreement(const TraceSummary& trace, const std::string& value) {
    if (!first_) {
      first_ = &trace;
      value_ = value;
      return std::nullopt;
    }
    if (value == value_) return std::nullopt;
    return different(*first_, trace, what_ + " " + value_ + " in the first and " + value + " in the second");
  }

 private:
  std::string what_;
  const TraceSummary* first_ = nullptr;
  std::string value_;
};

// The traces recorded earliest-ending and latest-starting, on their own wall
// clocks; whether they are further apart than one job's traces can be.
std::optional<std::string> recorded_apart(const std::vector<TraceSummary>& traces) {
  const TraceSummary *ends_first = nullptr, *starts_last = nullptr;
  const auto start = [](const TraceSummary& t) { return t.base_ns + t.first_ns; };
  const auto end = [](const TraceSummary& t) { return t.base_ns + t.last_ns; };
  for (const TraceSummary& trace : traces) {
    if (trace.first_ns > trace.last_ns) continue;  // nothing recorded
    if (!ends_first || end(trace) < end(*ends_first)) ends_first = &trace;
    if (!starts_last || start(trace) > start(*starts_last)) starts_last = &trace;
  }
  if (!ends_first || start(*starts_last) - end(*ends_first) <= kMaxClockApartNs) return std::nullopt;
  const double hours = static_cast<double>(start(*starts_last) - end(*ends_first)) / 3.6e12;
  char gap[32];
  std::snprintf(gap, sizeof(gap), "%.1f", hours);
  return different(*ends_first, *starts_last,
                   "the first was recorded from " + format_utc_time(start(*ends_first)) + " to " +
                       format_utc_time(end(*ends_first)) + ", the second from " +
                       format_utc_time(start(*starts_last)) + ", " + gap + " hours later (one job's traces are " +
                       "recorded within " + std::to_string(kMaxClockApartNs / 3'600'000'000'000) + " hour)");
}

}  // namespace

std::vector<std::string> job_disagreements(const std::vector<TraceSummary>& traces) {
  Fact world_size("distributedInfo.world_size is"), backend("distributedInfo.backend is");
  std::map<std::string, Fact> groups;
  std::optional<std::string> size_differs, backend_differs, group_differs;
  for (const TraceSummary& trace : traces) {
    if (trace.world_size > 0 && !size_differs) {
      size_differs = world_size.disagreement(trace, std::to_string(trace.world_size));
    }
    if (!trace.backend.empty() && !backend_differs) backend_differs = backend.disagreement(trace, trace.backend);
    for (const ProcessGroup& group : trace.process_groups) {
      if (group_differs) break;
      Fact& fact = groups.try_emplace(group.name, "process group \"" + group.name + "\" has").first->second;
      group_differs = fact.disagreement(trace, group.members);
    }
  }
  std::vector<std::string> reasons;
  for (auto& reason : {size_differs, backend_differs, group_differs, recorded_apart(traces)}) {
    if (reason) reasons.push_back(*reason);
  }
  return reasons;
}

}  // namespace rankscope::kineto
