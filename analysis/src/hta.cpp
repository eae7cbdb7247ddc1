// Holistic Trace Analysis' overlap and temporal breakdown, by its own
// definitions, for `rankscope report --hta-compat`: GPU events classified by
// kernel name (first match wins), HTA's window (complete steps but the last),
// timestamps in whole µs (begin rounded up, end rounded down, on the float64
// values HTA reads from the trace). Definitions and the figures they
// reproduce: docs/report.md.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "rankscope/analysis/analysis.h"

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

std::vector<std::optional<HtaFigures>> hta_figures(const Timeline& timeline) {
  std::vector<std::optional<HtaFigures>> out;
  for (const RankInfo& rank : timeline.ranks()) {
    if (rank.status == RankStatus::kMissing) {
      out.emplace_back();
      continue;
    }
    std::vector<bool> on_stream;
    for (const Track& t : rank.tracks) {
      if (t.id >= on_stream.size()) on_stream.resize(t.id + 1, false);
      on_stream[t.id] = t.type == TrackType::kCudaStream;
    }
    // HTA's window: with two or more ProfilerStep markers, only the GPU work
    // launched before the last one starts.
    int steps = 0;
    int64_t last_step_begin = INT64_MIN;
    timeline.for_each_event_block(rank.rank, [&](const std::vector<Event>& events) {
      for (const Event& e : events) {
        if (e.kind == EventKind::kNvtxRange && starts_with(timeline.string(e.name_id), "ProfilerStep#")) {
          ++steps;
          last_step_begin = std::max(last_step_begin, e.begin_ns);
        }
      }
    });
    const bool windowed = steps >= 2;
    // HTA rounds each rank's own timestamps, before any clock correction: back
    // on the rank's clock, rounding gives what HTA's does.
    const int64_t to_local = (rank.clock.synced ? rank.clock.offset_ns : 0) - rank.clock.repair_shift_ns;
    std::unordered_set<uint64_t> launched_in_window;  // correlation ids of launches before the cut
    Union communication, computation, everything;
    int64_t first = INT64_MAX, last = INT64_MIN;
    timeline.for_each_event_block(rank.rank, [&](const std::vector<Event>& events) {
      for (const Event& e : events) {
        if (e.kind == EventKind::kCudaApi) {
          if (windowed && e.begin_ns < last_step_begin) launched_in_window.insert(e.correlation_id);
          continue;
        }
        if (!gpu_work(e.kind) || e.track >= on_stream.size() || !on_stream[e.track]) continue;
        if (windowed && !launched_in_window.count(e.correlation_id)) continue;
        const auto [begin, end] = hta_whole_us(e.begin_ns + to_local, e.end_ns + to_local);
        first = std::min(first, begin);
        last = std::max(last, end);
        everything.add(begin, end);
        switch (classify(timeline.string(e.name_id))) {
          case HtaClass::kCommunication: communication.add(begin, end); break;
          case HtaClass::kComputation: computation.add(begin, end); break;
          default: break;
        }
      }
    });
    HtaFigures f;
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
    out.push_back(f);
  }
  return out;
}

}  // namespace rankscope::analysis
