// Capture windows: the spans of a rank's clock whose events its shard holds
// in full, where the capture was steered (--delay, --duration, --paused and
// triggers, --steps, --capture-range) or kept by the flight recorder
// (--ring). A shard without them recorded throughout its life. The report
// uses them to leave out what a window cut (docs/report-reference.md, "Capture
// windows"); layout: docs/format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace rankscope {

struct CaptureWindow {
  int64_t from_ns;
  int64_t until_ns;  // kWindowStillOpen: still open when its chunk was written
};
static_assert(sizeof(CaptureWindow) == 16, "CaptureWindow layout is part of the shard format");
inline constexpr int64_t kWindowStillOpen = INT64_MAX;

// What a window holds: the events that began in it (a steered window), or
// the events that ended in it (a flight recorder's dump).
enum class WindowHolds : uint8_t { kEventsBegun, kEventsEnded };

// The windows of one kind a shard recorded: the closed ones of every chunk,
// and the open one of the latest chunk (an earlier chunk's open window is
// among the later chunks' closed ones).
struct RecordedWindows {
  std::vector<CaptureWindow> closed;
  std::optional<int64_t> open_since;

  void add_chunk(const std::vector<CaptureWindow>& windows);
};

// [from, until) of one clock.
using TimeSpan = std::pair<int64_t, int64_t>;

// The spans whose events a shard holds in full: the union of its steered
// windows, met with the union of its flight recorder's dumps; a window still
// open ends at `last_ns` (when the rank was last heard from). Sorted,
// disjoint, none empty. Nothing when the shard recorded throughout.
std::optional<std::vector<TimeSpan>> captured_spans(const std::optional<RecordedWindows>& steered,
                                                    const std::optional<RecordedWindows>& dumped, int64_t last_ns);

// The index of the span in `spans` (captured_spans') that holds all of
// [from, until); nothing when none does.
std::optional<size_t> span_holding(const std::vector<TimeSpan>& spans, int64_t from, int64_t until);

}  // namespace rankscope
