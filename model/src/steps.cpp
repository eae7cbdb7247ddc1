#include "rankscope/model/steps.h"

#include "rankscope/model/text.h"

namespace rankscope {

std::string StepSelection::text() const {
  std::string out = first ? std::to_string(*first) : std::string();
  out += ":";
  if (last) out += std::to_string(*last);
  if (period != 0) out += "/" + std::to_string(period);
  return out;
}

std::optional<StepSelection> parse_step_selection(std::string_view text) {
  StepSelection steps;
  const size_t slash = text.find('/');
  if (slash != std::string_view::npos) {
    const auto period = parse_integer<uint64_t>(text.substr(slash + 1));
    if (!period || *period == 0) return std::nullopt;
    steps.period = *period;
    text = text.substr(0, slash);
  }
  const size_t colon = text.find(':');
  if (const std::string_view first = text.substr(0, colon); !first.empty()) {
    if (!(steps.first = parse_integer<uint64_t>(first))) return std::nullopt;
  }
  if (colon == std::string_view::npos) {
    if (!steps.first) return std::nullopt;
    steps.last = steps.first;
  } else if (const std::string_view last = text.substr(colon + 1); !last.empty()) {
    if (!(steps.last = parse_integer<uint64_t>(last))) return std::nullopt;
  }
  if (!steps.first && !steps.last) return std::nullopt;
  if (steps.first && steps.last && *steps.last < *steps.first) return std::nullopt;
  // A period repeats a closed window shorter than itself.
  if (steps.period != 0 && (!steps.last || *steps.last - steps.first.value_or(0) + 1 >= steps.period)) return std::nullopt;
  return steps;
}

}  // namespace rankscope
