// Holistic Trace Analysis' overlap and temporal breakdown, by its own
// definitions, for `rankscope report --hta-compat`: GPU events classified by
// kernel name (first match wins), HTA's window (complete steps but the last),
// timestamps in whole µs (begin rounded up, end rounded down, on the float64
// values HTA reads from the trace). Definitions and the figures they
// reproduce: docs/report-reference.md.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "rankscope/analysis/hta.h"
#include "rankscope/model/parallel.h"

namespace rankscope::analysis {
namespace {

enum class HtaClass { kCommunication, kMemory, kComputation, kOther };

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// "cuda.*LaunchKernel"
bool cuda_then_launch_kernel(std::string_view s) {
  const size_t cuda = s.find("cuda");
  return cuda != std::string_view::npos && s.find("LaunchKernel", cuda + 4) != std::string_view::npos;
}

HtaClass classify(std::string_view name) {
  if (starts_with(name, "nccl") || starts_with(name, "hip") || starts_with(name, "hccl") || contains(name, "ncclKernel")) {
    return HtaClass::kCommunication;
  }
  if (starts_with(name, "Memcpy") || starts_with(name, "hipMemcpy") || starts_with(name, "Memset") ||
      starts_with(name, "hipMemset") || starts_with(name, "dma")) {
    return HtaClass::kMemory;
  }
  const bool excluded =
      starts_with(name, "nccl") || contains(name, "Memcpy") || contains(name, "Memset") || contains(name, "dma") ||
      contains(name, "Sync") || starts_with(name, "Stream Wait Event") || cuda_then_launch_kernel(name) ||
      starts_with(name, "runFunction") || starts_with(name, "hip") || starts_with(name, "job_exe") ||
      starts_with(name, "packet") || starts_with(name, "pe_exe") || starts_with(name, "cpum_exe_subgraph") ||
      starts_with(name, "hccl") || starts_with(name, "collective_subgraph_execution");
  return excluded ? HtaClass::kOther : HtaClass::kComputation;
}

// HTA's GPU events: what runs on a CUDA stream. NCCL's kernels are among
// them however they were captured (CUPTI, or a torch.profiler trace).
bool gpu_work(EventKind kind) {
  return kind == EventKind::kGpuKernel || kind == EventKind::kGpuMemcpy || kind == EventKind::kGpuMemset ||
         kind == EventKind::kGpuSync || kind == EventKind::kNcclCollectiveGpu || kind == EventKind::kNcclP2pGpu;
}

// HTA's whole µs of an event: the trace's "ts" and "dur" read as float64,
// end = ts + dur in float64, the begin rounded up and the end rounded down.
// At epoch magnitudes a float64 resolves only 0.25 µs, so rounding the exact
// ns instead would move ends by up to a µs.
std::pair<int64_t, int64_t> hta_whole_us(int64_t begin_ns, int64_t end_ns) {
  const double ts = hta_microseconds(begin_ns), dur = hta_microseconds(end_ns - begin_ns);
  return {static_cast<int64_t>(std::ceil(ts)), static_cast<int64_t>(std::floor(ts + dur))};
}

// A union of intervals fed in order of their begins.
class Union {
 public:
  void add(int64_t begin, int64_t end) {
    if (end <= begin) return;
    if (!merged_.empty() && begin <= merged_.back().second) {
      merged_.back().second = std::max(merged_.back().second, end);
    } else {
      merged_.emplace_back(begin, end);
    }
  }
  int64_t length() const {
    int64_t total = 0;
    for (const auto& [b, e] : merged_) total += e - b;
    return total;
  }
  const std::vector<std::pair<int64_t, int64_t>>& intervals() const { return merged_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> merged_;
};

int64_t intersection(const Union& a, const Union& b) {
  int64_t total = 0;
  const auto& x = a.intervals();
  const auto& y = b.intervals();
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    const int64_t begin = std::max(x[i].first, y[j].first), end = std::min(x[i].second, y[j].second);
    if (end > begin) total += end - begin;
    if (x[i].second < y[j].second) ++i;
    else ++j;
  }
  return total;
}

double rounded_pct(double ratio) { return std::round(ratio * 100.0 * 100.0) / 100.0; }

// HTA 0.5's kernel types (hta/utils/utils.py get_kernel_type), in the order
// its breakdown names their overlaps.
enum KernelType { kComputationType, kCommunicationType, kMemoryType, kOtherType };
constexpr const char* kKernelTypeNames[] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};

KernelType kernel_type(std::string_view name, EventKind kind) {
  // A synchronisation is never a kernel ("Stream Sync" in traces; CUPTI's are named otherwise).
  if (kind == EventKind::kGpuSync) return kOtherType;
  const bool nccl_kernel = starts_with(name, "nccl") && contains(name.substr(4), "Kernel");
  if (nccl_kernel) return kCommunicationType;
  if (starts_with(name, "Memcpy") || starts_with(name, "Memset") || starts_with(name, "dma")) return kMemoryType;
  if (contains(name, "Memcpy") || starts_with(name, "Memset") || contains(name, "Sync")) return kOtherType;
  return kComputationType;
}

// The time each combination of types covers, from the types' merged intervals.
std::vector<HtaKernelType> kernel_type_times(const Union (&types)[3]) {
  std::vector<std::pair<int64_t, int>> edges;  // time, +bit at a begin, -bit at an end
  for (int t = 0; t < 3; ++t) {
    for (const auto& [b, e] : types[t].intervals()) {
      edges.emplace_back(b, 1 << t);
      edges.emplace_back(e, -(1 << t));
    }
  }
  std::sort(edges.begin(), edges.end());
  int64_t time_of[8] = {};
  int running = 0;
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    running += edges[i].second;
    time_of[running] += edges[i + 1].first - edges[i].first;
  }
  std::vector<HtaKernelType> out;
  for (int mask = 1; mask < 8; ++mask) {
    if (time_of[mask] == 0) continue;
    std::string label;
    for (int t = 0; t < 3; ++t) {
      if (mask & (1 << t)) label += (label.empty() ? "" : " overlapping ") + std::string(kKernelTypeNames[t]);
    }
    out.push_back({label, time_of[mask] * 1000});
  }
  return out;
}

// A stream track of no one stream: a trace's "stream": -1 (device-wide work), CUPTI's synchronisations of a context.
bool device_wide(const Track& track) {
  return track.os_id == UINT64_MAX || track.os_id == 0xFFFFFFFFu;
}

HtaFigures rank_figures(const Timeline& timeline, const RankInfo& rank, const RankProfile& profile,
                        const std::vector<bool>& launch_named) {
  std::vector<int> stream_of;  // track id -> index into streams, -1 for no stream
  std::vector<HtaStreamIdle> streams;
  for (const Track& t : rank.tracks) {
    if (t.id >= stream_of.size()) stream_of.resize(t.id + 1, -1);
    if (t.type != TrackType::kCudaStream || device_wide(t)) continue;
    stream_of[t.id] = static_cast<int>(streams.size());
    streams.push_back({static_cast<int64_t>(t.os_id), 0, 0, 0});
  }
  // HTA's window: with two or more ProfilerStep markers, only the GPU work
  // launched before the last one starts. The profile's first pass counted them.
  const bool windowed = profile.profiler_step_ranges >= 2;
  const int64_t last_step_begin = profile.last_profiler_step_begin_ns;
  // HTA rounds each rank's own timestamps, before any clock correction: back
  // on the rank's clock, rounding gives what HTA's does.
  const int64_t to_local = (rank.clock.synced ? rank.clock.offset_ns : 0) - rank.clock.repair_shift_ns;
  struct Call {
    int64_t begin_us, end_us;
    bool launch_named;
  };
  std::unordered_map<uint64_t, Call> calls;  // CUDA calls in the window by correlation id, until their work is seen
  std::vector<int64_t> previous_end(streams.size(), INT64_MIN);
  Union communication, computation, everything, types[3];
  int64_t first = INT64_MAX, last = INT64_MIN;
  HtaFigures f;
  timeline.for_each_event_block(rank.rank, [&](const std::vector<Event>& events) {
    for (const Event& e : events) {
      if (e.kind == EventKind::kCudaApi) {
        if (windowed && e.begin_ns >= last_step_begin) continue;
        const auto [begin, end] = hta_whole_us(e.begin_ns + to_local, e.end_ns + to_local);
        calls[e.correlation_id] = {begin, end, e.name_id < launch_named.size() && launch_named[e.name_id]};
        continue;
      }
      if (!gpu_work(e.kind) || e.track >= stream_of.size() || stream_of[e.track] < 0) continue;
      const auto call = calls.find(e.correlation_id);
      if (windowed && call == calls.end()) continue;
      const auto [begin, end] = hta_whole_us(e.begin_ns + to_local, e.end_ns + to_local);
      first = std::min(first, begin);
      last = std::max(last, end);
      everything.add(begin, end);
      const std::string& name = timeline.string(e.name_id);
      switch (classify(name)) {
        case HtaClass::kCommunication: communication.add(begin, end); break;
        case HtaClass::kComputation: computation.add(begin, end); break;
        default: break;
      }
      if (const KernelType type = kernel_type(name, e.kind); type != kOtherType) types[type].add(begin, end);
      if (call != calls.end() && call->second.launch_named) {
        const Call& c = call->second;
        const int64_t cpu = c.end_us - c.begin_us, gpu = end - begin, delay = std::max<int64_t>(0, begin - c.end_us);
        ++f.launch_stats.events;
        f.launch_stats.short_kernels += cpu <= 50 && gpu < cpu;
        f.launch_stats.runtime_outliers += cpu > 50;
        f.launch_stats.launch_delay_outliers += delay > 100;
      }
      // The idle breakdown: kernels, copies and memsets, each gap against the previous operation's end.
      if (e.kind != EventKind::kGpuSync) {
        const auto s = static_cast<size_t>(stream_of[e.track]);
        if (previous_end[s] != INT64_MIN) {
          const int64_t gap = begin - previous_end[s];
          if (call != calls.end() && call->second.begin_us > previous_end[s]) streams[s].host_wait_ns += gap * 1000;
          else if (gap < 30) streams[s].kernel_wait_ns += gap * 1000;
          else streams[s].other_ns += gap * 1000;
        }
        previous_end[s] = end;
      }
      if (call != calls.end()) calls.erase(call);
    }
  });
  const int64_t comm = communication.length();
  f.comm_comp_overlap_pct = comm > 0 ? rounded_pct(static_cast<double>(intersection(communication, computation)) /
                                                   static_cast<double>(comm))
                                     : std::numeric_limits<double>::quiet_NaN();
  if (last > first) {
    const int64_t kernel_time = last - first;
    const int64_t idle = kernel_time - everything.length();
    const int64_t compute = computation.length();
    f.kernel_time_ns = kernel_time * 1000;
    f.idle_pct = rounded_pct(static_cast<double>(idle) / static_cast<double>(kernel_time));
    f.compute_pct = rounded_pct(static_cast<double>(compute) / static_cast<double>(kernel_time));
    f.non_compute_pct = rounded_pct(static_cast<double>(kernel_time - compute - idle) / static_cast<double>(kernel_time));
  }
  for (size_t s = 0; s < streams.size(); ++s) {
    if (previous_end[s] != INT64_MIN) f.idle_breakdown.push_back(streams[s]);
  }
  f.kernel_breakdown = kernel_type_times(types);
  return f;
}

}  // namespace

double hta_microseconds(int64_t ns) {
  // Below 2^53 both operands are exact and IEEE division rounds correctly.
  constexpr int64_t kExactDouble = int64_t{1} << 53;
  if (ns > -kExactDouble && ns < kExactDouble) return static_cast<double>(ns) / 1000.0;
  if (ns < 0) return -hta_microseconds(-ns);  // round-half-even is symmetric; |INT64_MIN| is past any trace
  // ns = µs·1000 + rest: µs < 2^53 is exact, and its float64 neighbours are
  // `step` apart (a power of two ≤ 1; the value stays in µs's binade). The
  // rest, in steps, is rounded half to even.
  const int64_t us = ns / 1000, rest = ns % 1000;
  const double whole = static_cast<double>(us);
  const double step = std::nextafter(whole, std::numeric_limits<double>::infinity()) - whole;
  const int step_bits = -std::ilogb(step);
  const int64_t scaled = rest << step_bits;
  int64_t steps = scaled / 1000;
  const int64_t remainder = scaled % 1000;
  const bool odd = (((us << step_bits) + steps) & 1) != 0;
  if (2 * remainder > 1000 || (2 * remainder == 1000 && odd)) ++steps;
  return whole + static_cast<double>(steps) * step;
}

std::vector<std::optional<HtaFigures>> hta_figures(const Timeline& timeline, const JobProfile& job) {
  std::vector<std::optional<HtaFigures>> out;
  std::vector<bool> launch_named;  // HTA's launch statistics join these calls only
  for (const std::string& name : timeline.strings()) {
    launch_named.push_back(name == "cudaLaunchKernel" || name == "cudaLaunchKernelExC" || name == "cudaMemcpyAsync" ||
                           name == "cudaMemsetAsync");
  }
  // Each rank's figures are its own: ranks are read on every usable CPU.
  const std::vector<RankInfo>& ranks = timeline.ranks();
  out.resize(ranks.size());
  for_each_index(ranks.size(), usable_cpus(), [&](size_t r) {
    if (ranks[r].status != RankStatus::kMissing) out[r] = rank_figures(timeline, ranks[r], job.ranks[r], launch_named);
  });
  return out;
}

}  // namespace rankscope::analysis
