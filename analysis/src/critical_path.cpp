// The step's critical path across ranks: for the median step and the
// slowest, walked back from where the step ended last. On a thread, each
// range or call is flattened into stretches owned by the innermost one
// open; a stretch outside any is the host's own work. On a GPU stream, the
// operations follow one another. The walk crosses:
//  - from a call in which collectives or messages completed (a blocking
//    collective, receive or send, the wait that completed nonblocking
//    ones, NCCL's kernel), to what arrived latest: a collective's last
//    rank, at its arrival; a receive's sender, at the send; a send's
//    receiver, at the receive's post where the send waited for it; either
//    at its MPI call that released the message instead, where it began
//    one while the call here waited (message_released()); what follows
//    that arrival is transfer;
//  - from a synchronisation to the GPU operation it waited for;
//  - from a GPU operation to its launch, where the launch ended after the
//    stream's previous operation (the GPU waited for the host), and to the
//    host where the stream was idle.
// The walk ends where the rank it is on began the step. Each rank's events
// of the step are read the first time the walk comes to it.
#include "rankscope/analysis/critical_path.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "rankscope/model/parallel.h"
#include "rankscope/model/statistics.h"
#include "launches.h"
#include "step_events.h"
#include "step_replay.h"

namespace rankscope::analysis {
namespace {

// One thread or stream of a rank in one step: its events, flattened into
// stretches each owned by the innermost event open (or by none).
struct Lane {
  struct Stretch {
    int64_t begin, end;
    int32_t event;  // index into events; -1: outside any
  };
  std::vector<Event> events;
  std::vector<Stretch> stretches;  // in time order, touching
  bool stream = false;

  // The stretch that holds the time just before `t`, or null.
  const Stretch* before(int64_t t) const {
    auto it = std::lower_bound(stretches.begin(), stretches.end(), t,
                               [](const Stretch& s, int64_t at) { return s.begin < at; });
    return it == stretches.begin() ? nullptr : &*std::prev(it);
  }
  const Event* owner(const Stretch& s) const { return s.event < 0 ? nullptr : &events[static_cast<size_t>(s.event)]; }
};

// A rank in one step: its lanes by track, its launches by correlation id,
// and its point-to-point messages (blocking ones on a thread, nonblocking
// ones on their communicator's track, from post to completion).
struct RankLanes {
  bool ran_step = false;
  int64_t step_begin = 0;
  uint16_t training_track = 0;
  std::map<uint16_t, Lane> lanes;
  Launches launches;
  std::vector<Event> messages;  // sends and receives, by completion
  std::vector<int64_t> mpi_calls;  // the begins of its MPI calls on any thread, in order
};

bool is_host_event(const Event& e, uint32_t step_name) {
  switch (e.kind) {
    case EventKind::kNvtxRange: return e.name_id != step_name;
    case EventKind::kMpiCall:
    case EventKind::kMpiCollective:
    case EventKind::kMpiP2p:
    case EventKind::kTorchCollective:
    case EventKind::kTorchWait:
    case EventKind::kCudaApi: return true;
    default: return false;
  }
}

// Stretches from `from` to `until` of properly nested events (a range that
// outlives its parent is cut at the parent's end).
void flatten(Lane& lane, int64_t from, int64_t until) {
  std::vector<int32_t> open;
  int64_t at = from;
  const auto emit = [&](int64_t to, int32_t owner) {
    if (to > at) lane.stretches.push_back({at, to, owner});
    at = std::max(at, to);
  };
  const auto close_through = [&](int64_t t) {
    while (!open.empty() && lane.events[static_cast<size_t>(open.back())].end_ns <= t) {
      const int32_t top = open.back();
      open.pop_back();
      emit(lane.events[static_cast<size_t>(top)].end_ns, top);
    }
  };
  for (size_t i = 0; i < lane.events.size(); ++i) {
    const Event& e = lane.events[i];
    close_through(e.begin_ns);
    emit(e.begin_ns, open.empty() ? -1 : open.back());
    open.push_back(static_cast<int32_t>(i));
  }
  close_through(until);
  emit(until, open.empty() ? -1 : open.back());
}

// The step's first begin and last end over the ranks that ran it.
StepTimes job_step(const JobProfile& job, size_t step) {
  StepTimes times;
  for (const RankProfile& rank : job.ranks) {
    if (step >= rank.steps.size() || rank.steps[step].times.begin_ns == kUnknown) continue;
    const StepTimes& t = rank.steps[step].times;
    times.begin_ns = times.begin_ns == kUnknown ? t.begin_ns : std::min(times.begin_ns, t.begin_ns);
    times.end_ns = times.end_ns == kUnknown ? t.end_ns : std::max(times.end_ns, t.end_ns);
  }
  return times;
}

// The rank's threads and streams in the step, flattened.
RankLanes read_lanes(const Timeline& timeline, const JobProfile& job, const RankInfo& info, size_t step) {
  RankLanes rank_lanes;
  const RankProfile& rank = job.ranks[static_cast<size_t>(info.rank)];
  const int32_t training = training_thread(info, rank);
  if (step >= rank.steps.size() || rank.steps[step].times.begin_ns == kUnknown || training < 0) return rank_lanes;
  const StepTimes& times = rank.steps[step].times;
  rank_lanes.ran_step = true;
  rank_lanes.step_begin = times.begin_ns;
  rank_lanes.training_track = static_cast<uint16_t>(training);
  std::unordered_map<uint16_t, TrackType> types;
  for (const Track& track : info.tracks) types[track.id] = track.type;
  // The step's own range is the parent of every stretch, not one of them.
  uint32_t step_name = UINT32_MAX;
  for (const Event& e : events_beginning_in(timeline, info, times.begin_ns, times.end_ns)) {
    if (e.end_ns <= e.begin_ns) continue;
    if (message_key(e, info.rank)) rank_lanes.messages.push_back(e);
    const auto type = types.find(e.track);
    const bool on_thread = type == types.end() || type->second == TrackType::kThread;
    if (e.kind == EventKind::kNvtxRange && e.track == training && e.begin_ns == times.begin_ns &&
        e.end_ns == times.end_ns && step_name == UINT32_MAX) {
      step_name = e.name_id;
      continue;
    }
    const bool wanted = on_thread ? is_host_event(e, step_name) : job.gpu && is_gpu_operation(e.kind);
    if (!wanted) continue;
    Lane& lane = rank_lanes.lanes[e.track];
    lane.stream = !on_thread;
    lane.events.push_back(e);
  }
  std::sort(rank_lanes.messages.begin(), rank_lanes.messages.end(),
            [](const Event& a, const Event& b) { return a.end_ns < b.end_ns; });
  std::vector<Event> host_events;
  for (auto& [track, lane] : rank_lanes.lanes) {
    flatten(lane, times.begin_ns, times.end_ns);
    if (lane.stream) continue;
    for (const Event& e : lane.events) {
      if (e.kind == EventKind::kCudaApi) rank_lanes.launches.add(e);
      if (is_mpi(e.kind)) host_events.push_back(e);
    }
  }
  rank_lanes.launches.index();
  rank_lanes.mpi_calls = mpi_call_begins(host_events);
  return rank_lanes;
}

// A stretch onto the path, joined to the one before where it continues it
// (the same range or call on the same rank, touching): a loop of short calls
// stays one stretch per call, a call cut by the walk one stretch.
void add_segment(StepPath& path, const PathSegment& segment) {
  if (segment.end_ns <= segment.begin_ns) return;
  if (!path.segments.empty()) {
    PathSegment& later = path.segments.back();
    if (later.rank == segment.rank && later.category == segment.category && later.name_id == segment.name_id &&
        later.begin_ns == segment.end_ns) {
      later.begin_ns = segment.begin_ns;
      return;
    }
  }
  path.segments.push_back(segment);
}

// Where the walk is: a rank, one of its threads or streams, a time.
struct Place {
  int32_t rank;
  uint16_t track;
  int64_t t;
};

class Walk {
 public:
  Walk(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names, size_t step)
      : timeline_(timeline),
        job_(job),
        names_(names),
        step_(step),
        ranks_(job.ranks.size()),
        completions_(step_completions(job, step)) {}

  void run(int32_t rank, int64_t t, StepPath& path) {
    const RankLanes* first = lanes_of(rank);
    if (!first) return;
    Place at{rank, first->training_track, t};
    // Each turn moves back in time or hands the walk to another lane at the
    // same time; more hand-overs at one instant than lanes could make is a cycle.
    int stalled = 0;
    while (stalled <= 4 * static_cast<int>(ranks_.size()) + 4) {
      const RankLanes* lanes = lanes_of(at.rank);
      if (!lanes || at.t <= lanes->step_begin) return;
      const auto lane = lanes->lanes.find(at.track);
      if (lane == lanes->lanes.end()) {
        if (at.track == lanes->training_track) return;
        at.track = lanes->training_track;
        ++stalled;
        continue;
      }
      const Place before = at;
      if (!step_back(*lanes, lane->second, at, path)) return;
      stalled = at.t < before.t ? 0 : stalled + 1;
    }
  }

 private:
  // One stretch back from `at` on `lane`: books it, and says where the walk goes.
  bool step_back(const RankLanes& lanes, const Lane& lane, Place& at, StepPath& path) {
    const Lane::Stretch* stretch = lane.before(at.t);
    if (!stretch) return false;
    const int64_t begin = std::max(stretch->begin, lanes.step_begin);
    const Event* e = lane.owner(*stretch);
    if (lane.stream) {
      // An idle stream: the host is what the step waited for.
      if (!e) {
        at.track = lanes.training_track;
        return true;
      }
      if (follow_communication(at, *e, false, path)) return true;
      return follow_operation(lanes, lane, *stretch, *e, at, path);
    }
    if (e && (follow_communication(at, *e, true, path) || follow_sync(lanes, *e, at, path))) return true;
    add_segment(path, {at.rank, begin, at.t, category_of(e), e ? e->name_id : UINT32_MAX});
    at.t = begin;
    return true;
  }

  PathCategory category_of(const Event* e) const {
    if (!e) return PathCategory::kCompute;
    switch (e->kind) {
      case EventKind::kNvtxRange:
        return e->name_id < names_.size() && names_[e->name_id].data_loading ? PathCategory::kDataLoading
                                                                              : PathCategory::kCompute;
      case EventKind::kCudaApi:
        switch (cuda_api(*e, names_)) {
          case NameTraits::Api::kLaunch: return PathCategory::kLaunch;
          case NameTraits::Api::kSync: return PathCategory::kSync;
          default: return PathCategory::kCompute;
        }
      case EventKind::kGpuKernel: return PathCategory::kCompute;
      case EventKind::kGpuMemcpy:
      case EventKind::kGpuMemset: return PathCategory::kCopy;
      default: return PathCategory::kCommunicationTransfer;
    }
  }

  // A GPU operation: booked from its start; before it, its launch where that
  // ended after the stream's previous operation, else the stream goes on.
  bool follow_operation(const RankLanes& lanes, const Lane& lane, const Lane::Stretch& stretch, const Event& e,
                        Place& at, StepPath& path) {
    const int64_t start = std::max(e.begin_ns, lanes.step_begin);
    add_segment(path, {at.rank, start, at.t, category_of(&e), e.name_id});
    int64_t previous_end = lanes.step_begin;
    for (const Lane::Stretch* s = &stretch; s != lane.stretches.data();) {
      --s;
      if (s->event >= 0 && s->event != stretch.event) {
        previous_end = s->end;
        break;
      }
    }
    const Launches::Call* call = lanes.launches.find(e.correlation_id);
    if (call && call->end_ns > previous_end && call->end_ns <= start) {
      if (start > call->end_ns) add_segment(path, {at.rank, call->end_ns, start, PathCategory::kLaunch, e.name_id});
      at = {at.rank, call->track, call->end_ns};
      return true;
    }
    at.t = start;
    return true;
  }

  // A synchronisation that waited for the GPU: from the end of the last
  // operation that ended inside it, on that operation's stream.
  bool follow_sync(const RankLanes& lanes, const Event& e, Place& at, StepPath& path) {
    if (category_of(&e) != PathCategory::kSync) return false;
    const int64_t until = std::min(e.end_ns, at.t);
    const Event* waited = nullptr;
    uint16_t stream = 0;
    for (const auto& [track, lane] : lanes.lanes) {
      if (!lane.stream) continue;
      for (const Event& op : lane.events) {
        if (op.end_ns > e.begin_ns && op.end_ns <= until && (!waited || op.end_ns > waited->end_ns)) {
          waited = &op;
          stream = track;
        }
      }
    }
    if (!waited) return false;
    add_segment(path, {at.rank, waited->end_ns, at.t, PathCategory::kSync, e.name_id});
    at = {at.rank, stream, waited->end_ns};
    return true;
  }

  // What arrived latest of what completed on this rank in a call: where
  // the walk goes from the call.
  struct Arrival {
    int64_t at = INT64_MIN;
    int32_t rank = -1;         // the last rank to arrive, or the sender
    int32_t before_rank = -1;  // the rank whose instant it is ordered against
    int64_t before_at = 0;     // that instant: the arrival before the last, or the call's begin
    uint16_t track = 0;        // where the walk goes on, on `rank`, after a send
    const CollectiveInstance* collective = nullptr;  // what arrived, if a collective
  };

  // A call in which collectives or messages of this rank completed (a
  // blocking collective, receive or send, the wait of nonblocking ones,
  // NCCL's kernel): of them, the one that arrived latest held it (a
  // collective's last rank, a receive's send, a send's receive). What
  // follows that arrival is transfer; the walk goes on at the arrival, on
  // the rank that arrived there.
  bool follow_communication(Place& at, const Event& e, bool on_thread, StepPath& path) {
    if (!is_communication(e.kind)) return false;
    const int64_t until = std::min(e.end_ns, at.t);
    std::optional<Arrival> latest;
    if (const std::optional<size_t> index =
            collective_held(job_, completions_[static_cast<size_t>(at.rank)], e.begin_ns, until)) {
      const CollectiveInstance& held = job_.collectives[*index];
      latest = Arrival{held.last_arrival_ns(), held.last_arriver(), rank_of_second_last(held),
                       held.second_last_arrival_ns(), 0, &held};
    }
    if (on_thread) {
      if (const std::optional<Arrival> other_end = latest_message(at.rank, e.begin_ns, until);
          other_end && (!latest || other_end->at > latest->at)) {
        latest = other_end;
      }
    }
    if (!latest) return false;
    // No later than where the walk is: an arrival after this rank's end is
    // a clock the causality check counted, and the walk only goes back.
    const int64_t arrival = std::min(latest->at, at.t);
    const int64_t transfer_from = std::min(std::max({arrival, e.begin_ns, lanes_of(at.rank)->step_begin}), at.t);
    add_segment(path, {at.rank, transfer_from, at.t, PathCategory::kCommunicationTransfer, e.name_id});
    // Everything had arrived before this call began, or this rank came last: it goes on here.
    const RankLanes* arrived =
        latest->rank < 0 || latest->rank == at.rank || arrival <= e.begin_ns ? nullptr : lanes_of(latest->rank);
    if (!arrived) {
      at.t = transfer_from;
      return true;
    }
    note_edge(latest->rank, latest->before_rank, arrival - latest->before_at, path);
    ++path.hops;
    at = {latest->rank, latest->collective ? arrival_track(*arrived, *latest->collective, arrival) : latest->track,
          arrival};
    return true;
  }

  // Of the messages of this rank that completed in [from, until], the one
  // whose other end came latest, ordered against the call's begin: a
  // receive's send, or a send's receive where it was posted before the
  // send completed (a send held until its receiver came, as a message too
  // large to go eagerly is; one that completed before waited for nobody).
  // The other end came at its post, or at its MPI call that released the
  // wait (message_released()).
  std::optional<Arrival> latest_message(int32_t rank, int64_t from, int64_t until) {
    const std::vector<Event>& messages = lanes_of(rank)->messages;
    auto it = std::lower_bound(messages.begin(), messages.end(), from,
                               [](const Event& m, int64_t time) { return m.end_ns < time; });
    std::optional<Arrival> latest;
    for (; it != messages.end() && it->end_ns <= until; ++it) {
      const RankLanes* peer = lanes_of(it->peer);  // its ends of messages are known once its events are read
      const auto& other_ends = it->op == CommOp::kRecv ? sends_ : receives_;
      const auto other = other_ends.find(*message_key(*it, rank));
      if (other == other_ends.end()) continue;
      auto [track, came, other_completed] = other->second;
      if (it->op == CommOp::kSend && came > it->end_ns) continue;
      // Whichever thread's call released it, the walk goes on from the
      // training thread: where that has no events in the step, the post holds.
      if (peer && peer->lanes.contains(peer->training_track)) {
        const int64_t released = message_released(peer->mpi_calls, came, from, std::min(it->end_ns, other_completed));
        if (released != came) {
          track = peer->training_track;
          came = released;
        }
      }
      if (!latest || came > latest->at) latest = Arrival{came, it->peer, rank, from, track};
    }
    return latest;
  }

  // Where the last rank arrived: the stream of its NCCL kernel that began
  // then, else its training thread.
  static uint16_t arrival_track(const RankLanes& lanes, const CollectiveInstance& c, int64_t arrival) {
    if (c.source == CollectiveSource::kNccl) {
      for (const auto& [track, lane] : lanes.lanes) {
        if (!lane.stream) continue;
        for (const Event& e : lane.events) {
          if (e.kind == EventKind::kNcclCollectiveGpu && e.begin_ns == arrival && e.comm_hash == c.comm_hash) return track;
        }
      }
    }
    return lanes.training_track;
  }

  int32_t rank_of_second_last(const CollectiveInstance& c) const {
    const int32_t last = c.last_arriver();
    int32_t second = -1;
    int64_t latest = INT64_MIN;
    for (const Participation& p : c.ranks) {
      if (p.rank != last && p.arrival_ns > latest) {
        latest = p.arrival_ns;
        second = p.rank;
      }
    }
    return second;
  }

  // The order of two ranks' instants `apart_ns` apart, as their clocks' bounds allow it to be told.
  void note_edge(int32_t from, int32_t to, int64_t apart_ns, StepPath& path) const {
    if (from < 0 || to < 0) return;
    const int64_t bound =
        job_.clocks.at(static_cast<size_t>(from)).bound_ns + job_.clocks.at(static_cast<size_t>(to)).bound_ns;
    if (apart_ns <= bound) path.undecided.push_back({from, to, apart_ns, bound});
  }

  // The rank's lanes in the step, read the first time the walk comes to the
  // rank (most ranks it never visits); null where it did not run the step.
  const RankLanes* lanes_of(int32_t rank) {
    if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return nullptr;
    std::optional<RankLanes>& slot = ranks_[static_cast<size_t>(rank)];
    if (!slot) {
      slot = read_lanes(timeline_, job_, timeline_.ranks()[static_cast<size_t>(rank)], step_);
      // The walk goes on at a send or receive on its thread; a nonblocking
      // one's own track is its communicator's, where its post on the thread
      // began it.
      for (const Event& message : slot->messages) {
        const uint16_t track = slot->lanes.count(message.track) ? message.track : slot->training_track;
        (message.op == CommOp::kSend ? sends_ : receives_)[*message_key(message, rank)] = {track, message.begin_ns,
                                                                                            message.end_ns};
      }
    }
    return slot->ran_step ? &*slot : nullptr;
  }

  const Timeline& timeline_;
  const JobProfile& job_;
  const std::vector<NameTraits>& names_;
  size_t step_;
  std::vector<std::optional<RankLanes>> ranks_;
  StepCompletions completions_;
  // Where and when each send and each receive was posted, and when it completed.
  std::map<MessageKey, std::tuple<uint16_t, int64_t, int64_t>> sends_, receives_;
};

// The ranks that ended the step last, the last first: those whose end lies
// within a tie of the last end (a hundredth of the step on the job, or the
// two ranks' clock bounds where larger). Where ranks end a step together,
// as a synchronous job's last collective releases them, which of them ended
// last is noise, and the path from each is as much the step's. At most
// kTiedWalks, spread over them.
std::vector<int32_t> last_ends(const JobProfile& job, size_t step) {
  const StepTimes span = job_step(job, step);
  std::vector<std::pair<int64_t, int32_t>> ends;
  for (const RankProfile& rank : job.ranks) {
    if (step < rank.steps.size() && rank.steps[step].times.begin_ns != kUnknown) {
      ends.emplace_back(rank.steps[step].times.end_ns, rank.rank);
    }
  }
  if (ends.empty()) return {};
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const int32_t last = ends.front().second;
  const auto bound = [&](int32_t rank) {
    return static_cast<size_t>(rank) < job.clocks.size() ? job.clocks[static_cast<size_t>(rank)].bound_ns : 0;
  };
  size_t tied = 1;
  while (tied < ends.size() &&
         ends.front().first - ends[tied].first <= std::max(span.duration() / 100, bound(last) + bound(ends[tied].second))) {
    ++tied;
  }
  std::vector<int32_t> ranks;
  const size_t walks = std::min(tied, kTiedWalks);
  for (size_t k = 0; k < walks; ++k) ranks.push_back(ends[k * tied / walks].second);
  return ranks;
}

// The step's path from where `rank` ended it. Walks of one step share
// `walk`, and with it the ranks' events read.
StepPath walk_step(Walk& walk, const JobProfile& job, size_t step, int32_t rank) {
  StepPath path;
  path.step = step;
  const StepTimes span = job_step(job, step);
  path.begin_ns = span.begin_ns;
  path.end_ns = span.end_ns;
  walk.run(rank, job.ranks[static_cast<size_t>(rank)].steps[step].times.end_ns, path);
  return path;
}

// The steps walked: the median step by its time on the job and the
// slowest, named; and others spread evenly over the job, unnamed, up to
// kSharedSteps in all.
std::vector<std::pair<size_t, std::string>> steps_to_walk(const JobProfile& job) {
  std::vector<std::pair<int64_t, size_t>> by_time;
  for (size_t s = 0; s < job.step_numbers.size(); ++s) {
    const StepTimes t = job_step(job, s);
    if (t.begin_ns != kUnknown) by_time.emplace_back(t.duration(), s);
  }
  if (by_time.empty()) return {};
  std::vector<size_t> in_order;
  for (const auto& [duration, step] : by_time) in_order.push_back(step);
  std::sort(by_time.begin(), by_time.end());
  const size_t median = by_time[(by_time.size() - 1) / 2].second, slowest = by_time.back().second;
  std::vector<std::pair<size_t, std::string>> walked;
  if (median == slowest) walked = {{median, "median, slowest"}};
  else walked = {{median, "median"}, {slowest, "slowest"}};
  std::vector<bool> taken(job.step_numbers.size(), false);
  for (const auto& [step, which] : walked) taken[step] = true;
  // Evenly spaced over the steps in their order, the named ones skipped;
  // where those fell on the spacing, the first steps not taken fill in.
  const size_t wanted = std::min(kSharedSteps, in_order.size());
  const auto take = [&](size_t step) {
    if (walked.size() == wanted || taken[step]) return;
    taken[step] = true;
    walked.emplace_back(step, "");
  };
  for (size_t k = 0; k < wanted; ++k) take(in_order[k * in_order.size() / wanted]);
  for (size_t step : in_order) take(step);
  return walked;
}

std::string unmeasured(const JobProfile& job) {
  if (!job.clock_corrected) return kClocksNotAlignedReason;
  const bool steps_marked =
      job.steps_are_windows ||
      std::any_of(job.ranks.begin(), job.ranks.end(), [](const RankProfile& r) { return r.step_track >= 0; });
  if (!steps_marked) return "no step was marked (ProfilerStep#N ranges): a path runs from a step's end back to its begin";
  return "";
}

}  // namespace

std::string_view path_category_name(PathCategory category) {
  switch (category) {
    case PathCategory::kCompute: return "compute";
    case PathCategory::kDataLoading: return "data loading";
    case PathCategory::kLaunch: return "launch";
    case PathCategory::kSync: return "sync";
    case PathCategory::kCopy: return "copy";
    case PathCategory::kCommunicationTransfer: return "communication transfer";
    case PathCategory::kCount: break;
  }
  return "";
}

int64_t StepPath::path_ns() const {
  int64_t total = 0;
  for (const PathSegment& s : segments) total += s.ns();
  return total;
}

namespace {

// What one walked step gives: its walks' sums, the path drawn where it is,
// and its replays. The sums, not every walk's path: a step of 100,000
// kernels makes a path of as many segments.
struct WalkedStep {
  bool walked = false;
  std::map<int32_t, PathShare> ranks;
  std::map<std::string, int64_t> nodes;
  std::map<std::tuple<uint32_t, int32_t, PathCategory>, int64_t> items;
  int64_t total_ns = 0;
  // Per rank, its share of the own time on each walk's path: everything
  // but transfer, which is the communication's time, not a rank's.
  std::vector<double> on_path;
  bool own_time = false;
  std::optional<StepPath> drawn;
  bool replayed = false;
  std::vector<PathWhatIf> what_ifs;
  std::string what_if_unmeasured;
  std::vector<std::optional<PathWhatIf>> at_median;  // per replayed rank
  std::vector<BucketReplay> regrouped;
  std::string regroup_unmeasured;
};

WalkedStep walk_and_replay(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names,
                           size_t step, bool drawn, const std::vector<int32_t>& replayed_ranks,
                           const BucketReport* regrouped_buckets) {
  WalkedStep walked;
  const std::vector<int32_t> starts = last_ends(job, step);
  if (starts.empty()) return walked;
  walked.walked = true;
  walked.on_path.assign(job.ranks.size(), 0);
  // The shares are each tied walk's, in equal parts; the path drawn and
  // replayed is the one from the last end.
  const double weight = 1.0 / static_cast<double>(starts.size());
  const auto weighed = [&](int64_t ns) { return static_cast<int64_t>(std::llround(static_cast<double>(ns) * weight)); };
  {
    // The walk's copy of the step's events goes before the replay reads
    // its own: the two are never held together.
    Walk walk(timeline, job, names, step);
    for (const int32_t start : starts) {
      StepPath path = walk_step(walk, job, step, start);
      int64_t own_ns = 0;
      for (const PathSegment& s : path.segments) {
        if (s.category != PathCategory::kCommunicationTransfer) own_ns += s.ns();
      }
      walked.own_time |= own_ns > 0;
      for (const PathSegment& s : path.segments) {
        PathShare& share = walked.ranks[s.rank];
        share.rank = s.rank;
        share.ns += weighed(s.ns());
        share.by_category[static_cast<size_t>(s.category)] += weighed(s.ns());
        walked.total_ns += weighed(s.ns());
        if (static_cast<size_t>(s.rank) < walked.on_path.size()) {
          if (own_ns > 0 && s.category != PathCategory::kCommunicationTransfer) {
            walked.on_path[static_cast<size_t>(s.rank)] +=
                weight * static_cast<double>(s.ns()) / static_cast<double>(own_ns);
          }
          walked.nodes[job.ranks[static_cast<size_t>(s.rank)].host] += weighed(s.ns());
        }
        if (s.name_id != UINT32_MAX) walked.items[{s.name_id, s.rank, s.category}] += weighed(s.ns());
      }
      if (!walked.drawn) walked.drawn = std::move(path);
    }
  }
  if (drawn || !replayed_ranks.empty() || regrouped_buckets) {
    walked.replayed = true;
    const StepReplay replay(timeline, job, names, *walked.drawn, regrouped_buckets);
    if (drawn) walked.what_ifs = replay.what_ifs(walked.what_if_unmeasured);
    for (const int32_t rank : replayed_ranks) walked.at_median.push_back(replay.at_median(rank));
    walked.regrouped = replay.regrouped(walked.regroup_unmeasured);
  }
  if (!drawn) walked.drawn.reset();
  return walked;
}

// A step's graph holds every rank's events of the step and of the one
// before it, about 70 bytes an event (bench/results/report.md). Steps are
// walked and replayed at once, one per usable CPU, while their graphs
// together hold about this many events, about 140 MiB. Each graph is taken
// at the job's mean (two steps' share of its events): a step far larger
// than the mean may go beside others all the same.
constexpr uint64_t kEventsReplayedAtOnce = 2'000'000;

// How many steps are walked and replayed at once, a step's graph taken to
// hold two steps' share of the job's events.
unsigned steps_at_once(const Timeline& timeline, const JobProfile& job) {
  uint64_t events = 0;
  for (const RankInfo& info : timeline.ranks()) events += info.event_count;
  size_t steps = 1;
  for (const RankProfile& rank : job.ranks) steps = std::max(steps, rank.steps.size());
  const uint64_t per_graph = std::max<uint64_t>(1, 2 * events / steps);
  return static_cast<unsigned>(std::clamp<uint64_t>(kEventsReplayedAtOnce / per_graph, 1, usable_cpus()));
}

}  // namespace

CriticalPath critical_path(const Timeline& timeline, const JobProfile& job, const std::vector<int32_t>& replayed_ranks,
                           const BucketReport* buckets) {
  CriticalPath result;
  const bool regrouping = buckets && buckets->ddp && !buckets->predictions.empty();
  // Without a path, the buckets are not replayed for the same reason.
  const auto without_path = [&](std::string reason) {
    result.unmeasured = std::move(reason);
    if (regrouping && result.bucket_replays.empty()) {
      result.bucket_replays_unmeasured = "no critical path: " + result.unmeasured;
    }
    return result;
  };
  if (std::string reason = unmeasured(job); !reason.empty()) return without_path(std::move(reason));
  const std::vector<NameTraits> names = name_traits(*job.strings);
  // Steps are walked and replayed at once, each on its own: on GPU jobs
  // their graphs were most of the report's time.
  const std::vector<std::pair<size_t, std::string>> to_walk = steps_to_walk(job);
  std::vector<WalkedStep> outcomes(to_walk.size());
  for_each_index(to_walk.size(), steps_at_once(timeline, job), [&](size_t k) {
    outcomes[k] = walk_and_replay(timeline, job, names, to_walk[k].first, !to_walk[k].second.empty(), replayed_ranks,
                                regrouping ? buckets : nullptr);
  });
  std::map<int32_t, PathShare> ranks;
  std::map<std::string, int64_t> nodes;
  std::map<std::tuple<uint32_t, int32_t, PathCategory>, int64_t> items;
  // Per rank, its share of each walked step's path's own time less its fair share.
  std::vector<std::vector<double>> excess(job.ranks.size());
  std::map<int32_t, RankReplay> rank_replays;
  std::map<uint64_t, BucketReplay> bucket_replays;
  for (size_t k = 0; k < to_walk.size(); ++k) {
    const auto& [step, which] = to_walk[k];
    WalkedStep& outcome = outcomes[k];
    if (!outcome.walked) continue;
    ++result.steps_walked;
    for (const auto& [rank, step_share] : outcome.ranks) {
      PathShare& share = ranks[rank];
      share.rank = rank;
      share.ns += step_share.ns;
      for (size_t c = 0; c < std::size(share.by_category); ++c) share.by_category[c] += step_share.by_category[c];
    }
    for (const auto& [host, ns] : outcome.nodes) nodes[host] += ns;
    for (const auto& [key, ns] : outcome.items) items[key] += ns;
    result.total_ns += outcome.total_ns;
    size_t ran = 0;
    for (const RankProfile& rank : job.ranks) {
      ran += step < rank.steps.size() && rank.steps[step].times.begin_ns != kUnknown ? 1 : 0;
    }
    for (size_t r = 0; r < job.ranks.size() && outcome.own_time; ++r) {
      const RankProfile& rank = job.ranks[r];
      if (step >= rank.steps.size() || rank.steps[step].times.begin_ns == kUnknown) continue;
      excess[r].push_back(outcome.on_path[r] - 1.0 / static_cast<double>(ran));
    }
    if (outcome.replayed) {
      for (PathWhatIf& what_if : outcome.what_ifs) result.what_if.push_back(std::move(what_if));
      if (!outcome.what_if_unmeasured.empty()) result.what_if_unmeasured = outcome.what_if_unmeasured;
      for (size_t i = 0; i < replayed_ranks.size(); ++i) {
        const std::optional<PathWhatIf>& what_if = outcome.at_median[i];
        if (!what_if) continue;
        RankReplay& sum = rank_replays[replayed_ranks[i]];
        sum.rank = replayed_ranks[i];
        ++sum.steps;
        sum.replayed_ns += what_if->replayed_ns;
        sum.predicted_ns += what_if->predicted_ns;
      }
      if (regrouping && outcome.regrouped.empty()) {
        ++result.bucket_replays_left_out;
        if (result.bucket_replays_unmeasured.empty()) result.bucket_replays_unmeasured = outcome.regroup_unmeasured;
      }
      for (const BucketReplay& step_replay : outcome.regrouped) {
        BucketReplay& sum = bucket_replays[step_replay.bucket_bytes];
        sum.bucket_bytes = step_replay.bucket_bytes;
        ++sum.steps;
        sum.replayed_ns += step_replay.replayed_ns;
        sum.regrouped_ns += step_replay.regrouped_ns;
        sum.predicted_ns += step_replay.predicted_ns;
      }
    }
    if (which.empty()) continue;
    outcome.drawn->which = which;
    result.steps.push_back(std::move(*outcome.drawn));
  }
  for (auto& [rank, sum] : rank_replays) {
    const int64_t steps = static_cast<int64_t>(sum.steps);
    result.rank_replays.push_back({rank, sum.steps, sum.replayed_ns / steps, sum.predicted_ns / steps});
  }
  for (auto& [cap, sum] : bucket_replays) {
    const int64_t steps = static_cast<int64_t>(sum.steps);
    result.bucket_replays.push_back(
        {cap, sum.steps, sum.replayed_ns / steps, sum.regrouped_ns / steps, sum.predicted_ns / steps});
  }
  if (result.steps.empty()) return without_path(kNoStepTimesReason);
  if (result.steps_walked < kFairShareSteps) {
    result.fair_share_unmeasured = std::to_string(result.steps_walked) + (result.steps_walked == 1 ? " step" : " steps") +
                                   " walked: a rank's share of the path is told from noise over " +
                                   std::to_string(kFairShareSteps) + " steps or more";
  }
  for (auto& [rank, share] : ranks) {
    const std::vector<double>& e = excess[static_cast<size_t>(rank)];
    const MeanWithError excess_of_rank = mean_with_error(e);
    share.excess_mean = excess_of_rank.mean;
    share.excess_error = excess_of_rank.error;
    share.above_fair_share = e.size() >= kFairShareSteps && share.excess_mean > 3 * share.excess_error;
    result.ranks.push_back(share);
  }
  std::stable_sort(result.ranks.begin(), result.ranks.end(),
                   [](const PathShare& a, const PathShare& b) { return a.ns > b.ns; });
  for (const auto& [host, ns] : nodes) result.nodes.push_back({host, ns});
  std::stable_sort(result.nodes.begin(), result.nodes.end(),
                   [](const NodeShare& a, const NodeShare& b) { return a.ns > b.ns; });
  for (const auto& [key, ns] : items) result.items.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), ns});
  std::stable_sort(result.items.begin(), result.items.end(), [](const PathItem& a, const PathItem& b) { return a.ns > b.ns; });
  if (result.items.size() > 10) result.items.resize(10);
  return result;
}

}  // namespace rankscope::analysis
