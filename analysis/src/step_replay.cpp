// A walked step replayed with one thing changed (docs/report-reference.md,
// "What-if on the path"), as a graph of the step's instants: each instant
// comes at the latest of what it waited for, each plus the time it took
// after it as recorded (changed where the what-if changes it); an instant
// that waited for nothing in the replay comes when it was recorded.
// Replayed unchanged, every instant comes when it was recorded.
//
// Each rank that ran the step is a host line, its training thread from its
// begin of the step before (where it ran it) to its end of the step: its
// own time, then a blocking call, its own time again, and so on. A blocking
// call is one in which collectives or messages completed (a blocking
// collective, receive or send, the wait of nonblocking ones) or which
// waited for the GPU (a synchronisation, a copy that returns when done). It
// ends once what it waited for (of what completed in it, what came latest,
// as the walk follows it) came and took after it what it took as recorded:
// a collective, its last arrival plus the transfer after it, whenever this
// rank came to its call; a message, the later of its other end's post (or
// the other end's MPI call that released it) and the call's begin, plus
// the transfer; the GPU, the end of the last
// operation that ended in the call (of each stream's last, for a
// device-wide sync), plus what the call took after it. An instant of the
// rank's host threads (an arrival, a post, a launch) moves with the line's
// own time before it, or inside a blocking call with the call's begin.
//
// Each GPU stream of the rank is a line of operations. An operation starts
// after what it waited for: its launch (the call's end, or its begin where
// the operation started before the call returned), the stream's operation
// before it and, where it started later than both, the operation of
// another of the rank's streams that began before it and ended last before
// it started (a stream wait on an event, as DDP's communication stream
// waits for the gradients' kernels). The latest of them as recorded is
// followed by the delay recorded after it; the others only keep the start
// from coming sooner than they allowed. A kernel runs for its duration, a
// copy, a memset and NCCL's point-to-point kernel for theirs as recorded;
// NCCL's kernel of a collective is the collective: it ends once its last
// rank's kernel started, plus the transfer after that.
//
// The step replayed runs from its first rank's replayed begin to its last
// rank's end.
#include "step_replay.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "rankscope/model/format.h"
#include "rankscope/model/statistics.h"
#include "launches.h"
#include "step_events.h"

namespace rankscope::analysis {
namespace {

// What an edge's time is, and so how a change changes it.
enum class Lapse : uint8_t {
  kRecorded,  // a delay or an offset, as recorded
  kOwnTime,   // a rank's own time on its host line: scaled on CPU jobs
  kKernel,    // a compute kernel running: scaled on GPU jobs
  kTransfer,  // what a collective or a message took after it was ready
};

struct Change {
  int32_t rank = -1;  // whose time is scaled; -1: nobody's
  double factor = 1;
  Lapse scaled = Lapse::kOwnTime;
  bool transfers = true;
  int regrouping = -1;  // the gradient buckets regrouped into a predicted cap's (its index); -1: as recorded
};

// Which replays an edge is in: every one, those with the gradient buckets
// as recorded, those with them regrouped, or one regrouping's alone
// (kOneRegrouping + its index).
enum Variant : uint16_t { kAlways, kBucketsAsRecorded, kBucketsRegrouped, kOneRegrouping };

int64_t scaled(int64_t ns, double factor) { return static_cast<int64_t>(std::llround(static_cast<double>(ns) * factor)); }

class InstantGraph {
 public:
  uint32_t add(int64_t recorded) {
    recorded_.push_back(recorded);
    rank_of_.push_back(-1);
    return static_cast<uint32_t>(recorded_.size() - 1);
  }
  int64_t recorded(uint32_t instant) const { return recorded_[instant]; }
  // `to` comes no sooner than `ns` after `from`. A lapse that a change
  // scales is the time of `rank`, whose instant `to` is.
  void link(uint32_t from, uint32_t to, int64_t ns, Lapse lapse = Lapse::kRecorded, int32_t rank = -1,
            uint16_t variant = kAlways) {
    if (rank >= 0) rank_of_[to] = rank;
    linked_.push_back({from, to, std::clamp(ns, kShortestLapse, kLongestLapse), variant, static_cast<uint64_t>(lapse)});
  }

  // For the replay as recorded and each of `regroupings`, the instants in
  // an order each comes after all it waits for in it; none for one where
  // they wait on each other in a circle (clocks that disagree, or a call
  // that a regrouping makes wait for a bucket posted after it).
  void order(int regroupings) {
    // Grouped by `to` in one counting pass: a comparison sort of the edges
    // took 8 % of a report's time on steps of a million edges. Linked in
    // blocks, they are copied once, with no vector's room to spare.
    into_.assign(recorded_.size() + 1, 0);
    for (const Edge& e : linked_) ++into_[e.to + 1];
    for (size_t i = 1; i < into_.size(); ++i) into_[i] += into_[i - 1];
    edges_.resize(linked_.size());
    {
      std::vector<uint32_t> next(into_.begin(), into_.end() - 1);
      for (const Edge& e : linked_) edges_[next[e.to]++] = e;
    }
    std::deque<Edge>().swap(linked_);
    // Out of each instant, its edges' indices (every replay's), and the
    // edges that are not in every replay.
    out_begin_.assign(recorded_.size() + 1, 0);
    for (const Edge& e : edges_) ++out_begin_[e.from + 1];
    for (size_t i = 1; i < out_begin_.size(); ++i) out_begin_[i] += out_begin_[i - 1];
    out_.resize(edges_.size());
    std::vector<uint32_t> filled(out_begin_.begin(), out_begin_.end() - 1);
    variant_edges_.clear();
    for (uint32_t j = 0; j < edges_.size(); ++j) {
      out_[filled[edges_[j].from]++] = j;
      if (edges_[j].variant != kAlways) variant_edges_.push_back(j);
    }
    orders_.clear();
    order_of_.clear();
    // An order of every replay's edges together is one of each replay's:
    // one sort where no regrouping closes a circle.
    std::vector<uint32_t> together = topological_order([](const Edge&) { return true; });
    if (together.size() == recorded_.size()) {
      orders_.push_back(std::move(together));
      order_of_.assign(static_cast<size_t>(regroupings + 1), 0);
      return;
    }
    for (int regrouping = -1; regrouping < regroupings; ++regrouping) {
      const Change change{.regrouping = regrouping};
      std::vector<uint32_t> order = topological_order([&](const Edge& e) { return in_replay(e, change); });
      if (order.size() != recorded_.size()) order.clear();
      order_of_.push_back(orders_.size());
      orders_.push_back(std::move(order));
    }
  }
  bool ordered(const Change& change) const {
    const size_t which = static_cast<size_t>(change.regrouping + 1);
    return which < order_of_.size() && !orders_[order_of_[which]].empty();
  }

  // Every instant's replayed time (where ordered()); one that waits for
  // nothing in this replay comes when it was recorded.
  std::vector<int64_t> replay(const Change& change) const {
    std::vector<int64_t> at(recorded_.size());
    for (const uint32_t i : orders_[order_of_[static_cast<size_t>(change.regrouping + 1)]]) at[i] = arrive(i, at, change);
    return at;
  }

  // The replay of one regrouping, from `base`, the replay as recorded: only
  // the instants after the regrouping's own edges (or after those it
  // drops) can differ, and only they are replayed again.
  std::vector<int64_t> replay_regrouping(int regrouping, const std::vector<int64_t>& base) const {
    const Change change{.regrouping = regrouping};
    std::vector<char> differs(recorded_.size(), 0);
    std::vector<uint32_t> reached;
    for (const uint32_t j : variant_edges_) {
      const uint32_t to = edges_[j].to;
      if (in_replay(edges_[j], change) == in_replay(edges_[j], {}) || differs[to]) continue;
      differs[to] = 1;
      reached.push_back(to);
    }
    for (size_t k = 0; k < reached.size(); ++k) {
      for (uint32_t o = out_begin_[reached[k]]; o < out_begin_[reached[k] + 1]; ++o) {
        const Edge& e = edges_[out_[o]];
        if (!differs[e.to] && in_replay(e, change)) {
          differs[e.to] = 1;
          reached.push_back(e.to);
        }
      }
    }
    std::vector<int64_t> at = base;
    for (const uint32_t i : orders_[order_of_[static_cast<size_t>(regrouping + 1)]]) {
      if (differs[i]) at[i] = arrive(i, at, change);
    }
    return at;
  }

 private:
  // When instant `i` comes in the replay of `change`, those it waits for
  // having come at `at`: the latest of them plus its edge's lapse; when it
  // was recorded where it waits for none.
  int64_t arrive(uint32_t i, const std::vector<int64_t>& at, const Change& change) const {
    int64_t latest = INT64_MIN;
    const bool scaled_here = rank_of_[i] == change.rank;
    for (uint32_t j = into_[i]; j < into_[i + 1]; ++j) {
      if (in_replay(edges_[j], change)) {
        latest = std::max(latest, at[edges_[j].from] + lapse(edges_[j], change, scaled_here));
      }
    }
    return latest == INT64_MIN ? recorded_[i] : latest;
  }

  // 16 bytes: a step's graph holds a million of them, and the report
  // builds one per CPU at once. Whose time an edge is comes from its
  // instant `to` (rank_of_).
  struct Edge {
    uint32_t from, to;
    int64_t ns : 48;  // ±39 hours: a lapse within two steps
    uint64_t variant : 14;
    uint64_t lapse : 2;
  };
  static_assert(sizeof(Edge) == 16);
  static_assert(static_cast<int>(Lapse::kTransfer) < 4, "a lapse is 2 bits");
  // A variant is 14 bits: kOneRegrouping and one per bucket size predicted,
  // of which there are ten (buckets.cpp: caps of 1 to 256 MiB, and the
  // current size).
  static constexpr int64_t kLongestLapse = (int64_t{1} << 47) - 1, kShortestLapse = -kLongestLapse;
  // Kahn's order over the edges `in` takes.
  template <typename Takes>
  std::vector<uint32_t> topological_order(Takes in) const {
    std::vector<uint32_t> waiting(recorded_.size(), 0), out_begin(recorded_.size() + 1, 0), out, order;
    for (const Edge& e : edges_) {
      if (!in(e)) continue;
      ++waiting[e.to];
      ++out_begin[e.from + 1];
    }
    for (size_t i = 1; i < out_begin.size(); ++i) out_begin[i] += out_begin[i - 1];
    out.resize(out_begin.back());
    std::vector<uint32_t> filled(out_begin.begin(), out_begin.end() - 1);
    for (const Edge& e : edges_) {
      if (in(e)) out[filled[e.from]++] = e.to;
    }
    for (uint32_t i = 0; i < recorded_.size(); ++i) {
      if (waiting[i] == 0) order.push_back(i);
    }
    for (size_t k = 0; k < order.size(); ++k) {
      const uint32_t from = order[k];
      for (uint32_t j = out_begin[from]; j < out_begin[from + 1]; ++j) {
        if (--waiting[out[j]] == 0) order.push_back(out[j]);
      }
    }
    return order;
  }
  static bool in_replay(const Edge& e, const Change& change) {
    switch (e.variant) {
      case kAlways:
        return true;
      case kBucketsAsRecorded:
        return change.regrouping < 0;
      case kBucketsRegrouped:
        return change.regrouping >= 0;
      default:
        return change.regrouping == static_cast<int>(e.variant) - kOneRegrouping;
    }
  }
  static int64_t lapse(const Edge& e, const Change& change, bool scaled_here) {
    const auto kind = static_cast<Lapse>(e.lapse);
    if (kind == Lapse::kTransfer) return change.transfers ? e.ns : 0;
    if (kind == change.scaled && scaled_here) return scaled(e.ns, change.factor);
    return e.ns;
  }

  std::vector<int64_t> recorded_;
  std::vector<int32_t> rank_of_;   // per instant, the rank whose time the scaled lapses into it are; -1: none
  std::deque<Edge> linked_;        // as linked, until ordered
  std::vector<Edge> edges_;        // by `to`, once ordered
  std::vector<uint32_t> into_;     // per instant, its edges' range in edges_
  std::vector<std::vector<uint32_t>> orders_;  // empty: in a circle
  std::vector<size_t> order_of_;               // as recorded, then per regrouping: its order in orders_
  std::vector<uint32_t> out_begin_, out_;      // per instant, the indices in edges_ of the edges out of it
  std::vector<uint32_t> variant_edges_;        // the edges not in every replay
};

// What blocking calls wait for: the step's collectives (indices into
// JobProfile::collectives), then the other ends of its messages (after
// them): for a receive its send, for a send that waited for its receiver
// the receive, each at its post or at the MPI call that released it.
struct Rendezvous {
  size_t collectives = 0;
  std::vector<int64_t> posted;  // per other end: when it came (posted or released), as recorded
  std::vector<int32_t> poster;  // per other end: the rank that posted it
  size_t count() const { return collectives + posted.size(); }
};

// A GPU operation of a rank in the replay: of its event, what the replay
// reads (48 bytes, not the event's 64 and more: a step holds hundreds of
// thousands).
struct Operation {
  explicit Operation(const Event& e)
      : begin_ns(e.begin_ns), end_ns(e.end_ns), correlation_id(e.correlation_id), comm_hash(e.comm_hash),
        track(e.track), kind(e.kind) {}
  int64_t begin_ns, end_ns;
  uint64_t correlation_id, comm_hash;
  uint16_t track;
  EventKind kind;
  uint32_t start = 0, end = 0;  // its instants
};
static_assert(sizeof(Operation) == 48);

// A rank's step as read.
struct RankRead {
  bool ran = false;
  int64_t begin = 0, end = 0;  // its begin of the step before, where it ran it, to its end of the step
  int64_t step_begin = 0;
  std::vector<Event> calls;  // its training thread's communication and CUDA calls, by begin
  struct Message {
    int64_t posted, completed;
  };
  std::map<MessageKey, Message> sends, receives;
  std::map<uint16_t, std::vector<Operation>> streams;  // its GPU operations by stream, by start
  Launches launches;  // its CUDA calls, any thread's
  std::vector<int64_t> mpi_calls;  // the begins of its MPI calls, any thread's, in order: what releases a message
};

RankRead read_rank(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names,
                   const RankInfo& info, size_t step) {
  RankRead read;
  const RankProfile& rank = job.ranks[static_cast<size_t>(info.rank)];
  const int32_t training = training_thread(info, rank);
  if (step >= rank.steps.size() || rank.steps[step].times.begin_ns == kUnknown || training < 0) return read;
  read.ran = true;
  read.step_begin = rank.steps[step].times.begin_ns;
  const bool ran_before = step > 0 && rank.steps[step - 1].times.begin_ns != kUnknown;
  read.begin = ran_before ? std::min(rank.steps[step - 1].times.begin_ns, read.step_begin) : read.step_begin;
  read.end = rank.steps[step].times.end_ns;
  std::unordered_map<uint16_t, TrackType> types;
  for (const Track& track : info.tracks) types[track.id] = track.type;
  const auto on_thread = [&](const Event& e) {
    const auto type = types.find(e.track);
    return type == types.end() || type->second == TrackType::kThread;
  };
  const auto replayed_on_stream = [&](const Event& e) {
    return job.gpu && is_gpu_operation(e.kind) && e.end_ns >= e.begin_ns && !on_thread(e);
  };
  const std::vector<Event> events = events_beginning_in(timeline, info, read.begin, read.end);
  std::vector<Event> host_mpi_calls;
  // Each stream's operations counted first: grown one at a time, their
  // vectors held up to twice what they needed.
  std::map<uint16_t, size_t> operations_on;
  for (const Event& e : events) operations_on[e.track] += replayed_on_stream(e) ? 1 : 0;
  for (const auto& [track, count] : operations_on) {
    if (count > 0) read.streams[track].reserve(count);
  }
  for (const Event& e : events) {
    if (const std::optional<MessageKey> key = message_key(e, info.rank)) {
      (e.op == CommOp::kSend ? read.sends : read.receives)[*key] = {e.begin_ns, e.end_ns};
    }
    if (replayed_on_stream(e)) {
      read.streams[e.track].emplace_back(e);
      continue;
    }
    if (!on_thread(e)) continue;
    const NameTraits::Api api = cuda_api(e, names);
    if (e.kind == EventKind::kCudaApi) read.launches.add(e);
    if (is_mpi(e.kind)) host_mpi_calls.push_back(e);
    if (e.track == training && e.end_ns > e.begin_ns && (is_communication(e.kind) || api == NameTraits::Api::kSync)) {
      read.calls.push_back(e);
    }
  }
  read.launches.index();
  read.mpi_calls = mpi_call_begins(host_mpi_calls);
  const auto by_begin = [](const auto& a, const auto& b) { return a.begin_ns < b.begin_ns; };
  std::sort(read.calls.begin(), read.calls.end(), by_begin);
  // A timeline keeps each rank's events by begin, so they come sorted: the
  // check is all that is left of the sort's cost.
  const auto by_start = [](const Operation& a, const Operation& b) { return a.begin_ns < b.begin_ns; };
  for (auto& [track, operations] : read.streams) {
    if (!std::is_sorted(operations.begin(), operations.end(), by_start)) {
      std::stable_sort(operations.begin(), operations.end(), by_start);
    }
  }
  return read;
}

// When a launch call let an operation starting at
// `start` go: its return, or its begin for an operation that started
// before the call returned (on an idle stream).
int64_t launched_by(const Launches::Call& launch, int64_t start) {
  return launch.end_ns <= start ? launch.end_ns : launch.begin_ns;
}

// A rank's host line: its instants where its own time stops and starts
// (its begin, each blocking call's begin and end), in time order.
struct HostLine {
  int32_t rank = -1;
  struct Anchor {
    int64_t at;
    uint32_t instant;
    bool call_begins;  // the time up to the next anchor is inside a blocking call
  };
  std::vector<Anchor> anchors;
};

// The instant `t` of the rank's host line (recorded on any of its host
// threads): as far after the anchor before it as recorded, its own time
// after a blocking call's end, the call's time inside one. (Never from a
// call's end: an arrival recorded on another thread inside a wait for the
// same collective would wait for itself.)
uint32_t host_instant(InstantGraph& graph, const HostLine& line, int64_t t) {
  const uint32_t instant = graph.add(t);
  const auto after = std::upper_bound(line.anchors.begin(), line.anchors.end(), t,
                                      [](int64_t time, const HostLine::Anchor& a) { return time < a.at; });
  if (after == line.anchors.begin()) return instant;  // before the line: as recorded
  const HostLine::Anchor& anchor = *std::prev(after);
  graph.link(anchor.instant, instant, t - anchor.at, anchor.call_begins ? Lapse::kRecorded : Lapse::kOwnTime, line.rank);
  return instant;
}

// What a blocking call waited for: a rendezvous, or GPU operations (the
// last to end in it; for a device-wide sync, each stream's last).
struct BlockingCall {
  int32_t rank;
  int64_t begin, end;
  uint32_t begin_instant, end_instant;
  std::optional<size_t> rendezvous;
  std::vector<const Operation*> operations;
  bool poll = false;           // it only looked (MPI_Test*): it waits for nothing regrouped
  bool gradient_wait = false;  // the rank's wait for its gradient allreduces at the end of backward
};

// When a rank's gradient bucket was ready to be reduced: its instant and
// its time as recorded.
struct BucketPost {
  uint32_t instant;
  int64_t at;
};
using BucketPosts = std::vector<BucketPost>;  // a rank's, bucket by bucket

// A rank's GPU operations of every stream, by end.
using OperationsByEnd = std::vector<const Operation*>;

OperationsByEnd operations_by_end(const RankRead& read) {
  OperationsByEnd by_end;
  for (const auto& [track, operations] : read.streams) {
    for (const Operation& op : operations) by_end.push_back(&op);
  }
  std::stable_sort(by_end.begin(), by_end.end(),
                   [](const Operation* a, const Operation* b) { return a->end_ns < b->end_ns; });
  return by_end;
}

// Where the operations that ended by `t` end in `by_end`.
OperationsByEnd::const_iterator ended_by(const OperationsByEnd& by_end, int64_t t) {
  return std::upper_bound(by_end.begin(), by_end.end(), t, [](int64_t time, const Operation* o) { return time < o->end_ns; });
}

// Of the rank's GPU operations that ended in (from, until], the last; with
// `every_stream`, each stream's last. None where none did.
std::vector<const Operation*> operations_ending_in(const OperationsByEnd& by_end, int64_t from, int64_t until,
                                                   bool every_stream) {
  std::vector<const Operation*> found;
  for (auto it = ended_by(by_end, until); it != by_end.begin();) {
    const Operation* op = *--it;
    if (op->end_ns <= from) break;
    const bool stream_seen = std::any_of(found.begin(), found.end(),
                                         [&](const Operation* o) { return o->track == op->track; });
    if (!stream_seen) found.push_back(op);
    if (!every_stream) break;
  }
  return found;
}

// When the rank of `read` began to wait for what completed at `completed`:
// the begin of its training thread's last call of MPI or c10d that began
// before then (the walk's call that the completion fell in, which may be
// c10d's wait while another thread makes the MPI calls).
int64_t waited_from(const RankRead& read, int64_t completed) {
  auto call = std::lower_bound(read.calls.begin(), read.calls.end(), completed,
                               [](const Event& e, int64_t t) { return e.begin_ns < t; });
  while (call != read.calls.begin()) {
    --call;
    if (is_communication(call->kind)) return call->begin_ns;
  }
  return completed;
}

}  // namespace

// The graph of one step, from the step before, and the instants that say
// how long it took.
class StepGraph {
 public:
  StepGraph(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names, size_t step,
            const BucketReport* buckets)
      : job_(job), names_(names), step_(step) {
    for (const RankInfo& info : timeline.ranks()) {
      reads_.push_back(info.status == RankStatus::kMissing ? RankRead{} : read_rank(timeline, job, names, info, step));
    }
    reads_.resize(job.ranks.size());
    gather_rendezvous();
    if (buckets) find_gradients(*buckets);
    for (size_t r = 0; r < reads_.size(); ++r) {
      for (auto& [track, operations] : reads_[r].streams) {
        for (Operation& op : operations) {
          op.start = graph_.add(op.begin_ns);
          op.end = graph_.add(op.end_ns);
          gpu_ends_.push_back(op.end);
        }
      }
      by_end_.push_back(operations_by_end(reads_[r]));
    }
    lines_.resize(reads_.size());
    for (size_t r = 0; r < reads_.size(); ++r) make_line(r);
    link_arrivals();
    if (regroupable()) {
      if (const std::optional<std::map<int32_t, BucketPosts>> posts = gradient_posts()) {
        for (size_t k = 0; k < buckets->predictions.size(); ++k) regroup(*buckets, k, *posts);
      } else {
        gradients_.clear();
        gradient_index_.clear();
        gradient_kernels_.clear();
        after_gradients_.clear();
      }
    }
    for (size_t r = 0; r < reads_.size(); ++r) {
      link_operations(r);
      if (!reads_[r].ran) continue;
      begins_.push_back(host_instant(graph_, lines_[r], reads_[r].step_begin));
      ends_.push_back(host_instant(graph_, lines_[r], reads_[r].end));
    }
    graph_.order(regroupable() ? static_cast<int>(buckets->predictions.size()) : 0);
  }

  bool circular() const { return !graph_.ordered({}); }

  // Whether the step's gradient allreduces can be regrouped; why not in
  // regroup_unmeasured() where not.
  bool regroupable() const { return !gradients_.empty(); }
  const std::string& regroup_unmeasured() const { return regroup_unmeasured_; }

  // The step's time with `change`: from the first replayed begin to the
  // last end. None where the instants wait on each other in a circle.
  // `past_end` (where asked) is how long after the step's last end the
  // GPU's last operation of it ends (INT64_MIN without one).
  std::optional<int64_t> replay(const Change& change, int64_t* past_end = nullptr) const {
    if (!graph_.ordered(change) || begins_.empty()) return std::nullopt;
    // The replay as recorded is kept: each regrouping replays only what it changes.
    const bool plain = change.transfers && change.rank < 0;
    if (plain && as_recorded_.empty() && graph_.ordered({})) as_recorded_ = graph_.replay({});
    const bool kept = plain && !as_recorded_.empty();
    std::vector<int64_t> changed;
    if (!kept) {
      changed = graph_.replay(change);
    } else if (change.regrouping >= 0) {
      changed = graph_.replay_regrouping(change.regrouping, as_recorded_);
    }
    const std::vector<int64_t>& at = kept && change.regrouping < 0 ? as_recorded_ : changed;
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const uint32_t i : begins_) first = std::min(first, at[i]);
    for (const uint32_t i : ends_) last = std::max(last, at[i]);
    if (past_end) {
      *past_end = INT64_MIN;
      for (const uint32_t i : gpu_ends_) *past_end = std::max(*past_end, at[i] - last);
    }
    return last - first;
  }

 private:
  // The collectives of the step and the one before, and the messages whose
  // two ends both lines hold: each receive matched to its send by key (one
  // whose other end is not in the lines, posted before the peer's line
  // began, say, is not one the replay can move). A receive waits for its
  // send; a send that completed after its receive was posted may have
  // waited for it (a message too large to go eagerly); one that completed
  // before did not. What released it may be a later MPI call of the
  // other end's (message_released()).
  void gather_rendezvous() {
    const size_t n = reads_.size();
    completions_ = step_completions(job_, step_);
    if (step_ > 0) {
      const StepCompletions before = step_completions(job_, step_ - 1);
      for (size_t r = 0; r < n; ++r) completions_[r].insert(completions_[r].end(), before[r].begin(), before[r].end());
    }
    rendezvous_.collectives = job_.collectives.size();
    const auto other_end = [&](size_t waiter, int64_t completed, size_t poster, int64_t posted) {
      completions_[waiter].push_back({completed, rendezvous_.count()});
      rendezvous_.posted.push_back(posted);
      rendezvous_.poster.push_back(static_cast<int32_t>(poster));
    };
    for (size_t r = 0; r < n; ++r) {
      for (const auto& [key, receive] : reads_[r].receives) {
        const size_t sender = static_cast<size_t>(std::get<2>(key));
        if (sender >= n) continue;
        const auto send = reads_[sender].sends.find(key);
        if (send == reads_[sender].sends.end()) continue;
        const RankRead::Message& sent = send->second;
        other_end(r, receive.completed, sender,
                  message_released(reads_[sender].mpi_calls, sent.posted, waited_from(reads_[r], receive.completed),
                                   std::min(receive.completed, sent.completed)));
        if (receive.posted <= sent.completed) {
          other_end(sender, sent.completed, r,
                    message_released(reads_[r].mpi_calls, receive.posted, waited_from(reads_[sender], sent.completed),
                                     std::min(sent.completed, receive.completed)));
        }
      }
    }
    for (auto& list : completions_) std::sort(list.begin(), list.end());
    arrivals_.resize(rendezvous_.collectives);
    last_arrival_.assign(rendezvous_.count(), UINT32_MAX);
  }

  int64_t last_arrival(size_t rendezvous) const {
    return rendezvous < rendezvous_.collectives ? job_.collectives[rendezvous].last_arrival_ns()
                                                : rendezvous_.posted[rendezvous - rendezvous_.collectives];
  }

  // The rank's host line: each call in which something completed that
  // arrived from elsewhere, or in which the GPU's work ended, is a blocking
  // call; the instants of its begin and end are the line's anchors.
  void make_line(size_t r) {
    const RankRead& read = reads_[r];
    HostLine& line = lines_[r];
    line.rank = static_cast<int32_t>(r);
    if (!read.ran) return;
    line.anchors.push_back({read.begin, graph_.add(read.begin), false});
    int64_t reach = read.begin;
    for (const Event& call : read.calls) {
      if (call.begin_ns < reach) continue;  // inside the call before it
      const int64_t end = std::min(call.end_ns, read.end);
      BlockingCall blocking{line.rank, call.begin_ns, end, 0, 0, std::nullopt, {}};
      if (call.kind == EventKind::kCudaApi) {
        blocking.operations = operations_ending_in(by_end_[r], call.begin_ns, end, names_[call.name_id].every_stream);
        if (blocking.operations.empty()) continue;
      } else {
        blocking.rendezvous = latest_arrival(completions_[r], call.begin_ns, end,
                                             [&](size_t i) { return last_arrival(i); });
        blocking.poll = names_[call.name_id].poll;
        // The wait for the gradients is a line's anchor even where nothing
        // completed in it: regrouped, the buckets may come later.
        blocking.gradient_wait = !gradient_waits_.empty() && gradient_waits_[r] == call.begin_ns;
        if (!blocking.rendezvous && !blocking.gradient_wait) continue;
      }
      const HostLine::Anchor& before = line.anchors.back();
      blocking.begin_instant = graph_.add(call.begin_ns);
      blocking.end_instant = graph_.add(end);
      graph_.link(before.instant, blocking.begin_instant, call.begin_ns - before.at, Lapse::kOwnTime, line.rank);
      line.anchors.push_back({call.begin_ns, blocking.begin_instant, true});
      line.anchors.push_back({end, blocking.end_instant, false});
      blocking_.push_back(blocking);
      reach = end;
    }
  }

  // Each rendezvous's arrivals, and each blocking call's and NCCL kernel's
  // end after what it waited for.
  void link_arrivals() {
    const size_t n = reads_.size();
    const auto ran = [&](int32_t rank) { return static_cast<size_t>(rank) < n && reads_[static_cast<size_t>(rank)].ran; };
    // NCCL's kernels by rank, start and communicator: where a rank arrived at an NCCL collective.
    std::map<std::tuple<int32_t, int64_t, uint64_t>, const Operation*> nccl_kernels;
    for (size_t r = 0; r < n; ++r) {
      for (const auto& [track, operations] : reads_[r].streams) {
        for (const Operation& op : operations) {
          if (op.kind == EventKind::kNcclCollectiveGpu) {
            nccl_kernels[{static_cast<int32_t>(r), op.begin_ns, op.comm_hash}] = &op;
          }
        }
      }
    }
    const int32_t first_step = step_ > 0 ? static_cast<int32_t>(step_) - 1 : 0;
    for (size_t i = 0; i < job_.collectives.size(); ++i) {
      const CollectiveInstance& c = job_.collectives[i];
      // One rank's part alone is no rendezvous, but for a gradient allreduce
      // of a job of which one rank was captured: regrouped, its new buckets
      // are reduced as that rank's gradients come.
      if (c.step < first_step || c.step > static_cast<int32_t>(step_) ||
          (c.ranks.size() < 2 && !gradient_index_.contains(i))) {
        continue;
      }
      for (const Participation& p : c.ranks) {
        if (p.arrival_ns == kUnknown) continue;
        // Outside the replay (no step times), a rank arrives when it did.
        uint32_t arrival = 0;
        const auto kernel = nccl_kernels.find({p.rank, p.arrival_ns, c.comm_hash});
        if (c.source == CollectiveSource::kNccl && kernel != nccl_kernels.end()) {
          arrival = kernel->second->start;
          nccl_collective_[kernel->second] = i;
          if (const auto gradient = gradient_index_.find(i); gradient != gradient_index_.end()) {
            gradient_kernels_[gradient->second].push_back({p.rank, kernel->second});
          }
        } else if (c.source != CollectiveSource::kNccl && ran(p.rank)) {
          arrival = host_instant(graph_, lines_[static_cast<size_t>(p.rank)], p.arrival_ns);
        } else {
          arrival = graph_.add(p.arrival_ns);
        }
        arrivals_[i].push_back({p.rank, arrival});
      }
    }
    // Each collective's last arrival, one instant after all of its
    // arrivals, which every completion follows.
    for (size_t i = 0; i < rendezvous_.collectives; ++i) {
      if (arrivals_[i].empty()) continue;
      for (const auto& [rank, a] : arrivals_[i]) graph_.link(a, last_arrival_instant(i), 0);
    }
    for (size_t m = 0; m < rendezvous_.posted.size(); ++m) {
      last_arrival_[rendezvous_.collectives + m] =
          host_instant(graph_, lines_[static_cast<size_t>(rendezvous_.poster[m])], rendezvous_.posted[m]);
    }
    for (const BlockingCall& call : blocking_) {
      if (!call.operations.empty()) {
        // What the call took after the last of them, after each.
        const int64_t tail = call.end - call.operations.front()->end_ns;
        graph_.link(call.begin_instant, call.end_instant, 0);
        for (const Operation* op : call.operations) graph_.link(op->end, call.end_instant, tail);
        continue;
      }
      if (!call.rendezvous) {
        // A wait for the gradients in which nothing completed: its own time.
        graph_.link(call.begin_instant, call.end_instant, call.end - call.begin);
        continue;
      }
      const size_t held = *call.rendezvous;
      const int64_t arrival = last_arrival(held);
      if (held < rendezvous_.collectives) {
        // A collective completes on every rank at once after its last
        // arrival, whenever each rank came to its call. Regrouped, a
        // gradient allreduce completes with its new bucket (regroup()),
        // and a poll that saw it complete only looked.
        const bool gradient = gradient_index_.contains(held);
        graph_.link(call.begin_instant, call.end_instant, 0);
        graph_.link(last_arrival_instant(held), call.end_instant, std::max<int64_t>(0, call.end - arrival),
                    Lapse::kTransfer, -1, gradient ? kBucketsAsRecorded : kAlways);
        if (gradient && call.poll) {
          graph_.link(call.begin_instant, call.end_instant, call.end - call.begin, Lapse::kRecorded, -1,
                      kBucketsRegrouped);
        }
      } else {
        // A message's end completes on its own rank, after both ends.
        const int64_t transfer = call.end - std::min(std::max(arrival, call.begin), call.end);
        graph_.link(call.begin_instant, call.end_instant, transfer, Lapse::kTransfer);
        graph_.link(last_arrival_instant(held), call.end_instant, transfer, Lapse::kTransfer);
      }
    }
  }

  void link_completion(size_t collective, uint32_t begin, uint32_t end, int64_t transfer, uint16_t variant) {
    graph_.link(begin, end, 0, Lapse::kRecorded, -1, variant);
    graph_.link(last_arrival_instant(collective), end, transfer, Lapse::kTransfer, -1, variant);
  }

  // The step's gradient allreduces, as laid out in the job's buckets (one
  // communicator's, by sequence number), and each rank's wait for them: its
  // first waiting call (not a poll) after its last post of them. NCCL's run
  // on a stream of their own, which the GPU's work after them waits for:
  // the host need not wait.
  void find_gradients(const BucketReport& buckets) {
    std::vector<uint64_t> layout;
    for (const BucketStats& b : buckets.buckets) layout.push_back(b.bytes);
    if (!buckets.ddp || buckets.predictions.empty() || layout.size() < 2) {
      regroup_unmeasured_ = "no bucket sizes were predicted for the job";
      return;
    }
    // A gradient allreduce of one part is one only where one rank ran the
    // step (one rank's trace of a larger job): else it failed to match.
    const bool one_rank = std::count_if(reads_.begin(), reads_.end(), [](const RankRead& r) { return r.ran; }) == 1;
    std::map<uint64_t, std::vector<size_t>> by_communicator;
    for (size_t i = 0; i < job_.collectives.size(); ++i) {
      const CollectiveInstance& c = job_.collectives[i];
      if (c.step == static_cast<int32_t>(step_) && (c.ranks.size() >= 2 || one_rank) && is_gradient_allreduce(c)) {
        by_communicator[c.comm_hash].push_back(i);
      }
    }
    std::vector<size_t> found;
    for (auto& [comm, sequence] : by_communicator) {
      std::sort(sequence.begin(), sequence.end(),
                [&](size_t a, size_t b) { return job_.collectives[a].seq < job_.collectives[b].seq; });
      std::vector<uint64_t> sizes;
      for (const size_t i : sequence) sizes.push_back(job_.collectives[i].bytes);
      if (sizes == layout) found = sequence;
    }
    if (found.empty()) {
      regroup_unmeasured_ = "the step's gradient allreduces are not laid out as the job's buckets";
      return;
    }
    std::vector<int64_t> last_post(reads_.size(), INT64_MIN);
    std::vector<size_t> posts(reads_.size(), 0);
    for (const size_t i : found) {
      for (const Participation& p : job_.collectives[i].ranks) {
        if (static_cast<size_t>(p.rank) >= reads_.size() || p.arrival_ns == kUnknown) {
          regroup_unmeasured_ = "a gradient allreduce's post is not known on rank " + std::to_string(p.rank);
          return;
        }
        last_post[static_cast<size_t>(p.rank)] = std::max(last_post[static_cast<size_t>(p.rank)], p.arrival_ns);
        ++posts[static_cast<size_t>(p.rank)];
      }
    }
    for (size_t r = 0; r < reads_.size(); ++r) {
      if (posts[r] != 0 && posts[r] != found.size()) {
        regroup_unmeasured_ = "rank " + std::to_string(r) + " is not in every gradient allreduce of the step";
        return;
      }
    }
    gradients_on_gpu_ = job_.collectives[found.front()].source == CollectiveSource::kNccl;
    if (!gradients_on_gpu_) gradient_waits_.assign(reads_.size(), INT64_MIN);
    for (size_t r = 0; r < reads_.size() && !gradients_on_gpu_; ++r) {
      if (last_post[r] == INT64_MIN || !reads_[r].ran) continue;
      for (const Event& call : reads_[r].calls) {
        const bool waits = (call.kind == EventKind::kMpiCall && names_[call.name_id].wait) ||
                           call.kind == EventKind::kTorchWait;
        if (call.begin_ns > last_post[r] && waits) {
          gradient_waits_[r] = call.begin_ns;
          break;
        }
      }
      if (gradient_waits_[r] == INT64_MIN) {
        gradient_waits_.clear();
        regroup_unmeasured_ = "rank " + std::to_string(r) + "'s wait for its gradient allreduces was not found";
        return;
      }
    }
    gradients_ = std::move(found);
    for (size_t k = 0; k < gradients_.size(); ++k) gradient_index_[gradients_[k]] = k;
    gradient_kernels_.resize(gradients_.size());
  }

  // Per rank, when each of its gradient buckets was ready, bucket by
  // bucket, as an instant and its recorded time. A bucket handed to MPI or
  // gloo is ready at its post. One handed to NCCL is ready once its
  // kernel's launch returned and the GPU's work launched before it on the
  // rank's other streams ended (DDP's communication stream waits for an
  // event recorded there as the bucket is handed over): not when its
  // kernel started, which also waited for the bucket before it. None where
  // they are not known; why in regroup_unmeasured(). Over NCCL, it also
  // finds the GPU's work after backward (after_gradients_): on each stream
  // the last bucket waited for, the first operation launched after it.
  std::optional<std::map<int32_t, BucketPosts>> gradient_posts() {
    std::map<int32_t, BucketPosts> posts;
    if (!gradients_on_gpu_) {
      for (const size_t i : gradients_) {
        // find_gradients() found every arrival known, so arrivals_ holds them in the same order.
        const CollectiveInstance& c = job_.collectives[i];
        for (size_t j = 0; j < c.ranks.size(); ++j) {
          posts[c.ranks[j].rank].push_back({arrivals_[i][j].second, c.ranks[j].arrival_ns});
        }
      }
      return posts;
    }
    // Per rank and stream, its operations by the begin of their launch.
    std::map<std::pair<int32_t, uint16_t>, std::vector<std::pair<int64_t, const Operation*>>> launched;
    for (size_t k = 0; k < gradients_.size(); ++k) {
      if (gradient_kernels_[k].size() != job_.collectives[gradients_[k]].ranks.size()) {
        regroup_unmeasured_ = "a gradient allreduce's NCCL kernel was not captured on every rank";
        return std::nullopt;
      }
      for (const auto& [rank, kernel] : gradient_kernels_[k]) {
        const RankRead& read = reads_[static_cast<size_t>(rank)];
        const Launches::Call* launch = read.launches.find(kernel->correlation_id);
        if (!launch) {
          regroup_unmeasured_ = "the launch of a gradient allreduce's NCCL kernel was not captured on rank " +
                                std::to_string(rank);
          return std::nullopt;
        }
        const int64_t called = launch->begin_ns;
        const int64_t start = kernel->begin_ns;
        const bool last_bucket = k + 1 == gradients_.size();
        int64_t ready = launched_by(*launch, start);
        std::vector<uint32_t> causes = {host_instant(graph_, lines_[static_cast<size_t>(rank)], ready)};
        for (const auto& [track, operations] : read.streams) {
          if (track == kernel->track) continue;
          auto& by_launch = launched[{rank, track}];
          if (by_launch.empty()) {
            for (const Operation& op : operations) {
              if (const Launches::Call* op_launch = read.launches.find(op.correlation_id)) {
                by_launch.push_back({op_launch->begin_ns, &op});
              }
            }
            std::stable_sort(by_launch.begin(), by_launch.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
          }
          const auto after = std::lower_bound(by_launch.begin(), by_launch.end(), called,
                                              [](const auto& entry, int64_t t) { return entry.first < t; });
          if (after == by_launch.begin()) continue;
          const Operation* before = std::prev(after)->second;
          if (before->end_ns > start) continue;  // the kernel did not wait for it
          causes.push_back(before->end);
          ready = std::max(ready, before->end_ns);
          // DDP's end of backward makes the stream the gradients came from
          // wait for every bucket: its first operation launched after the
          // last one waits for it, seen or not (as recorded, it may have
          // been launched after the bucket was reduced).
          if (last_bucket && after != by_launch.end()) after_gradients_.push_back(after->second);
        }
        const uint32_t instant = graph_.add(ready);
        for (const uint32_t cause : causes) graph_.link(cause, instant, 0, Lapse::kRecorded, -1, kBucketsRegrouped);
        posts[rank].push_back({instant, ready});
      }
    }
    return posts;
  }

  // The edges of one regrouping (`buckets`' prediction `which`): the
  // gradients as a stream, each rank's byte ready at the pace of its
  // buckets' `posts` (the bytes of a bucket over the time since the bucket
  // before was ready; bucket 0 at the pace of bucket 1); each new bucket
  // handed to the network once its last byte is ready on every rank and the
  // bucket before it is reduced, reduced in the fit's time; each rank's wait
  // for the gradients, any call that waited for one of them (not a poll)
  // and NCCL's kernel of each recorded bucket done when the new bucket
  // holding its last byte is.
  void regroup(const BucketReport& buckets, size_t which, const std::map<int32_t, BucketPosts>& posts) {
    const uint16_t variant = static_cast<uint16_t>(kOneRegrouping + which);
    std::vector<uint64_t> original, ends;  // the buckets as recorded; where each ends in the stream
    uint64_t total = 0;
    for (const size_t i : gradients_) {
      original.push_back(job_.collectives[i].bytes);
      total += original.back();
      ends.push_back(total);
    }
    // find_gradients() matched `original` to the job's buckets.
    const uint64_t cap = buckets.predictions[which].bucket_bytes;
    const std::vector<uint64_t> layout = cap == current_bucket_cap(buckets) ? original : buckets_for_cap(total, cap);
    const size_t ranks = job_.collectives[gradients_.front()].ranks.size();

    std::vector<uint32_t> done;    // per new bucket, the instant it is reduced
    std::vector<size_t> holdings;  // per new bucket, the recorded bucket holding its last byte
    uint64_t position = 0;
    for (const uint64_t size : layout) {
      position += size;
      const size_t holding = static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), position) - ends.begin());
      holdings.push_back(holding);
      const size_t paced = holding == 0 ? 1 : holding;
      const uint32_t ready = graph_.add(last_arrival(gradients_[holding]));
      for (const auto& [rank, rank_posts] : posts) {
        if (rank_posts.size() != gradients_.size()) continue;
        const double pace = std::max(0.0, static_cast<double>(rank_posts[paced].at - rank_posts[paced - 1].at) /
                                              static_cast<double>(original[paced]));
        const int64_t before_post = std::llround(static_cast<double>(ends[holding] - position) * pace);
        graph_.link(rank_posts[holding].instant, ready, -before_post, Lapse::kRecorded, -1, variant);
      }
      const int64_t transfer = fitted_allreduce_ns(buckets, size, ranks);
      const uint32_t reduced = graph_.add(graph_.recorded(ready) + transfer);
      graph_.link(ready, reduced, transfer, Lapse::kRecorded, -1, variant);
      if (!done.empty()) graph_.link(done.back(), reduced, transfer, Lapse::kRecorded, -1, variant);
      done.push_back(reduced);
    }
    std::vector<uint64_t> new_ends;
    position = 0;
    for (const uint64_t size : layout) new_ends.push_back(position += size);
    const auto new_bucket_of = [&](size_t recorded) {
      return static_cast<size_t>(std::lower_bound(new_ends.begin(), new_ends.end(), ends[recorded]) - new_ends.begin());
    };
    // NCCL's kernel of a recorded bucket ends, on every rank, with the new
    // bucket holding its last byte: what waited for it follows; the GPU's
    // work after backward waits for the last.
    for (const Operation* op : after_gradients_) graph_.link(done.back(), op->start, 0, Lapse::kRecorded, -1, variant);
    for (size_t k = 0; k < gradient_kernels_.size(); ++k) {
      for (const auto& [rank, kernel] : gradient_kernels_[k]) {
        graph_.link(done[new_bucket_of(k)], kernel->end, 0, Lapse::kRecorded, -1, variant);
      }
    }
    for (const BlockingCall& call : blocking_) {
      if (call.gradient_wait) {
        graph_.link(done.back(), call.end_instant, 0, Lapse::kRecorded, -1, variant);
        continue;
      }
      if (!call.rendezvous || call.poll) continue;
      const auto gradient = gradient_index_.find(*call.rendezvous);
      if (gradient == gradient_index_.end()) continue;
      const size_t bucket = new_bucket_of(gradient->second);
      // A call before the rank posted what the new bucket waits for cannot
      // wait for it: it keeps its own time.
      if (posts.at(call.rank)[holdings[bucket]].at <= call.begin) {
        graph_.link(done[bucket], call.end_instant, 0, Lapse::kRecorded, -1, variant);
      } else {
        graph_.link(call.begin_instant, call.end_instant, call.end - call.begin, Lapse::kRecorded, -1, variant);
      }
    }
  }

  // The instant of the rendezvous's last arrival: after each of its
  // arrivals in the lines (a collective's; a message's post), else when
  // it was recorded.
  uint32_t last_arrival_instant(size_t rendezvous) {
    if (last_arrival_[rendezvous] == UINT32_MAX) last_arrival_[rendezvous] = graph_.add(last_arrival(rendezvous));
    return last_arrival_[rendezvous];
  }

  // The rank's GPU operations: each starts after its launch, the stream's
  // operation before it, or another stream's it waited for; each ends after
  // its run, or NCCL's after its collective's last arrival.
  void link_operations(size_t r) {
    const RankRead& read = reads_[r];
    const int32_t rank = static_cast<int32_t>(r);
    for (const auto& [track, operations] : read.streams) {
      const Operation* previous = nullptr;
      for (const Operation& op : operations) {
        // Each cause's instant, and when as recorded it let the operation
        // start: no later than the start (an operation that overlaps the
        // one before it on its stream, as rounded times make it, started
        // after that one did, not after it ended).
        struct Cause {
          int64_t at, allowed;
          uint32_t instant;
        };
        const int64_t start = op.begin_ns;
        // At most three, kept in place: allocated for every operation of a
        // step, they were nearly half of the report's calls to malloc.
        std::array<Cause, 3> causes;
        size_t caused = 0;
        if (previous) causes[caused++] = {previous->end_ns, std::min(previous->end_ns, start), previous->end};
        if (const Launches::Call* launch = read.launches.find(op.correlation_id)) {
          const int64_t at = launched_by(*launch, start);
          if (at <= start) causes[caused++] = {at, at, host_instant(graph_, lines_[r], at)};
        }
        const auto by_allowed = [](const Cause& a, const Cause& b) { return a.allowed < b.allowed; };
        if (caused > 0) {
          const int64_t ready = std::max_element(causes.begin(), causes.begin() + caused, by_allowed)->allowed;
          if (const Operation* waited = stream_waited(by_end_[r], op, ready)) {
            causes[caused++] = {waited->end_ns, waited->end_ns, waited->end};
          }
        }
        // The latest carries the delay recorded after it; the others only
        // keep the start from coming sooner than they allowed.
        const auto latest = std::max_element(causes.begin(), causes.begin() + caused, by_allowed);
        for (auto c = causes.begin(); c != causes.begin() + caused; ++c) {
          graph_.link(c->instant, op.start, c == latest ? start - c->at : std::min<int64_t>(0, start - c->at));
        }
        const auto collective = nccl_collective_.find(&op);
        if (collective != nccl_collective_.end()) {
          const int64_t arrival = job_.collectives[collective->second].last_arrival_ns();
          // Regrouped, a gradient allreduce's kernel ends with its new bucket (regroup()).
          link_completion(collective->second, op.start, op.end, std::max<int64_t>(0, op.end_ns - arrival),
                          gradient_index_.contains(collective->second) ? kBucketsAsRecorded : kAlways);
        } else {
          graph_.link(op.start, op.end, op.end_ns - op.begin_ns,
                      op.kind == EventKind::kGpuKernel ? Lapse::kKernel : Lapse::kRecorded, rank);
        }
        previous = &op;
      }
    }
  }

  // The operation of another stream that began before this one and ended
  // last in (ready, its start]: what an operation that started later than
  // its launch and its stream allowed waited for. Null where none did.
  static const Operation* stream_waited(const OperationsByEnd& by_end, const Operation& op, int64_t ready) {
    auto it = ended_by(by_end, op.begin_ns);
    while (it != by_end.begin()) {
      const Operation* candidate = *--it;
      if (candidate->end_ns <= ready) return nullptr;
      if (candidate->track != op.track && candidate->begin_ns < op.begin_ns) return candidate;
    }
    return nullptr;
  }

  const JobProfile& job_;
  const std::vector<NameTraits>& names_;
  size_t step_;
  InstantGraph graph_;
  std::vector<RankRead> reads_;
  std::vector<OperationsByEnd> by_end_;  // per rank
  std::vector<HostLine> lines_;
  StepCompletions completions_;
  Rendezvous rendezvous_;
  std::vector<std::vector<std::pair<int32_t, uint32_t>>> arrivals_;  // per collective, its participants' (rank, arrival)
  std::vector<size_t> gradients_;                  // the step's gradient allreduces in order, where regroupable
  std::unordered_map<size_t, size_t> gradient_index_;  // collective to its position in gradients_
  std::vector<int64_t> gradient_waits_;            // per rank, the begin of its wait for them; INT64_MIN: none
  bool gradients_on_gpu_ = false;                  // they are NCCL's
  std::vector<std::vector<std::pair<int32_t, const Operation*>>> gradient_kernels_;  // per gradient, NCCL's kernels by rank
  std::vector<const Operation*> after_gradients_;  // each rank's first on each other stream launched after its last
  std::string regroup_unmeasured_;
  std::vector<uint32_t> last_arrival_;           // per rendezvous, the instant of its last arrival
  std::vector<BlockingCall> blocking_;
  std::unordered_map<const Operation*, size_t> nccl_collective_;  // NCCL's kernels, to their collectives
  std::vector<uint32_t> begins_, ends_;  // each line's step begin and end
  std::vector<uint32_t> gpu_ends_;       // each GPU operation's end
  mutable std::vector<int64_t> as_recorded_;  // every instant replayed as recorded, from the first replay of it
};

namespace {

// The scale from the rank's compute in the step to the other ranks'
// median compute; none where it did not run the step or computed no
// more than them.
std::optional<double> median_factor(const JobProfile& job, size_t step, size_t rank) {
  const auto compute_of = [&](size_t r) -> std::optional<int64_t> {
    const RankProfile& profile = job.ranks[r];
    if (step >= profile.steps.size() || profile.steps[step].times.begin_ns == kUnknown) return std::nullopt;
    return profile.steps[step].compute_ns;
  };
  const std::optional<int64_t> mine = compute_of(rank);
  std::vector<int64_t> others;
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    if (r == rank) continue;
    if (const std::optional<int64_t> compute = compute_of(r)) others.push_back(*compute);
  }
  if (!mine || *mine <= 0 || others.empty()) return std::nullopt;
  const double factor = median(others, 0) / static_cast<double>(*mine);
  if (factor >= 1) return std::nullopt;
  return factor;
}

// The path's rank of most compute.
std::optional<size_t> most_compute_on_path(const JobProfile& job, const StepPath& path) {
  std::vector<int64_t> on_path(job.ranks.size(), 0);
  for (const PathSegment& s : path.segments) {
    if (s.category == PathCategory::kCompute && static_cast<size_t>(s.rank) < on_path.size()) {
      on_path[static_cast<size_t>(s.rank)] += s.ns();
    }
  }
  const auto most = std::max_element(on_path.begin(), on_path.end());
  if (most == on_path.end() || *most == 0) return std::nullopt;
  return static_cast<size_t>(most - on_path.begin());
}

}  // namespace

StepReplay::StepReplay(const Timeline& timeline, const JobProfile& job, const std::vector<NameTraits>& names,
                       const StepPath& path, const BucketReport* buckets)
    : job_(job),
      path_(path),
      buckets_(buckets),
      graph_(std::make_unique<StepGraph>(timeline, job, names, path.step, buckets)),
      replayed_(graph_->replay({})) {}

StepReplay::~StepReplay() = default;

std::optional<PathWhatIf> StepReplay::base() const {
  if (!replayed_) return std::nullopt;
  PathWhatIf base;
  base.step = path_.step;
  base.recorded_ns = path_.end_ns - path_.begin_ns;
  base.replayed_ns = *replayed_;
  return base;
}

std::optional<PathWhatIf> StepReplay::at_median(int32_t rank) const {
  std::optional<PathWhatIf> what_if = base();
  if (!what_if || rank < 0 || static_cast<size_t>(rank) >= job_.ranks.size()) return std::nullopt;
  what_if->change = "rank " + std::to_string(rank) +
                    (job_.gpu ? "'s kernels ran at the other ranks' median compute" : " computed at the other ranks' median");
  what_if->rank = rank;
  what_if->predicted_ns = what_if->replayed_ns;
  // Compute is a GPU job's kernels, a CPU job's own time (profile.h).
  if (const std::optional<double> factor = median_factor(job_, path_.step, static_cast<size_t>(rank))) {
    const std::optional<int64_t> predicted =
        graph_->replay({rank, *factor, job_.gpu ? Lapse::kKernel : Lapse::kOwnTime, true});
    if (!predicted) return std::nullopt;
    what_if->factor = *factor;
    what_if->predicted_ns = *predicted;
  }
  return what_if;
}

std::vector<PathWhatIf> StepReplay::what_ifs(std::string& unmeasured) const {
  std::optional<PathWhatIf> base = this->base();
  if (!base) {
    unmeasured = graph_->circular() ? "the step's instants wait on each other in a circle as recorded (clocks that disagree?)"
                                    : "no rank's training thread was found in the step";
    return {};
  }
  std::vector<PathWhatIf> found;
  const std::optional<size_t> most = most_compute_on_path(job_, path_);
  if (most && median_factor(job_, path_.step, *most)) {
    if (std::optional<PathWhatIf> what_if = at_median(static_cast<int32_t>(*most))) found.push_back(*what_if);
  }
  if (const std::optional<int64_t> predicted = graph_->replay({-1, 1, Lapse::kOwnTime, false})) {
    base->change = "collectives' and messages' transfers took no time";
    base->transfers = false;
    base->predicted_ns = *predicted;
    found.push_back(*base);
  }
  return found;
}

std::vector<BucketReplay> StepReplay::regrouped(std::string& unmeasured) const {
  if (!buckets_) return {};
  if (!replayed_) {
    unmeasured = graph_->circular() ? "the step's instants wait on each other in a circle as recorded"
                                    : "no rank's training thread was found in the step";
    return {};
  }
  if (!graph_->regroupable()) {
    unmeasured = graph_->regroup_unmeasured();
    return {};
  }
  // What a cap's regrouping changes against the current buckets' regrouping
  // is the prediction: the fit's error on the current buckets cancels.
  const uint64_t current_cap = current_bucket_cap(*buckets_);
  const auto current = std::find_if(buckets_->predictions.begin(), buckets_->predictions.end(),
                                    [&](const BucketPrediction& p) { return p.bucket_bytes == current_cap; });
  if (current == buckets_->predictions.end()) {
    unmeasured = "the current buckets are not among the predicted sizes";
    return {};
  }
  std::vector<int64_t> regrouped, past_end;
  for (size_t k = 0; k < buckets_->predictions.size(); ++k) {
    int64_t past = INT64_MIN;
    const std::optional<int64_t> step = graph_->replay({.regrouping = static_cast<int>(k)}, &past);
    if (!step) {
      unmeasured = "regrouped into buckets of " + format_bytes(buckets_->predictions[k].bucket_bytes) +
                   ", the step's instants wait on each other in a circle";
      return {};
    }
    regrouped.push_back(*step);
    past_end.push_back(past);
  }
  const size_t current_index = static_cast<size_t>(current - buckets_->predictions.begin());
  // GPU work that no rank waits for in the step (a host running ahead of
  // its GPU) and that a regrouping makes end later after the step's end
  // than the current buckets regrouped do costs the steps after it, which
  // are not replayed.
  for (size_t k = 0; k < regrouped.size(); ++k) {
    if (past_end[k] > std::max<int64_t>(0, past_end[current_index])) {
      unmeasured = "regrouped into buckets of " + format_bytes(buckets_->predictions[k].bucket_bytes) +
                   ", the GPU's work ends later after the step's end, which no rank waited for: what that costs "
                   "the next step is not replayed";
      return {};
    }
  }
  const int64_t current_ns = regrouped[current_index];
  // No layout makes the step shorter than communication taking no time.
  const std::optional<int64_t> floor = graph_->replay({.transfers = false});
  std::vector<BucketReplay> found;
  for (size_t k = 0; k < regrouped.size(); ++k) {
    found.push_back({buckets_->predictions[k].bucket_bytes, 1, *replayed_, regrouped[k],
                     std::max(floor.value_or(INT64_MIN), *replayed_ + (regrouped[k] - current_ns))});
  }
  return found;
}

}  // namespace rankscope::analysis
