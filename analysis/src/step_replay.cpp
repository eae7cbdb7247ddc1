// A walked step replayed with one thing changed (docs/report-reference.md,
// "What-if on the path"). Each rank that ran the step is a line: its own
// time, then a blocking call (one in which collectives of the step
// completed: a blocking collective, the wait of nonblocking ones), its own
// time again, and so on to its step's end. Replayed, its own time takes
// what it took (scaled, for the rank changed), each arrival at a collective
// moves with the own time around it, and a blocking call ends at the last
// arrival of the collective it waited for (of those completing in it, the
// one whose last rank came latest, as the walk follows it) plus the
// transfer it recorded after that arrival. Every rank's step begins when it
// began; the step ends with the last rank's end. Messages between ranks
// and GPU streams are not modelled: such steps are not replayed.
#include <algorithm>
#include <cmath>
#include <optional>

#include "rankscope/model/statistics.h"
#include "step_events.h"
#include "step_replay.h"

namespace rankscope::analysis {
namespace {

struct BlockingCall {
  int64_t begin, end;
  size_t held;        // index into JobProfile::collectives
  int64_t transfer;   // recorded: end − (the held collective's last arrival, or the call's begin if later)
};

// A collective this rank arrived at in the step.
struct Arrival {
  int64_t at;
  size_t instance;
};

struct Line {
  bool ran = false;
  bool messages = false;  // it sent or received point-to-point messages in the step
  int64_t begin = 0, end = 0;
  std::vector<BlockingCall> calls;  // in time order
  std::vector<Arrival> arrivals;    // in time order
};

Line read_line(const Timeline& timeline, const JobProfile& job, const RankInfo& info, size_t step,
               const std::vector<std::pair<int64_t, size_t>>& completed, std::vector<Arrival> arrivals) {
  Line line;
  const RankProfile& rank = job.ranks[static_cast<size_t>(info.rank)];
  const int32_t training = training_thread(info, rank);
  if (step >= rank.steps.size() || rank.steps[step].times.begin_ns == kUnknown || training < 0) return line;
  line.ran = true;
  line.begin = rank.steps[step].times.begin_ns;
  line.end = rank.steps[step].times.end_ns;
  std::sort(arrivals.begin(), arrivals.end(), [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  line.arrivals = std::move(arrivals);
  std::vector<Event> calls;
  for (const Event& e : events_beginning_in(timeline, info, line.begin, line.end)) {
    line.messages |= e.kind == EventKind::kMpiP2p;
    if (e.track == training && is_communication(e.kind) && e.end_ns > e.begin_ns) calls.push_back(e);
  }
  std::sort(calls.begin(), calls.end(), [](const Event& a, const Event& b) { return a.begin_ns < b.begin_ns; });
  int64_t reach = line.begin;
  for (const Event& call : calls) {
    if (call.begin_ns < reach) continue;  // inside the call before it
    const int64_t end = std::min(call.end_ns, line.end);
    const std::optional<size_t> held = collective_held(job, completed, call.begin_ns, end);
    if (!held) continue;
    const int64_t last_arrival = job.collectives[*held].last_arrival_ns();
    line.calls.push_back({call.begin_ns, end, *held, end - std::min(std::max(last_arrival, call.begin_ns), end)});
    reach = end;
  }
  return line;
}

int64_t scaled(int64_t ns, double factor) { return static_cast<int64_t>(std::llround(static_cast<double>(ns) * factor)); }

// The step's time replayed: `factors` scale each rank's own time; without
// `transfers` a blocking call ends at its collective's last arrival. None
// where the lines wait on each other in a circle (clocks that disagree).
std::optional<int64_t> replay(const JobProfile& job, const std::vector<Line>& lines, const std::vector<double>& factors,
                              bool transfers) {
  const size_t n = lines.size();
  // Per instance: participants still to arrive, and the latest new arrival.
  std::vector<size_t> waiting(job.collectives.size(), 0);
  std::vector<int64_t> last(job.collectives.size(), INT64_MIN);
  for (const Line& line : lines) {
    for (const Arrival& a : line.arrivals) ++waiting[a.instance];
  }
  // Participants outside the replay (no step times) arrive when they did.
  for (const Line& line : lines) {
    for (const BlockingCall& call : line.calls) {
      for (const Participation& p : job.collectives[call.held].ranks) {
        if (static_cast<size_t>(p.rank) < n && lines[static_cast<size_t>(p.rank)].ran) continue;
        last[call.held] = std::max(last[call.held], p.arrival_ns);
      }
    }
  }
  std::vector<size_t> next_call(n, 0), next_arrival(n, 0);
  std::vector<int64_t> now(n), recorded_at(n);  // each line's replayed time, and the recorded time it stands for
  for (size_t r = 0; r < n; ++r) now[r] = recorded_at[r] = lines[r].begin;
  // The line's arrivals up to `until` (recorded), moved with its own time.
  const auto arrive_until = [&](size_t r, int64_t until) {
    const Line& line = lines[r];
    for (; next_arrival[r] < line.arrivals.size() && line.arrivals[next_arrival[r]].at <= until; ++next_arrival[r]) {
      const Arrival& a = line.arrivals[next_arrival[r]];
      // An arrival inside a call already replayed moves with that call's end.
      const int64_t moved = a.at >= recorded_at[r] ? now[r] + scaled(a.at - recorded_at[r], factors[r])
                                                   : now[r] - (recorded_at[r] - a.at);
      last[a.instance] = std::max(last[a.instance], moved);
      --waiting[a.instance];
    }
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < n; ++r) {
      const Line& line = lines[r];
      if (!line.ran) continue;
      while (next_call[r] < line.calls.size()) {
        const BlockingCall& call = line.calls[next_call[r]];
        arrive_until(r, call.begin);
        if (waiting[call.held] > 0) break;  // someone has yet to arrive
        const int64_t begin = now[r] + scaled(call.begin - recorded_at[r], factors[r]);
        now[r] = std::max(begin, last[call.held]) + (transfers ? call.transfer : 0);
        recorded_at[r] = call.end;
        ++next_call[r];
        moved = true;
      }
      if (next_call[r] == line.calls.size() && next_arrival[r] < line.arrivals.size()) {
        arrive_until(r, INT64_MAX);  // its arrivals after its last blocking call
        moved = true;
      }
    }
  }
  int64_t first_begin = INT64_MAX, last_end = INT64_MIN;
  for (size_t r = 0; r < n; ++r) {
    const Line& line = lines[r];
    if (!line.ran) continue;
    if (next_call[r] < line.calls.size()) return std::nullopt;
    first_begin = std::min(first_begin, line.begin);
    last_end = std::max(last_end, now[r] + scaled(line.end - recorded_at[r], factors[r]));
  }
  if (first_begin == INT64_MAX) return std::nullopt;
  return last_end - first_begin;
}

// The path's rank of most compute, and its scale to the other ranks' median compute in the step.
std::optional<std::pair<int32_t, double>> slowest_on_path(const JobProfile& job, const StepPath& path) {
  std::vector<int64_t> on_path(job.ranks.size(), 0);
  for (const PathSegment& s : path.segments) {
    if (s.category == PathCategory::kCompute && static_cast<size_t>(s.rank) < on_path.size()) {
      on_path[static_cast<size_t>(s.rank)] += s.ns();
    }
  }
  const auto most = std::max_element(on_path.begin(), on_path.end());
  if (most == on_path.end() || *most == 0) return std::nullopt;
  const size_t rank = static_cast<size_t>(most - on_path.begin());
  const auto compute_of = [&](size_t r) -> std::optional<int64_t> {
    const RankProfile& profile = job.ranks[r];
    if (path.step >= profile.steps.size() || profile.steps[path.step].times.begin_ns == kUnknown) return std::nullopt;
    return profile.steps[path.step].compute_ns;
  };
  const std::optional<int64_t> mine = compute_of(rank);
  std::vector<int64_t> others;
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    if (r == rank) continue;
    if (const std::optional<int64_t> compute = compute_of(r)) others.push_back(*compute);
  }
  if (!mine || *mine <= 0 || others.empty()) return std::nullopt;
  const double factor = median(others, 0) / static_cast<double>(*mine);
  if (factor >= 1) return std::nullopt;  // it computed no more than the others
  return std::pair{static_cast<int32_t>(rank), factor};
}

}  // namespace

std::vector<PathWhatIf> replay_step(const Timeline& timeline, const JobProfile& job, const StepPath& path,
                                    std::string& unmeasured) {
  if (job.gpu) {
    unmeasured = "GPU jobs are not replayed yet: the replay follows host threads and the collectives they wait in, "
                 "not GPU streams";
    return {};
  }
  const StepCompletions completions = step_completions(job, path.step);
  std::vector<std::vector<Arrival>> arrivals(job.ranks.size());
  for (size_t i = 0; i < job.collectives.size(); ++i) {
    const CollectiveInstance& c = job.collectives[i];
    if (c.step != static_cast<int32_t>(path.step) || c.ranks.size() < 2) continue;
    for (const Participation& p : c.ranks) {
      if (static_cast<size_t>(p.rank) < arrivals.size() && p.arrival_ns != kUnknown) {
        arrivals[static_cast<size_t>(p.rank)].push_back({p.arrival_ns, i});
      }
    }
  }
  std::vector<Line> lines;
  for (const RankInfo& info : timeline.ranks()) {
    const auto& completed = completions[static_cast<size_t>(info.rank)];
    lines.push_back(info.status == RankStatus::kMissing
                        ? Line{}
                        : read_line(timeline, job, info, path.step, completed,
                                    std::move(arrivals[static_cast<size_t>(info.rank)])));
  }
  if (std::any_of(lines.begin(), lines.end(), [](const Line& line) { return line.messages; })) {
    unmeasured = "steps with point-to-point messages are not replayed yet: the replay follows collectives only";
    return {};
  }
  const std::vector<double> unchanged(lines.size(), 1.0);
  const std::optional<int64_t> replayed = replay(job, lines, unchanged, true);
  if (!replayed) {
    unmeasured = "the ranks' collectives wait on each other in a circle as recorded (clocks that disagree?)";
    return {};
  }
  std::vector<PathWhatIf> found;
  PathWhatIf base;
  base.step = path.step;
  base.recorded_ns = path.end_ns - path.begin_ns;
  base.replayed_ns = *replayed;
  if (const auto slowest = slowest_on_path(job, path)) {
    std::vector<double> factors = unchanged;
    factors[static_cast<size_t>(slowest->first)] = slowest->second;
    if (const std::optional<int64_t> predicted = replay(job, lines, factors, true)) {
      PathWhatIf what_if = base;
      what_if.change = "rank " + std::to_string(slowest->first) + " computed at the other ranks' median";
      what_if.rank = slowest->first;
      what_if.factor = slowest->second;
      what_if.predicted_ns = *predicted;
      found.push_back(what_if);
    }
  }
  if (const std::optional<int64_t> predicted = replay(job, lines, unchanged, false)) {
    PathWhatIf what_if = base;
    what_if.change = "collectives' transfers took no time";
    what_if.transfers = false;
    what_if.predicted_ns = *predicted;
    found.push_back(what_if);
  }
  return found;
}

}  // namespace rankscope::analysis
