// A stand-in for libcupti and libcuda, so that the CUPTI source runs end to
// end on a machine without a GPU: test_cuda_capture.sh links it as
// libcuda.so.1 and names it in RANKSCOPE_CUPTI_PATH. Only what the source
// calls is here, with CUDA 13's signatures (from the real headers).
//
// It writes down every call (fake_cupti_log), answers as a driver of
// FAKE_CUDA_DRIVER_VERSION would (13000 when unset), refuses the subscription
// when FAKE_CUPTI_HOLDER names another subscriber, and on the forced flush
// hands over one buffer of records of every kind the source translates,
// stamped by the timestamp callback the source registered.
#include <cuda.h>
#include <cupti.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace {

std::mutex g_mutex;
std::string g_log;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
CUpti_TimestampCallbackFunc g_clock = nullptr;
bool g_delivered = false;
int g_subscriber_token = 0;
std::string g_subscriber;  // the subscriber's name; "" when none
CUpti_CallbackFunc g_callback = nullptr;
std::set<std::pair<int, int>> g_callbacks_enabled;  // (domain, cbid)


void log(const std::string& line) {
  std::lock_guard lock(g_mutex);
  g_log += line + "\n";
}

// The records of one small training step, as CUPTI lays them out: back to
// back, each 8-byte aligned (every record struct is).
class RecordWriter {
 public:
  RecordWriter(uint8_t* buffer, size_t size) : buffer_(buffer), size_(size) {}
  template <typename Record>
  void add(const Record& record) {
    if (used_ + sizeof(Record) > size_) return;
    std::memcpy(buffer_ + used_, &record, sizeof(Record));
    used_ += sizeof(Record);
  }
  size_t used() const { return used_; }

 private:
  uint8_t* buffer_;
  size_t size_;
  size_t used_ = 0;
};

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_DEVICE: return sizeof(CUpti_ActivityDevice5);
    case CUPTI_ACTIVITY_KIND_CONTEXT: return sizeof(CUpti_ActivityContext3);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: return sizeof(CUpti_ActivityAPI);
    default: return 0;
  }
}

size_t write_step(uint8_t* buffer, size_t size) {
  const uint64_t now = g_clock ? g_clock() : 0;
  const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));  // the thread that flushes: the test's
  RecordWriter out(buffer, size);

  CUpti_ActivityDevice5 device{};
  device.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  std::memset(device.uuid.bytes, 0x11, sizeof(device.uuid.bytes));
  out.add(device);
  CUpti_ActivityContext3 context{};
  context.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  context.contextId = 1;
  context.deviceId = 0;
  out.add(context);

  CUpti_ActivityAPI launch{};
  launch.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  launch.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
  launch.start = now - 9'000;
  launch.end = now - 8'500;
  launch.threadId = tid;
  launch.correlationId = 1;
  CUpti_ActivityKernel10 nccl_kernel{};
  nccl_kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  nccl_kernel.start = now - 8'000;
  nccl_kernel.end = now - 6'000;
  nccl_kernel.contextId = 1;
  nccl_kernel.streamId = 7;
  nccl_kernel.correlationId = 1;
  nccl_kernel.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  CUpti_ActivityExternalCorrelation external{};
  external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
  external.externalId = 4242;
  external.correlationId = 1;
  out.add(nccl_kernel);  // before its external correlation, as CUPTI may write them
  out.add(launch);
  out.add(external);

  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 1 << 20;
  copy.start = now - 5'000;
  copy.end = now - 4'000;
  copy.contextId = 1;
  copy.streamId = 7;
  copy.correlationId = 2;
  copy.runtimeCorrelationId = 2;
  out.add(copy);
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  sync.start = now - 3'000;
  sync.end = now - 1'000;
  sync.contextId = 1;
  sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  sync.correlationId = 3;
  out.add(sync);
  CUpti_ActivityKernel10 unfinished{};  // forced out before it ran: no timestamps
  unfinished.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  unfinished.streamId = 7;
  unfinished.correlationId = 4;
  unfinished.name = "_Z8unfinishedv";
  out.add(unfinished);
  return out.used();
}

// As CUPTI calls a subscriber around an API call it enabled: on entry and on exit.
CUresult call_with_callbacks(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char* name) {
  log(name);
  bool enabled = false;
  {
    std::lock_guard lock(g_mutex);
    enabled = g_callback && g_callbacks_enabled.count({domain, static_cast<int>(cbid)});
  }
  if (!enabled) return CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.functionName = name;
  data.callbackSite = CUPTI_API_ENTER;
  g_callback(nullptr, domain, cbid, &data);
  data.callbackSite = CUPTI_API_EXIT;
  g_callback(nullptr, domain, cbid, &data);
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

// ---- the driver ----
CUresult CUDAAPI cuDriverGetVersion(int* version) {
  const char* text = std::getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = text ? std::atoi(text) : 13000;
  return CUDA_SUCCESS;
}

// ---- CUPTI ----
CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = 130001;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** text) {
  *text = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
                                                                    : "CUPTI_ERROR_UNKNOWN";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void*,
                                       CUpti_SubscriberParams* params) {
  const std::string name = params && params->subscriberName ? params->subscriberName : "";
  log("cuptiSubscribe_v2 " + name);
  const char* holder = std::getenv("FAKE_CUPTI_HOLDER");
  if (holder || !g_subscriber.empty()) {
    if (params && params->oldSubscriberName) {
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "CUPTI for %s",
                    holder ? holder : g_subscriber.c_str());
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_subscriber = name.empty() ? "unnamed" : name;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber_token);
  g_callback = callback;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId cbid) {
  log("cuptiEnableCallback " + std::to_string(enable) + " " + std::to_string(domain) + " " + std::to_string(cbid));
  std::lock_guard lock(g_mutex);
  if (enable) {
    g_callbacks_enabled.insert({domain, static_cast<int>(cbid)});
  } else {
    g_callbacks_enabled.erase({domain, static_cast<int>(cbid)});
  }
  return CUPTI_SUCCESS;
}

// The driver's profiler calls, which cudaProfilerStart and cudaProfilerStop make.
CUresult CUDAAPI cuProfilerStart() {
  return call_with_callbacks(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, "cuProfilerStart");
}
CUresult CUDAAPI cuProfilerStop() {
  return call_with_callbacks(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, "cuProfilerStop");
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* data) {
  return cuptiSubscribe_v2(subscriber, callback, data, nullptr);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle) {
  log("cuptiUnsubscribe");
  g_subscriber.clear();
  g_callback = nullptr;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  log("cuptiSetThreadIdType " + std::to_string(type));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attribute, size_t* size, void* value) {
  log("cuptiActivitySetAttribute " + std::to_string(attribute) + " " +
      std::to_string(*size == 1 ? *static_cast<uint8_t*>(value) : 0));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  log("cuptiActivityRegisterCallbacks");
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc clock) {
  log("cuptiActivityRegisterTimestampCallback");
  g_clock = clock;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  log("cuptiActivityEnable " + std::to_string(kind));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  log("cuptiActivityDisable " + std::to_string(kind));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  log("cuptiActivityEnableRuntimeApi " + std::to_string(cbid) + " " + std::to_string(enable));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  log("cuptiActivityEnableDriverApi " + std::to_string(cbid) + " " + std::to_string(enable));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t enable) {
  log("cuptiActivityEnableAllSyncRecords " + std::to_string(enable));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) {
  size_t at = 0;
  if (*record != nullptr) {
    at = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) + record_size((*record)->kind);
  }
  if (at >= valid_bytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  static bool reported = false;
  *dropped = reported ? 0 : 3;  // three records lost, once
  reported = true;
  return CUPTI_SUCCESS;
}

// The periodic (0) flushes find nothing; the forced one at stop hands over the step.
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  if (flag == 0) return CUPTI_SUCCESS;
  log("cuptiActivityFlushAll " + std::to_string(flag));
  if (g_delivered || !g_request || !g_complete) return CUPTI_SUCCESS;
  g_delivered = true;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  if (buffer == nullptr) return CUPTI_SUCCESS;
  const bool aligned = reinterpret_cast<uintptr_t>(buffer) % 8 == 0;
  log("buffer " + std::to_string(size) + " bytes, aligned " + std::to_string(aligned));
  g_complete(nullptr, 0, buffer, size, write_step(buffer, size));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  log("cuptiActivityPushExternalCorrelationId " + std::to_string(kind) + " " + std::to_string(id));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* id) {
  log("cuptiActivityPopExternalCorrelationId " + std::to_string(kind));
  if (id) *id = 0;
  return CUPTI_SUCCESS;
}

// For the test: every call above, one a line, in order.
__attribute__((visibility("default"))) const char* fake_cupti_log() {
  std::lock_guard lock(g_mutex);
  static std::string copy;
  copy = g_log;
  return copy.c_str();
}

// For the test: a timestamp as CUPTI would stamp a record now (0 with no callback registered).
__attribute__((visibility("default"))) uint64_t fake_cupti_timestamp() { return g_clock ? g_clock() : 0; }

}  // extern "C"
