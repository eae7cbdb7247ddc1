// What `rankscope accept` measures a second time before its verdict.
#pragma once

#include <utility>
#include <vector>

#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/verdict.h"

namespace rankscope::acceptance {

// What a first pass left unpassed, measured once more before the verdict
// (docs/accept-reference.md, "Retests"): a burst of a neighbour's load spoils every
// repeat of the figure measured while it lasts, and a second pass minutes
// later tells it from a fault, which stays. The nodes (indices) whose
// compute or memory check, the fleet's or a rule's, is not passed, and,
// screening every pair, the links not passed; group testing's second look
// is its own (bisection, and confirmation with a sound node).
struct Retests {
  std::vector<int> compute, memory;
  std::vector<std::pair<int, int>> links;  // as LinkMeasurements' (a < b)
  bool empty() const { return compute.empty() && memory.empty() && links.empty(); }
};
Retests retests_of(const Acceptance& so_far, const Measurements& measured);

}  // namespace rankscope::acceptance
