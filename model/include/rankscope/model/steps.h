// Steps, as the report, `export --steps` and `run --steps` count them: the
// program's "ProfilerStep#N" ranges (torch.profiler's record_function names,
// and NVTX ranges of that name in any domain).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rankscope {

inline constexpr std::string_view kStepRangePrefix = "ProfilerStep#";

// N of a range named "ProfilerStep#N"; nothing for any other name. Allocates
// nothing: the rank agent asks on the application's threads.
constexpr std::optional<uint64_t> step_number(std::string_view name) {
  if (name.size() <= kStepRangePrefix.size() || name.size() > kStepRangePrefix.size() + 18 ||
      name.substr(0, kStepRangePrefix.size()) != kStepRangePrefix) {
    return std::nullopt;
  }
  uint64_t n = 0;
  for (const char c : name.substr(kStepRangePrefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// Steps first..last, both included, and with a period P, the same window
// again every P steps: first+P..last+P, and so on.
struct StepSelection {
  std::optional<uint64_t> first, last;  // nothing: open
  uint64_t period = 0;                  // 0: once

  constexpr bool contains(uint64_t n) const {
    const uint64_t from = first.value_or(0);
    if (n < from) return false;
    if (period != 0) return (n - from) % period <= *last - from;
    return !last || n <= *last;
  }
  std::string text() const;  // as parsed: "A:B", "A:", ":B" or "A:B/P"
};

// "A:B", "A" (A:A), "A:", ":B", or with a period "A:B/P" (P more than the
// B - A + 1 steps of the window); nothing for any other text.
std::optional<StepSelection> parse_step_selection(std::string_view text);
inline constexpr std::string_view kStepSelectionForms = "A:B, A, A:, :B or A:B/PERIOD (step numbers)";

}  // namespace rankscope
