// CUDA capture through CUPTI's activity API: kernels, copies, memsets and
// synchronisations as the GPU ran them, the CUDA calls that launched them,
// and the link from a NCCL collective to its kernel (cuda_correlation.h).
//
// libcupti is opened at run time, never linked, so that the capture library
// loads on hosts without CUDA. Where CUPTI, the driver or a recent enough
// driver is missing, or another tool already holds CUPTI (Nsight,
// torch.profiler), start() says why in one line and the other sources
// capture on.
//
// Entry: the agent starts this source as the library loads (the preload),
// before the program initialises CUDA. CUDA then calls InitializeInjection
// (CUDA_INJECTION64_PATH names this same library) inside cuInit; the source
// is running by then, and the call only sets up the flush at exit. A library
// loaded through CUDA_INJECTION64_PATH alone starts the agent from its
// constructor the same way.
//
// CUPTI fills one buffer per thread and hands it back, when it is full or
// flushed, on a thread of its own: the buffer is translated in place into
// events (cupti_records.h) and returns to the pool.
//
// CUPTI takes one subscriber per process, and the agent subscribes first,
// as the library loads. A tool that subscribes later (torch.profiler's
// Kineto, which gives up on CUDA when refused) reaches this library's
// cuptiSubscribe first, which the preload puts ahead of libcupti's: the
// source then hands back every buffer, leaves CUPTI as it found it and
// passes the call on, so that the other tool gets CUPTI.
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "capture_source.h"
#include "cuda_correlation.h"
#include "cupti_records.h"
#include "rankscope/clocksync/clock.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/text.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::agent {
namespace {

constexpr uint32_t kCupti13 = 130000;         // cuptiGetVersion's xxyyzz for CUDA 13.0
constexpr int kDriverForCuda13 = 13000;       // cuDriverGetVersion's 1000 * major + 10 * minor

// Kinds asked for. Never KERNEL, which serialises kernels: CONCURRENT_KERNEL
// gives the same record. The API calls are asked for one by one
// (recorded_cuda_api_calls()): enabling the RUNTIME or DRIVER kind would
// record every CUDA call.
constexpr CUpti_ActivityKind kRecordedKinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE,                // GPU UUIDs for the rank's metadata
    CUPTI_ACTIVITY_KIND_CONTEXT,               // which GPU a synchronisation waited for
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,  // the NCCL collective a kernel belongs to
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,               // peer-to-peer copies
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_MEMORY2,               // device allocations and releases: memory allocated, per GPU
};

// The CUPTI functions used, resolved from libcupti.
struct Cupti {
  decltype(&cuptiGetVersion) get_version = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_naming_holder = nullptr;  // optional: names the other subscriber
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&cuptiActivitySetAttribute) set_attribute = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_buffer_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp_callback = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityEnableRuntimeApi) enable_runtime_call = nullptr;
  decltype(&cuptiActivityEnableDriverApi) enable_driver_call = nullptr;
  decltype(&cuptiActivityEnableAllSyncRecords) enable_all_sync_records = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push_external_id = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop_external_id = nullptr;

  // The name of the first required function libcupti lacks, or nullptr.
  const char* resolve(void* library) {
    const auto get = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, name));
      return function != nullptr;
    };
    get(subscribe_naming_holder, "cuptiSubscribe_v2");
    if (!get(get_version, "cuptiGetVersion")) return "cuptiGetVersion";
    if (!get(result_string, "cuptiGetResultString")) return "cuptiGetResultString";
    if (!get(subscribe, "cuptiSubscribe")) return "cuptiSubscribe";
    if (!get(unsubscribe, "cuptiUnsubscribe")) return "cuptiUnsubscribe";
    if (!get(enable_callback, "cuptiEnableCallback")) return "cuptiEnableCallback";
    if (!get(set_thread_id_type, "cuptiSetThreadIdType")) return "cuptiSetThreadIdType";
    if (!get(set_attribute, "cuptiActivitySetAttribute")) return "cuptiActivitySetAttribute";
    if (!get(register_buffer_callbacks, "cuptiActivityRegisterCallbacks")) return "cuptiActivityRegisterCallbacks";
    if (!get(register_timestamp_callback, "cuptiActivityRegisterTimestampCallback")) {
      return "cuptiActivityRegisterTimestampCallback";
    }
    if (!get(enable, "cuptiActivityEnable")) return "cuptiActivityEnable";
    if (!get(disable, "cuptiActivityDisable")) return "cuptiActivityDisable";
    if (!get(enable_runtime_call, "cuptiActivityEnableRuntimeApi")) return "cuptiActivityEnableRuntimeApi";
    if (!get(enable_driver_call, "cuptiActivityEnableDriverApi")) return "cuptiActivityEnableDriverApi";
    if (!get(enable_all_sync_records, "cuptiActivityEnableAllSyncRecords")) return "cuptiActivityEnableAllSyncRecords";
    if (!get(next_record, "cuptiActivityGetNextRecord")) return "cuptiActivityGetNextRecord";
    if (!get(dropped_records, "cuptiActivityGetNumDroppedRecords")) return "cuptiActivityGetNumDroppedRecords";
    if (!get(flush_all, "cuptiActivityFlushAll")) return "cuptiActivityFlushAll";
    if (!get(push_external_id, "cuptiActivityPushExternalCorrelationId")) {
      return "cuptiActivityPushExternalCorrelationId";
    }
    if (!get(pop_external_id, "cuptiActivityPopExternalCorrelationId")) return "cuptiActivityPopExternalCorrelationId";
    return nullptr;
  }

  std::string error_text(CUptiResult result) const {
    const char* text = nullptr;
    if (result_string(result, &text) != CUPTI_SUCCESS || text == nullptr) {
      return "CUPTI error " + std::to_string(result);
    }
    return text;
  }
};

// Where libcupti may be: RANKSCOPE_CUPTI_PATH alone when set (a pip wheel's
// copy, say); otherwise the soname on the loader's path (which also finds a
// copy the program has loaded already), then the toolkit's folders.
std::vector<std::string> cupti_candidates(const AgentSettings& settings) {
  if (!settings.cupti_path.empty()) return {settings.cupti_path};
  std::vector<std::string> candidates = {"libcupti.so.13", "libcupti.so"};
  std::vector<std::string> roots = settings.cuda_roots;
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    candidates.push_back(root + "/lib64/libcupti.so.13");
    candidates.push_back(root + "/extras/CUPTI/lib64/libcupti.so.13");
  }
  return candidates;
}

// CUPTI's activity buffers, mapped once. A thread that calls CUDA fills one
// at a time, and a buffer comes back only once all its kernels have run, so
// the pool covers the launching threads (a handful per rank) and buffers in
// flight. Pages become resident as CUPTI writes them. When the pool is empty
// CUPTI drops records, and counts them (cupti_records_dropped).
class ActivityBufferPool {
 public:
  static constexpr size_t kBufferBytes = size_t{4} << 20;
  static constexpr uint32_t kBuffers = 32;  // 128 MiB at most, as much as Kineto lets be in flight

  bool map() {
    void* memory = ::mmap(nullptr, kBufferBytes * kBuffers, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return false;
    memory_ = static_cast<uint8_t*>(memory);
    free_.store(~uint64_t{0} >> (64 - kBuffers), std::memory_order_release);
    return true;
  }

  uint8_t* take() {
    uint64_t free = free_.load(std::memory_order_acquire);
    while (free != 0) {
      const int index = std::countr_zero(free);
      if (free_.compare_exchange_weak(free, free & ~(uint64_t{1} << index), std::memory_order_acq_rel)) {
        return memory_ + kBufferBytes * index;
      }
    }
    return nullptr;
  }

  void give_back(uint8_t* buffer) {
    if (buffer < memory_ || buffer >= memory_ + kBufferBytes * kBuffers) return;  // not one of ours
    const auto index = static_cast<size_t>(buffer - memory_) / kBufferBytes;
    free_.fetch_or(uint64_t{1} << index, std::memory_order_acq_rel);
  }

 private:
  static_assert(kBuffers <= 64, "one bit per buffer");
  uint8_t* memory_ = nullptr;
  std::atomic<uint64_t> free_{0};  // bit i: buffer i is free
};


// The calls that steer --capture-range cudaProfilerApi, the only callbacks
// enabled (and only with that option): the runtime's, and the driver's,
// which programs without the runtime call. A start within a window, or a
// stop outside one, changes nothing.
struct ProfilerCall {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  bool starts;
};
constexpr ProfilerCall kProfilerCalls[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, true},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, false},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, true},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, false},
};

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (static_cast<const CUpti_CallbackData*>(data)->callbackSite != CUPTI_API_ENTER) return;
  for (const ProfilerCall& call : kProfilerCalls) {
    if (call.domain == domain && call.cbid == cbid) rankscope_agent_profiler_api(call.starts, rankscope_agent_now());
  }
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                  size_t valid_bytes);

class CuptiSource final : public CaptureSource {
 public:
  uint32_t bit() const override { return kCaptureCuda; }

  bool start(const AgentSettings& settings, std::string& why_not) override {
    settings_ = &settings;
    if (!open_cupti(why_not) || !check_driver(why_not) || !subscribe(why_not)) return false;
    translator_ = std::make_unique<CuptiRecordTranslator>();
    if (!configure(why_not)) {
      undo_configuration();
      return false;
    }
    pid_ = ::getpid();
    state_.store(State::kRunning, std::memory_order_release);
    flusher_ = std::thread([this] { flush_periodically(); });
    return true;
  }

  void stop() override { shut_down(); }

  // Another CUPTI client subscribes (`client` names it): everything CUPTI
  // holds is taken, and CUPTI is left to it, with its own clock back.
  void leave_to(const std::string& client) {
    if (!shut_down()) return;
    cupti_.register_timestamp_callback(&realtime_now_ns);
    rankscope_agent_add_counter(counter::kCuptiLeftToOtherClient.data(), 1);
    const std::string why = "another CUPTI client subscribed (" + client +
                            "); rankscope leaves CUPTI to it, with the GPU work recorded until now";
    rankscope_agent_source_off(kCaptureCuda, why.c_str());
  }

  // From InitializeInjection, inside cuInit. An atexit handler registered now
  // runs before those registered earlier (the agent's, which writes the
  // shard), so GPU records are in the agent's buffers when it writes them.
  void on_injection() {
    if (!running()) return;
    std::call_once(exit_flush_once_, [] { std::atexit([] { CuptiSource::cupti_source().shut_down(); }); });
  }

  // The agent's bit is off in a forked child and after finish; checking it costs no system call.
  bool push_external_id(uint64_t id) {
    return rankscope_agent_capturing(kCaptureCuda) && running() &&
           cupti_.push_external_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, id) == CUPTI_SUCCESS;
  }
  // Also after stop: the id was pushed on CUPTI's per-thread stack, which outlives the session.
  void pop_external_id() {
    if (state_.load(std::memory_order_acquire) == State::kOff) return;
    uint64_t popped = 0;
    cupti_.pop_external_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &popped);
  }

  void fill_request(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = pool_.take();
    *size = *buffer ? ActivityBufferPool::kBufferBytes : 0;
    *max_records = 0;  // as many as fit
  }

  void take_buffer(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_bytes) {
    if (rankscope_agent_capturing(kCaptureCuda) || draining_.load(std::memory_order_acquire)) {
      translate(buffer, valid_bytes);
    }
    size_t dropped = 0;
    if (cupti_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
      rankscope_agent_add_counter(counter::kCuptiRecordsDropped.data(), dropped);
    }
    pool_.give_back(buffer);
  }

  // Never destroyed: CUPTI's thread may hand back a buffer while the process
  // exits, and a forked child, which never stops the source, must not meet
  // the destructor of a flusher thread it does not have.
  static CuptiSource& cupti_source() {
    static CuptiSource* const source = new CuptiSource;
    return *source;
  }

 private:
  enum class State : uint8_t { kOff, kRunning, kStopped };

  bool running() const { return state_.load(std::memory_order_acquire) == State::kRunning; }

  bool open_cupti(std::string& why_not) {
    std::string last_error;
    for (const std::string& candidate : cupti_candidates(*settings_)) {
      if ((library_ = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      last_error = ::dlerror();
    }
    if (library_ == nullptr) {
      why_not = !settings_->cupti_path.empty() ? "CUPTI cannot be loaded from " + std::string(kEnvCuptiPath) + " (" + last_error + ")"
                                : "CUPTI (libcupti.so.13) is not on the library path, nor under $CUDA_HOME or "
                                  "/usr/local/cuda; " + std::string(kEnvCuptiPath) + " may name it";
      return false;
    }
    if (const char* missing = cupti_.resolve(library_)) {
      why_not = std::string("the CUPTI library found lacks ") + missing;
      return false;
    }
    uint32_t version = 0;
    if (cupti_.get_version(&version) != CUPTI_SUCCESS || version < kCupti13) {
      why_not = "the CUPTI library found has API version " + std::to_string(version) +
                "; rankscope reads CUDA 13 records (" + std::to_string(kCupti13) + " or newer)";
      return false;
    }
    return true;
  }

  // CUPTI reports a missing or old driver as an unknown error, so ask the driver first.
  bool check_driver(std::string& why_not) {
    void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // left loaded: CUPTI and the program use it
    if (driver == nullptr) {
      why_not = "no NVIDIA driver on this host (libcuda.so.1 cannot be loaded)";
      return false;
    }
    const auto driver_version = reinterpret_cast<decltype(&cuDriverGetVersion)>(::dlsym(driver, "cuDriverGetVersion"));
    int version = 0;
    if (driver_version && driver_version(&version) == CUDA_SUCCESS && version < kDriverForCuda13) {
      why_not = "the NVIDIA driver supports CUDA " + std::to_string(version / 1000) + "." +
                std::to_string(version % 1000 / 10) + " only; CUPTI 13 needs a driver for CUDA 13.0 or newer";
      return false;
    }
    return true;
  }

  bool subscribe(std::string& why_not) {
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    CUptiResult result;
    if (cupti_.subscribe_naming_holder) {
      CUpti_SubscriberParams params{};
      params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
      params.subscriberName = "rankscope";
      params.oldSubscriberName = holder;
      params.oldSubscriberSize = sizeof(holder);
      result = cupti_.subscribe_naming_holder(&subscriber_, on_callback, nullptr, &params);
    } else {
      result = cupti_.subscribe(&subscriber_, on_callback, nullptr);
    }
    if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      // One subscriber per process: the tool that came first keeps CUPTI.
      why_not = std::string("another CUPTI client traces this process (") +
                (holder[0] ? holder : "Nsight Systems, Nsight Compute, torch.profiler or cuda-gdb") +
                "); rankscope leaves CUPTI to it";
      return false;
    }
    if (result != CUPTI_SUCCESS) {
      why_not = "CUPTI cannot start: cuptiSubscribe: " + cupti_.error_text(result);
      return false;
    }
    subscribed_ = true;
    return true;
  }

  bool configure(std::string& why_not) {
    const auto failed = [&](const std::string& step, CUptiResult result) {
      why_not = step + ": " + cupti_.error_text(result);
      return false;
    };
    CUptiResult result = cupti_.set_thread_id_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);  // gettid(), as host tracks
    if (result != CUPTI_SUCCESS) return failed("cuptiSetThreadIdType", result);
    // Per-thread buffers (CUPTI's default, asked for explicitly) keep a
    // launch's external correlation in the buffer of its kernel's record.
    uint8_t per_thread = 1;
    size_t attribute_size = sizeof(per_thread);
    result = cupti_.set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &attribute_size, &per_thread);
    if (result != CUPTI_SUCCESS) return failed("per-thread activity buffers", result);
    if (!pool_.map()) {
      constexpr size_t kPoolMiB = (ActivityBufferPool::kBufferBytes * ActivityBufferPool::kBuffers) >> 20;
      why_not = "cannot map " + std::to_string(kPoolMiB) + " MiB for CUPTI's buffers";
      return false;
    }
    result = cupti_.register_buffer_callbacks(on_buffer_requested, on_buffer_completed);
    if (result != CUPTI_SUCCESS) return failed("cuptiActivityRegisterCallbacks", result);
    // Before any kind is enabled, or early records keep CUPTI's own clock.
    result = cupti_.register_timestamp_callback(&clocksync::process_clock_now);
    if (result != CUPTI_SUCCESS) return failed("cuptiActivityRegisterTimestampCallback", result);
    for (const CUpti_ActivityKind kind : kRecordedKinds) {
      result = cupti_.enable(kind);
      if (result != CUPTI_SUCCESS) return failed("enabling activity kind " + std::to_string(kind), result);
      ++kinds_enabled_;
    }
    // Without it, every poll of an unfinished event or stream (the NCCL
    // watchdog's cudaEventQuery) would be a synchronisation record.
    result = cupti_.enable_all_sync_records(0);
    if (result != CUPTI_SUCCESS) return failed("cuptiActivityEnableAllSyncRecords", result);
    for (const CudaApiCall& call : recorded_cuda_api_calls()) {
      result = enable_call(call, 1);
      if (result != CUPTI_SUCCESS) return failed(std::string("recording ") + call.name, result);
      ++calls_enabled_;
    }
    CaptureRange range;
    if (parse_capture_range(settings_->capture_range, range) && range.kind == CaptureRange::Kind::kCudaProfilerApi) {
      for (const ProfilerCall& call : kProfilerCalls) {
        result = cupti_.enable_callback(1, subscriber_, call.domain, call.cbid);
        if (result != CUPTI_SUCCESS) return failed("the callback of cudaProfilerStart/Stop", result);
        ++profiler_callbacks_enabled_;
      }
    }
    return true;
  }

  CUptiResult enable_call(const CudaApiCall& call, uint8_t enable) {
    return call.domain == CUPTI_ACTIVITY_KIND_RUNTIME ? cupti_.enable_runtime_call(call.cbid, enable)
                                                      : cupti_.enable_driver_call(call.cbid, enable);
  }

  // Leaves CUPTI as it was before start(), so that another tool may take it.
  void undo_configuration() {
    for (uint32_t i = 0; i < profiler_callbacks_enabled_; ++i) {
      cupti_.enable_callback(0, subscriber_, kProfilerCalls[i].domain, kProfilerCalls[i].cbid);
    }
    for (uint32_t i = 0; i < calls_enabled_; ++i) enable_call(recorded_cuda_api_calls()[i], 0);
    for (uint32_t i = 0; i < kinds_enabled_; ++i) cupti_.disable(kRecordedKinds[i]);
    calls_enabled_ = kinds_enabled_ = profiler_callbacks_enabled_ = 0;
    if (subscribed_) cupti_.unsubscribe(subscriber_);
    subscribed_ = false;
  }

  // At finish, at exit or for another CUPTI client, whichever comes first;
  // never in a forked child, which has no flusher thread and whose parent
  // still captures. True for the call that stopped the source.
  bool shut_down() {
    if (::getpid() != pid_) return false;
    State expected = State::kRunning;
    if (!state_.compare_exchange_strong(expected, State::kStopped, std::memory_order_acq_rel)) return false;
    {
      std::lock_guard lock(flush_mutex_);
      stop_flushing_ = true;
    }
    flush_wake_.notify_all();
    if (flusher_.joinable()) flusher_.join();
    // Forced: buffers with kernels that have not run come back too; those
    // records have no timestamps and are dropped (cupti_records_without_timestamps).
    draining_.store(true, std::memory_order_release);
    cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    draining_.store(false, std::memory_order_release);
    undo_configuration();
    return true;
  }

  // CUPTI's own timestamps on Linux, which a client taking CUPTI over expects.
  static uint64_t CUPTIAPI realtime_now_ns() {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
  }

  // Buffers come back on their own only when full; flushing them as often as
  // the agent writes its shard bounds what a rank killed outright loses.
  void flush_periodically() {
    pthread_setname_np(pthread_self(), "rankscope-cupti");
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the application's signals go to its own threads
    const std::chrono::milliseconds period(settings_->flush_ms);
    std::unique_lock lock(flush_mutex_);
    while (!flush_wake_.wait_for(lock, period, [this] { return stop_flushing_; })) {
      lock.unlock();
      cupti_.flush_all(0);  // only buffers whose records are all complete
      lock.lock();
    }
  }

  void translate(uint8_t* buffer, size_t valid_bytes) {
    const auto for_each_record = [&](auto&& visit) {
      CUpti_Activity* record = nullptr;
      while (cupti_.next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) visit(*record);
    };
    const uint64_t without_timestamps =
        translator_->translate_buffer(for_each_record, [](const Event& event) { rankscope_agent_record(&event); });
    if (without_timestamps > 0) rankscope_agent_add_counter(counter::kCuptiRecordsWithoutTimestamps.data(), without_timestamps);
  }

  Cupti cupti_;
  void* library_ = nullptr;  // never closed: CUPTI stays loaded for the process's life
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool subscribed_ = false;
  uint32_t kinds_enabled_ = 0;
  uint32_t calls_enabled_ = 0;
  uint32_t profiler_callbacks_enabled_ = 0;
  ActivityBufferPool pool_;
  std::unique_ptr<CuptiRecordTranslator> translator_;
  std::atomic<State> state_{State::kOff};
  std::atomic<bool> draining_{false};  // the final flush: records are taken after capture stopped
  pid_t pid_ = 0;
  std::once_flag exit_flush_once_;

  const AgentSettings* settings_ = nullptr;  // the agent's, which outlive its sources
  std::thread flusher_;
  std::mutex flush_mutex_;
  std::condition_variable flush_wake_;
  bool stop_flushing_ = false;
};

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiSource::cupti_source().fill_request(buffer, size, max_records);
}

void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_bytes) {
  CuptiSource::cupti_source().take_buffer(context, stream, buffer, valid_bytes);
}

}  // namespace

CaptureSource& cupti_capture_source() { return CuptiSource::cupti_source(); }

bool push_external_correlation(uint64_t id) { return CuptiSource::cupti_source().push_external_id(id); }

void pop_external_correlation() { CuptiSource::cupti_source().pop_external_id(); }

namespace {

// A function of the libcupti the program calls: the next definition after
// this library's in the global scope or, where the program's libcupti lies
// in a local scope only (a Python extension's dependency), the one loaded.
void* program_cupti_function(const char* name) {
  if (void* function = ::dlsym(RTLD_NEXT, name)) return function;
  std::vector<std::string> loaded;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* paths) {
        const std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        if (path.substr(path.rfind('/') + 1).starts_with("libcupti.so")) {
          static_cast<std::vector<std::string>*>(paths)->emplace_back(path);
        }
        return 0;
      },
      &loaded);
  for (const std::string& path : loaded) {
    void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) continue;
    void* function = ::dlsym(library, name);
    ::dlclose(library);  // only the reference RTLD_NOLOAD took
    if (function != nullptr) return function;
  }
  return nullptr;
}

// The other client: the name it gave CUPTI, or the library that called.
std::string subscribing_client(const void* caller, const CUpti_SubscriberParams* params) {
  if (params != nullptr && params->subscriberName != nullptr && *params->subscriberName) return params->subscriberName;
  Dl_info info{};
  if (::dladdr(caller, &info) != 0 && info.dli_fname != nullptr && *info.dli_fname) {
    const std::string_view path = info.dli_fname;
    return "called from " + std::string(path.substr(path.rfind('/') + 1));
  }
  return "a tool";
}

}  // namespace

}  // namespace rankscope::agent

// CUPTI's subscription, as a tool other than rankscope makes it: the
// preloaded capture library is found before libcupti (see the top of this file).
extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  using namespace rankscope::agent;
  CuptiSource::cupti_source().leave_to(subscribing_client(__builtin_return_address(0), nullptr));
  const auto next = reinterpret_cast<decltype(&cuptiSubscribe)>(program_cupti_function("cuptiSubscribe"));
  return next ? next(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
}

extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                  CUpti_SubscriberParams* params) {
  using namespace rankscope::agent;
  CuptiSource::cupti_source().leave_to(subscribing_client(__builtin_return_address(0), params));
  const auto next = reinterpret_cast<decltype(&cuptiSubscribe_v2)>(program_cupti_function("cuptiSubscribe_v2"));
  return next ? next(subscriber, callback, userdata, params) : CUPTI_ERROR_NOT_INITIALIZED;
}

// CUDA's injection entry (CUDA_INJECTION64_PATH), called in cuInit, once per
// process. Nonzero tells CUDA the injection succeeded: also where this
// process does not capture, whose CUDA must run as if nothing were injected.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  rankscope::agent::CuptiSource::cupti_source().on_injection();
  return 1;
}
