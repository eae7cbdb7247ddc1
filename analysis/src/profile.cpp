// Builds a job's profile from its timeline in two streaming passes over each
// rank's events (docs/report-reference.md, "The job's profile"):
//  1. steps and collectives: every collective instance matched across ranks;
//  2. a sweep over each rank's time that splits its steps into compute,
//     communication, overlap, exposed wait, exposed transfer and idle time.
// The collectives matched can then be written back into the timeline.
#include <algorithm>
#include <bit>
#include <cmath>
#include <future>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "byte_record.h"
#include "device_work_collector.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/work_share.h"
#include "rankscope/model/capture_sources.h"
#include "rankscope/model/capture_windows.h"
#include "rankscope/model/error.h"
#include "rankscope/model/host_phases.h"
#include "rankscope/model/parallel.h"
#include "rankscope/model/steps.h"
#include "rankscope/timeline/collectives.h"

namespace rankscope::analysis {

int64_t CollectiveInstance::last_arrival_ns() const {
  int64_t last = kUnknown;
  for (const Participation& p : ranks) last = std::max(last, p.arrival_ns);
  return last;
}

int32_t CollectiveInstance::last_arriver() const {
  if (ranks.size() < 2) return -1;
  const auto last = std::max_element(ranks.begin(), ranks.end(), [](const Participation& a, const Participation& b) {
    return a.arrival_ns < b.arrival_ns;
  });
  return last->rank;
}

int64_t CollectiveInstance::second_last_arrival_ns() const {
  int64_t last = kUnknown, second = kUnknown;
  for (const Participation& p : ranks) {
    if (p.arrival_ns > last) {
      second = last;
      last = p.arrival_ns;
    } else if (p.arrival_ns > second) {
      second = p.arrival_ns;
    }
  }
  return second;
}

int64_t shorter_execution(int64_t shortest, const Participation& p) {
  if (p.start_ns == kUnknown || p.end_ns == kUnknown) return shortest;
  const int64_t d = p.end_ns - p.start_ns;
  return shortest == kUnknown ? d : std::min(shortest, d);
}

int64_t CollectiveInstance::transfer_ns() const {
  int64_t shortest = kUnknown;
  for (const Participation& p : ranks) shortest = shorter_execution(shortest, p);
  return shortest;
}

namespace {

bool is_gpu_kind(EventKind kind) {
  return kind == EventKind::kGpuKernel || kind == EventKind::kGpuMemcpy || kind == EventKind::kGpuMemset ||
         kind == EventKind::kNcclCollectiveGpu || kind == EventKind::kNcclP2pGpu;
}

struct InstanceKey {
  uint64_t comm_hash;
  uint64_t seq;
  CommOp op;
  CollectiveSource source;
  bool operator==(const InstanceKey&) const = default;
};
struct InstanceKeyHash {
  size_t operator()(const InstanceKey& k) const {
    uint64_t h = k.comm_hash * 0x9E3779B97F4A7C15ull ^ (k.seq + 0x632BE59BD9B4E019ull * static_cast<uint64_t>(k.op));
    return static_cast<size_t>(h ^ (h >> 29) ^ static_cast<uint64_t>(k.source));
  }
};

// Track types of one rank, by track id.
std::vector<TrackType> track_types(const RankInfo& rank) {
  std::vector<TrackType> types;
  for (const Track& t : rank.tracks) {
    if (t.id >= types.size()) types.resize(t.id + 1, TrackType::kThread);
    types[t.id] = t.type;
  }
  return types;
}

// Which process reads which ranks: blocks of `batch` ranks dealt to the
// processes in turn, so that one round of reading, a block on each
// process, covers consecutive ranks. Each process sweeps in the second
// pass the ranks it read in the first.
struct RankDeal {
  size_t batch = 1;
  int processes = 1;
  int owner(size_t rank) const { return static_cast<int>(rank / batch % static_cast<size_t>(processes)); }
};

// Events a round reads per CPU, at least: a round of less spends more on
// starting its threads and waiting for the last than on reading (4,096
// ranks of 2,441 events, a rank per CPU: 1.53 s; 214 per CPU: 1.30 s).
constexpr uint64_t kEventsPerCpuAndRound = uint64_t{1} << 19;

// Every process's block as large as the fewest CPUs any of them may use
// read in a round, ranks of a mean size.
RankDeal deal_ranks(const Timeline& timeline, const WorkShare& share) {
  unsigned fewest = usable_cpus();
  for (const std::string& cpus : exchange(share, [] { return std::to_string(usable_cpus()); })) {
    fewest = std::min<unsigned>(fewest, static_cast<unsigned>(std::stoul(cpus)));
  }
  uint64_t events = 0;
  for (const RankInfo& rank : timeline.ranks()) events += rank.event_count;
  const uint64_t mean = std::max<uint64_t>(1, events / std::max<size_t>(1, timeline.ranks().size()));
  const size_t per_cpu = static_cast<size_t>(std::max<uint64_t>(1, kEventsPerCpuAndRound / mean));
  return {std::max<size_t>(fewest, 1) * per_cpu, share.processes};
}

// ------------------------------------------------------------- pass 1 ---

class FirstPass {
 public:
  FirstPass(const Timeline& timeline, JobProfile& job, const WorkShare& share, const RankDeal& deal)
      : timeline_(timeline), job_(job), share_(share), deal_(deal) {
    // Names are few and events many: each name is looked at once.
    for (const std::string& name : timeline.strings()) {
      step_of_name_.push_back(step_number(name));
      profiler_step_name_.push_back(name.starts_with("ProfilerStep#"));
    }
  }

  void run() {
    std::map<uint64_t, size_t> step_index;
    per_rank_steps_.resize(job_.ranks.size());
    read_ranks();
    leave_out_cut_steps();
    // Steps: the union of the step numbers any rank ran, in order.
    for (const auto& steps : per_rank_steps_) {
      for (const auto& [n, times] : steps) step_index.emplace(n, 0);
    }
    size_t next = 0;
    for (auto& [n, index] : step_index) {
      index = next++;
      job_.step_numbers.push_back(n);
    }
    job_.steps_are_windows = step_index.empty() && !job_.windowed_ranks.empty();
    if (job_.steps_are_windows) return steps_by_windows();
    for (size_t r = 0; r < job_.ranks.size(); ++r) {
      RankProfile& rank = job_.ranks[r];
      const RankInfo& info = timeline_.ranks()[r];
      if (step_index.empty()) {
        // No steps marked: the rank's whole capture is one step.
        rank.steps.assign(1, RankStep{});
        if (rank.events == RankEvents::kRead && info.event_count > 0) rank.steps[0].times = {info.first_ns, info.last_ns};
        continue;
      }
      rank.steps.assign(step_index.size(), RankStep{});
      for (const auto& [n, times] : per_rank_steps_[r]) rank.steps[step_index.at(n)].times = times;
    }
    if (step_index.empty()) job_.step_numbers.push_back(0);
    finish_collectives();
  }

 private:
  // A windowed rank's steps that no one of its windows holds whole.
  void leave_out_cut_steps() {
    std::map<uint64_t, std::vector<int32_t>> cut;
    for (const RankInfo& info : timeline_.ranks()) {
      if (!info.capture_windowed || info.status == RankStatus::kMissing) continue;
      job_.windowed_ranks.push_back(info.rank);
      auto& steps = per_rank_steps_[static_cast<size_t>(info.rank)];
      std::set<uint64_t> cut_here;
      std::erase_if(steps, [&](const auto& step) {
        const auto& [n, times] = step;
        if (span_holding(info.capture_windows, times.begin_ns, times.end_ns)) return false;
        cut_here.insert(n);
        return true;
      });
      // Two threads that each ran step N: one range whole is the step.
      for (const auto& [n, times] : steps) cut_here.erase(n);
      for (const uint64_t n : cut_here) cut[n].push_back(info.rank);
    }
    for (auto& [n, ranks] : cut) job_.steps_cut.push_back({n, std::move(ranks)});
  }

  // No step marked in a windowed capture: each window is a step, the k-th
  // window of every rank the k-th step (the edges of --ring dumps and
  // triggers are the same instant on every rank; --capture-range and --steps
  // open theirs at the same range on each).
  void steps_by_windows() {
    size_t windows = 0;
    for (const int32_t r : job_.windowed_ranks) {
      windows = std::max(windows, timeline_.ranks()[static_cast<size_t>(r)].capture_windows.size());
    }
    for (size_t k = 1; k <= std::max<size_t>(windows, 1); ++k) job_.step_numbers.push_back(k);
    for (size_t r = 0; r < job_.ranks.size(); ++r) {
      RankProfile& rank = job_.ranks[r];
      const RankInfo& info = timeline_.ranks()[r];
      rank.steps.assign(job_.step_numbers.size(), RankStep{});
      if (rank.events != RankEvents::kRead || info.event_count == 0) continue;
      for (size_t k = 0; k < info.capture_windows.size(); ++k) {
        const int64_t from = std::max(info.capture_windows[k].first, info.first_ns);
        const int64_t until = std::min(info.capture_windows[k].second, info.last_ns);
        if (from < until) rank.steps[k].times = {from, until};
      }
    }
    finish_collectives();
  }

  // A collective event as a rank's reading saw it, for take() to match.
  struct Sighting {
    InstanceKey key;
    uint32_t name_id;
    EventKind kind;
    bool in_flight;  // on its communicator's or group's track: the rank went on meanwhile
    DataType datatype;
    Algorithm algorithm;
    Protocol protocol;
    uint64_t bytes;
    int64_t begin_ns, end_ns;
  };

  // What one rank's events say, read apart from every other rank's.
  struct RankRead {
    uint64_t events = 0;
    bool gpu = false;
    int32_t step_track = -1;
    uint64_t profiler_step_ranges = 0;
    int64_t last_profiler_step_begin_ns = kUnknown;
    std::vector<std::pair<uint64_t, StepTimes>> steps;
    std::vector<Sighting> sightings;  // in the rank's time order
  };

  // Ranks are read in rounds, a block on each process, the block's ranks on
  // the CPUs the process may use; every process takes every rank's reading
  // in rank order: the result is the one reading in order would give, and
  // memory holds two rounds' sightings. The next round is read while this
  // thread takes the last one: taking in rank order, alone, left the other
  // CPUs idle for most of the pass.
  void read_ranks() {
    const std::vector<RankInfo>& ranks = timeline_.ranks();
    const size_t round = deal_.batch * static_cast<size_t>(deal_.processes);
    const auto block_of = [&](size_t first, int process) {
      const size_t begin = std::min(ranks.size(), first + static_cast<size_t>(process) * deal_.batch);
      return std::pair{begin, std::min(ranks.size(), begin + deal_.batch)};
    };
    const auto read_block = [&](size_t first) {
      const auto [begin, end] = block_of(first, share_.process);
      std::vector<RankRead> batch(end - begin);
      for_each_index(batch.size(), usable_cpus(), [&](size_t i) { read_rank(ranks[begin + i], batch[i]); });
      return batch;
    };
    std::future<std::vector<RankRead>> reading = std::async(std::launch::async, read_block, size_t{0});
    for (size_t first = 0; first < ranks.size(); first += round) {
      std::vector<RankRead> batch = reading.get();
      if (first + round < ranks.size()) reading = std::async(std::launch::async, read_block, first + round);
      if (deal_.processes == 1) {  // a lone process takes its readings as they are
        for (size_t i = 0; i < batch.size(); ++i) take(ranks[first + i], batch[i]);
        continue;
      }
      const std::vector<std::string> read = exchange(share_, [&] {
        std::string bytes;
        BytesOut out(bytes);
        for (const RankRead& r : batch) fields(out, r);
        return bytes;
      });
      for (int process = 0; process < deal_.processes; ++process) {
        const auto [begin, end] = block_of(first, process);
        BytesIn in(read[static_cast<size_t>(process)]);
        for (size_t r = begin; r < end; ++r) {
          RankRead rank_read;
          fields(in, rank_read);
          take(ranks[r], rank_read);
        }
      }
    }
  }

  // A rank's reading as it travels between processes.
  template <typename Bytes, typename Read>
  static void fields(Bytes& bytes, Read& read) {
    bytes.field(read.events);
    bytes.field(read.gpu);
    bytes.field(read.step_track);
    bytes.field(read.profiler_step_ranges);
    bytes.field(read.last_profiler_step_begin_ns);
    bytes.field(read.steps);
    bytes.field(read.sightings);
  }

  void read_rank(const RankInfo& rank, RankRead& out) const {
    if (rank.status == RankStatus::kMissing) return;
    const std::vector<TrackType> tracks = track_types(rank);
    timeline_.for_each_event_block(rank.rank, [&](const std::vector<Event>& events) {
      out.events += events.size();
      for (const Event& e : events) read(e, tracks, out);
    });
  }

  void read(const Event& e, const std::vector<TrackType>& tracks, RankRead& out) const {
    out.gpu |= is_gpu_kind(e.kind);
    if (e.kind == EventKind::kNvtxRange) {
      if (e.name_id < profiler_step_name_.size() && profiler_step_name_[e.name_id]) {
        ++out.profiler_step_ranges;
        out.last_profiler_step_begin_ns = std::max(out.last_profiler_step_begin_ns, e.begin_ns);
      }
      // A step still open when a hang's state was written is the step again once it ends.
      if (e.flags & kFlagIncomplete) return;
      if (const auto n = e.name_id < step_of_name_.size() ? step_of_name_[e.name_id] : std::nullopt) {
        out.steps.emplace_back(*n, StepTimes{e.begin_ns, e.end_ns});
        out.step_track = e.track;
      }
      return;
    }
    // An unfinished collective (a hang's state) has no transfer to time: find_hangs reports it.
    if (!is_collective_kind(e.kind) || e.comm_hash == 0 || (e.flags & kFlagIncomplete)) return;
    const CollectiveSource source = e.kind == EventKind::kMpiCollective     ? CollectiveSource::kMpi
                                    : e.kind == EventKind::kTorchCollective ? CollectiveSource::kTorch
                                                                            : CollectiveSource::kNccl;
    const TrackType track = e.track < tracks.size() ? tracks[e.track] : TrackType::kThread;
    out.sightings.push_back({InstanceKey{e.comm_hash, e.seq, e.op, source}, e.name_id, e.kind,
                             track == TrackType::kMpiComm || track == TrackType::kProcessGroup, e.datatype,
                             e.algorithm, e.protocol, e.bytes, e.begin_ns, e.end_ns});
  }

  void take(const RankInfo& rank, RankRead& read) {
    if (rank.status == RankStatus::kMissing) return;
    if (rank.event_count > 0 && read.events == 0) {
      job_.ranks[static_cast<size_t>(rank.rank)].events = RankEvents::kAllDamaged;
    }
    job_.gpu |= read.gpu;
    RankProfile& profile = job_.ranks[static_cast<size_t>(rank.rank)];
    if (read.step_track >= 0) profile.step_track = read.step_track;
    profile.profiler_step_ranges = read.profiler_step_ranges;
    profile.last_profiler_step_begin_ns = read.last_profiler_step_begin_ns;
    per_rank_steps_[static_cast<size_t>(rank.rank)] = std::move(read.steps);
    // Each of a rank's sightings lands in another instance, whose
    // participations lie far apart: misses of the cache, which held most
    // of the matching's time. So every instance is found first, then each
    // one's instance and participations are fetched a few sightings ahead
    // of their use.
    instance_of_.resize(read.sightings.size());
    for (size_t i = 0; i < read.sightings.size(); ++i) instance_of_[i] = instance(read.sightings[i]);
    constexpr size_t kInstanceAhead = 48, kParticipationAhead = 24;
    for (size_t i = 0; i < read.sightings.size(); ++i) {
      if (i + kInstanceAhead < instance_of_.size()) {
        __builtin_prefetch(&job_.collectives[instance_of_[i + kInstanceAhead]]);
      }
      if (i + kParticipationAhead < instance_of_.size()) {
        const std::vector<Participation>& ranks = job_.collectives[instance_of_[i + kParticipationAhead]].ranks;
        // The last participation is compared, the next one written: a line each.
        if (!ranks.empty()) __builtin_prefetch(&ranks.back(), 1);
        __builtin_prefetch(ranks.data() + ranks.size(), 1);
      }
      match(rank.rank, read.sightings[i], job_.collectives[instance_of_[i]]);
    }
  }

  // The instance a sighting belongs to, added at its first sighting.
  size_t instance(const Sighting& e) {
    auto [it, added] = index_.try_emplace(e.key, job_.collectives.size());
    if (added) {
      CollectiveInstance c;
      c.comm_hash = e.key.comm_hash;
      c.op = e.key.op;
      c.seq = e.key.seq;
      c.source = e.key.source;
      c.name_id = e.name_id;
      job_.collectives.push_back(std::move(c));
    }
    return it->second;
  }

  void match(int32_t rank, const Sighting& e, CollectiveInstance& c) {
    c.bytes = std::max(c.bytes, e.bytes);
    if (c.datatype == DataType::kNone) c.datatype = e.datatype;
    if (e.algorithm != Algorithm::kNone) c.algorithm = e.algorithm;
    if (e.protocol != Protocol::kNone) c.protocol = e.protocol;
    Participation& p = participation(c, rank);
    if (e.key.source != CollectiveSource::kNccl) {
      c.nonblocking |= e.in_flight;
      p.enqueue_ns = p.arrival_ns = p.start_ns = e.begin_ns;
      p.end_ns = e.end_ns;
    } else if (e.kind == EventKind::kNcclCollectiveEnqueue) {
      c.nonblocking = true;  // NCCL collectives run on a stream, apart from the host
      p.enqueue_ns = e.begin_ns;
      if (p.start_ns == kUnknown) {  // until the GPU's own times arrive
        p.arrival_ns = p.start_ns = e.begin_ns;
        p.end_ns = e.end_ns;
      }
    } else {
      p.arrival_ns = p.start_ns = e.begin_ns;
      p.end_ns = e.end_ns;
    }
  }

  static Participation& participation(CollectiveInstance& c, int32_t rank) {
    if (c.ranks.empty() || c.ranks.back().rank != rank) {
      c.ranks.push_back(Participation{});
      c.ranks.back().rank = rank;
    }
    return c.ranks.back();
  }

  // Orders the instances, puts each in its step, and works out the waits.
  void finish_collectives() {
    for (CollectiveInstance& c : job_.collectives) {
      std::sort(c.ranks.begin(), c.ranks.end(), [](const Participation& a, const Participation& b) { return a.rank < b.rank; });
      // NCCL counts one rank's share for these; nccl-tests and the MPI shim the whole.
      if (c.source == CollectiveSource::kNccl && (c.op == CommOp::kAllGather || c.op == CommOp::kReduceScatter)) {
        c.bytes *= c.ranks.size();
      }
      const int64_t last = c.last_arrival_ns();
      for (Participation& p : c.ranks) p.wait_ns = last - p.arrival_ns;
      const Participation& first = c.ranks.front();
      const auto& steps = job_.ranks[static_cast<size_t>(first.rank)].steps;
      for (size_t s = 0; s < steps.size(); ++s) {
        if (steps[s].times.begin_ns != kUnknown && first.arrival_ns >= steps[s].times.begin_ns &&
            first.arrival_ns < steps[s].times.end_ns) {
          c.step = static_cast<int32_t>(s);
          break;
        }
      }
    }
    std::sort(job_.collectives.begin(), job_.collectives.end(),
              [](const CollectiveInstance& a, const CollectiveInstance& b) {
                const int64_t fa = a.ranks.front().arrival_ns, fb = b.ranks.front().arrival_ns;
                return fa != fb ? fa < fb : std::tie(a.comm_hash, a.op, a.seq) < std::tie(b.comm_hash, b.op, b.seq);
              });
  }

  const Timeline& timeline_;
  JobProfile& job_;
  const WorkShare& share_;
  const RankDeal& deal_;
  std::unordered_map<InstanceKey, size_t, InstanceKeyHash> index_;
  std::vector<size_t> instance_of_;  // take()'s instance of each sighting, kept between ranks
  std::vector<std::optional<uint64_t>> step_of_name_;
  std::vector<bool> profiler_step_name_;  // HTA's step markers: ProfilerStep#, whatever follows
  std::vector<std::vector<std::pair<uint64_t, StepTimes>>> per_rank_steps_;
};

// ------------------------------------------------------------- pass 2 ---

// What a stretch of a rank's time was spent on, from the intervals open over it.
enum Layer : uint8_t {
  kInStep,          // inside one of the rank's steps
  kBlocked,         // CPU job: inside an MPI call on a thread
  kCommunicating,   // an MPI or NCCL operation in flight, or an MPI call
  kComputing,       // GPU job: a compute kernel runs
  kGpuBusy,         // GPU job: any GPU activity
  kWaitWindow,      // between this rank's arrival at a collective and the last rank's, or inside an unfinished one
  kTransferWindow,  // between the last arrival and this rank's end of that collective
  kDataLoading,     // the host's phases (model/host_phases.h), from its ranges
  kForward,
  kBackward,
  kOptimizer,
  kCopying,         // a GPU copy runs
  kSetting,         // a GPU memset runs
  kCudaCall,        // the host is inside a CUDA call
  kHostRange,       // the host is inside another range of its own (an NVTX range, a c10d wait)
  kLayerCount,
};

// The layer of a host range of this phase.
constexpr Layer phase_layer(HostPhase phase) {
  switch (phase) {
    case HostPhase::kDataLoading: return kDataLoading;
    case HostPhase::kForward: return kForward;
    case HostPhase::kBackward: return kBackward;
    case HostPhase::kOptimizer: return kOptimizer;
    case HostPhase::kNone: break;
  }
  return kLayerCount;
}

// A collective's wait or transfer window on one rank's time, and the time
// the rank did not compute in it, which the sweep finds.
struct Window {
  int64_t begin, end;
  Layer layer;
  Participation* participation;
  int64_t exposed_ns = 0;
};

// The participation's exposed time is its window's: stored once a rank's
// sweep is done, a run of stores the CPU need not wait for, where adding
// as the sweep went fetched each participation from memory.
void book_exposed_times(const std::vector<Window>& windows) {
  for (const Window& w : windows) {
    (w.layer == kWaitWindow ? w.participation->exposed_wait_ns : w.participation->exposed_transfer_ns) = w.exposed_ns;
  }
}

static_assert(kLayerCount <= 32, "a layer is a bit of a 32-bit mask");

// A sweep over one rank's time: intervals open in time order. A layer's own
// intervals are merged as they come (each begins no earlier than the last),
// so a layer holds one end, that of the merged interval open now, and the
// time is booked only where the set of open layers changes: nested ranges
// and calls cost a comparison each. Steps and collective windows are
// counted, a heap holding their ends; a window's exposed time is the
// exposed time the whole rank booked between its open and its close. Only
// what is open at once is held, so memory does not grow with the rank's
// events.
class RankSweep {
 public:
  RankSweep(RankProfile& rank, bool gpu) : rank_(rank), gpu_(gpu) {}

  // Intervals must be opened in order of their begins.
  void open(int64_t begin, int64_t end, Layer layer) {
    if (end <= begin) return;
    close_through(begin);
    const uint32_t bit = 1u << layer;
    if (merged_open_ & bit) {
      merged_end_[layer] = std::max(merged_end_[layer], end);
      return;
    }
    account(begin);
    merged_open_ |= bit;
    merged_end_[layer] = end;
  }

  // A collective's wait or transfer window: its exposed time goes into it as it closes.
  void open_window(Window& window) {
    if (window.end <= window.begin) return;
    close_through(window.begin);
    account(window.begin);
    add_counted(window.layer, +1);
    counted_ends_.push({window.end, window.layer, &window, exposed_ns_});
  }

  // Steps do not overlap: time inside one belongs to the last one opened.
  void open_step(int64_t begin, int64_t end, size_t index) {
    if (end <= begin) return;
    close_through(begin);
    account(begin);
    step_ = index;
    add_counted(kInStep, +1);
    counted_ends_.push({end, kInStep, nullptr, 0});
  }

  void finish() { close_through(INT64_MAX); }

 private:
  struct End {
    int64_t time;
    Layer layer;
    Window* window;
    int64_t exposed_at_open;  // exposed_ns_ when the window opened
    bool operator>(const End& other) const { return time > other.time; }
  };

  bool is_open(Layer layer) const { return ((merged_open_ | counted_open_) >> layer) & 1u; }

  void add_counted(Layer layer, int delta) {
    counts_[layer] += delta;
    if (counts_[layer] > 0) counted_open_ |= 1u << layer;
    else counted_open_ &= ~(1u << layer);
  }

  // Closes, in time order, what ends at or before `to`, booking the time
  // before each close.
  void close_through(int64_t to) {
    for (;;) {
      int64_t merged_at = INT64_MAX;
      int merged_layer = -1;
      for (uint32_t bits = merged_open_; bits != 0; bits &= bits - 1) {
        const int layer = std::countr_zero(bits);
        if (merged_layer < 0 || merged_end_[layer] < merged_at) {
          merged_at = merged_end_[layer];
          merged_layer = layer;
        }
      }
      const bool counted = !counted_ends_.empty() && (merged_layer < 0 || counted_ends_.top().time < merged_at);
      const int64_t at = counted ? counted_ends_.top().time : merged_at;
      if ((!counted && merged_layer < 0) || at > to) return;
      account(at);
      if (!counted) {
        merged_open_ &= ~(1u << merged_layer);
        continue;
      }
      const End end = counted_ends_.top();
      counted_ends_.pop();
      add_counted(end.layer, -1);
      if (end.window) end.window->exposed_ns = exposed_ns_ - end.exposed_at_open;
    }
  }

  // Books [now_, to) by the layers open over it.
  void account(int64_t to) {
    // The first call only starts the clock (to - INT64_MIN would overflow).
    const int64_t dt = now_ == INT64_MIN ? 0 : to - now_;
    now_ = to;
    if (dt <= 0 || !is_open(kInStep) || step_ >= rank_.steps.size()) return;
    RankStep& step = rank_.steps[step_];
    const bool computing = gpu_ ? is_open(kComputing) : !is_open(kBlocked);
    const bool communicating = is_open(kCommunicating);
    if (computing) step.compute_ns += dt;
    if (communicating) step.comm_ns += dt;
    if (computing && communicating) step.overlap_ns += dt;
    const bool busy = computing || communicating || (gpu_ && is_open(kGpuBusy));
    if (!busy) step.idle_ns += dt;
    if (communicating && !computing) {
      if (is_open(kWaitWindow)) step.exposed_wait_ns += dt;
      else step.exposed_transfer_ns += dt;
    } else if (is_open(kDataLoading)) {
      step.data_loading_ns += dt;
    } else if (is_open(kOptimizer)) {
      step.optimizer_ns += dt;
    } else if (is_open(kBackward)) {
      step.backward_ns += dt;
    } else if (is_open(kForward)) {
      step.forward_ns += dt;
    }
    step.device.work_ns[static_cast<size_t>(work_category())] += dt;
    if (!computing) exposed_ns_ += dt;
  }

  // The first category active now, in WorkCategory's order.
  WorkCategory work_category() const {
    if (is_open(kComputing)) return WorkCategory::kKernel;
    if (is_open(kCopying)) return WorkCategory::kMemcpy;
    if (is_open(kSetting)) return WorkCategory::kMemset;
    if (is_open(kCommunicating)) return WorkCategory::kCommunication;
    if (is_open(kCudaCall)) return WorkCategory::kRuntime;
    if (is_open(kDataLoading)) return WorkCategory::kDataLoading;
    if (is_open(kHostRange) || is_open(kForward) || is_open(kBackward) || is_open(kOptimizer)) {
      return WorkCategory::kCpuExec;
    }
    return WorkCategory::kOther;
  }

  RankProfile& rank_;
  bool gpu_;
  int64_t now_ = INT64_MIN;
  size_t step_ = 0;
  // Layers opened by open(): a bit each, and the end of the merged interval open.
  uint32_t merged_open_ = 0;
  int64_t merged_end_[kLayerCount] = {};
  // Steps and windows: counted, each with its end in the heap.
  uint32_t counted_open_ = 0;
  int counts_[kLayerCount] = {};
  std::priority_queue<End, std::vector<End>, std::greater<End>> counted_ends_;
  // Time booked in a step while the rank was not computing, from the start.
  int64_t exposed_ns_ = 0;
};

// The layers an event opens, by its kind, where it was recorded, and (for a
// kernel) whether its name is NCCL's.
void classify(const Event& e, bool gpu, bool on_thread, bool nccl_named, Layer out[], int& count) {
  count = 0;
  switch (e.kind) {
    case EventKind::kMpiCall:
    case EventKind::kMpiCollective:
    case EventKind::kMpiP2p:
    case EventKind::kTorchCollective:
      out[count++] = kCommunicating;
      if (!gpu && on_thread) out[count++] = kBlocked;
      break;
    case EventKind::kTorchWait:
      // A thread waiting for c10d's work blocks a CPU job; on a GPU job only
      // the GPU's time counts, and the host's waits are none of it.
      if (!gpu && on_thread) {
        out[count++] = kCommunicating;
        out[count++] = kBlocked;
      } else if (on_thread) {
        out[count++] = kHostRange;
      }
      break;
    case EventKind::kNcclCollectiveGpu:
    case EventKind::kNcclP2pGpu:
      out[count++] = kCommunicating;
      out[count++] = kGpuBusy;
      break;
    case EventKind::kGpuKernel: {
      // NCCL's own kernels are communication: tied to their collective
      // through CUPTI, or known by name when the run timed NCCL otherwise.
      const bool nccl = (e.flags & kFlagExternalCorrelation) != 0 || nccl_named;
      out[count++] = nccl ? kCommunicating : kComputing;
      out[count++] = kGpuBusy;
      break;
    }
    case EventKind::kGpuMemcpy:
      out[count++] = kCopying;
      out[count++] = kGpuBusy;
      break;
    case EventKind::kGpuMemset:
      out[count++] = kSetting;
      out[count++] = kGpuBusy;
      break;
    case EventKind::kGpuSync:
      out[count++] = kGpuBusy;
      break;
    case EventKind::kCudaApi:
      out[count++] = kCudaCall;
      break;
    default:
      break;
  }
}

// What a rank's events tell of its time: one sweep over them in time order,
// with the rank's steps and collective windows opened among them.
void sweep_rank(const Timeline& timeline, JobProfile& job, const RankInfo& info, const std::vector<NameTraits>& names,
                const std::vector<HostPhase>& phase_of_name, std::vector<Window>& rank_windows) {
  RankProfile& rank = job.ranks[static_cast<size_t>(info.rank)];
  RankSweep sweep(rank, job.gpu);
  const std::vector<TrackType> tracks = track_types(info);
  std::vector<StepSpan> steps;  // the steps this rank ran, by begin
  for (size_t s = 0; s < rank.steps.size(); ++s) {
    const StepTimes& t = rank.steps[s].times;
    if (t.begin_ns != kUnknown) steps.push_back({t.begin_ns, t.end_ns, s});
  }
  std::sort(steps.begin(), steps.end(), [](const StepSpan& a, const StepSpan& b) { return a.begin < b.begin; });
  DeviceWorkCollector device_work(names, info.tracks, steps, rank);
  size_t next_step = 0, next_window = 0;
  // Steps and windows are opened in step with the events, all by begin.
  auto open_before = [&](int64_t t) {
    for (;;) {
      const int64_t step_at = next_step < steps.size() ? steps[next_step].begin : INT64_MAX;
      const int64_t window_at = next_window < rank_windows.size() ? rank_windows[next_window].begin : INT64_MAX;
      if (std::min(step_at, window_at) > t) return;
      if (step_at <= window_at) {
        sweep.open_step(step_at, steps[next_step].end, steps[next_step].index);
        ++next_step;
      } else {
        sweep.open_window(rank_windows[next_window++]);
      }
    }
  };
  Layer layers[6];
  int count = 0;
  timeline.for_each_event_block(info.rank, [&](const std::vector<Event>& events) {
    for (const Event& e : events) {
      open_before(e.begin_ns);
      const bool on_thread = e.track >= tracks.size() || tracks[e.track] == TrackType::kThread;
      const bool named = e.name_id < names.size();
      classify(e, job.gpu, on_thread, named && names[e.name_id].nccl, layers, count);
      device_work.add(e);
      // Phases of the training thread only: a thread that prefetches batches is no data loading of the step.
      const bool on_step_track = rank.step_track < 0 || e.track == rank.step_track;
      if (e.kind == EventKind::kNvtxRange && on_step_track && e.name_id < phase_of_name.size()) {
        if (const HostPhase phase = phase_of_name[e.name_id]; phase != HostPhase::kNone) {
          layers[count++] = phase_layer(phase);
          rank.phases_seen |= 1u << static_cast<unsigned>(phase);
        }
      }
      // The host's own ranges, but the step's, which spans all of it.
      if (e.kind == EventKind::kNvtxRange && on_thread && !(named && names[e.name_id].step)) {
        layers[count++] = kHostRange;
      }
      rank.communicated |= e.kind == EventKind::kTorchWait || is_collective_kind(e.kind) ||
                           std::find(layers, layers + count, kCommunicating) != layers + count;
      for (int i = 0; i < count; ++i) {
        sweep.open(e.begin_ns, e.end_ns, layers[i]);
        // Unfinished when the state was written (a hang): waiting, to the end, for what never came.
        if (layers[i] == kCommunicating && (e.flags & kFlagIncomplete)) {
          sweep.open(e.begin_ns, e.end_ns, kWaitWindow);
        }
      }
    }
  });
  open_before(INT64_MAX - 1);
  sweep.finish();
  device_work.finish();
}

void sort_by_begin(std::vector<Window>& windows) {
  std::sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) { return a.begin < b.begin; });
}

// What a rank's sweep found: its RankProfile's figures (its steps' times
// came from the first pass, the same on every process) and the exposed
// time each of its collective windows booked to its participation (a wait
// window its exposed wait, a transfer window its exposed transfer), in the
// windows' order.
template <typename Bytes, typename Rank, typename Windows>
void sweep_fields(Bytes& bytes, Rank& rank, Windows& windows) {
  bytes.field(rank.steps);
  bytes.field(rank.phases_seen);
  bytes.field(rank.communicated);
  auto& device = rank.device;
  bytes.field(device.gpu);
  bytes.field(device.kernels);
  bytes.field(device.largest_gaps);
  bytes.field(device.idle_ns);
  bytes.field(device.idle_gaps);
  bytes.field(device.syncs);
  bytes.field(device.launches);
  bytes.field(device.gap_causes_unknown);
  bytes.field(device.device_memory_seen);
  bytes.field(device.memory.peak_bytes);
  bytes.field(device.memory.peak_step);
  bytes.field(device.memory.step_end_bytes);
  for (auto& w : windows) bytes.field(w.exposed_ns);
}

// Each process sweeps the ranks it read, on the CPUs it may use: each sweep
// writes only its own RankProfile and its own participations' exposed times.
// Then every process takes the others' sweeps.
void second_pass(const Timeline& timeline, JobProfile& job, const WorkShare& share, const RankDeal& deal) {
  const std::vector<NameTraits> names = name_traits(timeline.strings());
  std::vector<HostPhase> phase_of_name;
  for (const std::string& name : timeline.strings()) phase_of_name.push_back(host_phase(name));
  // Each rank's collective windows: every process makes the same lists, by
  // which (sorted for the sweep) the exposed times travel.
  // Each thread fills the lists of its share of the ranks (rank modulo the
  // threads): filled on one thread, they took a tenth of the report.
  std::vector<std::vector<Window>> windows(job.ranks.size());
  const unsigned fillers = std::max(1u, std::min<unsigned>(usable_cpus(), static_cast<unsigned>(windows.size())));
  for_each_index(fillers, fillers, [&](size_t filler) {
    for (CollectiveInstance& c : job.collectives) {
      const int64_t last = c.last_arrival_ns();
      for (Participation& p : c.ranks) {
        if (static_cast<size_t>(p.rank) % fillers != filler) continue;
        auto& list = windows[static_cast<size_t>(p.rank)];
        if (last > p.arrival_ns) list.push_back({p.arrival_ns, last, kWaitWindow, &p});
        const int64_t from = std::max(last, p.arrival_ns);
        if (p.end_ns > from) list.push_back({from, p.end_ns, kTransferWindow, &p});
      }
    }
  });
  const std::vector<RankInfo>& ranks = timeline.ranks();
  std::vector<std::vector<size_t>> swept_by(static_cast<size_t>(deal.processes));
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].status != RankStatus::kMissing) swept_by[static_cast<size_t>(deal.owner(r))].push_back(r);
  }
  const std::vector<std::string> swept = exchange(share, [&] {
    const std::vector<size_t>& mine = swept_by[static_cast<size_t>(share.process)];
    for_each_index(mine.size(), usable_cpus(), [&](size_t i) {
      sort_by_begin(windows[mine[i]]);
      sweep_rank(timeline, job, ranks[mine[i]], names, phase_of_name, windows[mine[i]]);
      book_exposed_times(windows[mine[i]]);
    });
    std::string bytes;
    if (deal.processes == 1) return bytes;  // no one to tell
    BytesOut out(bytes);
    for (const size_t r : mine) sweep_fields(out, std::as_const(job.ranks[r]), std::as_const(windows[r]));
    return bytes;
  });
  for (int process = 0; process < deal.processes; ++process) {
    if (process == share.process) continue;
    const std::vector<size_t>& theirs = swept_by[static_cast<size_t>(process)];
    // In the order their sweeps put them (the same sort of the same lists).
    for_each_index(theirs.size(), usable_cpus(), [&](size_t i) { sort_by_begin(windows[theirs[i]]); });
    BytesIn in(swept[static_cast<size_t>(process)]);
    for (const size_t r : theirs) {
      sweep_fields(in, job.ranks[r], windows[r]);
      book_exposed_times(windows[r]);
    }
  }
}

// Rows [first, end) of a dataset.
struct RowRun {
  uint64_t first, end;
};

template <typename Bytes, typename Finding>
void finding_fields(Bytes& bytes, Finding& finding) {
  bytes.field(finding.dataset);
  bytes.field(finding.row);
  bytes.field(finding.rows);
  bytes.field(finding.field);
  bytes.field(finding.problem);
}

// Each process's reading found damage in its own ranks' events: every process
// holds all of it afterwards.
void join_damage(const Timeline& timeline, const WorkShare& share) {
  if (share.processes == 1) return;
  const std::vector<std::string> seen = exchange(share, [&] {
    const Timeline::DamageSeen damage = timeline.damage_seen();
    std::vector<std::pair<std::string, std::vector<RowRun>>> runs;
    for (const auto& [dataset, rows] : damage.rows) {
      auto& packed = runs.emplace_back(dataset, std::vector<RowRun>()).second;
      for (const auto& [first, end] : rows) packed.push_back({first, end});
    }
    std::string bytes;
    BytesOut out(bytes);
    out.field(runs);
    out.field<uint64_t>(damage.findings.size());
    for (const TimelineDamage::Finding& f : damage.findings) finding_fields(out, f);
    return bytes;
  });
  for (int process = 0; process < share.processes; ++process) {
    if (process == share.process) continue;
    BytesIn in(seen[static_cast<size_t>(process)]);
    Timeline::DamageSeen damage;
    std::vector<std::pair<std::string, std::vector<RowRun>>> runs;
    in.field(runs);
    for (const auto& [dataset, rows] : runs) {
      for (const RowRun& run : rows) damage.rows[dataset].emplace(run.first, run.end);
    }
    damage.findings.resize(in.get<uint64_t>());
    for (TimelineDamage::Finding& f : damage.findings) finding_fields(in, f);
    timeline.join_damage(damage);
  }
}

// Why each rank's arrivals cannot be compared with other ranks'.
void mark_unmeasured_arrivals(JobProfile& job) {
  const bool others_have_data = job.ranks_with_data().size() > 1;
  std::vector<bool> shares_a_collective(job.ranks.size(), false);
  for (const CollectiveInstance& c : job.collectives) {
    for (const Participation& p : c.ranks) {
      if (c.ranks.size() > 1) shares_a_collective[static_cast<size_t>(p.rank)] = true;
    }
  }
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    RankProfile& rank = job.ranks[r];
    if (rank.status == RankStatus::kMissing) {
      rank.arrivals_unmeasured = kNoDataReason;
    } else if (!others_have_data) {
      rank.arrivals_unmeasured = "no other rank has data";
    } else if (!shares_a_collective[r]) {
      rank.arrivals_unmeasured = "none of its collectives was matched with another rank's";
    } else if (!job.clock_corrected) {
      rank.arrivals_unmeasured = kClocksNotAlignedReason;
    }
  }
}

}  // namespace

std::vector<int32_t> JobProfile::ranks_with_data() const {
  std::vector<int32_t> out;
  for (const RankProfile& rank : ranks) {
    if (rank.status != RankStatus::kMissing) out.push_back(rank.rank);
  }
  return out;
}

std::string communication_uncaptured(std::string_view capture) {
  const std::string_view list = capture.substr(0, capture.find(' '));
  std::string_view unknown;
  const uint32_t sources = parse_capture_list(list, &unknown);
  if (list.empty() || !unknown.empty() || (sources & (kCaptureMpi | kCaptureNccl | kCaptureCuda | kCapturePython))) {
    return "";
  }
  return "communication was not captured: --capture " + std::string(list) +
         " leaves out mpi, nccl, cuda and python, which record it";
}

std::string collectives_unmeasured(const JobProfile& job) {
  if (job.collectives.empty()) {
    // Said once for the job: the reason every rank with data gives, where they agree.
    std::optional<std::string> uncaptured;
    for (const RankProfile& rank : job.ranks) {
      if (rank.status == RankStatus::kMissing) continue;
      if (uncaptured && *uncaptured != rank.communication_uncaptured) return kNoCollectivesReason;
      uncaptured = rank.communication_uncaptured;
    }
    return uncaptured && !uncaptured->empty() ? *uncaptured : kNoCollectivesReason;
  }
  const bool matched = std::any_of(job.collectives.begin(), job.collectives.end(),
                                   [](const CollectiveInstance& c) { return c.ranks.size() > 1; });
  return matched ? "" : kNoMatchedCollectivesReason;
}

std::optional<int32_t> clock_reference(const Timeline& timeline) {
  for (const RankInfo& rank : timeline.ranks()) {
    if (rank.status != RankStatus::kMissing && rank.clock.synced && rank.clock.offset_ns == 0 &&
        rank.clock.drift_ppm == 0) {
      return rank.rank;
    }
  }
  return std::nullopt;
}

std::string clock_reference_text(std::optional<int32_t> reference) {
  return reference ? "rank " + std::to_string(*reference) + "'s clock"
                   : "the reference clock (rank 0's in a captured job), which no rank with data reads";
}

JobProfile build_profile(const Timeline& timeline, const WorkShare& share) {
  JobProfile job;
  job.path = timeline.path();
  job.world_size = timeline.world_size();
  job.clock_corrected = timeline.clock_corrected();
  job.clock_reference = clock_reference(timeline);
  job.strings = timeline.shared_strings();
  for (const RankInfo& info : timeline.ranks()) {
    RankProfile rank;
    rank.rank = info.rank;
    rank.host = info.host;
    rank.node_id = info.node_id;
    rank.status = info.status;
    if (info.status != RankStatus::kMissing && info.event_count == 0) rank.events = RankEvents::kNoneCaptured;
    rank.communication_uncaptured = communication_uncaptured(info.capture);
    job.ranks.push_back(std::move(rank));
    job.clocks.push_back(info.clock);
  }
  const RankDeal deal = deal_ranks(timeline, share);
  FirstPass(timeline, job, share, deal).run();
  mark_unmeasured_arrivals(job);
  second_pass(timeline, job, share, deal);
  join_damage(timeline, share);
  return job;
}

void write_collectives_table(const std::string& timeline_path, const JobProfile& job) {
  std::vector<CollectiveRow> instances;
  std::vector<ParticipantRow> participants;
  instances.reserve(job.collectives.size());
  for (const CollectiveInstance& c : job.collectives) {
    instances.push_back({c.comm_hash, c.seq, c.bytes, participants.size(), static_cast<uint32_t>(c.ranks.size()),
                         c.name_id, c.step, c.op, static_cast<uint8_t>(c.source), c.nonblocking, c.datatype,
                         c.algorithm, c.protocol});
    for (const Participation& p : c.ranks) {
      participants.push_back({p.rank, p.enqueue_ns, p.arrival_ns, p.start_ns, p.end_ns, p.wait_ns, p.exposed_wait_ns,
                              p.exposed_transfer_ns});
    }
  }
  write_collectives(timeline_path, instances, participants);
}

}  // namespace rankscope::analysis
