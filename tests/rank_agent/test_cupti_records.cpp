// The translation of CUPTI activity records into events, on records built
// from CUDA 13's cupti_activity.h as CUPTI writes them: no GPU and no
// libcupti. The agent's names and tracks come from a fake agent defined here
// (the functions of rankscope/agent.h that the translation calls), so every
// field of every event is checked against what the agent handed out.
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cupti_records.h"
#include "rankscope/rank_agent/agent.h"

namespace {

using rankscope::Event;
using rankscope::EventKind;
using rankscope::TrackType;
using rankscope::agent::CuptiRecordTranslator;
using Result = CuptiRecordTranslator::Result;

// Ids start away from 0, so that an id left at zero shows.
constexpr uint32_t kFirstStringId = 10;
constexpr uint32_t kFirstTrackId = 3;

struct FakeTrack {
  TrackType type;
  uint64_t os_id;
  int16_t device;
  std::string name;
};

struct FakeAgent {
  std::vector<std::string> strings;
  std::map<std::string, uint32_t> string_ids;
  std::vector<FakeTrack> tracks;
  std::map<std::tuple<TrackType, uint64_t, int16_t>, uint32_t> track_ids;
  std::vector<std::string> gpu_uuids;
  int intern_calls = 0;
  int track_calls = 0;

  const std::string& name(uint32_t id) const { return strings.at(id - kFirstStringId); }
  const FakeTrack& track(uint32_t id) const { return tracks.at(id - kFirstTrackId); }
};
FakeAgent g_agent;

}  // namespace

uint32_t rankscope_agent_intern(const char* text, uint64_t length) {
  ++g_agent.intern_calls;
  const std::string key(text, length);
  const auto [it, added] = g_agent.string_ids.try_emplace(key, kFirstStringId + g_agent.strings.size());
  if (added) g_agent.strings.push_back(key);
  return it->second;
}

uint32_t rankscope_agent_track(TrackType type, uint64_t os_id, int16_t device, const char* name) {
  ++g_agent.track_calls;
  const auto [it, added] = g_agent.track_ids.try_emplace({type, os_id, device}, kFirstTrackId + g_agent.tracks.size());
  if (added) g_agent.tracks.push_back({type, os_id, device, name});
  return it->second;
}

void rankscope_agent_add_gpu_uuid(const char* uuid) { g_agent.gpu_uuids.emplace_back(uuid); }

namespace {

// CUPTI's records all begin with their kind: CUPTI's buffers are read so.
template <typename Record>
const CUpti_Activity& as_activity(const Record& record) {
  return reinterpret_cast<const CUpti_Activity&>(record);
}

class CuptiRecords : public ::testing::Test {
 protected:
  void SetUp() override { g_agent = FakeAgent{}; }

  template <typename Record>
  Result translate(const Record& record, Event& event) {
    return translator().translate(as_activity(record), event);
  }
  template <typename Record>
  Event event_of(const Record& record) {
    Event event{};
    EXPECT_EQ(translate(record, event), Result::kEvent);
    return event;
  }
  template <typename Record>
  void learn(const Record& record) {
    ASSERT_TRUE(CuptiRecordTranslator::is_reference(as_activity(record)));
    translator().learn(as_activity(record));
  }

  // Constructed after SetUp, so that its fixed names go to this test's fake agent.
  CuptiRecordTranslator& translator() {
    if (!translator_) translator_ = std::make_unique<CuptiRecordTranslator>();
    return *translator_;
  }

  uint32_t string_id(const std::string& text) const { return g_agent.string_ids.at(text); }
  uint32_t track_id(TrackType type, uint64_t os_id, int16_t device) const {
    return g_agent.track_ids.at({type, os_id, device});
  }

 private:
  std::unique_ptr<CuptiRecordTranslator> translator_;
};

// Every field of the event, one by one, so that a failure names the field.
void expect_event(const Event& e, EventKind kind, int64_t begin, int64_t end, uint64_t correlation_id, uint64_t bytes,
                  uint32_t name_id, uint32_t track, uint8_t flags) {
  EXPECT_EQ(e.begin_ns, begin);
  EXPECT_EQ(e.end_ns, end);
  EXPECT_EQ(e.correlation_id, correlation_id);
  EXPECT_EQ(e.comm_hash, 0u);
  EXPECT_EQ(e.seq, 0u);
  EXPECT_EQ(e.bytes, bytes);
  EXPECT_EQ(e.name_id, name_id);
  EXPECT_EQ(e.track, track);
  EXPECT_EQ(e.kind, kind);
  EXPECT_EQ(e.op, rankscope::CommOp::kNone);
  EXPECT_EQ(e.peer, rankscope::kNoPeer);
  EXPECT_EQ(e.datatype, rankscope::DataType::kNone);
  EXPECT_EQ(e.algorithm, rankscope::Algorithm::kNone);
  EXPECT_EQ(e.protocol, rankscope::Protocol::kNone);
  EXPECT_EQ(e.flags, flags);
}

// ------------------------------------------------------ record builders ---

CUpti_ActivityKernel10 kernel(uint32_t correlation, uint64_t start, uint64_t end, uint32_t device, uint32_t stream,
                              const char* name) {
  CUpti_ActivityKernel10 r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  r.start = start;
  r.end = end;
  r.completed = end;
  r.deviceId = device;
  r.contextId = 1;
  r.streamId = stream;
  r.gridX = 128;
  r.gridY = r.gridZ = 1;
  r.blockX = 256;
  r.blockY = r.blockZ = 1;
  r.correlationId = correlation;
  r.name = name;
  return r;
}

CUpti_ActivityMemcpy6 memcpy_record(CUpti_ActivityMemcpyKind copy_kind, uint32_t correlation,
                                    uint32_t runtime_correlation, uint64_t bytes, uint64_t start, uint64_t end) {
  CUpti_ActivityMemcpy6 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.copyKind = static_cast<uint8_t>(copy_kind);
  r.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.bytes = bytes;
  r.start = start;
  r.end = end;
  r.deviceId = 0;
  r.contextId = 1;
  r.streamId = 13;
  r.correlationId = correlation;
  r.runtimeCorrelationId = runtime_correlation;
  r.copyCount = 1;
  return r;
}

CUpti_ActivityMemset4 memset_record(uint32_t correlation, uint64_t bytes, uint64_t start, uint64_t end) {
  CUpti_ActivityMemset4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  r.value = 0;
  r.bytes = bytes;
  r.start = start;
  r.end = end;
  r.deviceId = 3;
  r.contextId = 4;
  r.streamId = 21;
  r.correlationId = correlation;
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  return r;
}

CUpti_ActivitySynchronization2 sync_record(CUpti_ActivitySynchronizationType type, uint32_t context, uint32_t stream,
                                           uint32_t correlation, uint64_t start, uint64_t end) {
  CUpti_ActivitySynchronization2 r{};
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.type = type;
  r.start = start;
  r.end = end;
  r.correlationId = correlation;
  r.contextId = context;
  r.streamId = stream;
  r.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  return r;
}

CUpti_ActivityAPI api_record(CUpti_ActivityKind domain, CUpti_CallbackId cbid, uint32_t tid, uint32_t correlation,
                             uint64_t start, uint64_t end) {
  CUpti_ActivityAPI r{};
  r.kind = domain;
  r.cbid = cbid;
  r.start = start;
  r.end = end;
  r.processId = static_cast<uint32_t>(::getpid());
  r.threadId = tid;
  r.correlationId = correlation;
  return r;
}

CUpti_ActivityExternalCorrelation external_record(CUpti_ExternalCorrelationKind kind, uint32_t correlation,
                                                  uint64_t external_id) {
  CUpti_ActivityExternalCorrelation r{};
  r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  r.externalKind = kind;
  r.externalId = external_id;
  r.correlationId = correlation;
  return r;
}

CUpti_ActivityContext3 context_record(uint32_t context, uint32_t device) {
  CUpti_ActivityContext3 r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  r.contextId = context;
  r.deviceId = device;
  r.nullStreamId = 7;
  return r;
}

uint32_t this_thread_id() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

// ------------------------------------------------------------- kernels ---

TEST_F(CuptiRecords, KernelBecomesAGpuKernelEventOnItsStreamTrackWithItsDemangledName) {
  const char* mangled = "_Z9vectorAddPKfS0_Pfi";
  const Event e = event_of(kernel(42, 1'000'000, 1'002'500, 1, 7, mangled));
  const uint32_t name = string_id("vectorAdd(float const*, float const*, float*, int)");
  const uint32_t track = track_id(TrackType::kCudaStream, 7, 1);
  expect_event(e, EventKind::kGpuKernel, 1'000'000, 1'002'500, 42, 0, name, track, 0);
  EXPECT_EQ(g_agent.track(track).name, "GPU 1 stream 7");
}

TEST_F(CuptiRecords, KernelNamesAndStreamTracksAreLookedUpOncePerKernelAndStream) {
  const char* name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";  // not mangled: kept as it is
  const Event first = event_of(kernel(1, 10, 20, 0, 3, name));
  const int interns = g_agent.intern_calls, tracks = g_agent.track_calls;
  for (uint32_t i = 2; i < 100; ++i) {
    const Event again = event_of(kernel(i, 10 * i, 10 * i + 5, 0, 3, name));
    expect_event(again, EventKind::kGpuKernel, 10 * i, 10 * i + 5, i, 0, first.name_id, first.track, 0);
  }
  EXPECT_EQ(g_agent.intern_calls, interns);
  EXPECT_EQ(g_agent.track_calls, tracks);
  EXPECT_EQ(g_agent.name(first.name_id), name);
  // Another stream of the same GPU, and the same stream number on another GPU, are other tracks.
  const Event other_stream = event_of(kernel(200, 1, 2, 0, 4, name));
  const Event other_gpu = event_of(kernel(201, 1, 2, 1, 3, name));
  EXPECT_NE(other_stream.track, first.track);
  EXPECT_NE(other_gpu.track, first.track);
  EXPECT_NE(other_gpu.track, other_stream.track);
  EXPECT_EQ(g_agent.track(other_gpu.track).name, "GPU 1 stream 3");
}

TEST_F(CuptiRecords, KernelWithoutANameIsStillRecorded) {
  const Event e = event_of(kernel(5, 100, 200, 0, 1, nullptr));
  EXPECT_EQ(g_agent.name(e.name_id), "(unnamed kernel)");
}

// ------------------------------------------------- external correlation ---

// A buffer as CUPTI hands it over: records back to back, each 8-byte
// aligned. Its walk stands in for cuptiActivityGetNextRecord (libcupti's).
class Buffer {
 public:
  template <typename Record>
  Buffer& add(const Record& record) {
    static_assert(sizeof(Record) % 8 == 0, "CUPTI records are 8-byte aligned");
    const size_t at = words_.size();
    words_.resize(at + sizeof(Record) / 8);
    std::memcpy(words_.data() + at, &record, sizeof(Record));
    offsets_.push_back(at);
    return *this;
  }

  struct Translated {
    std::vector<Event> events;
    uint64_t without_timestamps = 0;
  };
  // As the CUPTI source translates a buffer it is handed.
  Translated translate(CuptiRecordTranslator& translator) const {
    Translated out;
    out.without_timestamps = translator.translate_buffer(
        [this](auto&& visit) {
          for (const size_t at : offsets_) visit(record(at));
        },
        [&](const Event& event) { out.events.push_back(event); });
    return out;
  }

 private:
  const CUpti_Activity& record(size_t at) const { return *reinterpret_cast<const CUpti_Activity*>(words_.data() + at); }

  std::vector<uint64_t> words_;  // 8-byte aligned, as CUPTI's buffers
  std::vector<size_t> offsets_;
};

TEST_F(CuptiRecords, KernelOfALaunchInsideAPushedCustom2IdCarriesTheExternalIdWhereverTheRecordsLie) {
  const uint32_t tid = this_thread_id();
  const uint64_t collective = 0x1234'5678'9abc'def0;
  // Launch 77: NCCL's cuLaunchKernelEx with an id pushed; its correlation
  // record comes after the kernel's in this buffer. Launch 78: an external id
  // of another kind (Kineto's CUSTOM0). Launch 79: none at all.
  Buffer buffer;
  buffer.add(kernel(77, 5'000, 9'000, 0, 2, "ncclDevKernel_AllGather_RING_LL"))
      .add(api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, tid, 77, 4'000, 4'100))
      .add(external_record(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 77, collective))
      .add(external_record(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 78, 555))
      .add(kernel(78, 9'500, 9'900, 0, 2, "_Z6kernelv"))
      .add(kernel(79, 10'000, 10'400, 0, 2, "_Z6kernelv"));
  const Buffer::Translated translated = buffer.translate(translator());
  EXPECT_EQ(translated.without_timestamps, 0u);
  const std::vector<Event>& events = translated.events;
  ASSERT_EQ(events.size(), 4u);
  const uint32_t stream = track_id(TrackType::kCudaStream, 2, 0);
  expect_event(events[0], EventKind::kGpuKernel, 5'000, 9'000, collective, 0,
               string_id("ncclDevKernel_AllGather_RING_LL"), stream, rankscope::kFlagExternalCorrelation);
  // The launch call keeps CUDA's correlation id: the kernel's link to it is
  // the external id now, as the NCCL source records the collective with it.
  expect_event(events[1], EventKind::kCudaApi, 4'000, 4'100, 77, 0, string_id("cuLaunchKernelEx"),
               track_id(TrackType::kThread, tid, -1), 0);
  expect_event(events[2], EventKind::kGpuKernel, 9'500, 9'900, 78, 0, string_id("kernel()"), stream, 0);
  expect_event(events[3], EventKind::kGpuKernel, 10'000, 10'400, 79, 0, string_id("kernel()"), stream, 0);
}

TEST_F(CuptiRecords, ExternalIdsAreKeptFor65536LaunchesAndNoLonger) {
  learn(external_record(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 1, 1001));
  EXPECT_EQ(event_of(kernel(1, 1, 2, 0, 0, "k")).correlation_id, 1001u);
  // Correlation ids 1 and 65537 share a slot: the later launch's id wins, and
  // a kernel of launch 1 read after it is not given launch 65537's id.
  learn(external_record(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 65537, 2002));
  const Event late = event_of(kernel(1, 1, 2, 0, 0, "k"));
  EXPECT_EQ(late.correlation_id, 1u);
  EXPECT_EQ(late.flags, 0);
  const Event newer = event_of(kernel(65537, 3, 4, 0, 0, "k"));
  EXPECT_EQ(newer.correlation_id, 2002u);
  EXPECT_EQ(newer.flags, rankscope::kFlagExternalCorrelation);
}

// -------------------------------------------------------------- copies ---

TEST_F(CuptiRecords, MemcpyIsNamedByItsKindAndCarriesItsBytesAndTheRuntimeCallsCorrelation) {
  const Event htod = event_of(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 56, 55, 1 << 20, 2'000, 3'000));
  const uint32_t track = track_id(TrackType::kCudaStream, 13, 0);
  expect_event(htod, EventKind::kGpuMemcpy, 2'000, 3'000, 55, 1 << 20, string_id("memcpy HtoD"), track, 0);
  EXPECT_EQ(g_agent.track(track).name, "GPU 0 stream 13");
  // A copy from the driver API has no runtime correlation id.
  const Event dtoh = event_of(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 60, 0, 4096, 3'500, 3'600));
  expect_event(dtoh, EventKind::kGpuMemcpy, 3'500, 3'600, 60, 4096, string_id("memcpy DtoH"), track, 0);

  const std::pair<CUpti_ActivityMemcpyKind, const char*> names[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, "memcpy"},   {CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, "memcpy HtoA"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, "memcpy AtoH"}, {CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, "memcpy AtoA"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, "memcpy AtoD"}, {CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, "memcpy DtoA"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, "memcpy DtoD"}, {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, "memcpy HtoH"},
      {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, "memcpy PtoP"}, {static_cast<CUpti_ActivityMemcpyKind>(77), "memcpy"},
  };
  for (const auto& [kind, name] : names) {
    EXPECT_EQ(g_agent.name(event_of(memcpy_record(kind, 1, 0, 8, 1, 2)).name_id), name) << kind;
  }
}

TEST_F(CuptiRecords, ACopyFromOrToPageableMemorySaysSo) {
  CUpti_ActivityMemcpy6 from_pageable = memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 70, 69, 1 << 20, 10, 20);
  from_pageable.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  EXPECT_EQ(g_agent.name(event_of(from_pageable).name_id), "memcpy HtoD (pageable)");
  CUpti_ActivityMemcpy6 to_pageable = memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 72, 71, 4, 30, 40);
  to_pageable.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  to_pageable.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  EXPECT_EQ(g_agent.name(event_of(to_pageable).name_id), "memcpy DtoH (pageable)");
}

CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType operation, CUpti_ActivityMemoryKind kind,
                                    uint64_t bytes, uint64_t timestamp, uint32_t device = 0) {
  CUpti_ActivityMemory4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = operation;
  r.memoryKind = kind;
  r.bytes = bytes;
  r.timestamp = timestamp;
  r.deviceId = device;
  r.correlationId = 5;
  return r;
}

TEST_F(CuptiRecords, DeviceAllocationsMoveTheirGpusCounterOfMemoryAllocated) {
  constexpr auto kAllocate = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  constexpr auto kRelease = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  constexpr auto kDevice = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  const uint64_t totals[] = {1 << 20, 3 << 20, 2 << 20};
  const CUpti_ActivityMemory4 records[] = {memory_record(kAllocate, kDevice, 1 << 20, 100, 3),
                                           memory_record(kAllocate, kDevice, 2 << 20, 200, 3),
                                           memory_record(kRelease, kDevice, 1 << 20, 300, 3)};
  for (size_t i = 0; i < 3; ++i) {
    const Event e = event_of(records[i]);
    const uint32_t device_track = track_id(TrackType::kCounter, 3, 3);  // made by the first record
    expect_event(e, EventKind::kCounter, 100 * (i + 1), 100 * (i + 1), 5, totals[i],
                 string_id("memory allocated (device 3)"), device_track, 0);
  }
  const uint32_t device_track = track_id(TrackType::kCounter, 3, 3);
  EXPECT_EQ(g_agent.track(device_track).name, "memory allocated (device 3)");
  // Pinned host memory is not the device's; a release of memory allocated before capture keeps the counter at 0.
  Event e;
  EXPECT_EQ(translate(memory_record(kAllocate, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 4096, 400), e), Result::kNoEvent);
  EXPECT_EQ(event_of(memory_record(kRelease, kDevice, 8 << 20, 500, 4)).bytes, 0u);
}

TEST_F(CuptiRecords, PeerToPeerCopyIsAMemcpyEvent) {
  CUpti_ActivityMemcpyPtoP4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  r.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  r.bytes = 64 << 20;
  r.start = 7'000;
  r.end = 17'000;
  r.deviceId = 1;
  r.contextId = 2;
  r.streamId = 30;
  r.srcDeviceId = 1;
  r.dstDeviceId = 0;
  r.correlationId = 90;
  const Event e = event_of(r);
  expect_event(e, EventKind::kGpuMemcpy, 7'000, 17'000, 90, 64 << 20, string_id("memcpy PtoP"),
               track_id(TrackType::kCudaStream, 30, 1), 0);
}

TEST_F(CuptiRecords, MemsetIsAGpuMemsetEventWithItsBytes) {
  const Event e = event_of(memset_record(91, 3 << 20, 8'000, 8'200));
  const uint32_t track = track_id(TrackType::kCudaStream, 21, 3);
  expect_event(e, EventKind::kGpuMemset, 8'000, 8'200, 91, 3 << 20, string_id("memset"), track, 0);
  EXPECT_EQ(g_agent.track(track).name, "GPU 3 stream 21");
}

// ----------------------------------------------------- synchronisations ---

TEST_F(CuptiRecords, SynchronisationGoesOnItsStreamOrOnItsGpusSynchronizeTrack) {
  learn(context_record(5, 2));
  const Event stream_sync = event_of(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 5, 9, 300,
                                                 20'000, 25'000));
  expect_event(stream_sync, EventKind::kGpuSync, 20'000, 25'000, 300, 0, string_id("stream synchronize"),
               track_id(TrackType::kCudaStream, 9, 2), 0);
  const Event wait = event_of(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 5, 9, 301, 26'000,
                                          26'010));
  expect_event(wait, EventKind::kGpuSync, 26'000, 26'010, 301, 0, string_id("stream wait event"), stream_sync.track, 0);

  const uint32_t no_stream = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  const Event context_sync = event_of(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 5,
                                                  no_stream, 302, 30'000, 31'000));
  const uint32_t gpu_track = track_id(TrackType::kCudaStream, no_stream, 2);
  expect_event(context_sync, EventKind::kGpuSync, 30'000, 31'000, 302, 0, string_id("context synchronize"), gpu_track,
               0);
  EXPECT_EQ(g_agent.track(gpu_track).name, "GPU 2 synchronize");
  const Event event_sync = event_of(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 5, no_stream,
                                                303, 32'000, 32'500));
  expect_event(event_sync, EventKind::kGpuSync, 32'000, 32'500, 303, 0, string_id("event synchronize"), gpu_track, 0);
  const Event unknown_type = event_of(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN, 5, 9, 304, 1, 2));
  EXPECT_EQ(g_agent.name(unknown_type.name_id), "synchronize");
}

TEST_F(CuptiRecords, SynchronisationOfAContextNotYetSeenGoesOnAnUnknownGpu) {
  const Event e = event_of(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 99, 4, 400, 1, 2));
  const uint32_t track = track_id(TrackType::kCudaStream, 4, -1);
  EXPECT_EQ(e.track, track);
  EXPECT_EQ(g_agent.track(track).name, "GPU ? stream 4");
}

// ------------------------------------------------------------ API calls ---

TEST_F(CuptiRecords, ApiCallGoesOnTheCallingThreadsTrackNamedAsTheRecorderNamesIt) {
  pthread_setname_np(pthread_self(), "trainer");
  const uint32_t tid = this_thread_id();
  const Event launch = event_of(
      api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, tid, 501, 100, 130));
  const uint32_t track = track_id(TrackType::kThread, tid, -1);
  expect_event(launch, EventKind::kCudaApi, 100, 130, 501, 0, string_id("cudaLaunchKernel"), track, 0);
  EXPECT_EQ(g_agent.track(track).name, "trainer " + std::to_string(tid));
  const Event sync = event_of(api_record(CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, tid, 502, 140, 900));
  expect_event(sync, EventKind::kCudaApi, 140, 900, 502, 0, string_id("cudaStreamSynchronize"), track, 0);
}

TEST_F(CuptiRecords, ApiCallOfAThreadThatHasExitedGetsTheRecordersDefaultName) {
  uint32_t gone = 0;
  std::thread([&] { gone = this_thread_id(); }).join();
  const Event e =
      event_of(api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, gone, 7, 1, 2));
  EXPECT_EQ(g_agent.track(e.track).name, "thread " + std::to_string(gone));
  EXPECT_EQ(g_agent.name(e.name_id), "cuLaunchKernel");
}

TEST_F(CuptiRecords, EveryRecordedCallIsNamedAndCallsBeyondThemAreNamedByNumber) {
  std::set<std::pair<int, uint32_t>> seen;
  for (const auto& call : rankscope::agent::recorded_cuda_api_calls()) {
    ASSERT_TRUE(call.domain == CUPTI_ACTIVITY_KIND_RUNTIME || call.domain == CUPTI_ACTIVITY_KIND_DRIVER);
    EXPECT_TRUE(seen.emplace(call.domain, call.cbid).second) << call.name << " listed twice";
    const Event e = event_of(api_record(call.domain, call.cbid, 1, 1, 1, 2));
    EXPECT_EQ(g_agent.name(e.name_id), call.name);
    EXPECT_EQ(std::string(call.name).rfind(call.domain == CUPTI_ACTIVITY_KIND_RUNTIME ? "cuda" : "cu", 0), 0u);
  }
  // Recorded when another tool asks CUPTI for more calls than rankscope does.
  const Event malloc_call =
      event_of(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, 1, 1, 1, 2));
  EXPECT_EQ(g_agent.name(malloc_call.name_id), "CUDA runtime call 373");
  const Event alloc_call =
      event_of(api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1, 1, 1, 2));
  EXPECT_EQ(g_agent.name(alloc_call.name_id), "CUDA driver call 243");
}

// ------------------------------------------------ what makes no event ---

TEST_F(CuptiRecords, RecordsWithoutTimestampsAreDropped) {
  Event untouched{};
  untouched.begin_ns = -7;
  Event e = untouched;
  EXPECT_EQ(translate(kernel(1, 0, 0, 0, 1, "_Z1kv"), e), Result::kNoTimestamps);
  EXPECT_EQ(translate(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 2, 2, 8, 0, 0), e), Result::kNoTimestamps);
  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  EXPECT_EQ(translate(peer, e), Result::kNoTimestamps);
  EXPECT_EQ(translate(memset_record(3, 8, 0, 0), e), Result::kNoTimestamps);
  EXPECT_EQ(translate(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 1, 1, 4, 0, 0), e),
            Result::kNoTimestamps);
  EXPECT_EQ(translate(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1, 5, 0,
                                 0),
                      e),
            Result::kNoTimestamps);
  EXPECT_EQ(e.begin_ns, -7) << "a dropped record leaves the event alone";
  // Only both at zero means "no timestamps".
  EXPECT_EQ(translate(kernel(6, 0, 10, 0, 1, "_Z1kv"), e), Result::kEvent);
}

TEST_F(CuptiRecords, ReferenceRecordsAndKindsRankscopeDoesNotRecordMakeNoEvent) {
  Event e{};
  EXPECT_EQ(translate(external_record(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 1, 2), e), Result::kNoEvent);
  EXPECT_EQ(translate(context_record(1, 0), e), Result::kNoEvent);
  CUpti_ActivityMarker2 marker{};
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  EXPECT_EQ(translate(marker, e), Result::kNoEvent);
  EXPECT_FALSE(CuptiRecordTranslator::is_reference(as_activity(marker)));
}

// ------------------------------------------------------------- devices ---

TEST_F(CuptiRecords, DeviceRecordsGiveTheGpuUuidsForTheRanksMetadata) {
  CUpti_ActivityDevice5 gpu{};
  gpu.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  gpu.id = 0;
  const unsigned char uuid[16] = {0x5b, 0x9e, 0x8c, 0x61, 0x0d, 0x2f, 0x4a, 0x7b,
                                  0x91, 0xc3, 0x00, 0x1e, 0xff, 0x42, 0x10, 0x0a};
  std::memcpy(gpu.uuid.bytes, uuid, 16);
  learn(gpu);
  CUpti_ActivityDevice5 mig = gpu;
  mig.isMigEnabled = 1;
  std::memset(mig.migUuid.bytes, 0xab, 16);
  learn(mig);
  EXPECT_EQ(g_agent.gpu_uuids,
            (std::vector<std::string>{"GPU-5b9e8c61-0d2f-4a7b-91c3-001eff42100a",
                                      "MIG-abababab-abab-abab-abab-abababababab"}));
  Event e{};
  EXPECT_EQ(translate(gpu, e), Result::kNoEvent);
}

// ------------------------------------------------- a buffer, all kinds ---

TEST_F(CuptiRecords, ABufferOfEveryKindTranslatesRecordByRecord) {
  const uint32_t tid = this_thread_id();
  Buffer buffer;
  buffer.add(context_record(1, 0))
      .add(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, tid, 10, 100, 110))
      .add(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 11, 10, 4 << 20, 120, 400))
      .add(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, tid, 12, 410, 415))
      .add(kernel(12, 420, 900, 0, 13, "_Z4stepv"))
      .add(kernel(13, 0, 0, 0, 13, "_Z4stepv"))  // a forced flush before it ran
      .add(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, tid, 14, 910, 915))
      .add(memset_record(14, 256, 920, 930))
      .add(sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 1, 13, 15, 940, 990));
  const Buffer::Translated translated = buffer.translate(translator());
  EXPECT_EQ(translated.without_timestamps, 1u);
  const std::vector<Event>& events = translated.events;
  ASSERT_EQ(events.size(), 7u);
  const uint32_t thread = track_id(TrackType::kThread, tid, -1);
  const uint32_t stream = track_id(TrackType::kCudaStream, 13, 0);
  const uint32_t memset_stream = track_id(TrackType::kCudaStream, 21, 3);
  expect_event(events[0], EventKind::kCudaApi, 100, 110, 10, 0, string_id("cudaMemcpyAsync"), thread, 0);
  expect_event(events[1], EventKind::kGpuMemcpy, 120, 400, 10, 4 << 20, string_id("memcpy HtoD"), stream, 0);
  expect_event(events[2], EventKind::kCudaApi, 410, 415, 12, 0, string_id("cudaLaunchKernel"), thread, 0);
  expect_event(events[3], EventKind::kGpuKernel, 420, 900, 12, 0, string_id("step()"), stream, 0);
  expect_event(events[4], EventKind::kCudaApi, 910, 915, 14, 0, string_id("cudaMemsetAsync"), thread, 0);
  expect_event(events[5], EventKind::kGpuMemset, 920, 930, 14, 256, string_id("memset"), memset_stream, 0);
  expect_event(events[6], EventKind::kGpuSync, 940, 990, 15, 0, string_id("stream synchronize"), stream, 0);
}

// -------------------------------------------------- the caches, shared ---

TEST(ConcurrentCache, ThreadsFillingAndReadingAtOnceSeeOnlyTheValuesStored) {
  rankscope::agent::ConcurrentCache cache(1 << 10);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (uint64_t key = 1; key <= 400; ++key) {
        const uint32_t seen = cache.find(key);
        if (seen != rankscope::agent::ConcurrentCache::kMissing && seen != key * 3) ++wrong;
        cache.insert(key, static_cast<uint32_t>(key * 3));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  for (uint64_t key = 1; key <= 400; ++key) EXPECT_EQ(cache.find(key), key * 3);
}

TEST(ConcurrentCache, AFullCacheDropsNewValuesAndKeepsTheOldOnes) {
  rankscope::agent::ConcurrentCache cache(8);
  for (uint64_t key = 1; key <= 20; ++key) cache.insert(key, static_cast<uint32_t>(key));
  int kept = 0;
  for (uint64_t key = 1; key <= 20; ++key) {
    const uint32_t value = cache.find(key);
    if (value != rankscope::agent::ConcurrentCache::kMissing) {
      EXPECT_EQ(value, key);
      ++kept;
    }
  }
  EXPECT_EQ(kept, 8);
}

}  // namespace
