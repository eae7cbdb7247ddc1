// Capture windows the program's own ranges steer (docs/windows-and-hangs.md, "Capture
// windows"). --steps opens a window where the ProfilerStep#N range of a
// selected step begins, and closes it where the last selected step of a run
// ends (or where an unselected step begins); --capture-range nvtx:NAME
// records while a range named NAME is open on any thread; cudaProfilerApi
// from cudaProfilerStart to cudaProfilerStop. Each edge is the instant the
// range itself begins or ends, so a step's own range lies inside its window.
//
// Called on the application's threads, at each range's begin and end: no
// lock, no allocation, and one relaxed load when nothing is steered.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "rankscope/model/steps.h"
#include "recorder.h"

namespace rankscope::agent {

class RangeWindows {
 public:
  enum class By : uint8_t { kNothing, kSteps, kNvtxRange, kCudaProfilerApi };
  static constexpr uint64_t kAnyDomain = UINT64_MAX;
  static constexpr uint64_t kNoStep = UINT64_MAX;

  explicit RangeWindows(Recorder& recorder) : recorder_(recorder) {}

  // One of these, before the first range: what steers, and how it reads in
  // messages (the option as given). Each leaves the recorder's window as it
  // stands at the start: closed, except for steps selected from the first (":B").
  void steer_by_steps(const StepSelection& steps, std::string option);
  void steer_by_range(uint32_t name_id, uint64_t domain_key, std::string option);
  void steer_by_profiler_api(std::string option);
  // A trigger takes over: ranges no longer steer.
  void stop_steering() { by_.store(By::kNothing, std::memory_order_relaxed); }
  bool steering() const { return by_.load(std::memory_order_relaxed) != By::kNothing; }
  const std::string& option() const { return option_; }

  void range_edge(uint32_t name_id, uint64_t domain_key, int64_t at_ns, bool begins);
  void profiler_api(bool start, int64_t at_ns);

  uint64_t windows_opened() const { return opened_.load(std::memory_order_relaxed); }
  // The highest ProfilerStep#N that began (kNoStep: none), for the word when no window opened.
  uint64_t highest_step_seen() const { return highest_step_.load(std::memory_order_relaxed); }

 private:
  void open(int64_t at_ns);
  void close(int64_t at_ns);

  Recorder& recorder_;
  std::atomic<By> by_{By::kNothing};
  std::string option_;
  StepSelection steps_;
  uint32_t name_id_ = 0;
  uint64_t domain_key_ = kAnyDomain;
  std::atomic<int32_t> ranges_open_{0};  // kNvtxRange: ranges named NAME open now
  std::atomic<bool> open_{false};
  std::atomic<uint64_t> opened_{0};
  std::atomic<uint64_t> highest_step_{kNoStep};
};

}  // namespace rankscope::agent
