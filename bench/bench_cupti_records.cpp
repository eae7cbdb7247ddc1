// How fast CUPTI activity records become events: the work the CUPTI source
// does on CUPTI's thread for every buffer (rank_agent/src/cupti_records.h),
// over a 4 MiB buffer of records as a training step writes them. Target:
// ≥ 20 M records/s. Figures in bench/results/gpu-capture.md.
//
// Two figures: the translation alone (the buffer walked through known
// offsets), and as the capture library runs it, walked by libcupti's
// cuptiActivityGetNextRecord (loaded with dlopen; it needs no GPU). Events go
// to an array where the capture library calls rankscope_agent_record
// (measured by bench_agent). Names and tracks come from a stand-in for the
// agent, reached only on cache misses.
#include <benchmark/benchmark.h>
#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cupti_records.h"
#include "rankscope/rank_agent/agent.h"

namespace {

std::map<std::string, uint32_t> g_strings;
std::map<std::tuple<rankscope::TrackType, uint64_t, int16_t>, uint32_t> g_tracks;

}  // namespace

uint32_t rankscope_agent_intern(const char* text, uint64_t length) {
  return g_strings.try_emplace(std::string(text, length), static_cast<uint32_t>(g_strings.size())).first->second;
}

uint32_t rankscope_agent_track(rankscope::TrackType type, uint64_t os_id, int16_t device, const char*) {
  return g_tracks.try_emplace({type, os_id, device}, static_cast<uint32_t>(g_tracks.size())).first->second;
}

void rankscope_agent_add_gpu_uuid(const char*) {}

namespace {

using rankscope::agent::CuptiRecordTranslator;

constexpr size_t kBufferBytes = size_t{4} << 20;  // the CUPTI source's buffer size

// Records back to back, 8-byte aligned, as CUPTI writes them.
class ActivityBuffer {
 public:
  template <typename Record>
  bool add(const Record& record) {
    if (words_.size() * 8 + sizeof(Record) > kBufferBytes) return false;
    offsets_.push_back(words_.size());
    words_.resize(words_.size() + sizeof(Record) / 8);
    std::memcpy(words_.data() + offsets_.back(), &record, sizeof(Record));
    return true;
  }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(words_.data()); }
  size_t valid_bytes() const { return words_.size() * 8; }
  size_t record_count() const { return offsets_.size(); }
  const CUpti_Activity* record(size_t index) const {
    return reinterpret_cast<const CUpti_Activity*>(words_.data() + offsets_[index]);
  }

 private:
  std::vector<uint64_t> words_;
  std::vector<size_t> offsets_;
};

// A training step's mix on one GPU: PyTorch's runtime launches from the main
// and the autograd thread over 4 streams and 64 kernels; every 8th launch a
// copy, every 16th a memset; every 20th a NCCL kernel launched through the
// driver with an external correlation id; a stream synchronisation now and then.
ActivityBuffer training_step_buffer(std::vector<std::string>& names) {
  for (int k = 0; k < 64; ++k) {
    names.push_back("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_"
                    "T1_" + std::to_string(k));
  }
  names.push_back("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const uint32_t threads[] = {41'001, 41'017};
  ActivityBuffer buffer;
  uint64_t now = 1'000'000'000;
  for (uint32_t launch = 1;; ++launch) {
    const uint32_t tid = threads[launch % 2];
    const uint32_t stream = 7 + launch % 4;
    const uint32_t correlation = launch * 2;
    CUpti_ActivityAPI call{};
    call.start = now;
    call.end = now + 4'000;
    call.threadId = tid;
    call.correlationId = correlation;
    CUpti_ActivityKernel10 kernel{};
    kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    kernel.start = now + 10'000;
    kernel.end = now + 60'000;
    kernel.streamId = stream;
    kernel.correlationId = correlation;
    bool room = true;
    if (launch % 20 == 0) {
      CUpti_ActivityExternalCorrelation external{};
      external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
      external.externalId = launch;
      external.correlationId = correlation;
      call.kind = CUPTI_ACTIVITY_KIND_DRIVER;
      call.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
      kernel.name = names.back().c_str();
      room = buffer.add(external) && buffer.add(kernel) && buffer.add(call);
    } else {
      call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
      call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
      kernel.name = names[launch % 64].c_str();
      room = buffer.add(kernel) && buffer.add(call);
    }
    if (room && launch % 8 == 0) {
      CUpti_ActivityAPI copy_call = call;
      copy_call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
      copy_call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
      copy_call.correlationId = correlation + 1;
      CUpti_ActivityMemcpy6 copy{};
      copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
      copy.bytes = 1 << 20;
      copy.start = now + 70'000;
      copy.end = now + 90'000;
      copy.streamId = stream;
      copy.correlationId = correlation + 1;
      copy.runtimeCorrelationId = correlation + 1;
      room = buffer.add(copy) && buffer.add(copy_call);
    }
    if (room && launch % 16 == 0) {
      CUpti_ActivityMemset4 fill{};
      fill.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      fill.bytes = 4096;
      fill.start = now + 95'000;
      fill.end = now + 96'000;
      fill.streamId = stream;
      fill.correlationId = correlation + 1;
      room = buffer.add(fill);
    }
    if (room && launch % 64 == 0) {
      CUpti_ActivitySynchronization2 sync{};
      sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
      sync.start = now;
      sync.end = now + 100'000;
      sync.streamId = stream;
      sync.correlationId = correlation + 1;
      room = buffer.add(sync);
    }
    if (!room) return buffer;
    now += 5'000;
  }
}

// What the CUPTI source does with a buffer CUPTI hands back, given a walk
// over it: the figure is records of the buffer per second.
template <typename ForEachRecord>
void translate_buffers(benchmark::State& state, const ActivityBuffer& buffer, ForEachRecord&& for_each_record) {
  CuptiRecordTranslator translator;
  std::vector<rankscope::Event> events(buffer.record_count());
  for (auto _ : state) {
    size_t count = 0;
    translator.translate_buffer(for_each_record, [&](const rankscope::Event& event) { events[count++] = event; });
    benchmark::DoNotOptimize(events.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * buffer.record_count()));
  state.counters["records_per_buffer"] = static_cast<double>(buffer.record_count());
}

// The translation alone: the buffer walked through known offsets.
void BM_TranslateTrainingStepBuffer(benchmark::State& state) {
  std::vector<std::string> names;
  const ActivityBuffer buffer = training_step_buffer(names);
  translate_buffers(state, buffer, [&buffer](auto&& visit) {
    for (size_t i = 0; i < buffer.record_count(); ++i) visit(*buffer.record(i));
  });
}
BENCHMARK(BM_TranslateTrainingStepBuffer)->Unit(benchmark::kMillisecond);

// As in the capture library: walked by libcupti's cuptiActivityGetNextRecord,
// which needs no GPU. Skipped where libcupti cannot be loaded.
void BM_TranslateTrainingStepBufferWalkedByCupti(benchmark::State& state) {
  void* cupti = ::dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  const auto next_record = cupti ? reinterpret_cast<decltype(&cuptiActivityGetNextRecord)>(
                                       ::dlsym(cupti, "cuptiActivityGetNextRecord"))
                                 : nullptr;
  if (next_record == nullptr) {
    state.SkipWithError("libcupti.so.13 cannot be loaded");
    return;
  }
  std::vector<std::string> names;
  ActivityBuffer buffer = training_step_buffer(names);
  translate_buffers(state, buffer, [&buffer, next_record](auto&& visit) {
    CUpti_Activity* record = nullptr;
    while (next_record(buffer.bytes(), buffer.valid_bytes(), &record) == CUPTI_SUCCESS) visit(*record);
  });
}
BENCHMARK(BM_TranslateTrainingStepBufferWalkedByCupti)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
