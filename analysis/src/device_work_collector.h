// The profile's second pass hands each rank's events, in begin order, to a
// DeviceWorkCollector, which keeps what device_work.h describes: GPU idle
// gaps and their causes, launches linked to their work, synchronisations,
// copies, allocations, kernels by name and device memory.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "rankscope/analysis/profile.h"

namespace rankscope::analysis {

// What a name tells about an event, worked out once per name of the job.
struct NameTraits {
  enum class Api : uint8_t { kNone, kLaunch, kCopy, kSet, kSync, kAllocation };
  Api api = Api::kNone;             // a CUDA call by its name
  bool every_stream = false;        // a sync of the whole device (cudaDeviceSynchronize, cuCtxSynchronize)
  bool nccl = false;                // NCCL's kernel
  bool poll = false;                // an MPI call that only looks (MPI_Test*, MPI_Iprobe): it waits for nothing
  bool wait = false;                // an MPI call that waits for requests (MPI_Wait*)
  bool step = false;                // a ProfilerStep#N range
  bool data_loading = false;        // a data-loading range (model/host_phases.h)
  bool device_memory = false;       // a counter track of device memory allocated
  bool pageable = false;            // a copy from or to pageable host memory
  CopyDirection direction = CopyDirection::kOther;
};
std::vector<NameTraits> name_traits(const std::vector<std::string>& strings);

// A rank's step, on its own clock order.
struct StepSpan {
  int64_t begin, end;
  size_t index;  // into JobProfile::steps
};

class DeviceWorkCollector {
 public:
  // `steps` sorted by begin and not overlapping; `tracks` the rank's track table.
  DeviceWorkCollector(const std::vector<NameTraits>& names, const std::vector<Track>& tracks,
                      const std::vector<StepSpan>& steps, RankProfile& rank);
  void add(const Event& e);  // in begin order
  void finish();

 private:
  struct Launch {
    int64_t begin, end;
  };
  struct Interval {
    int64_t begin, end;
  };
  // Merged host intervals of one kind, recent enough to meet a gap to come.
  class History {
   public:
    void add(int64_t begin, int64_t end);
    int64_t overlap(int64_t begin, int64_t end) const;
    void forget_before(int64_t time);
    bool dropped() const { return dropped_; }

   private:
    std::deque<Interval> intervals_;
    bool dropped_ = false;
  };
  // A synchronisation that returned this long before the GPU ran dry still
  // caused the gap after it (the host's and the GPU's clocks differ by a few µs).
  static constexpr int64_t kSyncReturnSlackNs = 10'000;
  struct Device {
    int16_t id;
    int64_t busy_until;
  };

  void gpu_operation(const Event& e, const NameTraits& name);
  void cuda_call(const Event& e, const NameTraits& name);
  void counter_sample(const Event& e);
  int64_t innermost_range(uint16_t track, int64_t begin);
  IdleCause gap_cause(int64_t begin, int64_t end, const Launch* launch) const;
  void book_gap(int16_t device, int64_t begin, int64_t end, IdleCause cause);
  StepDeviceWork* step_at(int64_t time);
  int32_t step_index_at(int64_t time) const;
  Device& device(int16_t id);
  void forget_old_launches(int64_t now);

  const std::vector<NameTraits>& names_;
  const std::vector<StepSpan>& steps_;
  RankProfile& rank_;
  RankDeviceWork& work_;
  std::vector<TrackType> track_types_;
  std::vector<int16_t> track_devices_;
  std::vector<bool> device_memory_tracks_;
  std::unordered_map<uint64_t, Launch> launches_;  // by correlation id, until their work is seen
  // The table's size at which old launches are next looked for: twice what
  // the last look left, so that a host launching far ahead of its GPU
  // (hundreds of thousands of launches in flight) is not swept per launch.
  size_t sweep_launches_at_ = kSweepLaunchesAbove;
  static constexpr size_t kSweepLaunchesAbove = 1 << 16;
  std::unordered_map<uint32_t, KernelTotals> kernels_;
  std::unordered_map<uint64_t, SyncTotals> syncs_;  // by (call, range)
  // Per thread track, the host ranges open now, innermost last: (end, name id).
  std::unordered_map<uint16_t, std::vector<std::pair<int64_t, uint32_t>>> open_ranges_;
  std::unordered_map<uint16_t, uint64_t> memory_now_;  // per device-memory counter track: its last sample
  std::vector<Device> devices_;
  History syncs_history_, data_loading_history_, communication_history_;
  bool has_streams_ = false;  // only a rank with GPU streams keeps the host's history for their gaps
};

}  // namespace rankscope::analysis
