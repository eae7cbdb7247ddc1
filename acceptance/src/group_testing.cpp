// Group testing's plan: the first rings, each round's bisection, and the
// links that confirm the suspects (docs/design/group-testing.md).
#include "group_testing.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "rankscope/model/error.h"

namespace rankscope::acceptance {

const char* link_screen_name(LinkScreen screen) {
  return screen == LinkScreen::group_testing ? "group_testing" : "all_pairs";
}

std::vector<std::vector<int>> first_rings(int nodes) {
  int width = 1;
  while (width * width < nodes) ++width;
  // Four rings at least, so that the median ring and the spread about it stand where one ring is bad.
  width = std::max(2, std::min(width, nodes / 4));
  std::vector<std::vector<int>> rings;
  for (int first = 0; first < nodes; first += width) {
    std::vector<int> ring;
    for (int n = first; n < std::min(first + width, nodes); ++n) ring.push_back(n);
    rings.push_back(ring);
  }
  // A node alone has no ring to be tested in.
  if (rings.size() > 1 && rings.back().size() == 1) {
    rings[rings.size() - 2].push_back(rings.back().front());
    rings.pop_back();
  }
  return rings;
}

LinkScreen link_screen_for(std::string_view option, int nodes) {
  if (option == "pairs" || (option == "auto" && nodes <= kAllPairsUpTo)) return LinkScreen::all_pairs;
  if (option != "groups" && option != "auto") throw Error("--links is pairs, groups or auto, not '" + std::string(option) + "'");
  if (nodes < kGroupTestingFrom) {
    throw Error("group testing needs " + std::to_string(kGroupTestingFrom) + " nodes or more (4 rings to judge each "
                "against), not " + std::to_string(nodes) + ": screen the links of fewer with --links pairs");
  }
  return LinkScreen::group_testing;
}

GroupTestingStep next_group_tests(int nodes, const std::vector<RingTest>& done, const Rules& rules) {
  GroupTestingStep step;
  if (nodes < 2) return step;
  if (done.empty()) {
    step.rings = first_rings(nodes);
    return step;
  }
  const Bisection bisection = bisect(done, rules);
  if (!bisection.next_rings.empty()) {
    step.rings = bisection.next_rings;
    return step;
  }
  const auto add = [&](int a, int b) {
    const std::pair<int, int> link = std::minmax(a, b);
    if (std::find(step.links.begin(), step.links.end(), link) == step.links.end()) step.links.push_back(link);
  };
  // Links sharing a node are measured in rounds, one after another.
  for (const auto& [suspect, sound] : bisection.confirmations) add(suspect, sound);
  for (const auto& [a, b] : bisection.crossing_links) add(a, b);
  const std::vector<int>& sound = bisection.sound;
  // The reference pairs, ⌈√N⌉ or 3 of them: sound nodes in no pair yet first, then the others.
  const size_t wanted = step.links.size() + std::max<size_t>(3, static_cast<size_t>(std::ceil(std::sqrt(nodes))));
  const auto paired = [&](int n) {
    return std::any_of(step.links.begin(), step.links.end(), [n](const auto& l) { return l.first == n || l.second == n; });
  };
  std::vector<int> order;
  std::copy_if(sound.begin(), sound.end(), std::back_inserter(order), [&](int n) { return !paired(n); });
  std::copy_if(sound.begin(), sound.end(), std::back_inserter(order), paired);
  for (size_t i = 0; i + 1 < order.size() && step.links.size() < wanted; i += 2) add(order[i], order[i + 1]);
  return step;
}

}  // namespace rankscope::acceptance
