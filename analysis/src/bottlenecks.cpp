// What is slow in a step (docs/report-reference.md): the eight bottleneck classes,
// each costed per step on every rank from the profile's figures, the job's
// verdict ranked by what fixing each would give back, the top kernels
// across ranks and the longest GPU idle gaps.
#include <algorithm>
#include <string>
#include <unordered_map>

#include "rankscope/analysis/bottlenecks.h"
#include "rankscope/model/format.h"
#include "rankscope/model/host_phases.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"

namespace rankscope::analysis {
namespace {

enum Class { kDataLoadingClass, kLaunch, kSync, kCommunication, kTransfer, kMemory, kGpuIdle, kStraggler, kClassCount };
static_assert(std::size(kBottleneckClasses) == kClassCount);

// The share of a step a class must take to be named: the TensorBoard
// profiler's rules for data loading (5 %) and communication (10 %), and 5 %
// for the others.
constexpr double kThreshold[kClassCount] = {0.05, 0.05, 0.05, 0.10, 0.05, 0.05, 0.05, 0.0};

constexpr const char* kFix[kClassCount] = {
    "feed the step faster: more DataLoader workers (num_workers), pin_memory=True, a larger prefetch_factor and "
    "persistent_workers=True; move decoding and augmentation off the training thread or onto the GPU",
    "launch fewer, larger kernels: CUDA graphs (torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs), "
    "torch.compile's fusion, a larger batch; keep Python work off the launching thread",
    "take synchronisations out of the hot path: no .item(), .cpu(), .tolist() or printing of a tensor every step "
    "(accumulate on the GPU, read every N steps), no torch.cuda.synchronize(); "
    "torch.cuda.set_sync_debug_mode(\"warn\") names each one",
    "hide communication behind compute: DDP's bucket_cap_mb (see the buckets), FSDP's prefetch, fewer gradient "
    "synchronisations (no_sync with gradient accumulation), a larger batch per rank",
    "copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then .to(device, "
    "non_blocking=True); keep tensors on the GPU between steps",
    "allocate less often: reuse buffers; let the caching allocator keep its segments "
    "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); a memory that grows every step holds tensors across steps "
    "(a loss kept without .detach()); near capacity, activation checkpointing or a smaller batch",
    "the GPU waited on itself: streams waiting for each other's events, or copies serialising with kernels; open "
    "the longest gaps in the timeline (rankscope export, then Perfetto)",
    "make the slow rank as fast as the others: its evidence says whether its compute, its network or its share of "
    "the work is at fault",
};

struct RankCosts {
  int32_t rank = -1;
  int64_t median_step_ns = 0;
  int64_t cost[kClassCount] = {};  // mean per measured step
  size_t steps = 0;
  // Totals over its steps, for the evidence.
  StepDeviceWork sum;
  int64_t exposed_wait_ns = 0, exposed_transfer_ns = 0;
};

int64_t per_step(int64_t total, size_t steps) { return steps == 0 ? 0 : total / static_cast<int64_t>(steps); }

int64_t idle(const StepDeviceWork& w, IdleCause cause) { return w.idle_ns[static_cast<size_t>(cause)]; }
int64_t work(const StepDeviceWork& w, WorkCategory category) { return w.work_ns[static_cast<size_t>(category)]; }

// Bytes per step of device memory added, by a least-squares line through the
// samples at the steps' ends; 0 with fewer than three.
double memory_growth_per_step(const DeviceMemory& memory) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t s = 0; s < memory.step_end_bytes.size(); ++s) {
    if (memory.step_end_bytes[s] < 0) continue;
    const double x = static_cast<double>(s), y = static_cast<double>(memory.step_end_bytes[s]);
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  if (n < 3 || n * sxx - sx * sx <= 0) return 0;
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

// Whether the memory at the steps' ends rose in most steps and by more than
// a step's noise: a leak, not a warm-up.
bool grows(const DeviceMemory& memory) {
  std::vector<int64_t> samples;
  for (const int64_t v : memory.step_end_bytes) {
    if (v >= 0) samples.push_back(v);
  }
  if (samples.size() < 4) return false;
  // The first steps warm the caching allocator up; judge the rest.
  const size_t from = samples.size() / 4;
  size_t rises = 0;
  for (size_t i = from + 1; i < samples.size(); ++i) rises += samples[i] > samples[i - 1];
  const size_t pairs = samples.size() - from - 1;
  return pairs >= 2 && 5 * rises >= 4 * pairs && samples.back() > samples[from];
}

std::string ms(int64_t ns) { return format_duration(static_cast<double>(ns)); }
std::string pct(int64_t part, int64_t whole) {
  return whole > 0 ? printf_string("%.1f %%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "n/a";
}

std::string evidence(Class c, const RankCosts& r, const RankProfile& rank, const JobProfile& job) {
  const StepDeviceWork& w = r.sum;
  const size_t n = r.steps;
  const std::string where =
      printf_string("rank %d, %s a step on average over %zu steps (%s of its median step %s)", r.rank,
                    ms(r.cost[c]).c_str(), n, pct(r.cost[c], r.median_step_ns).c_str(), ms(r.median_step_ns).c_str());
  switch (c) {
    case kDataLoadingClass:
      return where + (rank.device.gpu ? ": the training thread loading data while no GPU work, copy or CUDA call ran"
                                      : ": the training thread inside its data-loading ranges");
    case kLaunch:
      return where + printf_string(
                         ": the GPU idle waiting for the host's next launch (host-bound %s, kernel to kernel %s a "
                         "step); %llu of %llu kernels linked to their launch ran shorter than the launch call took, "
                         "whose mean is %s",
                         ms(per_step(idle(w, IdleCause::kHostBound), n)).c_str(),
                         ms(per_step(idle(w, IdleCause::kKernelToKernel), n)).c_str(),
                         static_cast<unsigned long long>(w.tiny_kernels), static_cast<unsigned long long>(w.launches),
                         ms(w.launches ? w.launch_cpu_ns / static_cast<int64_t>(w.launches) : 0).c_str());
    case kSync: {
      std::string calls;
      std::vector<SyncTotals> syncs = rank.device.syncs;
      std::sort(syncs.begin(), syncs.end(),
                [](const SyncTotals& a, const SyncTotals& b) { return a.blocked_ns > b.blocked_ns; });
      for (size_t i = 0; i < syncs.size() && i < 3; ++i) {
        const std::string range = syncs[i].range_id >= 0 ? " in " + job.name(static_cast<uint32_t>(syncs[i].range_id)) : "";
        calls += printf_string("%s%s%s %llu times (%s blocked)", i ? ", " : "", job.name(syncs[i].name_id).c_str(),
                               range.c_str(), static_cast<unsigned long long>(syncs[i].count),
                               ms(syncs[i].blocked_ns).c_str());
      }
      return where + printf_string(": the GPU idle after the host waited for it, %.1f synchronisations a step "
                                   "blocking the host %s a step; %s",
                                   n ? static_cast<double>(w.syncs) / static_cast<double>(n) : 0.0,
                                   ms(per_step(w.sync_ns, n)).c_str(), calls.empty() ? "no call named" : calls.c_str());
    }
    case kCommunication:
      return where + printf_string(": communication nothing hid, waiting for the last rank %s and transferring %s a "
                                   "step",
                                   ms(per_step(r.exposed_wait_ns, n)).c_str(),
                                   ms(per_step(r.exposed_transfer_ns, n)).c_str());
    case kTransfer: {
      std::string copies;
      for (int d = 0; d < kCopyDirectionCount; ++d) {
        if (w.copy_bytes[d] == 0 && w.copy_ns[d] == 0) continue;
        const double gbps = w.copy_ns[d] > 0 ? static_cast<double>(w.copy_bytes[d]) / static_cast<double>(w.copy_ns[d]) : 0;
        copies += printf_string("%s%s %s a step at %.2f GB/s", copies.empty() ? "" : ", ",
                                copy_direction_key(static_cast<CopyDirection>(d)),
                                format_bytes(static_cast<double>(w.copy_bytes[d]) / static_cast<double>(n)).c_str(),
                                gbps);
      }
      return where + ": copies nothing hid; " + (copies.empty() ? "no bytes recorded" : copies) +
             printf_string("; %llu copies (%s) from or to pageable memory",
                           static_cast<unsigned long long>(w.pageable_copies),
                           format_bytes(static_cast<double>(w.pageable_bytes)).c_str());
    }
    case kMemory: {
      std::string text = where + printf_string(": %llu device allocations and frees (%s), each synchronising the GPU",
                                               static_cast<unsigned long long>(w.allocations),
                                               ms(w.allocation_ns).c_str());
      if (rank.device.device_memory_seen) {
        text += printf_string("; device memory peaks at %s", format_bytes(static_cast<double>(rank.device.memory.peak_bytes)).c_str());
        if (grows(rank.device.memory)) {
          text += printf_string(" and grows %s a step", format_bytes(memory_growth_per_step(rank.device.memory)).c_str());
        }
      }
      return text;
    }
    case kGpuIdle:
      return where + ": the GPU idle with its next work already launched (waiting on another stream or event)";
    default:
      return where;
  }
}

std::vector<RankCosts> rank_costs(const JobProfile& job) {
  std::vector<RankCosts> out;
  for (const RankProfile& rank : job.ranks) {
    if (*rank_unmeasured(rank) != '\0') continue;
    RankCosts r;
    r.rank = rank.rank;
    std::vector<int64_t> durations;
    int64_t data_loading = 0;
    for (const RankStep& step : rank.steps) {
      if (step.times.begin_ns == kUnknown || step.times.end_ns == kUnknown) continue;
      durations.push_back(step.times.duration());
      r.sum += step.device;
      // On a GPU rank only the loading nothing on the GPU hid; on a CPU rank all of it.
      data_loading += rank.device.gpu ? work(step.device, WorkCategory::kDataLoading) : step.data_loading_ns;
      r.exposed_wait_ns += step.exposed_wait_ns;
      r.exposed_transfer_ns += step.exposed_transfer_ns;
    }
    r.steps = durations.size();
    if (r.steps == 0) continue;
    r.median_step_ns = median_ns(durations);
    const StepDeviceWork& w = r.sum;
    r.cost[kDataLoadingClass] = per_step(data_loading, r.steps);
    r.cost[kLaunch] = per_step(idle(w, IdleCause::kHostBound) + idle(w, IdleCause::kKernelToKernel), r.steps);
    r.cost[kSync] = per_step(idle(w, IdleCause::kSyncStall), r.steps);
    r.cost[kCommunication] = per_step(r.exposed_wait_ns + r.exposed_transfer_ns, r.steps);
    r.cost[kTransfer] = per_step(work(w, WorkCategory::kMemcpy), r.steps);
    r.cost[kMemory] = per_step(w.allocation_ns, r.steps);
    r.cost[kGpuIdle] = per_step(idle(w, IdleCause::kOther), r.steps);
    out.push_back(r);
  }
  return out;
}

// Why a class cannot be measured on this job; empty when it can.
std::string class_unmeasured(Class c, const JobProfile& job, const std::vector<RankBreakdown>& breakdown,
                             const StragglerReport& stragglers, bool out_of_memory) {
  bool gpu = false, data_loading = false, communicated = false, allocations = out_of_memory;
  for (const RankProfile& rank : job.ranks) {
    gpu |= rank.device.gpu;
    data_loading |= (rank.phases_seen & (1u << static_cast<unsigned>(HostPhase::kDataLoading))) != 0;
    communicated |= rank.communicated && rank.communication_uncaptured.empty();
    allocations |= rank.device.device_memory_seen;
    for (const RankStep& step : rank.steps) allocations |= step.device.allocations > 0;
  }
  constexpr const char* kNoGpu =
      "no GPU work in the timeline: no CUDA kernel, copy or memset was recorded (a CPU job, or a run without "
      "--capture cuda)";
  switch (c) {
    case kDataLoadingClass:
      if (data_loading) return "";
      for (const RankBreakdown& b : breakdown) {
        const std::string& why = b.category_unmeasured[static_cast<size_t>(StepCategory::kDataLoading)];
        if (!why.empty()) return why;
      }
      return "no data-loading range on any rank";
    case kLaunch:
    case kSync:
    case kTransfer:
    case kGpuIdle:
      return gpu ? "" : kNoGpu;
    case kMemory:
      if (!gpu && !out_of_memory) return kNoGpu;
      return allocations ? ""
                         : std::string("no device allocation was recorded: no cudaMalloc/cudaFree call, and ") +
                               kNoDeviceMemoryReason;
    case kCommunication:
      if (communicated) return "";
      if (const std::string why = collectives_unmeasured(job); !why.empty()) return why;
      return kNoCollectivesReason;
    case kStraggler:
      return stragglers.unmeasured;
    default:
      return "";
  }
}

// A rank whose memory cgroup's OOM killer killed a process while it ran,
// and the last step it began.
struct OutOfMemory {
  int32_t rank;
  uint64_t kills;
  int32_t step;  // -1: none
};
std::vector<OutOfMemory> out_of_memory(const JobProfile& job, const std::vector<RankEnd>& ends) {
  std::vector<OutOfMemory> out;
  for (const RankEnd& end : ends) {
    if (end.oom_kills == 0 || end.rank < 0 || static_cast<size_t>(end.rank) >= job.ranks.size()) continue;
    int32_t step = -1;
    const auto& steps = job.ranks[static_cast<size_t>(end.rank)].steps;
    for (size_t s = 0; s < steps.size(); ++s) {
      if (steps[s].times.begin_ns != kUnknown) step = static_cast<int32_t>(s);
    }
    out.push_back({end.rank, end.oom_kills, step});
  }
  return out;
}

std::vector<KernelAcrossRanks> top_kernels(const JobProfile& job, bool by_count) {
  std::unordered_map<uint32_t, KernelAcrossRanks> all;
  for (const RankProfile& rank : job.ranks) {
    for (const KernelTotals& k : rank.device.kernels) {
      KernelAcrossRanks& a = all[k.name_id];
      if (a.ranks == 0) {
        a.name_id = k.name_id;
        a.min_ns = k.min_ns;
        a.max_ns = k.max_ns;
      }
      ++a.ranks;
      a.count += k.count;
      a.total_ns += k.total_ns;
      a.min_ns = std::min(a.min_ns, k.min_ns);
      a.max_ns = std::max(a.max_ns, k.max_ns);
      for (int b = 0; b < KernelTotals::kBuckets; ++b) a.histogram[b] += k.histogram[b];
    }
  }
  std::vector<KernelAcrossRanks> ranked;
  ranked.reserve(all.size());
  for (auto& [id, a] : all) ranked.push_back(a);
  const auto first = [&](const KernelAcrossRanks& a, const KernelAcrossRanks& b) {
    if (by_count && a.count != b.count) return a.count > b.count;
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.name_id < b.name_id;
  };
  const size_t keep = std::min(BottleneckReport::kTopKernels, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep), ranked.end(), first);
  ranked.resize(keep);
  // The spread over ranks, where a straggler's kernel shows.
  for (KernelAcrossRanks& a : ranked) {
    std::vector<std::pair<int64_t, int32_t>> per_rank;
    for (const RankProfile& rank : job.ranks) {
      const auto& kernels = rank.device.kernels;
      const auto it = std::lower_bound(kernels.begin(), kernels.end(), a.name_id,
                                       [](const KernelTotals& k, uint32_t id) { return k.name_id < id; });
      if (it != kernels.end() && it->name_id == a.name_id) per_rank.emplace_back(it->total_ns, rank.rank);
    }
    std::sort(per_rank.begin(), per_rank.end());
    a.rank_min_ns = per_rank.front().first;
    a.rank_min = per_rank.front().second;
    a.rank_max_ns = per_rank.back().first;
    a.rank_max = per_rank.back().second;
    std::vector<int64_t> totals;
    for (const auto& [total, rank] : per_rank) totals.push_back(total);
    a.rank_median_ns = median_ns(totals);
  }
  return ranked;
}

std::vector<RankIdleGap> largest_gaps(const JobProfile& job) {
  std::vector<RankIdleGap> gaps;
  for (const RankProfile& rank : job.ranks) {
    for (const IdleGap& gap : rank.device.largest_gaps) gaps.push_back({rank.rank, gap});
  }
  std::stable_sort(gaps.begin(), gaps.end(), [](const RankIdleGap& a, const RankIdleGap& b) {
    return a.gap.end_ns - a.gap.begin_ns > b.gap.end_ns - b.gap.begin_ns;
  });
  if (gaps.size() > RankDeviceWork::kLargestGaps) gaps.resize(RankDeviceWork::kLargestGaps);
  return gaps;
}

}  // namespace

BottleneckReport find_bottlenecks(const JobProfile& job, const std::vector<RankBreakdown>& breakdown,
                                  const StragglerReport& stragglers, const BucketReport& buckets,
                                  const std::vector<RankEnd>& ends) {
  BottleneckReport report;
  const std::vector<RankCosts> costs = rank_costs(job);
  const std::vector<OutOfMemory> killed = out_of_memory(job, ends);
  // Waiting for the last rank is the straggler's cost where one was found, not communication's.
  const bool straggler_found = !stragglers.stragglers.empty();
  for (int c = 0; c < kClassCount; ++c) {
    const Class klass = static_cast<Class>(c);
    if (std::string why = class_unmeasured(klass, job, breakdown, stragglers, !killed.empty()); !why.empty()) {
      report.unmeasured.emplace_back(kBottleneckClasses[c], std::move(why));
      continue;
    }
    if (klass == kStraggler) {
      for (const Straggler& s : stragglers.stragglers) {
        Bottleneck b;
        b.klass = kBottleneckClasses[c];
        b.cost_ns_per_step = s.actual_step_ns - s.what_if_step_ns;
        b.step_share = s.actual_step_ns > 0 ? static_cast<double>(b.cost_ns_per_step) / static_cast<double>(s.actual_step_ns) : 0;
        b.ranks = {s.rank};
        b.evidence = printf_string("rank %d, %s: ", s.rank, s.cause.c_str()) + s.evidence;
        b.fix = kFix[c];
        report.found.push_back(std::move(b));
      }
      continue;
    }
    const RankCosts* worst = nullptr;
    Bottleneck b;
    for (const RankCosts& r : costs) {
      int64_t cost = r.cost[c];
      if (klass == kCommunication && straggler_found) cost = per_step(r.exposed_transfer_ns, r.steps);
      if (r.median_step_ns <= 0 || static_cast<double>(cost) < kThreshold[c] * static_cast<double>(r.median_step_ns)) {
        continue;
      }
      b.ranks.push_back(r.rank);
      if (!worst || cost > b.cost_ns_per_step) {
        worst = &r;
        b.cost_ns_per_step = cost;
      }
    }
    // A memory that grows every step, or a rank the OOM killer ended, is
    // named whatever its allocations cost.
    if (klass == kMemory && !worst) {
      for (const RankCosts& r : costs) {
        const RankProfile& rank = job.ranks[static_cast<size_t>(r.rank)];
        const bool killed_here = std::any_of(killed.begin(), killed.end(), [&](const OutOfMemory& k) { return k.rank == r.rank; });
        if ((rank.device.device_memory_seen && grows(rank.device.memory)) || killed_here) {
          b.ranks.push_back(r.rank);
          if (!worst) worst = &r;
        }
      }
      if (worst) b.cost_ns_per_step = worst->cost[c];
    }
    if (!worst) continue;
    if (klass == kMemory) {
      for (const OutOfMemory& k : killed) {
        b.evidence += printf_string("; rank %d was killed by the OOM killer (%llu kills in its memory cgroup) %s",
                                    k.rank, static_cast<unsigned long long>(k.kills),
                                    k.step >= 0 ? ("in step " + std::to_string(job.step_numbers[static_cast<size_t>(k.step)])).c_str()
                                                : "before its first step");
      }
    }
    b.klass = kBottleneckClasses[c];
    b.step_share = static_cast<double>(b.cost_ns_per_step) / static_cast<double>(worst->median_step_ns);
    b.evidence = evidence(klass, *worst, job.ranks[static_cast<size_t>(worst->rank)], job) + b.evidence;
    if (klass == kCommunication && straggler_found) {
      b.evidence += "; the wait is the straggler's, and only the transfer is counted here";
    }
    b.fix = kFix[c];
    if (klass == kCommunication && !buckets.recommendation.empty()) b.fix += ". Buckets: " + buckets.recommendation;
    report.found.push_back(std::move(b));
  }
  std::stable_sort(report.found.begin(), report.found.end(),
                   [](const Bottleneck& a, const Bottleneck& b) { return a.cost_ns_per_step > b.cost_ns_per_step; });
  report.top_by_time = top_kernels(job, false);
  report.top_by_count = top_kernels(job, true);
  report.largest_gaps = largest_gaps(job);
  return report;
}

}  // namespace rankscope::analysis
