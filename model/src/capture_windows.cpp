#include "rankscope/model/capture_windows.h"

#include <algorithm>

namespace rankscope {
namespace {

// Sorted, with overlapping and touching spans joined and empty ones dropped.
std::vector<TimeSpan> united(std::vector<TimeSpan> spans) {
  std::erase_if(spans, [](const TimeSpan& s) { return s.first >= s.second; });
  std::sort(spans.begin(), spans.end());
  std::vector<TimeSpan> out;
  for (const TimeSpan& s : spans) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

std::vector<TimeSpan> spans_of(const RecordedWindows& windows, int64_t last_ns) {
  std::vector<TimeSpan> spans;
  for (const CaptureWindow& w : windows.closed) spans.emplace_back(w.from_ns, w.until_ns);
  if (windows.open_since) spans.emplace_back(*windows.open_since, last_ns);
  return united(std::move(spans));
}

// Both sorted and disjoint: the parts in both.
std::vector<TimeSpan> met(const std::vector<TimeSpan>& a, const std::vector<TimeSpan>& b) {
  std::vector<TimeSpan> out;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const int64_t from = std::max(a[i].first, b[j].first), until = std::min(a[i].second, b[j].second);
    if (from < until) out.emplace_back(from, until);
    (a[i].second < b[j].second ? i : j) += 1;
  }
  return out;
}

}  // namespace

void RecordedWindows::add_chunk(const std::vector<CaptureWindow>& windows) {
  open_since.reset();
  for (const CaptureWindow& w : windows) {
    if (w.until_ns == kWindowStillOpen) {
      open_since = w.from_ns;
    } else {
      closed.push_back(w);
    }
  }
}

std::optional<std::vector<TimeSpan>> captured_spans(const std::optional<RecordedWindows>& steered,
                                                    const std::optional<RecordedWindows>& dumped, int64_t last_ns) {
  if (!steered && !dumped) return std::nullopt;
  if (!steered) return spans_of(*dumped, last_ns);
  if (!dumped) return spans_of(*steered, last_ns);
  return met(spans_of(*steered, last_ns), spans_of(*dumped, last_ns));
}

std::optional<size_t> span_holding(const std::vector<TimeSpan>& spans, int64_t from, int64_t until) {
  // The last span beginning at or before `from`.
  const auto after = std::upper_bound(spans.begin(), spans.end(), from,
                                      [](int64_t at, const TimeSpan& s) { return at < s.first; });
  if (after == spans.begin()) return std::nullopt;
  const auto span = std::prev(after);
  if (until > span->second) return std::nullopt;
  return static_cast<size_t>(span - spans.begin());
}

}  // namespace rankscope
