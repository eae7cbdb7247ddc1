// CUPTI activity records → rankscope events, one record at a time and without
// libcupti. CUPTI hands over buffers and walks them
// (cuptiActivityGetNextRecord); this turns each record it yields into an
// Event. It is kept apart from the CUPTI source so that the tests and the
// benchmark build real CUDA 13 records from cupti_activity.h and check what
// comes out, on machines with no GPU.
//
// Names and tracks come from the agent (rankscope_agent_intern,
// rankscope_agent_track) and are cached here: CUPTI's completion callback
// translates every record of a buffer, so the common case is a few cache
// probes and a 64-byte store, with no lock and no allocation.
#pragma once

#include <cupti_activity.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "rankscope/model/event.h"

namespace rankscope::agent {

// A CUDA API call whose activity records the CUPTI source asks for (one cbid
// at a time), with the name its kCudaApi events get.
struct CudaApiCall {
  CUpti_ActivityKind domain;  // CUPTI_ACTIVITY_KIND_RUNTIME or CUPTI_ACTIVITY_KIND_DRIVER
  CUpti_CallbackId cbid;
  const char* name;
};
// Launches, graph launches, copies, memsets and synchronisations (docs/gpu-capture.md, "CUDA capture").
std::span<const CudaApiCall> recorded_cuda_api_calls();

// A fixed-capacity map from nonzero 64-bit keys to 32-bit values, read and
// filled by any number of threads without locks. A value still being stored
// reads as missing, and the reader then works it out itself: every value
// cached here (a string or track id) comes out the same however often it is
// worked out. When the map is full, insert() drops the value.
class ConcurrentCache {
 public:
  static constexpr uint32_t kMissing = UINT32_MAX;

  explicit ConcurrentCache(uint32_t slots);  // a power of two
  uint32_t find(uint64_t key) const;
  void insert(uint64_t key, uint32_t value);

 private:
  struct Slot {
    std::atomic<uint64_t> key{0};
    std::atomic<uint32_t> value{kMissing};
  };
  const uint32_t mask_;
  std::unique_ptr<Slot[]> slots_;
};

// CUDA correlation id → the external id a capture source pushed around the
// launch (CUPTI's CUSTOM2 kind, cuda_correlation.h). Direct-mapped on the
// correlation id, which CUPTI counts up: an entry is overwritten only 65,536
// API calls later, long after its kernel's record has been read.
class ExternalCorrelations {
 public:
  ExternalCorrelations();
  void set(uint32_t correlation_id, uint64_t external_id);
  bool find(uint32_t correlation_id, uint64_t& external_id) const;

 private:
  static constexpr uint32_t kSlots = 1 << 16;
  struct Slot {
    std::atomic<uint64_t> key{0};  // correlation id with bit 32 set; 0 while being written
    std::atomic<uint64_t> external_id{0};
  };
  std::unique_ptr<Slot[]> slots_;
};

class CuptiRecordTranslator {
 public:
  enum class Result : uint8_t {
    kEvent,         // `event` holds the record's event
    kNoTimestamps,  // start = end = 0: CUPTI could not time it (a forced flush before it ran); dropped
    kNoEvent,       // a reference record (see learn), or a kind rankscope does not record
  };

  // Interns the fixed names (API calls, copy kinds, ...): construct it once the agent runs.
  CuptiRecordTranslator();

  // Records that others refer to: external correlations (a kernel's NCCL
  // collective), contexts (the GPU of a synchronisation), devices (GPU UUIDs,
  // for the rank's metadata). CUPTI may write one after a record that refers
  // to it, so a buffer's reference records all go to learn() before any of
  // its records goes to translate().
  static bool is_reference(const CUpti_Activity& record) {
    return record.kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION || record.kind == CUPTI_ACTIVITY_KIND_CONTEXT ||
           record.kind == CUPTI_ACTIVITY_KIND_DEVICE;
  }
  void learn(const CUpti_Activity& record);

  Result translate(const CUpti_Activity& record, Event& event);

  // All the records of one buffer: `for_each_record(visit)` calls
  // visit(record) for each, in order, as cuptiActivityGetNextRecord walks
  // the buffer; `emit(event)` takes each event. Two walks: the reference
  // records first (see learn), then the events. Returns how many records had
  // no timestamps.
  template <typename ForEachRecord, typename Emit>
  uint64_t translate_buffer(ForEachRecord&& for_each_record, Emit&& emit) {
    for_each_record([this](const CUpti_Activity& record) {
      if (is_reference(record)) learn(record);
    });
    uint64_t without_timestamps = 0;
    Event event;
    for_each_record([&](const CUpti_Activity& record) {
      switch (translate(record, event)) {
        case Result::kEvent: emit(event); break;
        case Result::kNoTimestamps: ++without_timestamps; break;
        case Result::kNoEvent: break;
      }
    });
    return without_timestamps;
  }

 private:
  Result kernel(const CUpti_ActivityKernel10& record, Event& event);
  Result memory_copy(const CUpti_ActivityMemcpy6& record, Event& event);
  Result peer_memory_copy(const CUpti_ActivityMemcpyPtoP4& record, Event& event);
  Result memory_set(const CUpti_ActivityMemset4& record, Event& event);
  Result synchronization(const CUpti_ActivitySynchronization2& record, Event& event);
  Result api_call(const CUpti_ActivityAPI& record, Event& event);
  Result device_memory(const CUpti_ActivityMemory4& record, Event& event);

  uint32_t kernel_name(const char* name);
  uint32_t api_name(CUpti_ActivityKind domain, CUpti_CallbackId cbid);
  uint16_t stream_track(int16_t device, uint32_t stream);
  uint16_t thread_track(uint32_t tid);
  int16_t device_of_context(uint32_t context) const;

  static constexpr uint32_t kMemcpyKinds = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP + 1;
  static constexpr uint32_t kSyncTypes = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE + 1;

  uint32_t memcpy_names_[kMemcpyKinds];  // "memcpy HtoD", ...; [0]: "memcpy" (unknown kind)
  uint32_t pageable_memcpy_names_[kMemcpyKinds];  // "memcpy HtoD (pageable)", ...: from or to pageable memory
  uint32_t memset_name_;
  uint32_t sync_names_[kSyncTypes];
  ConcurrentCache kernel_names_{1 << 14};  // by the address of CUPTI's copy of the name
  ConcurrentCache api_names_{1 << 10};     // by (domain, cbid)
  ConcurrentCache stream_tracks_{1 << 12}; // by (device, stream)
  ConcurrentCache thread_tracks_{1 << 12}; // by OS thread id
  ConcurrentCache context_devices_{1 << 8};
  ExternalCorrelations external_;
  // Device memory allocated through CUDA, per GPU ordinal: the counter
  // each allocation and release moves.
  static constexpr int kMemoryDevices = 64;
  std::atomic<int64_t> device_memory_[kMemoryDevices] = {};
  ConcurrentCache memory_tracks_{1 << 7};  // by GPU ordinal
  ConcurrentCache memory_names_{1 << 7};   // "memory allocated (device N)", by GPU ordinal
};

}  // namespace rankscope::agent
