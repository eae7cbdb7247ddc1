// What a rank's GPUs did and what its host did to feed them, per step: the
// figures the profile's sweep collects beside compute and communication
// (analysis/src/device_work.cpp), from which the bottleneck finder judges
// (docs/report-reference.md, "What is slow in a step"). Memory grows with steps,
// devices and kernel names, never with events.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rankscope::analysis {

// The step time by what ran, each ns booked once to the first category in
// this order that was active over it (the TensorBoard profiler's order):
// GPU kernels, copies, memsets, communication (NCCL's kernels, MPI's and
// torch.distributed's calls, in flight), CUDA calls on the host, data
// loading, the host's other ranges, and other (nothing recorded).
enum class WorkCategory : uint8_t { kKernel, kMemcpy, kMemset, kCommunication, kRuntime, kDataLoading, kCpuExec, kOther };
inline constexpr int kWorkCategoryCount = 8;
const char* work_category_key(WorkCategory category);    // JSON: "kernel", "memcpy", ..., "cpu_exec", "other"
const char* work_category_label(WorkCategory category);  // text: "kernel", "memcpy", ..., "CPU exec", "other"

// Why a GPU had nothing to run between two of its operations (a gap in the
// union of all its streams). The launch of the work after the gap decides:
// issued after the GPU ran dry, the gap is the host's; what the host was
// inside of then names it (a synchronisation it had just waited in, a data
// loader, a communication call), else host-bound. Issued before, the GPU
// waited on itself: kernel-to-kernel below 30 µs (HTA's cutoff), else other
// (a stream waiting for an event, a copy engine).
enum class IdleCause : uint8_t { kHostBound, kKernelToKernel, kSyncStall, kDataLoading, kCommunication, kOther };
inline constexpr int kIdleCauseCount = 6;
const char* idle_cause_key(IdleCause cause);    // "host_bound", "kernel_to_kernel", "sync_stall", ...
const char* idle_cause_label(IdleCause cause);  // "host-bound", "kernel to kernel", "sync stall", ...
inline constexpr int64_t kKernelToKernelCutoffNs = 30'000;

// Directions of copies, by CUPTI's and Kineto's names ("memcpy HtoD", "Memcpy DtoH (Device -> Pageable)").
enum class CopyDirection : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice, kPeer, kOther };
inline constexpr int kCopyDirectionCount = 5;
const char* copy_direction_key(CopyDirection direction);  // "h2d", "d2h", "d2d", "peer", "other"

// Per step: what one rank's devices and CUDA calls did in it.
struct StepDeviceWork {
  int64_t work_ns[kWorkCategoryCount] = {};  // booked by WorkCategory's order; other = the rest of the step
  int64_t idle_ns[kIdleCauseCount] = {};     // GPU idle inside the step, by cause (the rank's devices summed)
  uint64_t launches = 0;                     // kernels whose launch call was linked to them
  uint64_t tiny_kernels = 0;                 // of those, kernels that ran shorter than their launch call
  int64_t launch_cpu_ns = 0;                 // the launch calls' time on the host
  uint64_t syncs = 0;                        // host synchronisations (device, stream, event; blocking copies)
  int64_t sync_ns = 0;                       // the host's time blocked in them
  uint64_t copy_bytes[kCopyDirectionCount] = {};
  int64_t copy_ns[kCopyDirectionCount] = {};
  uint64_t pageable_copies = 0, pageable_bytes = 0;  // copies from or to pageable host memory
  uint64_t allocations = 0;                  // cudaMalloc/cudaFree calls (each synchronises the device)
  int64_t allocation_ns = 0;
};

// Sums of several steps' figures.
StepDeviceWork& operator+=(StepDeviceWork& sum, const StepDeviceWork& step);

// One kernel name's launches on one rank.
struct KernelTotals {
  uint32_t name_id = 0;  // the job's string table
  uint64_t count = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
  // Durations by powers of 4 from 1 µs: < 1 µs, 1-4 µs, 4-16 µs, ... , ≥ 4^6 µs (≈ 4.1 ms).
  static constexpr int kBuckets = 8;
  std::array<uint32_t, kBuckets> histogram{};
};
int kernel_duration_bucket(int64_t ns);

struct IdleGap {
  int64_t begin_ns = 0, end_ns = 0;
  int16_t device = -1;
  int32_t step = -1;  // JobProfile step it began in; -1 outside steps
  IdleCause cause = IdleCause::kOther;
};

// A kind of host synchronisation: the CUDA call by name, and the host range
// it was made in (the innermost range open on its thread but the step's).
struct SyncTotals {
  uint32_t name_id = 0;  // "cudaStreamSynchronize", "cudaMemcpy", ...
  int64_t range_id = -1;  // the range's name id ("forward", "optimizer"); -1: outside any range
  uint64_t count = 0;
  int64_t blocked_ns = 0, longest_ns = 0;
};

// A rank's launches linked to their GPU work: every launch call CUPTI links,
// the driver's (NCCL's, Triton's) included.
struct LaunchTotals {
  uint64_t linked = 0;          // GPU operations whose launch call was found
  uint64_t unlinked = 0;        // GPU operations without one (not recorded, or an imported trace without ids)
  uint64_t tiny_kernels = 0;    // ran shorter than their launch call took
  int64_t cpu_ns = 0, gpu_ns = 0, delay_ns = 0;  // summed: launch call, GPU run, launch end to GPU start
};

// A device-memory counter of the rank (torch.profiler's "Total Allocated",
// the PyTorch hook's allocator view): its peak and its value at each step's end.
struct DeviceMemory {
  uint64_t peak_bytes = 0;
  int32_t peak_step = -1;
  std::vector<int64_t> step_end_bytes;  // by JobProfile step; -1: no sample up to its end
};

// Why a rank's device memory is n/a.
inline constexpr const char* kNoDeviceMemoryReason =
    "no device-memory counter was recorded (`rankscope run` records CUDA's allocations through CUPTI; a "
    "torch.profiler trace has one with profile_memory=True)";

struct RankDeviceWork {
  bool gpu = false;                    // the rank ran GPU work on a stream
  std::vector<KernelTotals> kernels;   // by name id
  std::vector<IdleGap> largest_gaps;   // the longest, longest first (at most kLargestGaps)
  static constexpr size_t kLargestGaps = 10;
  int64_t idle_ns[kIdleCauseCount] = {};  // over the whole capture, steps or not
  uint64_t idle_gaps[kIdleCauseCount] = {};
  std::vector<SyncTotals> syncs;       // by call and range
  LaunchTotals launches;
  uint64_t gap_causes_unknown = 0;     // gaps whose host history had been dropped (see device_work.cpp)
  bool device_memory_seen = false;
  DeviceMemory memory;
};

}  // namespace rankscope::analysis
