#include "cupti_records.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "id_table.h"
#include "rankscope/model/text.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::agent {

// The record versions CUPTI 13.0 writes (shared/reference/capture-apis.md §2.1).
// Later versions only append fields, so these layouts stay valid for what is
// read here; a header that changes them must be looked at before it is used.
static_assert(sizeof(CUpti_ActivityKernel10) == 216);
static_assert(sizeof(CUpti_ActivityMemcpy6) == 96);
static_assert(sizeof(CUpti_ActivityMemset4) == 88);
static_assert(sizeof(CUpti_ActivitySynchronization2) == 56);
static_assert(sizeof(CUpti_ActivityAPI) == 40);
static_assert(sizeof(CUpti_ActivityExternalCorrelation) == 24);
static_assert(sizeof(CUpti_ActivityMemory4) >= 128);

namespace {

constexpr CudaApiCall kRecordedApiCalls[] = {
#define RUNTIME(call, version) {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_##call##_##version, #call}
#define DRIVER(call) {CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_##call, #call}
    // Kernel and graph launches. The driver's too: NCCL, Triton and the CUDA
    // libraries launch through it, and a kernel's NCCL collective is linked
    // through its launch call's record (cuda_correlation.h).
    RUNTIME(cudaLaunchKernel, v7000), RUNTIME(cudaLaunchKernel_ptsz, v7000),
    RUNTIME(cudaLaunchKernelExC, v11060), RUNTIME(cudaLaunchKernelExC_ptsz, v11060),
    RUNTIME(cudaLaunchCooperativeKernel, v9000), RUNTIME(cudaLaunchCooperativeKernel_ptsz, v9000),
    RUNTIME(cudaGraphLaunch, v10000), RUNTIME(cudaGraphLaunch_ptsz, v10000),
    DRIVER(cuLaunchKernel), DRIVER(cuLaunchKernel_ptsz), DRIVER(cuLaunchKernelEx), DRIVER(cuLaunchKernelEx_ptsz),
    DRIVER(cuLaunchCooperativeKernel), DRIVER(cuLaunchCooperativeKernel_ptsz),
    DRIVER(cuGraphLaunch), DRIVER(cuGraphLaunch_ptsz),
    // Copies and memsets.
    RUNTIME(cudaMemcpy, v3020), RUNTIME(cudaMemcpy_ptds, v7000),
    RUNTIME(cudaMemcpyAsync, v3020), RUNTIME(cudaMemcpyAsync_ptsz, v7000),
    RUNTIME(cudaMemcpy2D, v3020), RUNTIME(cudaMemcpy2D_ptds, v7000),
    RUNTIME(cudaMemcpy2DAsync, v3020), RUNTIME(cudaMemcpy2DAsync_ptsz, v7000),
    RUNTIME(cudaMemcpyPeer, v4000), RUNTIME(cudaMemcpyPeerAsync, v4000),
    RUNTIME(cudaMemcpyBatchAsync, v13000), RUNTIME(cudaMemcpyBatchAsync_ptsz, v13000),
    RUNTIME(cudaMemset, v3020), RUNTIME(cudaMemset_ptds, v7000),
    RUNTIME(cudaMemsetAsync, v3020), RUNTIME(cudaMemsetAsync_ptsz, v7000),
    // Synchronisations: where the host waits for the GPU.
    RUNTIME(cudaDeviceSynchronize, v3020),
    RUNTIME(cudaStreamSynchronize, v3020), RUNTIME(cudaStreamSynchronize_ptsz, v7000),
    RUNTIME(cudaEventSynchronize, v3020),
    RUNTIME(cudaStreamWaitEvent, v3020), RUNTIME(cudaStreamWaitEvent_ptsz, v7000),
    // Device allocations, which synchronise the whole device (the caching
    // allocator's segments; the stream-ordered Async forms do not).
    RUNTIME(cudaMalloc, v3020), RUNTIME(cudaFree, v3020),
#undef RUNTIME
#undef DRIVER
};

// Marks a cache key as such, so that no key is 0 (an empty slot).
constexpr uint64_t kKeyTag = uint64_t{1} << 48;

// What a synchronisation on no particular stream (a context or an event)
// uses as the stream of its track: CUPTI's own "not applicable".
constexpr uint32_t kNoStream = CUPTI_SYNCHRONIZATION_INVALID_VALUE;

uint32_t intern(const char* text, size_t length) {
  const uint32_t id = rankscope_agent_intern(text, length);
  return id == kNoName ? 0 : id;  // the string table is full: counted by the agent
}
uint32_t intern(const char* text) { return intern(text, std::strlen(text)); }

uint64_t api_key(CUpti_ActivityKind domain, CUpti_CallbackId cbid) {
  return kKeyTag | uint64_t{static_cast<uint32_t>(domain)} << 32 | cbid;
}

// The name recorder.cpp gives a thread's track, so that a thread seen first
// by CUPTI gets the name its host events would have given it.
std::string thread_track_name(uint32_t tid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%u/comm", tid);
  char name[32] = {};
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t got = ::read(fd, name, sizeof(name) - 1);
    ::close(fd);
    name[got > 0 ? got : 0] = '\0';
    name[std::strcspn(name, "\n")] = '\0';
  }
  return std::string(name[0] ? name : "thread") + " " + std::to_string(tid);
}

Event make_event(EventKind kind, uint64_t start, uint64_t end, uint64_t correlation_id, uint64_t bytes,
                 uint32_t name_id, uint16_t track, uint8_t flags) {
  return Event{static_cast<int64_t>(start), static_cast<int64_t>(end), correlation_id, 0, 0, bytes, name_id, track,
               kind, CommOp::kNone, kNoPeer, DataType::kNone, Algorithm::kNone, Protocol::kNone, flags};
}

bool untimed(uint64_t start, uint64_t end) { return start == 0 && end == 0; }

}  // namespace

std::span<const CudaApiCall> recorded_cuda_api_calls() { return kRecordedApiCalls; }

// --------------------------------------------------------- ConcurrentCache ---

ConcurrentCache::ConcurrentCache(uint32_t slots) : mask_(slots - 1), slots_(new Slot[slots]) {}

uint32_t ConcurrentCache::find(uint64_t key) const {
  const uint64_t start = mix64(key);
  for (uint64_t probe = start; probe - start <= mask_; ++probe) {
    const Slot& slot = slots_[probe & mask_];
    const uint64_t seen = slot.key.load(std::memory_order_acquire);
    if (seen == key) return slot.value.load(std::memory_order_acquire);
    if (seen == 0) break;
  }
  return kMissing;
}

void ConcurrentCache::insert(uint64_t key, uint32_t value) {
  const uint64_t start = mix64(key);
  for (uint64_t probe = start; probe - start <= mask_; ++probe) {
    Slot& slot = slots_[probe & mask_];
    uint64_t seen = slot.key.load(std::memory_order_acquire);
    if (seen == 0 && slot.key.compare_exchange_strong(seen, key, std::memory_order_acq_rel)) seen = key;
    if (seen == key) {
      slot.value.store(value, std::memory_order_release);
      return;
    }
  }
}

// ---------------------------------------------------- ExternalCorrelations ---

ExternalCorrelations::ExternalCorrelations() : slots_(new Slot[kSlots]) {}

// A sequence lock on the key: readers that meet a slot being rewritten by
// another completion thread see no match rather than a torn pair.
void ExternalCorrelations::set(uint32_t correlation_id, uint64_t external_id) {
  Slot& slot = slots_[correlation_id & (kSlots - 1)];
  slot.key.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.external_id.store(external_id, std::memory_order_relaxed);
  slot.key.store(uint64_t{1} << 32 | correlation_id, std::memory_order_release);
}

bool ExternalCorrelations::find(uint32_t correlation_id, uint64_t& external_id) const {
  const Slot& slot = slots_[correlation_id & (kSlots - 1)];
  const uint64_t key = uint64_t{1} << 32 | correlation_id;
  if (slot.key.load(std::memory_order_acquire) != key) return false;
  const uint64_t value = slot.external_id.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.key.load(std::memory_order_relaxed) != key) return false;
  external_id = value;
  return true;
}

// --------------------------------------------------- CuptiRecordTranslator ---

CuptiRecordTranslator::CuptiRecordTranslator() {
  static constexpr const char* kMemcpyNames[kMemcpyKinds] = {
      "memcpy",      "memcpy HtoD", "memcpy DtoH", "memcpy HtoA", "memcpy AtoH", "memcpy AtoA",
      "memcpy AtoD", "memcpy DtoA", "memcpy DtoD", "memcpy HtoH", "memcpy PtoP"};
  // A copy from or to pageable host memory is staged by the driver, and the
  // host may wait for it: the bottleneck finder looks for these names.
  static constexpr const char* kPageableMemcpyNames[kMemcpyKinds] = {
      "memcpy (pageable)",      "memcpy HtoD (pageable)", "memcpy DtoH (pageable)", "memcpy HtoA (pageable)",
      "memcpy AtoH (pageable)", "memcpy AtoA (pageable)", "memcpy AtoD (pageable)", "memcpy DtoA (pageable)",
      "memcpy DtoD (pageable)", "memcpy HtoH (pageable)", "memcpy PtoP (pageable)"};
  static constexpr const char* kSyncNames[kSyncTypes] = {
      "synchronize", "event synchronize", "stream wait event", "stream synchronize", "context synchronize"};
  for (uint32_t i = 0; i < kMemcpyKinds; ++i) {
    memcpy_names_[i] = intern(kMemcpyNames[i]);
    pageable_memcpy_names_[i] = intern(kPageableMemcpyNames[i]);
  }
  for (uint32_t i = 0; i < kSyncTypes; ++i) sync_names_[i] = intern(kSyncNames[i]);
  memset_name_ = intern("memset");
  for (const CudaApiCall& call : kRecordedApiCalls) {
    api_names_.insert(api_key(call.domain, call.cbid), intern(call.name));
  }
}

void CuptiRecordTranslator::learn(const CUpti_Activity& record) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& r = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record);
      // CUSTOM2 is rankscope's (CUSTOM0 and CUSTOM1 are Kineto's).
      if (r.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) external_.set(r.correlationId, r.externalId);
      return;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
      const auto& r = reinterpret_cast<const CUpti_ActivityContext3&>(record);
      context_devices_.insert(kKeyTag | r.contextId, r.deviceId);
      return;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto& r = reinterpret_cast<const CUpti_ActivityDevice5&>(record);
      const std::string uuid = r.isMigEnabled ? gpu_uuid_text("MIG-", r.migUuid.bytes) : gpu_uuid_text("GPU-", r.uuid.bytes);
      rankscope_agent_add_gpu_uuid(uuid.c_str());
      return;
    }
    default:
      return;
  }
}

CuptiRecordTranslator::Result CuptiRecordTranslator::translate(const CUpti_Activity& record, Event& event) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:  // never enabled here (it serialises kernels), but the same record
      return kernel(reinterpret_cast<const CUpti_ActivityKernel10&>(record), event);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return memory_copy(reinterpret_cast<const CUpti_ActivityMemcpy6&>(record), event);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return peer_memory_copy(reinterpret_cast<const CUpti_ActivityMemcpyPtoP4&>(record), event);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return memory_set(reinterpret_cast<const CUpti_ActivityMemset4&>(record), event);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return synchronization(reinterpret_cast<const CUpti_ActivitySynchronization2&>(record), event);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return api_call(reinterpret_cast<const CUpti_ActivityAPI&>(record), event);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return device_memory(reinterpret_cast<const CUpti_ActivityMemory4&>(record), event);
    default:
      return Result::kNoEvent;
  }
}

CuptiRecordTranslator::Result CuptiRecordTranslator::kernel(const CUpti_ActivityKernel10& r, Event& event) {
  if (untimed(r.start, r.end)) return Result::kNoTimestamps;
  uint64_t correlation_id = r.correlationId;
  uint8_t flags = 0;
  if (external_.find(r.correlationId, correlation_id)) flags = kFlagExternalCorrelation;
  event = make_event(EventKind::kGpuKernel, r.start, r.end, correlation_id, 0, kernel_name(r.name),
                     stream_track(static_cast<int16_t>(r.deviceId), r.streamId), flags);
  return Result::kEvent;
}

CuptiRecordTranslator::Result CuptiRecordTranslator::memory_copy(const CUpti_ActivityMemcpy6& r, Event& event) {
  if (untimed(r.start, r.end)) return Result::kNoTimestamps;
  // correlationId is the driver call's; a copy made through the runtime also
  // carries the runtime call's, which is the API record rankscope has.
  const uint64_t correlation_id = r.runtimeCorrelationId != 0 ? r.runtimeCorrelationId : r.correlationId;
  const bool pageable = r.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE || r.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  const uint32_t kind = r.copyKind < kMemcpyKinds ? r.copyKind : 0;
  event = make_event(EventKind::kGpuMemcpy, r.start, r.end, correlation_id, r.bytes,
                     pageable ? pageable_memcpy_names_[kind] : memcpy_names_[kind],
                     stream_track(static_cast<int16_t>(r.deviceId), r.streamId), 0);
  return Result::kEvent;
}

CuptiRecordTranslator::Result CuptiRecordTranslator::peer_memory_copy(const CUpti_ActivityMemcpyPtoP4& r,
                                                                      Event& event) {
  if (untimed(r.start, r.end)) return Result::kNoTimestamps;
  event = make_event(EventKind::kGpuMemcpy, r.start, r.end, r.correlationId, r.bytes,
                     memcpy_names_[CUPTI_ACTIVITY_MEMCPY_KIND_PTOP],
                     stream_track(static_cast<int16_t>(r.deviceId), r.streamId), 0);
  return Result::kEvent;
}

CuptiRecordTranslator::Result CuptiRecordTranslator::memory_set(const CUpti_ActivityMemset4& r, Event& event) {
  if (untimed(r.start, r.end)) return Result::kNoTimestamps;
  event = make_event(EventKind::kGpuMemset, r.start, r.end, r.correlationId, r.bytes, memset_name_,
                     stream_track(static_cast<int16_t>(r.deviceId), r.streamId), 0);
  return Result::kEvent;
}

CuptiRecordTranslator::Result CuptiRecordTranslator::synchronization(const CUpti_ActivitySynchronization2& r,
                                                                     Event& event) {
  if (untimed(r.start, r.end)) return Result::kNoTimestamps;
  // A stream's synchronisation goes on that stream's track; a context's or an
  // event's, on its GPU's "synchronize" track. The record names the context,
  // not the GPU: CONTEXT records tell which.
  const uint32_t type = static_cast<uint32_t>(r.type);
  event = make_event(EventKind::kGpuSync, r.start, r.end, r.correlationId, 0, sync_names_[type < kSyncTypes ? type : 0],
                     stream_track(device_of_context(r.contextId), r.streamId), 0);
  return Result::kEvent;
}

CuptiRecordTranslator::Result CuptiRecordTranslator::api_call(const CUpti_ActivityAPI& r, Event& event) {
  if (untimed(r.start, r.end)) return Result::kNoTimestamps;
  event = make_event(EventKind::kCudaApi, r.start, r.end, r.correlationId, 0, api_name(r.kind, r.cbid),
                     thread_track(r.threadId), 0);
  return Result::kEvent;
}

// Each allocation or release of device memory moves its GPU's counter of
// memory allocated; the sample is the total after it. Host, pinned and
// managed memory are not the device's.
CuptiRecordTranslator::Result CuptiRecordTranslator::device_memory(const CUpti_ActivityMemory4& r, Event& event) {
  if (r.memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || r.deviceId >= kMemoryDevices) return Result::kNoEvent;
  if (r.timestamp == 0) return Result::kNoTimestamps;
  int64_t change = static_cast<int64_t>(r.bytes);
  if (r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) change = -change;
  else if (r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) return Result::kNoEvent;
  // Memory allocated before capture began is released unseen: the counter stays at 0 or above.
  const int64_t total = std::max<int64_t>(0, device_memory_[r.deviceId].fetch_add(change) + change);
  // The track and the name, made once per GPU (the first record allocates).
  const uint64_t key = kKeyTag | r.deviceId;
  uint32_t track = memory_tracks_.find(key);
  uint32_t name = memory_names_.find(key);
  if (track == ConcurrentCache::kMissing || name == ConcurrentCache::kMissing) {
    const std::string text = "memory allocated (device " + std::to_string(r.deviceId) + ")";
    track = rankscope_agent_track(TrackType::kCounter, r.deviceId, static_cast<int16_t>(r.deviceId), text.c_str());
    name = intern(text.c_str(), text.size());
    memory_tracks_.insert(key, track);
    memory_names_.insert(key, name);
  }
  event = make_event(EventKind::kCounter, r.timestamp, r.timestamp, r.correlationId, static_cast<uint64_t>(total),
                     name, static_cast<uint16_t>(track), 0);
  return Result::kEvent;
}

// CUPTI keeps one copy of each kernel's name for the whole session (every
// record of the kernel points to it, and a buffer may be read at any time
// later), so its address identifies the name: demangling, which allocates,
// happens once per kernel.
uint32_t CuptiRecordTranslator::kernel_name(const char* name) {
  if (name == nullptr) return intern("(unnamed kernel)");
  const uint64_t key = reinterpret_cast<uintptr_t>(name);
  uint32_t id = kernel_names_.find(key);
  if (id != ConcurrentCache::kMissing) return id;
  int status = -1;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  id = intern(status == 0 && demangled ? demangled : name);  // NCCL's and extern "C" kernels are not mangled
  std::free(demangled);
  kernel_names_.insert(key, id);
  return id;
}

// Calls outside recorded_cuda_api_calls() appear when another tool enabled more.
uint32_t CuptiRecordTranslator::api_name(CUpti_ActivityKind domain, CUpti_CallbackId cbid) {
  const uint64_t key = api_key(domain, cbid);
  uint32_t id = api_names_.find(key);
  if (id != ConcurrentCache::kMissing) return id;
  const char* api = domain == CUPTI_ACTIVITY_KIND_RUNTIME ? "CUDA runtime call " : "CUDA driver call ";
  const std::string name = api + std::to_string(cbid);
  id = intern(name.c_str(), name.size());
  api_names_.insert(key, id);
  return id;
}

uint16_t CuptiRecordTranslator::stream_track(int16_t device, uint32_t stream) {
  const uint64_t key = kKeyTag | uint64_t{static_cast<uint16_t>(device)} << 32 | stream;
  uint32_t track = stream_tracks_.find(key);
  if (track != ConcurrentCache::kMissing) return static_cast<uint16_t>(track);
  const std::string gpu = device < 0 ? "GPU ?" : "GPU " + std::to_string(device);
  const std::string name = stream == kNoStream ? gpu + " synchronize" : gpu + " stream " + std::to_string(stream);
  track = rankscope_agent_track(TrackType::kCudaStream, stream, device, name.c_str());
  stream_tracks_.insert(key, track);
  return static_cast<uint16_t>(track);
}

uint16_t CuptiRecordTranslator::thread_track(uint32_t tid) {
  const uint64_t key = kKeyTag | tid;
  uint32_t track = thread_tracks_.find(key);
  if (track != ConcurrentCache::kMissing) return static_cast<uint16_t>(track);
  track = rankscope_agent_track(TrackType::kThread, tid, -1, thread_track_name(tid).c_str());
  thread_tracks_.insert(key, track);
  return static_cast<uint16_t>(track);
}

int16_t CuptiRecordTranslator::device_of_context(uint32_t context) const {
  const uint32_t device = context_devices_.find(kKeyTag | context);
  return device == ConcurrentCache::kMissing ? int16_t{-1} : static_cast<int16_t>(device);
}

}  // namespace rankscope::agent
