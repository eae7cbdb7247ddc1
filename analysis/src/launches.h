// A rank's CUDA calls by correlation id, found from the GPU operations they
// launched: what the critical path's walk and the step's replay follow from
// an operation back to its host.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rankscope/model/event.h"

namespace rankscope::analysis {

class Launches {
 public:
  struct Call {
    uint64_t correlation_id;
    int64_t begin_ns, end_ns;
    uint16_t track;
  };

  // A CUDA call with a correlation id; calls without one are not kept.
  void add(const Event& call) {
    if (call.correlation_id != 0) calls_.push_back({call.correlation_id, call.begin_ns, call.end_ns, call.track});
  }

  // Once every call is added. A flat sorted table and not a hash map,
  // which allocated a node per call: 1.2 M in one report of the generated
  // Kineto job. Calls come in correlation order, so the sort usually finds
  // them sorted.
  void index() {
    const auto by_id = [](const Call& a, const Call& b) { return a.correlation_id < b.correlation_id; };
    if (!std::is_sorted(calls_.begin(), calls_.end(), by_id)) std::stable_sort(calls_.begin(), calls_.end(), by_id);
  }

  // The call of `correlation_id` (the last added, where several share it);
  // null for 0 or a call not captured.
  const Call* find(uint64_t correlation_id) const {
    if (correlation_id == 0) return nullptr;
    const auto after = std::upper_bound(calls_.begin(), calls_.end(), correlation_id,
                                        [](uint64_t id, const Call& c) { return id < c.correlation_id; });
    return after == calls_.begin() || std::prev(after)->correlation_id != correlation_id ? nullptr : &*std::prev(after);
  }

 private:
  std::vector<Call> calls_;  // by correlation id, once indexed
};

}  // namespace rankscope::analysis
