#include "range_windows.h"

namespace rankscope::agent {

void RangeWindows::steer_by_steps(const StepSelection& steps, std::string option) {
  steps_ = steps;
  option_ = std::move(option);
  // ":B" selects from the start: the window the recorder starts with is the first.
  const bool open_from_start = !steps.first;
  open_.store(open_from_start, std::memory_order_relaxed);
  opened_.store(open_from_start ? 1 : 0, std::memory_order_relaxed);
  if (!open_from_start) recorder_.set_window(INT64_MAX, INT64_MAX);
  by_.store(By::kSteps, std::memory_order_release);
}

void RangeWindows::steer_by_range(uint32_t name_id, uint64_t domain_key, std::string option) {
  name_id_ = name_id;
  domain_key_ = domain_key;
  option_ = std::move(option);
  recorder_.set_window(INT64_MAX, INT64_MAX);
  by_.store(By::kNvtxRange, std::memory_order_release);
}

void RangeWindows::steer_by_profiler_api(std::string option) {
  option_ = std::move(option);
  recorder_.set_window(INT64_MAX, INT64_MAX);
  by_.store(By::kCudaProfilerApi, std::memory_order_release);
}

void RangeWindows::range_edge(uint32_t name_id, uint64_t domain_key, int64_t at_ns, bool begins) {
  const By by = by_.load(std::memory_order_acquire);
  if (by == By::kSteps) {
    const auto step = step_number(recorder_.strings().text(name_id));
    if (!step) return;
    if (begins) {
      uint64_t highest = highest_step_.load(std::memory_order_relaxed);
      while ((highest == kNoStep || *step > highest) &&
             !highest_step_.compare_exchange_weak(highest, *step, std::memory_order_relaxed)) {
      }
    }
    const bool selected = steps_.contains(*step);
    const bool open = open_.load(std::memory_order_relaxed);
    if (begins && selected && !open) this->open(at_ns);
    if (begins && !selected && open) close(at_ns);
    if (!begins && selected && !steps_.contains(*step + 1) && open) close(at_ns);
  } else if (by == By::kNvtxRange && name_id == name_id_ && (domain_key_ == kAnyDomain || domain_key == domain_key_)) {
    if (begins) {
      if (ranges_open_.fetch_add(1, std::memory_order_relaxed) == 0) open(at_ns);
      return;
    }
    // A range that began before capture did is not counted.
    int32_t ranges = ranges_open_.load(std::memory_order_relaxed);
    while (ranges > 0 && !ranges_open_.compare_exchange_weak(ranges, ranges - 1, std::memory_order_relaxed)) {
    }
    if (ranges == 1) close(at_ns);
  }
}

void RangeWindows::profiler_api(bool start, int64_t at_ns) {
  if (by_.load(std::memory_order_acquire) != By::kCudaProfilerApi) return;
  const bool open = open_.load(std::memory_order_relaxed);
  if (start && !open) this->open(at_ns);
  if (!start && open) close(at_ns);
}

void RangeWindows::open(int64_t at_ns) {
  recorder_.open_window(at_ns, INT64_MAX);
  open_.store(true, std::memory_order_relaxed);
  opened_.fetch_add(1, std::memory_order_relaxed);
}

void RangeWindows::close(int64_t at_ns) {
  recorder_.set_window(recorder_.window().first, at_ns);
  open_.store(false, std::memory_order_relaxed);
}

}  // namespace rankscope::agent
