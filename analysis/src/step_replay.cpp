// A walked step replayed with one thing changed (docs/report-reference.md,
// "What-if on the path"). Each rank that ran the step is a line, from its
// begin of the step before (where it ran it) to its end of the step: its
// own time, then a blocking call (one in which collectives or messages
// completed: a blocking collective, receive or send, the wait of
// nonblocking ones), its own time again, and so on. Replayed, its own time
// takes what it took (scaled, for the rank changed), each arrival (at a
// collective, a send's or a receive's post) moves with the own time around
// it, and a blocking call ends once what it waited for (of what completed
// in it, what arrived latest, as the walk follows it) has arrived and been
// transferred: a collective the time after its last arrival it took as
// recorded, a message the time after its other end's post. The step
// replayed runs from its first rank's replayed begin to its last rank's
// end. GPU streams are not modelled: GPU steps are not replayed.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "rankscope/model/statistics.h"
#include "step_events.h"
#include "step_replay.h"

namespace rankscope::analysis {
namespace {

// What blocking calls wait for: the step's collectives (indices into
// JobProfile::collectives), then the other ends of its messages (after
// them): for a receive its send's post, for a send that waited for its
// receiver the receive's post.
struct Rendezvous {
  size_t collectives = 0;
  std::vector<int64_t> posted;  // per other end: when it was posted, as recorded
  std::vector<int32_t> poster;  // per other end: the rank that posted it
  // Per rendezvous: the latest arrival of participants outside the replay
  // (ranks without the step's times), who arrive when they did.
  std::vector<int64_t> outside;
  size_t count() const { return collectives + posted.size(); }
};

struct BlockingCall {
  int64_t begin, end;
  size_t held;  // index of the rendezvous it waited for
  // What it took after the arrival it waited for, as recorded. A collective
  // completes on every rank at once after its last arrival, whenever each
  // rank came to its call: end − last arrival, and the call ends no sooner
  // than it began. A message's end completes on its own rank: end − (the
  // other end's post, or the call's begin if later), after both.
  bool collective;
  int64_t transfer;
};

// A collective this rank arrived at, or a message it sent, in the step.
struct Arrival {
  int64_t at;
  size_t instance;  // index of the rendezvous
};

// A rank's step as read: its communication calls on its training thread
// and its messages.
struct RankRead {
  bool ran = false;
  int64_t begin = 0, end = 0;  // as Line's
  int64_t step_begin = 0;
  std::vector<Event> calls;  // by begin
  struct Message {
    int64_t posted, completed;
  };
  std::map<MessageKey, Message> sends, receives;
};

struct Line {
  bool ran = false;
  int64_t begin = 0, end = 0;  // the step before the one replayed, where the rank ran it, to the step's end
  int64_t step_begin = 0;      // the replayed step's begin
  std::vector<BlockingCall> calls;  // in time order
  std::vector<Arrival> arrivals;    // in time order
};

RankRead read_rank(const Timeline& timeline, const JobProfile& job, const RankInfo& info, size_t step) {
  RankRead read;
  const RankProfile& rank = job.ranks[static_cast<size_t>(info.rank)];
  const int32_t training = training_thread(info, rank);
  if (step >= rank.steps.size() || rank.steps[step].times.begin_ns == kUnknown || training < 0) return read;
  read.ran = true;
  read.step_begin = rank.steps[step].times.begin_ns;
  const bool ran_before = step > 0 && rank.steps[step - 1].times.begin_ns != kUnknown;
  read.begin = ran_before ? std::min(rank.steps[step - 1].times.begin_ns, read.step_begin) : read.step_begin;
  read.end = rank.steps[step].times.end_ns;
  for (const Event& e : events_beginning_in(timeline, info, read.begin, read.end)) {
    if (const std::optional<MessageKey> key = message_key(e, info.rank)) {
      (e.op == CommOp::kSend ? read.sends : read.receives)[*key] = {e.begin_ns, e.end_ns};
    }
    if (e.track == training && is_communication(e.kind) && e.end_ns > e.begin_ns) read.calls.push_back(e);
  }
  std::sort(read.calls.begin(), read.calls.end(), [](const Event& a, const Event& b) { return a.begin_ns < b.begin_ns; });
  return read;
}

// The rank's line: each call in which something completed that arrived
// from elsewhere becomes a blocking call held by what arrived latest.
Line make_line(const RankRead& read, const Rendezvous& rendezvous, const JobProfile& job,
               const std::vector<std::pair<int64_t, size_t>>& completed, std::vector<Arrival> arrivals) {
  Line line;
  if (!read.ran) return line;
  line.ran = true;
  line.begin = read.begin;
  line.end = read.end;
  line.step_begin = read.step_begin;
  std::sort(arrivals.begin(), arrivals.end(), [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  line.arrivals = std::move(arrivals);
  const auto last_arrival = [&](size_t i) {
    return i < rendezvous.collectives ? job.collectives[i].last_arrival_ns()
                                      : rendezvous.posted[i - rendezvous.collectives];
  };
  int64_t reach = line.begin;
  for (const Event& call : read.calls) {
    if (call.begin_ns < reach) continue;  // inside the call before it
    const int64_t end = std::min(call.end_ns, line.end);
    const std::optional<size_t> held = latest_arrival(completed, call.begin_ns, end, last_arrival);
    if (!held) continue;
    const int64_t arrival = last_arrival(*held);
    const bool collective = *held < rendezvous.collectives;
    const int64_t transfer = collective ? std::max<int64_t>(0, end - arrival)
                                        : end - std::min(std::max(arrival, call.begin_ns), end);
    line.calls.push_back({call.begin_ns, end, *held, collective, transfer});
    reach = end;
  }
  return line;
}

int64_t scaled(int64_t ns, double factor) { return static_cast<int64_t>(std::llround(static_cast<double>(ns) * factor)); }

// The step's time replayed: `factors` scale each rank's own time; without
// `transfers` a blocking call ends at its collective's last arrival. None
// where the lines wait on each other in a circle (clocks that disagree).
std::optional<int64_t> replay(const Rendezvous& rendezvous, const std::vector<Line>& lines,
                              const std::vector<double>& factors, bool transfers) {
  const size_t n = lines.size();
  // Per rendezvous: participants still to arrive, and the latest arrival.
  std::vector<size_t> waiting(rendezvous.count(), 0);
  std::vector<int64_t> last = rendezvous.outside;
  for (const Line& line : lines) {
    for (const Arrival& a : line.arrivals) ++waiting[a.instance];
  }
  std::vector<size_t> next_call(n, 0), next_arrival(n, 0);
  std::vector<int64_t> now(n), recorded_at(n);  // each line's replayed time, and the recorded time it stands for
  for (size_t r = 0; r < n; ++r) now[r] = recorded_at[r] = lines[r].begin;
  // A recorded instant of line r, replayed: moved with the own time before
  // it, or, inside a call already replayed, with that call's end.
  const auto replayed_at = [&](size_t r, int64_t t) {
    return t >= recorded_at[r] ? now[r] + scaled(t - recorded_at[r], factors[r]) : now[r] - (recorded_at[r] - t);
  };
  // The line's arrivals up to `until` (recorded), moved.
  const auto arrive_until = [&](size_t r, int64_t until) {
    const Line& line = lines[r];
    for (; next_arrival[r] < line.arrivals.size() && line.arrivals[next_arrival[r]].at <= until; ++next_arrival[r]) {
      const Arrival& a = line.arrivals[next_arrival[r]];
      last[a.instance] = std::max(last[a.instance], replayed_at(r, a.at));
      --waiting[a.instance];
    }
  };
  // Each line's step begin, replayed, once the line has come to it.
  std::vector<std::optional<int64_t>> step_begin(n);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < n; ++r) {
      const Line& line = lines[r];
      if (!line.ran) continue;
      while (next_call[r] < line.calls.size()) {
        const BlockingCall& call = line.calls[next_call[r]];
        arrive_until(r, call.begin);
        if (waiting[call.held] > 0) break;  // someone has yet to arrive
        if (!step_begin[r] && line.step_begin <= call.begin) step_begin[r] = replayed_at(r, line.step_begin);
        const int64_t begin = now[r] + scaled(call.begin - recorded_at[r], factors[r]);
        const int64_t transfer = transfers ? call.transfer : 0;
        now[r] = call.collective ? std::max(begin, last[call.held] + transfer)
                                 : std::max(begin, last[call.held]) + transfer;
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
    first_begin = std::min(first_begin, step_begin[r] ? *step_begin[r] : replayed_at(r, line.step_begin));
    last_end = std::max(last_end, replayed_at(r, line.end));
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
    unmeasured = "GPU jobs are not replayed yet: the replay follows host threads and the collectives and messages "
                 "they wait in, not GPU streams";
    return {};
  }
  std::vector<RankRead> reads;
  for (const RankInfo& info : timeline.ranks()) {
    reads.push_back(info.status == RankStatus::kMissing ? RankRead{} : read_rank(timeline, job, info, path.step));
  }
  const size_t n = job.ranks.size();
  // The step is replayed after the one before it: each rank's begin of the
  // step is where its line comes to it, not where it began as recorded.
  // (In a pipeline the ranks begin a step when their part of the last one
  // ended: a stagger that a change to one rank changes too.)
  const int32_t first_step = path.step > 0 ? static_cast<int32_t>(path.step) - 1 : 0;
  StepCompletions completions = step_completions(job, path.step);
  if (path.step > 0) {
    StepCompletions before = step_completions(job, path.step - 1);
    for (size_t r = 0; r < n; ++r) completions[r].insert(completions[r].end(), before[r].begin(), before[r].end());
  }
  std::vector<std::vector<Arrival>> arrivals(n);
  Rendezvous rendezvous;
  rendezvous.collectives = job.collectives.size();
  for (size_t i = 0; i < job.collectives.size(); ++i) {
    const CollectiveInstance& c = job.collectives[i];
    if (c.step < first_step || c.step > static_cast<int32_t>(path.step) || c.ranks.size() < 2) continue;
    for (const Participation& p : c.ranks) {
      if (static_cast<size_t>(p.rank) < n && p.arrival_ns != kUnknown) {
        arrivals[static_cast<size_t>(p.rank)].push_back({p.arrival_ns, i});
      }
    }
  }
  // The messages: each receive matched to its send by key (one whose other
  // end is not in the lines, posted before the peer's line began, say, is
  // not one the replay can move). The receive waits for its send's post;
  // a send that completed after its receive was posted may have waited
  // for it (a message too large to go eagerly); one that completed before
  // did not.
  const auto other_end = [&](size_t waiter, int64_t completed, size_t poster, int64_t posted) {
    const size_t instance = rendezvous.count();
    rendezvous.posted.push_back(posted);
    rendezvous.poster.push_back(static_cast<int32_t>(poster));
    arrivals[poster].push_back({posted, instance});
    completions[waiter].push_back({completed, instance});
  };
  for (size_t r = 0; r < reads.size(); ++r) {
    for (const auto& [key, receive] : reads[r].receives) {
      const size_t sender = static_cast<size_t>(std::get<2>(key));
      if (sender >= reads.size()) continue;
      const auto send = reads[sender].sends.find(key);
      if (send == reads[sender].sends.end()) continue;
      const RankRead::Message& sent = send->second;
      other_end(r, receive.completed, sender, sent.posted);
      if (receive.posted <= sent.completed) {
        other_end(sender, sent.completed, r, receive.posted);
      }
    }
  }
  for (auto& list : completions) std::sort(list.begin(), list.end());
  std::vector<Line> lines;
  for (size_t r = 0; r < reads.size(); ++r) {
    lines.push_back(make_line(reads[r], rendezvous, job, completions[r], std::move(arrivals[r])));
  }
  // Participants outside the replay (no step times) arrive when they did.
  rendezvous.outside.assign(rendezvous.count(), INT64_MIN);
  const auto outside = [&](int32_t rank) { return static_cast<size_t>(rank) >= n || !lines[static_cast<size_t>(rank)].ran; };
  for (const Line& line : lines) {
    for (const BlockingCall& call : line.calls) {
      if (call.held >= rendezvous.collectives) {
        const size_t m = call.held - rendezvous.collectives;
        if (outside(rendezvous.poster[m])) rendezvous.outside[call.held] = rendezvous.posted[m];
        continue;
      }
      for (const Participation& p : job.collectives[call.held].ranks) {
        if (outside(p.rank)) rendezvous.outside[call.held] = std::max(rendezvous.outside[call.held], p.arrival_ns);
      }
    }
  }
  const std::vector<double> unchanged(lines.size(), 1.0);
  const std::optional<int64_t> replayed = replay(rendezvous, lines, unchanged, true);
  if (!replayed) {
    unmeasured = "the ranks' collectives and messages wait on each other in a circle as recorded (clocks that disagree?)";
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
    if (const std::optional<int64_t> predicted = replay(rendezvous, lines, factors, true)) {
      PathWhatIf what_if = base;
      what_if.change = "rank " + std::to_string(slowest->first) + " computed at the other ranks' median";
      what_if.rank = slowest->first;
      what_if.factor = slowest->second;
      what_if.predicted_ns = *predicted;
      found.push_back(what_if);
    }
  }
  if (const std::optional<int64_t> predicted = replay(rendezvous, lines, unchanged, false)) {
    PathWhatIf what_if = base;
    what_if.change = "collectives' and messages' transfers took no time";
    what_if.transfers = false;
    what_if.predicted_ns = *predicted;
    found.push_back(what_if);
  }
  return found;
}

}  // namespace rankscope::analysis
