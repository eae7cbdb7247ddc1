// The exporter's second pass, shared by every output format: walks each
// selected rank's events once, in time order, and tells a Sink what to write
// (docs/export.md, "Tracks, lanes, counters, flows"):
//  - tracks: one process per rank, and per source track (host thread, CUDA
//    stream, NCCL or MPI communicator, NVTX domain) one or more lanes. A
//    thread's lane holds nested slices; a slice that would overlap the open
//    ones without nesting goes to the next lane. On the other tracks
//    operations in flight overlap without being nested (nonblocking MPI
//    calls, async copies), so each lane holds one slice at a time. Slice
//    ends are emitted as lanes are revisited, so every lane's output is in
//    time order (a viewer closes the top slice of a track at each end).
//  - counters: the source's counter samples, and per rank "bytes in flight"
//    and "GPU busy", derived from the operations' begins and ends.
//  - flows: collective instances matched in the plan, each participant to
//    the last arriver; and a host launch to its GPU work by correlation id
//    (per rank, found by a pre-scan of the rank).
//  - an overlay (ExportOptions::overlay): its stretches on a track of their
//    own per rank, written after the rank's events, chained by flows.
//
// A Sink has: begin_rank(rank), declare_lane(rank, lane, ts),
// declare_counter(rank, counter, ts), slice(rank, lane, event, flows),
// slice_end(rank, lane, end_ns), instant(rank, lane, event),
// counter(rank, counter, ts, value), overlay_slice(rank, lane, begin_ns,
// end_ns, name, category, flows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "export_plan.h"
#include "rankscope/exporters/export.h"
#include "rankscope/timeline/event_stream.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::export_detail {

// trace_processor drops slices nested deeper (stat slice_max_depth_exceeded).
inline constexpr size_t kMaxDepth = 512;
// Synthetic thread ids: pid * this + the lane's number within the rank.
inline constexpr int64_t kTidsPerPid = 1'000'000;

enum class FlowKind : uint8_t { kCollective, kLaunch, kOverlay };

struct FlowEnd {
  uint64_t id;
  FlowKind kind;
  bool first;  // the edge's earlier endpoint: where the arrow starts
};

struct RankOut {
  int32_t rank = -1;
  int32_t pid = 0;            // rank + 1: real pids repeat across hosts, and 0 is not a process
  uint32_t sequence = 0;      // the rank's packet sequence (Perfetto)
  uint64_t uuid = 0;          // its process track
  uint64_t default_lane = 0;  // uuid of the lane most of its events go to; 0: none
  int64_t first_ns = 0;       // when its process and default lane are dated
  std::string name;           // "rank 3 (host-a)"
  std::vector<std::string> labels;
};

struct LaneOut {
  uint64_t uuid = 0;
  int64_t tid = 0;
  bool thread = false;         // a host thread's first lane: a thread track; the rest are plain tracks
  bool of_thread = false;      // a lane of a host thread (the first or an overflow lane)
  uint32_t lane = 0;           // 0 for the source track's first lane
  std::string name;            // the source track's name
};

enum class CounterUnit : uint8_t { kNone, kBytes, kCount };

struct CounterOut {
  uint64_t uuid = 0;
  std::string name;
  CounterUnit unit = CounterUnit::kNone;
};

template <typename Sink>
class TraceWalker {
 public:
  TraceWalker(const Timeline& timeline, const Plan& plan, Sink& sink)
      : timeline_(timeline), plan_(plan), sink_(sink), next_launch_flow_(plan.launch_flow_base) {}

  void run() {
    // Each rank is read once, after a first read for its launches when it has some.
    std::vector<int32_t> reads;
    for (const RankPlan& rank : plan_.ranks) {
      if (has_launches(timeline_.ranks()[static_cast<size_t>(rank.rank)])) reads.push_back(rank.rank);
      reads.push_back(rank.rank);
    }
    plan_overlay();
    EventStream stream(timeline_, std::move(reads));
    stream_ = &stream;
    for (const RankPlan& rank : plan_.ranks) write_rank(rank);
    stream_ = nullptr;
  }
  const ExportCounts& counts() const { return counts_; }
  uint64_t events_read() const { return events_read_; }
  uint64_t events_written() const { return events_written_; }

 private:
  struct Lane {
    LaneOut out;
    std::vector<int64_t> open_ends;  // the open slices' ends, innermost last
  };
  // Perfetto and Chrome JSON draw an overlay; OTF2 has no place for one.
  static constexpr bool kDrawsOverlay = requires(Sink& sink, const RankOut& rank, const LaneOut& lane) {
    sink.overlay_slice(rank, lane, int64_t{}, int64_t{}, std::string(), std::string(), std::span<const FlowEnd>());
  };
  struct OverlaySlice {
    int64_t begin_ns, end_ns;
    const std::string* name;
    std::vector<FlowEnd> flows;
  };
  struct SourceTrack {
    bool ready = false;
    bool thread = false;
    bool nests = true;  // its slices nest (host threads), or each lane holds one slice at a time
    std::string name;
    std::vector<uint32_t> lanes;  // into lanes_
    int32_t counter = -1;         // into counters_: its counter events' track
  };
  // A counter that rises at operations' begins and falls at their ends; one
  // sample per time it changes, with the value after every change at that time.
  struct DerivedCounter {
    int32_t counter = -1;
    std::string name;
    CounterUnit unit = CounterUnit::kNone;
    int64_t value = 0;
    bool pending = false;
    int64_t pending_ns = 0;
    std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>, std::greater<>> ends;
  };
  enum class LaunchSide : uint8_t { kNone, kHost, kGpu };
  struct LaunchKey {
    uint64_t correlation_id;
    uint8_t domain;  // 0 CUDA's ids, 1 external ids (a NCCL group's), 2 NCCL's task ids
    bool operator==(const LaunchKey&) const = default;
  };
  struct LaunchKeyHash {
    size_t operator()(const LaunchKey& k) const {
      return static_cast<size_t>((k.correlation_id ^ uint64_t{k.domain} << 62) * 0x9E3779B97F4A7C15ull);
    }
  };
  struct LaunchLink {
    uint32_t gpu_total = 0, gpu_written = 0;
    uint64_t first_id = 0;  // 0: no flow (no host side or no GPU side in the selection)
    bool host_seen = false, host_written = false;
  };

  static LaunchSide launch_side(EventKind kind) {
    switch (kind) {
      case EventKind::kCudaApi: case EventKind::kNcclCollectiveEnqueue: case EventKind::kNcclP2pEnqueue:
        return LaunchSide::kHost;
      case EventKind::kGpuKernel: case EventKind::kGpuMemcpy: case EventKind::kGpuMemset: case EventKind::kGpuSync:
      case EventKind::kNcclCollectiveGpu: case EventKind::kNcclP2pGpu:
        return LaunchSide::kGpu;
      default:
        return LaunchSide::kNone;
    }
  }
  static LaunchKey launch_key(const Event& e) {
    const bool nccl = e.kind >= EventKind::kNcclCollectiveEnqueue && e.kind <= EventKind::kNcclP2pGpu;
    return {e.correlation_id, static_cast<uint8_t>(e.flags & kFlagExternalCorrelation ? 1 : nccl ? 2 : 0)};
  }

  void write_rank(const RankPlan& plan) {
    const RankInfo& info = timeline_.ranks()[static_cast<size_t>(plan.rank)];
    const Selection& selection = plan_.selection;
    rank_ = RankOut{};
    rank_.rank = plan.rank;
    rank_.pid = plan.rank + 1;
    rank_.sequence = static_cast<uint32_t>(plan.rank) + 1;
    rank_.uuid = next_uuid_++;
    rank_.first_ns = std::max(info.first_ns, selection.begin_ns);
    rank_.name = "rank " + std::to_string(plan.rank) + " (" + (info.host.empty() ? "unknown host" : info.host) + ")";
    rank_.labels = {"pid " + std::to_string(info.pid), "node " + std::to_string(info.node_id),
                    rank_status_name(info.status)};
    lanes_.clear();
    counters_.clear();
    sources_.clear();
    track_rows_.clear();
    for (size_t i = 0; i < info.tracks.size(); ++i) {
      const uint32_t id = info.tracks[i].id;
      if (id >= track_rows_.size()) track_rows_.resize(id + size_t{1}, -1);
      track_rows_[id] = static_cast<int32_t>(i);
    }
    lane_numbers_ = 0;
    bytes_in_flight_ = DerivedCounter{};
    bytes_in_flight_.name = "bytes in flight";
    bytes_in_flight_.unit = CounterUnit::kBytes;
    gpu_busy_ = DerivedCounter{};
    gpu_busy_.name = "GPU busy";
    gpu_busy_.unit = CounterUnit::kCount;
    find_launches(plan.rank, info);

    // The busiest track's first lane is declared up front, to be the sequence's default.
    const Lane* default_lane = nullptr;
    if (plan.busiest_track >= 0) {
      SourceTrack& busiest = source(static_cast<uint16_t>(plan.busiest_track));
      busiest.lanes.push_back(new_lane(busiest));
      default_lane = &lanes_[busiest.lanes[0]];
      rank_.default_lane = default_lane->out.uuid;
    }
    sink_.begin_rank(rank_);
    if (default_lane != nullptr) sink_.declare_lane(rank_, default_lane->out, rank_.first_ns);
    ++counts_.processes;

    size_t collective_cursor = 0;
    events_read_ += stream_->stream(plan.rank, [&](const Event& e) {
      if (e.begin_ns > selection.end_ns) return false;
      if (!selection.contains(e)) return true;
      advance(bytes_in_flight_, e.begin_ns);
      advance(gpu_busy_, e.begin_ns);
      ++events_written_;
      if (e.kind == EventKind::kCounter) {
        counter_sample(e);
        return true;
      }
      SourceTrack& track = source(e.track);
      if (is_instant(e)) {
        Lane& lane = lane_at(track, 0, e.begin_ns);
        close_until(lane, e.begin_ns);
        sink_.instant(rank_, lane.out, e);
        ++counts_.instants;
        return true;
      }
      flows_.clear();
      if (collective_kind_class(e, plan_.nccl_flow_kind) != 0) {
        collective_flows(plan.collectives.at(collective_cursor++));
      }
      if (!launches_.empty() && e.correlation_id != 0) launch_flows(e);
      Lane& lane = place(track, e);
      sink_.slice(rank_, lane.out, e, std::span<const FlowEnd>(flows_));
      lane.open_ends.push_back(e.end_ns);
      ++counts_.slices;
      if (is_communication(e.kind) && e.bytes != 0) rise(bytes_in_flight_, e, static_cast<int64_t>(e.bytes));
      if (is_gpu_work(e.kind)) rise(gpu_busy_, e, 1);
      return true;
    });
    for (Lane& lane : lanes_) close_until(lane, INT64_MAX);
    advance(bytes_in_flight_, INT64_MAX);
    advance(gpu_busy_, INT64_MAX);
    flush(bytes_in_flight_);
    flush(gpu_busy_);
    write_overlay();
  }

  // Each written rank's stretches of the overlay, cut to the window, in time
  // order; a flow joins two stretches of a chain that follow each other on
  // different ranks, where both are written.
  void plan_overlay() {
    overlay_.clear();
    if (!kDrawsOverlay || plan_.overlay == nullptr) return;
    const Selection& selection = plan_.selection;
    for (const RankPlan& rank : plan_.ranks) overlay_[rank.rank];
    uint64_t next_flow = plan_.overlay_flow_base;
    for (const std::vector<OverlayStretch>& chain : plan_.overlay->chains) {
      std::vector<OverlaySlice>* previous = nullptr;  // the list of the chain's last stretch written
      int32_t previous_rank = -1;
      for (const OverlayStretch& stretch : chain) {
        const int64_t begin = std::max(stretch.begin_ns, selection.begin_ns);
        const int64_t end = std::min(stretch.end_ns, selection.end_ns);
        const auto written = overlay_.find(stretch.rank);
        if (written == overlay_.end() || begin >= end) {
          previous = nullptr;
          continue;
        }
        std::vector<OverlaySlice>& slices = written->second;
        slices.push_back({begin, end, &stretch.name, {}});
        if (previous != nullptr && previous_rank != stretch.rank) {
          previous->back().flows.push_back({next_flow, FlowKind::kOverlay, true});
          slices.back().flows.push_back({next_flow++, FlowKind::kOverlay, false});
        }
        previous = &slices;
        previous_rank = stretch.rank;
      }
    }
    for (auto& [rank, slices] : overlay_) {
      std::stable_sort(slices.begin(), slices.end(), [](const OverlaySlice& a, const OverlaySlice& b) {
        return a.begin_ns < b.begin_ns;
      });
    }
  }

  // The rank's overlay on a track of its own, after its events.
  void write_overlay() {
    if constexpr (kDrawsOverlay) {
      const auto it = overlay_.find(rank_.rank);
      if (it == overlay_.end() || it->second.empty()) return;
      Lane lane;
      lane.out.uuid = next_uuid_++;
      lane.out.tid = int64_t{rank_.pid} * kTidsPerPid + ++lane_numbers_;
      lane.out.name = plan_.overlay->track;
      ++counts_.other_tracks;
      sink_.declare_lane(rank_, lane.out, it->second.front().begin_ns);
      for (const OverlaySlice& slice : it->second) {
        sink_.overlay_slice(rank_, lane.out, slice.begin_ns, slice.end_ns, *slice.name, plan_.overlay->category,
                            std::span<const FlowEnd>(slice.flows));
        sink_.slice_end(rank_, lane.out, slice.end_ns);
        ++counts_.slices;
        ++counts_.overlay_slices;
        for (const FlowEnd& flow : slice.flows) {
          counts_.flows += flow.first;
          counts_.overlay_flows += flow.first;
        }
      }
    }
  }

  // Whether the rank has both host launches and GPU work.
  static bool has_launches(const RankInfo& info) {
    uint64_t host = 0, gpu = 0;
    for (size_t k = 0; k < info.events_by_kind.size(); ++k) {
      const LaunchSide side = launch_side(static_cast<EventKind>(k + 1));
      if (side == LaunchSide::kHost) host += info.events_by_kind[k];
      if (side == LaunchSide::kGpu) gpu += info.events_by_kind[k];
    }
    return host > 0 && gpu > 0;
  }

  // Which of the rank's correlation ids have both a host launch and GPU work
  // in the selection; gives each such pair of events a flow id.
  void find_launches(int32_t rank, const RankInfo& info) {
    launches_.clear();
    if (!has_launches(info)) return;
    const Selection& selection = plan_.selection;
    events_read_ += stream_->stream(rank, [&](const Event& e) {
      if (e.begin_ns > selection.end_ns) return false;
      const LaunchSide side = launch_side(e.kind);
      if (side == LaunchSide::kNone || e.correlation_id == 0 || is_instant(e) || !selection.contains(e)) return true;
      LaunchLink& link = launches_[launch_key(e)];
      if (side == LaunchSide::kHost) link.host_seen = true;
      else ++link.gpu_total;
      return true;
    });
    for (auto& [key, link] : launches_) {
      if (!link.host_seen || link.gpu_total == 0) continue;
      link.first_id = next_launch_flow_;
      next_launch_flow_ += link.gpu_total;
    }
  }

  void collective_flows(const Participation& part) {
    if (part.instance == kNotMatched) return;
    const CollectiveMatch& match = plan_.collectives[part.instance];
    const auto [first, count] = collective_flow_ids(match, part);
    const bool to_last_arriver = match.last_rank != rank_.rank;
    for (uint64_t id = first; id < first + count; ++id) flows_.push_back({id, FlowKind::kCollective, to_last_arriver});
    if (to_last_arriver) {
      counts_.collective_flows += count;
      counts_.flows += count;
    }
  }

  void launch_flows(const Event& e) {
    const LaunchSide side = launch_side(e.kind);
    if (side == LaunchSide::kNone) return;
    const auto found = launches_.find(launch_key(e));
    if (found == launches_.end() || found->second.first_id == 0) return;
    LaunchLink& link = found->second;
    if (side == LaunchSide::kHost && !link.host_written) {
      // The first host event of the id links to all its GPU work; one flow id per edge.
      link.host_written = true;
      for (uint32_t j = 0; j < link.gpu_total; ++j) {
        flows_.push_back({link.first_id + j, FlowKind::kLaunch, j >= link.gpu_written});
      }
      counts_.launch_flows += link.gpu_total;
      counts_.flows += link.gpu_total;
    } else if (side == LaunchSide::kGpu && link.gpu_written < link.gpu_total) {
      flows_.push_back({link.first_id + link.gpu_written++, FlowKind::kLaunch, !link.host_written});
    }
  }

  SourceTrack& source(uint16_t id) {
    if (id >= sources_.size()) sources_.resize(id + size_t{1});
    SourceTrack& track = sources_[id];
    if (track.ready) return track;
    track.ready = true;
    const int32_t row = id < track_rows_.size() ? track_rows_[id] : -1;
    if (row < 0) {
      track.name = "track " + std::to_string(id);
      return track;
    }
    const Track& t = timeline_.ranks()[static_cast<size_t>(rank_.rank)].tracks[static_cast<size_t>(row)];
    track.name = t.name_id < timeline_.strings().size() ? timeline_.string(t.name_id) : std::string();
    track.thread = t.type == TrackType::kThread;
    track.nests = track.thread;
    if (track.name.empty()) {
      track.name = std::string(track_type_name(t.type)) + " " + std::to_string(t.os_id);
    }
    return track;
  }

  uint32_t new_lane(const SourceTrack& track) {
    Lane lane;
    lane.out.uuid = next_uuid_++;
    lane.out.tid = int64_t{rank_.pid} * kTidsPerPid + ++lane_numbers_;
    lane.out.lane = static_cast<uint32_t>(track.lanes.size());
    lane.out.thread = track.thread && lane.out.lane == 0;
    lane.out.of_thread = track.thread;
    lane.out.name = track.name;
    (lane.out.thread ? counts_.thread_tracks : counts_.other_tracks) += 1;
    lanes_.push_back(std::move(lane));
    return static_cast<uint32_t>(lanes_.size() - 1);
  }

  Lane& lane_at(SourceTrack& track, size_t index, int64_t ts) {
    while (track.lanes.size() <= index) {
      track.lanes.push_back(new_lane(track));
      sink_.declare_lane(rank_, lanes_[track.lanes.back()].out, ts);
    }
    return lanes_[track.lanes[index]];
  }

  // The first lane where the event fits: under the open slices it nests in,
  // or on a lane with none open.
  Lane& place(SourceTrack& track, const Event& e) {
    for (size_t i = 0;; ++i) {
      Lane& lane = lane_at(track, i, e.begin_ns);
      close_until(lane, e.begin_ns);
      if (lane.open_ends.empty()) return lane;
      if (track.nests && e.end_ns <= lane.open_ends.back() && lane.open_ends.size() < kMaxDepth) return lane;
    }
  }

  void close_until(Lane& lane, int64_t ns) {
    while (!lane.open_ends.empty() && lane.open_ends.back() <= ns) {
      sink_.slice_end(rank_, lane.out, lane.open_ends.back());
      lane.open_ends.pop_back();
    }
  }

  int32_t new_counter(std::string name, CounterUnit unit, int64_t ts) {
    CounterOut counter;
    counter.uuid = next_uuid_++;
    counter.name = std::move(name);
    counter.unit = unit;
    counters_.push_back(std::move(counter));
    sink_.declare_counter(rank_, counters_.back(), ts);
    ++counts_.counter_tracks;
    return static_cast<int32_t>(counters_.size() - 1);
  }

  void counter_sample(const Event& e) {
    SourceTrack& track = source(e.track);
    if (track.counter < 0) track.counter = new_counter(track.name, CounterUnit::kNone, e.begin_ns);
    sink_.counter(rank_, counters_[static_cast<size_t>(track.counter)], e.begin_ns, static_cast<int64_t>(e.bytes));
    ++counts_.counter_samples;
  }

  void rise(DerivedCounter& counter, const Event& e, int64_t amount) {
    change(counter, e.begin_ns, amount);
    counter.ends.emplace(e.end_ns, amount);
  }
  void advance(DerivedCounter& counter, int64_t ns) {
    if (counter.ends.empty() || counter.ends.top().first > ns) return;  // the common case: nothing ends yet
    while (!counter.ends.empty() && counter.ends.top().first <= ns) {
      const auto [end_ns, amount] = counter.ends.top();
      counter.ends.pop();
      change(counter, end_ns, -amount);
    }
  }
  void change(DerivedCounter& counter, int64_t ns, int64_t amount) {
    if (counter.pending && counter.pending_ns != ns) flush(counter);
    counter.value += amount;
    counter.pending = true;
    counter.pending_ns = ns;
  }
  void flush(DerivedCounter& counter) {
    if (!counter.pending) return;
    if (counter.counter < 0) counter.counter = new_counter(counter.name, counter.unit, counter.pending_ns);
    sink_.counter(rank_, counters_[static_cast<size_t>(counter.counter)], counter.pending_ns, counter.value);
    ++counts_.counter_samples;
    counter.pending = false;
  }

  const Timeline& timeline_;
  const Plan& plan_;
  Sink& sink_;
  EventStream* stream_ = nullptr;  // while run() reads
  ExportCounts counts_;
  uint64_t events_read_ = 0, events_written_ = 0;
  uint64_t next_uuid_ = 1;
  uint64_t next_launch_flow_;
  // The rank being written.
  RankOut rank_;
  std::vector<Lane> lanes_;
  std::vector<CounterOut> counters_;
  std::vector<SourceTrack> sources_;  // by track id
  std::vector<int32_t> track_rows_;   // track id -> row of RankInfo::tracks, -1 for none
  int64_t lane_numbers_ = 0;
  DerivedCounter bytes_in_flight_, gpu_busy_;
  std::unordered_map<LaunchKey, LaunchLink, LaunchKeyHash> launches_;
  std::vector<FlowEnd> flows_;
  std::map<int32_t, std::vector<OverlaySlice>> overlay_;  // by rank, every written rank
};

}  // namespace rankscope::export_detail
