#include "export_plan.h"

#include <cstdio>
#include <unordered_map>

#include "export_arguments.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/event_stream.h"

namespace rankscope::export_detail {
namespace {

// N for each string "ProfilerStep#N" of the job's table, -1 for the others.
std::vector<int64_t> step_numbers(const std::vector<std::string>& strings) {
  std::vector<int64_t> steps(strings.size(), -1);
  for (size_t i = 0; i < strings.size(); ++i) {
    if (const auto n = step_number(strings[i]); n && *n <= uint64_t{INT64_MAX}) steps[i] = static_cast<int64_t>(*n);
  }
  return steps;
}

int64_t resolve(const TimeBound& bound, int64_t job_begin_ns, int64_t open) {
  switch (bound.kind) {
    case TimeBound::Kind::kOpen: return open;
    case TimeBound::Kind::kAbsolute: return bound.ns;
    case TimeBound::Kind::kFromJobStart: return job_begin_ns + bound.ns;
  }
  return open;
}

// The window from the first selected step's earliest begin to the last
// selected step's latest end, over the selected ranks.
void narrow_to_steps(const Timeline& timeline, const StepSelection& steps, Plan& plan) {
  const std::vector<int64_t> step_of = step_numbers(timeline.strings());
  const auto step_number = [&](const Event& e) {
    return e.kind == EventKind::kNvtxRange && e.name_id < step_of.size() ? step_of[e.name_id] : int64_t{-1};
  };
  const int64_t first = steps.first ? static_cast<int64_t>(*steps.first) : 0;
  const int64_t last = steps.last ? static_cast<int64_t>(*steps.last) : INT64_MAX;
  int64_t begin = INT64_MAX, end = INT64_MIN;
  EventStream events(timeline, plan.selection.ranks);
  for (int32_t rank : plan.selection.ranks) {
    plan.events_read += events.stream(rank, [&](const Event& e) {
      const int64_t n = step_number(e);
      if (n < 0) return true;
      if (n > last) return false;  // steps come in order: the rest of the rank is later
      if (n >= first) {
        begin = std::min(begin, e.begin_ns);
        end = std::max(end, e.end_ns);
      }
      return true;
    });
  }
  if (begin > end) {
    // The steps the ranks have, every one of them read for the message.
    int64_t lowest = INT64_MAX, highest = -1;
    EventStream every_event(timeline, plan.selection.ranks);
    for (int32_t rank : plan.selection.ranks) {
      every_event.stream(rank, [&](const Event& e) {
        if (const int64_t n = step_number(e); n >= 0) {
          lowest = std::min(lowest, n);
          highest = std::max(highest, n);
        }
        return true;
      });
    }
    throw Error(timeline.path() + ": no ProfilerStep#N range with N in " + steps.text() + " on the selected ranks" +
                (highest < 0 ? " (they have no ProfilerStep ranges)"
                             : " (they have steps " + std::to_string(lowest) + " to " + std::to_string(highest) + ")"));
  }
  if (begin >= plan.selection.end_ns || end <= plan.selection.begin_ns) {
    throw Error(timeline.path() + ": --steps " + steps.text() + " (" + std::to_string(begin) + " to " +
                std::to_string(end) + " ns) and --time (" + std::to_string(plan.selection.begin_ns) + " to " +
                std::to_string(plan.selection.end_ns) + " ns) do not overlap: nothing is selected");
  }
  plan.selection.begin_ns = std::max(plan.selection.begin_ns, begin);
  plan.selection.end_ns = std::min(plan.selection.end_ns, end);
}

// The instances of one (kind, communicator, operation). Their sequence
// numbers count up from 0, so they index a dense array; a number far beyond
// the others goes to a hash map instead.
constexpr uint32_t kUnnumbered = UINT32_MAX;
struct StreamKey {
  uint64_t comm_hash;
  CommOp op;
  uint8_t kind_class;
  bool operator==(const StreamKey&) const = default;
};
struct StreamKeyHash {
  size_t operator()(const StreamKey& k) const {
    return static_cast<size_t>((k.comm_hash ^ (uint64_t{k.kind_class} << 8 | static_cast<uint64_t>(k.op))) *
                               0x9E3779B97F4A7C15ull);
  }
};
struct InstanceStream {
  std::vector<uint32_t> by_seq;
  std::unordered_map<uint64_t, uint32_t> sparse;

  uint32_t& instance(uint64_t seq) {
    if (seq < by_seq.size()) return by_seq[seq];
    if (seq < 2 * by_seq.size() + 4096) {
      by_seq.resize(std::max<size_t>(seq + 1, 2 * by_seq.size()), kUnnumbered);
      return by_seq[seq];
    }
    return sparse.try_emplace(seq, kUnnumbered).first->second;
  }
};

class InstanceIndex {
 public:
  // The instance's number; kUnnumbered until the caller numbers it.
  uint32_t& instance(const Event& e, uint8_t kind_class) {
    const StreamKey key{e.comm_hash, e.op, kind_class};
    if (last_ == nullptr || !(last_key_ == key)) {  // consecutive collectives are mostly of one stream
      last_ = &streams_[key];
      last_key_ = key;
    }
    return last_->instance(e.seq);
  }

 private:
  std::unordered_map<StreamKey, InstanceStream, StreamKeyHash> streams_;
  InstanceStream* last_ = nullptr;
  StreamKey last_key_{};
};

// Ranges of consecutive ranks: 0-3,8.
std::string rank_ranges(const std::vector<int32_t>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return text;
}

// In the unit --warn-size-mb counts in (10^6 bytes), GB from a gigabyte on.
std::string output_size(uint64_t bytes) {
  char text[32];
  if (bytes >= 1'000'000'000) std::snprintf(text, sizeof(text), "%.1f GB", static_cast<double>(bytes) * 1e-9);
  else std::snprintf(text, sizeof(text), "%.1f MB", static_cast<double>(bytes) * 1e-6);
  return text;
}

}  // namespace

Plan make_plan(const Timeline& timeline, const ExportOptions& options) {
  Plan plan;
  const std::string& path = timeline.path();
  plan.job_begin_ns = INT64_MAX;
  plan.job_end_ns = INT64_MIN;
  for (const RankInfo& rank : timeline.ranks()) {
    if (rank.status == RankStatus::kMissing || rank.event_count == 0) continue;
    plan.job_begin_ns = std::min(plan.job_begin_ns, rank.first_ns);
    plan.job_end_ns = std::max(plan.job_end_ns, rank.last_ns);
  }
  if (plan.job_end_ns == INT64_MIN) throw Error(path + ": the timeline has no events to export");

  if (options.ranks) {
    for (int32_t rank : *options.ranks) {
      if (rank < 0 || rank >= timeline.world_size()) {
        throw Error(path + ": rank " + std::to_string(rank) + " is not in the job (ranks 0 to " +
                    std::to_string(timeline.world_size() - 1) + ")");
      }
      plan.selection.ranks.push_back(rank);
    }
  } else {
    for (int32_t rank = 0; rank < timeline.world_size(); ++rank) plan.selection.ranks.push_back(rank);
  }
  std::erase_if(plan.selection.ranks,
                [&](int32_t rank) { return timeline.ranks()[static_cast<size_t>(rank)].event_count == 0; });

  if (options.time) {
    plan.selection.begin_ns = resolve(options.time->begin, plan.job_begin_ns, INT64_MIN);
    plan.selection.end_ns = resolve(options.time->end, plan.job_begin_ns, INT64_MAX);
    if (plan.selection.begin_ns > plan.selection.end_ns) {
      throw Error(path + ": the --time window ends (" + std::to_string(plan.selection.end_ns) + " ns) before it begins (" +
                  std::to_string(plan.selection.begin_ns) + " ns)");
    }
  }
  if (options.steps) narrow_to_steps(timeline, *options.steps, plan);

  bool nccl_gpu_side = false;
  for (int32_t rank : plan.selection.ranks) {
    const RankInfo& info = timeline.ranks()[static_cast<size_t>(rank)];
    const size_t column = static_cast<size_t>(EventKind::kNcclCollectiveGpu) - 1;
    nccl_gpu_side |= column < info.events_by_kind.size() && info.events_by_kind[column] > 0;
  }
  plan.nccl_flow_kind = nccl_gpu_side ? EventKind::kNcclCollectiveGpu : EventKind::kNcclCollectiveEnqueue;

  // Pass 1: what each rank will write, and every collective's participants.
  InstanceIndex index;
  const Selection& selection = plan.selection;
  PlannedCounts& planned = plan.planned;
  std::vector<uint64_t> per_track;
  EventStream stream(timeline, selection.ranks);
  for (int32_t rank : selection.ranks) {
    RankPlan rank_plan;
    rank_plan.rank = rank;
    per_track.assign(per_track.size(), 0);
    uint64_t events = 0;
    plan.events_read += stream.stream(rank, [&](const Event& e) {
      if (e.begin_ns > selection.end_ns) return false;
      if (!selection.contains(e)) return true;
      ++events;
      if (e.kind == EventKind::kCounter) {
        ++planned.counter_events;
        return true;
      }
      if (e.track >= per_track.size()) per_track.resize(e.track + size_t{1}, 0);
      ++per_track[e.track];
      if (is_instant(e)) {
        ++planned.instants;
        return true;  // instants move no counter and carry no flow
      }
      ++planned.slices;
      for_each_argument(e, [&](Arg, const ArgValue&) { ++planned.arguments; });
      planned.communication += is_communication(e.kind) && e.bytes != 0;
      planned.gpu_work += is_gpu_work(e.kind);
      planned.launch_candidates += is_gpu_work(e.kind) && e.correlation_id != 0;
      const uint8_t kind_class = collective_kind_class(e, plan.nccl_flow_kind);
      if (kind_class == 0) return true;
      uint32_t& instance = index.instance(e, kind_class);
      if (instance == kUnnumbered) {
        instance = static_cast<uint32_t>(plan.collectives.size());
        plan.collectives.emplace_back();
      }
      CollectiveMatch& match = plan.collectives[instance];
      if (match.seen_by == rank) {
        rank_plan.collectives.push_back({kNotMatched, 0});
        return true;
      }
      match.seen_by = rank;
      const uint32_t position = match.participants++;
      if (e.begin_ns >= match.last_begin_ns) {  // ranks come in order: a tie goes to the higher rank
        match.last_begin_ns = e.begin_ns;
        match.last_rank = rank;
        match.last_position = position;
      }
      rank_plan.collectives.push_back({instance, position});
      return true;
    });
    if (events == 0) continue;
    const auto busiest = std::max_element(per_track.begin(), per_track.end());
    if (busiest != per_track.end() && *busiest > 0) {
      rank_plan.busiest_track = static_cast<int32_t>(busiest - per_track.begin());
    }
    plan.ranks.push_back(std::move(rank_plan));
  }
  // Each instance's flows take the next participants - 1 ids.
  uint64_t next_flow = 1;
  for (CollectiveMatch& match : plan.collectives) {
    match.first_flow = next_flow;
    if (match.participants >= 2) next_flow += match.participants - 1;
  }
  planned.flows = next_flow - 1;
  plan.launch_flow_base = next_flow;
  if (plan.ranks.empty()) {
    throw Error(path + ": no events in the selection (window " + std::to_string(selection.begin_ns) + " to " +
                std::to_string(selection.end_ns) + " ns, ranks " + rank_ranges(selection.ranks) + ")");
  }
  if (options.overlay) plan.overlay = &*options.overlay;
  plan.overlay_flow_base = plan.launch_flow_base + planned.launch_candidates;
  return plan;
}

namespace {

// Bytes per item of each format, measured on synthetic and ddp_sim exports
// (docs/export.md). Counters derived from the events (bytes in flight, GPU
// busy) and collective flows are Perfetto's and Chrome JSON's alone; a
// Kineto launch flow is two events.
struct BytesPerItem {
  double slice, instant, argument, source_counter_sample, derived_counter_sample, collective_flow, launch_flow, rank;
  double overlay_stretch;  // named in full, not interned: 85 and 129 bytes on an imported trace's critical path
};

BytesPerItem bytes_per_item(ExportFormat format) {
  switch (format) {
    case ExportFormat::kPerfetto: return {37, 25, 7.5, 20.5, 20.5, 20, 20, 300, 85};
    case ExportFormat::kChromeJson: return {103, 100, 19, 86, 86, 180, 180, 400, 130};
    case ExportFormat::kKineto: return {165, 120, 19, 110, 0, 0, 200, 600, 0};
    case ExportFormat::kOtf2: return {25, 20, 0, 0, 0, 0, 0, 2000, 0};
  }
  return {};
}

// The overlay's stretches: at most this many are drawn (those outside the selection are not).
uint64_t overlay_stretches(const Plan& plan) {
  uint64_t stretches = 0;
  if (plan.overlay) {
    for (const std::vector<OverlayStretch>& chain : plan.overlay->chains) stretches += chain.size();
  }
  return stretches;
}

}  // namespace

uint64_t estimate_bytes(const Plan& plan, ExportFormat format) {
  const BytesPerItem per = bytes_per_item(format);
  const PlannedCounts& n = plan.planned;
  // Derived counters change at most twice per communication or GPU operation.
  const auto derived_samples = static_cast<double>(2 * (n.communication + n.gpu_work));
  return static_cast<uint64_t>(per.slice * static_cast<double>(n.slices) + per.instant * static_cast<double>(n.instants) +
                               per.argument * static_cast<double>(n.arguments) +
                               per.source_counter_sample * static_cast<double>(n.counter_events) +
                               per.derived_counter_sample * derived_samples +
                               per.collective_flow * static_cast<double>(n.flows) +
                               per.launch_flow * static_cast<double>(n.launch_candidates) +
                               per.rank * static_cast<double>(plan.ranks.size()) +
                               per.overlay_stretch * static_cast<double>(overlay_stretches(plan)));
}

void require_times_from_zero(const Timeline& timeline, const Plan& plan, std::string_view format) {
  for (const RankPlan& rank : plan.ranks) {
    const int64_t first_ns = timeline.ranks()[static_cast<size_t>(rank.rank)].first_ns;
    if (first_ns < 0) {
      throw Error(timeline.path() + ": rank " + std::to_string(rank.rank) + " has events before time 0 (" +
                  std::to_string(first_ns) + " ns), which " + std::string(format) +
                  "'s unsigned timestamps cannot hold");
    }
  }
}

std::string size_warning(const Plan& plan, ExportFormat format, uint64_t estimated, uint64_t limit) {
  // Aim below the limit: the estimate is not exact.
  const double fraction = 0.8 * static_cast<double>(limit) / static_cast<double>(estimated);
  std::vector<std::string> selections;
  // Ranks are taken whole, and a window to the µs: a suggestion that would
  // still be too large, or select nothing, is not made.
  if (const auto ranks = static_cast<size_t>(static_cast<double>(plan.ranks.size()) * fraction); ranks >= 1) {
    std::vector<int32_t> fewer;
    for (size_t i = 0; i < ranks; ++i) fewer.push_back(plan.ranks[i].rank);
    selections.push_back("--ranks " + rank_ranges(fewer) + " (" + std::to_string(ranks) + " of " +
                         std::to_string(plan.ranks.size()) + " ranks)");
  }
  const int64_t begin = std::max(plan.selection.begin_ns, plan.job_begin_ns);
  const int64_t end = std::min(plan.selection.end_ns, plan.job_end_ns);
  if (const double length_s = static_cast<double>(end - begin) * 1e-9 * fraction; end > begin && length_s >= 1e-6) {
    const double offset_s = static_cast<double>(begin - plan.job_begin_ns) * 1e-9;
    char window[96];
    std::snprintf(window, sizeof(window), "--time +%.6fs:+%.6fs", offset_s, offset_s + length_s);
    selections.emplace_back(window);
  }
  // What reads the format, and how it copes with a large output.
  const bool viewer = format == ExportFormat::kPerfetto || format == ExportFormat::kChromeJson;
  const std::string reader = viewer                              ? "; a browser loads about 1 GB"
                             : format == ExportFormat::kKineto ? "; HTA holds each rank's file in memory"
                                                                 : "";
  std::string advice;
  if (!selections.empty()) {
    advice = "select less, e.g. " + selections[0] + (selections.size() > 1 ? " or " + selections[1] : "");
  }
  if (viewer) advice += (advice.empty() ? "" : ", or ") + std::string("open it with `trace_processor server http`");
  return "the " + std::string(export_format_name(format)) + " output would be about " + output_size(estimated) +
         ", over the " + output_size(limit) + " warned at (--warn-size-mb" + reader + ")" +
         (advice.empty() ? "" : "; " + advice);
}

}  // namespace rankscope::export_detail
