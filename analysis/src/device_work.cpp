// What a rank's GPUs did and what its host did to feed them (device_work.h),
// collected in the profile's second pass (device_work_collector.h).
#include <algorithm>
#include <cctype>
#include <string_view>

#include "device_work_collector.h"
#include "rankscope/model/host_phases.h"
#include "rankscope/model/steps.h"

namespace rankscope::analysis {
namespace {

constexpr const char* kWorkKeys[kWorkCategoryCount] = {"kernel",  "memcpy",       "memset",   "communication",
                                                       "runtime", "data_loading", "cpu_exec", "other"};
constexpr const char* kWorkLabels[kWorkCategoryCount] = {"kernel",  "memcpy",       "memset",   "communication",
                                                         "runtime", "data loading", "CPU exec", "other"};
constexpr const char* kIdleKeys[kIdleCauseCount] = {"host_bound",   "kernel_to_kernel", "sync_stall",
                                                    "data_loading", "communication",    "other"};
constexpr const char* kIdleLabels[kIdleCauseCount] = {"host-bound",   "kernel to kernel", "sync stall",
                                                      "data loading", "communication",    "other"};
constexpr const char* kDirectionKeys[kCopyDirectionCount] = {"h2d", "d2h", "d2d", "peer", "other"};

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool contains_ignoring_case(std::string_view s, std::string_view lower_part) {
  if (lower_part.size() > s.size()) return false;
  for (size_t i = 0; i + lower_part.size() <= s.size(); ++i) {
    size_t j = 0;
    while (j < lower_part.size() &&
           std::tolower(static_cast<unsigned char>(s[i + j])) == static_cast<unsigned char>(lower_part[j])) {
      ++j;
    }
    if (j == lower_part.size()) return true;
  }
  return false;
}

// CUDA's runtime and driver calls by name (CUPTI's names, which Kineto keeps).
NameTraits::Api api_of(std::string_view name) {
  using Api = NameTraits::Api;
  if (!name.starts_with("cu")) return Api::kNone;
  if (contains(name, "Synchronize")) return Api::kSync;
  if (contains(name, "Launch")) return Api::kLaunch;
  // Stream-ordered allocations do not synchronise the device; the others do.
  if ((name.starts_with("cudaMalloc") || name.starts_with("cudaFree") || name.starts_with("cuMemAlloc") ||
       name.starts_with("cuMemFree")) &&
      !contains(name, "Async")) {
    return Api::kAllocation;
  }
  if (name.starts_with("cudaMemcpy") || name.starts_with("cuMemcpy")) {
    // A copy call without Async returns when its copy is done (to or from the
    // host): the host waits on the GPU as in a synchronize.
    return contains(name, "Async") || contains(name, "Peer") ? Api::kCopy : Api::kSync;
  }
  if (name.starts_with("cudaMemset") || name.starts_with("cuMemset")) return Api::kSet;
  return Api::kNone;
}

// "memcpy HtoD", "memcpy DtoH (device -> pageable)", Kineto's "Memcpy HtoD (Pageable -> Device)".
CopyDirection direction_of(std::string_view name) {
  if (!name.starts_with("memcpy ") && !name.starts_with("Memcpy ")) return CopyDirection::kOther;
  const std::string_view kind = name.substr(7, 4);
  if (kind == "HtoD") return CopyDirection::kHostToDevice;
  if (kind == "DtoH") return CopyDirection::kDeviceToHost;
  if (kind == "DtoD") return CopyDirection::kDeviceToDevice;
  if (kind == "PtoP") return CopyDirection::kPeer;
  return CopyDirection::kOther;
}

}  // namespace

const char* work_category_key(WorkCategory category) { return kWorkKeys[static_cast<size_t>(category)]; }
const char* work_category_label(WorkCategory category) { return kWorkLabels[static_cast<size_t>(category)]; }
const char* idle_cause_key(IdleCause cause) { return kIdleKeys[static_cast<size_t>(cause)]; }
const char* idle_cause_label(IdleCause cause) { return kIdleLabels[static_cast<size_t>(cause)]; }
const char* copy_direction_key(CopyDirection direction) { return kDirectionKeys[static_cast<size_t>(direction)]; }

StepDeviceWork& operator+=(StepDeviceWork& sum, const StepDeviceWork& step) {
  for (int c = 0; c < kWorkCategoryCount; ++c) sum.work_ns[c] += step.work_ns[c];
  for (int c = 0; c < kIdleCauseCount; ++c) sum.idle_ns[c] += step.idle_ns[c];
  sum.launches += step.launches;
  sum.tiny_kernels += step.tiny_kernels;
  sum.launch_cpu_ns += step.launch_cpu_ns;
  sum.syncs += step.syncs;
  sum.sync_ns += step.sync_ns;
  for (int d = 0; d < kCopyDirectionCount; ++d) {
    sum.copy_bytes[d] += step.copy_bytes[d];
    sum.copy_ns[d] += step.copy_ns[d];
  }
  sum.pageable_copies += step.pageable_copies;
  sum.pageable_bytes += step.pageable_bytes;
  sum.allocations += step.allocations;
  sum.allocation_ns += step.allocation_ns;
  return sum;
}

int kernel_duration_bucket(int64_t ns) {
  int bucket = 0;
  for (int64_t limit = 1000; bucket < KernelTotals::kBuckets - 1 && ns >= limit; limit *= 4) ++bucket;
  return bucket;
}

std::vector<NameTraits> name_traits(const std::vector<std::string>& strings) {
  std::vector<NameTraits> out(strings.size());
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string_view name = strings[i];
    NameTraits& t = out[i];
    t.api = api_of(name);
    t.every_stream = t.api == NameTraits::Api::kSync &&
                     (contains(name, "DeviceSynchronize") || contains(name, "CtxSynchronize"));
    t.nccl = name.starts_with("nccl");
    t.poll = name.starts_with("MPI_Test") || name == "MPI_Iprobe" || name == "MPI_Improbe";
    t.wait = name.starts_with("MPI_Wait");
    t.step = step_number(name).has_value();
    t.data_loading = host_phase(name) == HostPhase::kDataLoading;
    t.device_memory = name.starts_with("memory allocated");
    t.direction = direction_of(name);
    t.pageable = contains_ignoring_case(name, "pageable");
  }
  return out;
}

// ------------------------------------------------------------ History ---

void DeviceWorkCollector::History::add(int64_t begin, int64_t end) {
  if (end <= begin) return;
  if (!intervals_.empty() && begin <= intervals_.back().end) {
    intervals_.back().end = std::max(intervals_.back().end, end);
    return;
  }
  // Bounded whatever the program does: a device that stopped long ago keeps
  // the watermark back; its next gap then sees the recent part only.
  constexpr size_t kMostIntervals = 1 << 16;
  if (intervals_.size() == kMostIntervals) {
    intervals_.pop_front();
    dropped_ = true;
  }
  intervals_.push_back({begin, end});
}

int64_t DeviceWorkCollector::History::overlap(int64_t begin, int64_t end) const {
  int64_t total = 0;
  // The newest first: a gap ends now, and the intervals before it soon stop meeting it.
  for (auto it = intervals_.rbegin(); it != intervals_.rend(); ++it) {
    if (it->end <= begin) {
      // Merged intervals are in order of begins, and ends too once merged.
      break;
    }
    total += std::max<int64_t>(0, std::min(end, it->end) - std::max(begin, it->begin));
  }
  return total;
}

void DeviceWorkCollector::History::forget_before(int64_t time) {
  while (!intervals_.empty() && intervals_.front().end < time) intervals_.pop_front();
}

// ----------------------------------------------------------- collector ---

DeviceWorkCollector::DeviceWorkCollector(const std::vector<NameTraits>& names, const std::vector<Track>& tracks,
                                         const std::vector<StepSpan>& steps, RankProfile& rank)
    : names_(names), steps_(steps), rank_(rank), work_(rank.device) {
  for (const Track& t : tracks) {
    if (t.id >= track_types_.size()) {
      track_types_.resize(t.id + 1, TrackType::kThread);
      track_devices_.resize(t.id + 1, -1);
      device_memory_tracks_.resize(t.id + 1, false);
    }
    track_types_[t.id] = t.type;
    track_devices_[t.id] = t.device;
    device_memory_tracks_[t.id] =
        t.type == TrackType::kCounter && t.name_id < names.size() && names[t.name_id].device_memory;
    has_streams_ |= t.type == TrackType::kCudaStream;
  }
  if (!steps_.empty()) work_.memory.step_end_bytes.assign(rank.steps.size(), -1);
}

void DeviceWorkCollector::add(const Event& e) {
  static const NameTraits kNoTraits;
  const NameTraits& name = e.name_id < names_.size() ? names_[e.name_id] : kNoTraits;
  const TrackType track = e.track < track_types_.size() ? track_types_[e.track] : TrackType::kThread;
  switch (e.kind) {
    case EventKind::kGpuKernel:
    case EventKind::kGpuMemcpy:
    case EventKind::kGpuMemset:
    case EventKind::kNcclCollectiveGpu:
    case EventKind::kNcclP2pGpu:
      if (track == TrackType::kCudaStream) gpu_operation(e, name);
      return;
    case EventKind::kCudaApi:
      cuda_call(e, name);
      return;
    case EventKind::kCounter:
      if (e.track < device_memory_tracks_.size() && device_memory_tracks_[e.track]) counter_sample(e);
      return;
    // What the host was inside of, for the gaps of its GPUs; a CPU job has none.
    case EventKind::kNvtxRange:
      if (has_streams_ && name.data_loading && (rank_.step_track < 0 || e.track == rank_.step_track)) {
        data_loading_history_.add(e.begin_ns, e.end_ns);
      }
      if (has_streams_ && track == TrackType::kThread && !name.step) {
        innermost_range(e.track, e.begin_ns);
        open_ranges_[e.track].emplace_back(e.end_ns, e.name_id);
      }
      return;
    case EventKind::kMpiCall:
    case EventKind::kMpiCollective:
    case EventKind::kMpiP2p:
    case EventKind::kTorchCollective:
    case EventKind::kTorchWait:
      if (has_streams_ && track == TrackType::kThread) communication_history_.add(e.begin_ns, e.end_ns);
      return;
    default:
      return;
  }
}

void DeviceWorkCollector::cuda_call(const Event& e, const NameTraits& name) {
  using Api = NameTraits::Api;
  const int64_t duration = e.end_ns - e.begin_ns;
  switch (name.api) {
    case Api::kLaunch:
    case Api::kCopy:
    case Api::kSet:
      forget_old_launches(e.begin_ns);
      launches_[e.correlation_id] = {e.begin_ns, e.end_ns};
      return;
    case Api::kSync: {
      // A blocking copy launches its copy too.
      launches_[e.correlation_id] = {e.begin_ns, e.end_ns};
      syncs_history_.add(e.begin_ns, e.end_ns);
      const int64_t range = innermost_range(e.track, e.begin_ns);
      SyncTotals& totals = syncs_[uint64_t{e.name_id} << 32 | static_cast<uint32_t>(range + 1)];
      totals.name_id = e.name_id;
      totals.range_id = range;
      ++totals.count;
      totals.blocked_ns += duration;
      totals.longest_ns = std::max(totals.longest_ns, duration);
      if (StepDeviceWork* step = step_at(e.begin_ns)) {
        ++step->syncs;
        step->sync_ns += duration;
      }
      return;
    }
    case Api::kAllocation:
      if (StepDeviceWork* step = step_at(e.begin_ns)) {
        ++step->allocations;
        step->allocation_ns += duration;
      }
      return;
    case Api::kNone:
      return;
  }
}

// A launch whose work never came (not recorded, or dropped) is let go after a
// while, so the table holds only launches in flight.
void DeviceWorkCollector::forget_old_launches(int64_t now) {
  constexpr int64_t kInFlightAtMostNs = 10'000'000'000;
  if (launches_.size() < sweep_launches_at_) return;
  std::erase_if(launches_, [&](const auto& entry) { return entry.second.end < now - kInFlightAtMostNs; });
  sweep_launches_at_ = std::max(kSweepLaunchesAbove, 2 * launches_.size());
}

void DeviceWorkCollector::gpu_operation(const Event& e, const NameTraits& name) {
  work_.gpu = true;
  const int64_t duration = e.end_ns - e.begin_ns;
  const Launch* launch = nullptr;
  Launch found{};
  if (const auto it = launches_.find(e.correlation_id); it != launches_.end() && e.correlation_id != 0) {
    found = it->second;
    launch = &found;
    launches_.erase(it);
  }
  StepDeviceWork* step = step_at(e.begin_ns);
  const bool kernel = e.kind == EventKind::kGpuKernel && !name.nccl && !(e.flags & kFlagExternalCorrelation);
  if (launch) {
    const int64_t cpu = launch->end - launch->begin;
    ++work_.launches.linked;
    work_.launches.cpu_ns += cpu;
    work_.launches.gpu_ns += duration;
    work_.launches.delay_ns += std::max<int64_t>(0, e.begin_ns - launch->end);
    const bool tiny = kernel && duration < cpu;
    work_.launches.tiny_kernels += tiny;
    if (step) {
      ++step->launches;
      step->tiny_kernels += tiny;
      step->launch_cpu_ns += cpu;
    }
  } else {
    ++work_.launches.unlinked;
  }
  if (e.kind == EventKind::kGpuKernel) {
    KernelTotals& k = kernels_[e.name_id];
    if (k.count == 0) {
      k.name_id = e.name_id;
      k.min_ns = k.max_ns = duration;
    }
    ++k.count;
    k.total_ns += duration;
    k.min_ns = std::min(k.min_ns, duration);
    k.max_ns = std::max(k.max_ns, duration);
    ++k.histogram[static_cast<size_t>(kernel_duration_bucket(duration))];
  } else if (e.kind == EventKind::kGpuMemcpy && step) {
    const auto d = static_cast<size_t>(name.direction);
    step->copy_bytes[d] += e.bytes;
    step->copy_ns[d] += duration;
    if (name.pageable) {
      ++step->pageable_copies;
      step->pageable_bytes += e.bytes;
    }
  }
  const int16_t id = e.track < track_devices_.size() ? track_devices_[e.track] : -1;
  Device& d = device(id);
  if (d.busy_until != INT64_MIN && e.begin_ns > d.busy_until) {
    book_gap(id, d.busy_until, e.begin_ns, gap_cause(d.busy_until, e.begin_ns, launch));
  }
  d.busy_until = std::max(d.busy_until, e.end_ns);
  // Host intervals that ended before every device's last work meet no gap to come.
  int64_t watermark = INT64_MAX;
  for (const Device& other : devices_) watermark = std::min(watermark, other.busy_until);
  syncs_history_.forget_before(watermark - kSyncReturnSlackNs);
  data_loading_history_.forget_before(watermark);
  communication_history_.forget_before(watermark);
}

IdleCause DeviceWorkCollector::gap_cause(int64_t begin, int64_t end, const Launch* launch) const {
  if (!launch || launch->begin < begin) {
    // Launched while the GPU was still busy: it waited on itself.
    return end - begin < kKernelToKernelCutoffNs ? IdleCause::kKernelToKernel : IdleCause::kOther;
  }
  // Launched once the GPU had run dry: the host was late, and what it was doing says why.
  const int64_t length = end - begin;
  if (2 * data_loading_history_.overlap(begin, end) >= length) return IdleCause::kDataLoading;
  // A synchronisation returns as the GPU runs dry; the queue it emptied is the gap.
  if (syncs_history_.overlap(begin - kSyncReturnSlackNs, end) > 0) return IdleCause::kSyncStall;
  if (2 * communication_history_.overlap(begin, end) >= length) return IdleCause::kCommunication;
  return IdleCause::kHostBound;
}

void DeviceWorkCollector::book_gap(int16_t device, int64_t begin, int64_t end, IdleCause cause) {
  const auto c = static_cast<size_t>(cause);
  work_.idle_ns[c] += end - begin;
  ++work_.idle_gaps[c];
  if (syncs_history_.dropped() || data_loading_history_.dropped() || communication_history_.dropped()) {
    ++work_.gap_causes_unknown;
  }
  // Inside steps, each step its part.
  auto it = std::upper_bound(steps_.begin(), steps_.end(), begin,
                             [](int64_t t, const StepSpan& s) { return t < s.begin; });
  if (it != steps_.begin()) --it;
  for (; it != steps_.end() && it->begin < end; ++it) {
    const int64_t part = std::min(end, it->end) - std::max(begin, it->begin);
    if (part > 0) rank_.steps[it->index].device.idle_ns[c] += part;
  }
  auto& gaps = work_.largest_gaps;
  const auto longer = [](const IdleGap& a, const IdleGap& b) { return a.end_ns - a.begin_ns > b.end_ns - b.begin_ns; };
  const IdleGap gap{begin, end, device, step_index_at(begin), cause};
  if (gaps.size() == RankDeviceWork::kLargestGaps && !longer(gap, gaps.back())) return;
  if (gaps.size() == RankDeviceWork::kLargestGaps) gaps.pop_back();
  gaps.insert(std::upper_bound(gaps.begin(), gaps.end(), gap, longer), gap);
}

// The innermost range still open on the thread at `begin`, those ended before it let go.
int64_t DeviceWorkCollector::innermost_range(uint16_t track, int64_t begin) {
  const auto it = open_ranges_.find(track);
  if (it == open_ranges_.end()) return -1;
  auto& stack = it->second;
  while (!stack.empty() && stack.back().first <= begin) stack.pop_back();
  return stack.empty() ? int64_t{-1} : static_cast<int64_t>(stack.back().second);
}

void DeviceWorkCollector::counter_sample(const Event& e) {
  work_.device_memory_seen = true;
  memory_now_[e.track] = e.bytes;
  uint64_t total = 0;
  for (const auto& [track, bytes] : memory_now_) total += bytes;
  const int32_t step = step_index_at(e.begin_ns);
  if (total > work_.memory.peak_bytes) {
    work_.memory.peak_bytes = total;
    work_.memory.peak_step = step;
  }
  if (step >= 0) work_.memory.step_end_bytes[static_cast<size_t>(step)] = static_cast<int64_t>(total);
}

int32_t DeviceWorkCollector::step_index_at(int64_t time) const {
  auto it = std::upper_bound(steps_.begin(), steps_.end(), time,
                             [](int64_t t, const StepSpan& s) { return t < s.begin; });
  if (it == steps_.begin()) return -1;
  --it;
  return time < it->end ? static_cast<int32_t>(it->index) : -1;
}

StepDeviceWork* DeviceWorkCollector::step_at(int64_t time) {
  const int32_t index = step_index_at(time);
  return index < 0 ? nullptr : &rank_.steps[static_cast<size_t>(index)].device;
}

DeviceWorkCollector::Device& DeviceWorkCollector::device(int16_t id) {
  for (Device& d : devices_) {
    if (d.id == id) return d;
  }
  devices_.push_back({id, INT64_MIN});
  return devices_.back();
}

void DeviceWorkCollector::finish() {
  work_.kernels.reserve(kernels_.size());
  for (const auto& [id, totals] : kernels_) work_.kernels.push_back(totals);
  std::sort(work_.kernels.begin(), work_.kernels.end(),
            [](const KernelTotals& a, const KernelTotals& b) { return a.name_id < b.name_id; });
  for (const auto& [id, totals] : syncs_) work_.syncs.push_back(totals);
  std::sort(work_.syncs.begin(), work_.syncs.end(), [](const SyncTotals& a, const SyncTotals& b) {
    return a.name_id != b.name_id ? a.name_id < b.name_id : a.range_id < b.range_id;
  });
}

}  // namespace rankscope::analysis
