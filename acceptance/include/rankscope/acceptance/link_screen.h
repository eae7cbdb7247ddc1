// How `rankscope accept` screens the links between nodes, and what it plans
// to measure next under each screen.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/acceptance/fleet_rules.h"

namespace rankscope::acceptance {

// How links are screened. All pairs measures every link; it finds a bad
// link between two sound nodes, and takes nodes − 1 rounds. Group testing
// (in the spirit of NVIDIA's Cluster Readiness Engine) measures rings of
// nodes and bisects the slow ones down to single nodes, then confirms each
// suspect over a link with a node known to be sound: about d·log(N/d)
// tests in a handful of rounds for d bad nodes among N, but a bad link
// between two sound nodes goes unseen unless they are ring neighbours.
enum class LinkScreen { all_pairs, group_testing };
const char* link_screen_name(LinkScreen screen);

// One group test: every node of a ring sends to the next and receives from
// the one before, all at once. A node's figure is the bytes over the time
// both its transfers took, the best of the repeats; the test's figure is its
// slowest node's, as a collective over the group would take.
struct RingTest {
  int round = 0;             // 0: the first groups; each later round bisects the failed tests of the one before
  std::vector<int> nodes;    // indexes into Measurements::nodes, in ring order
  std::vector<double> gbps;  // per node of `nodes`
  // A pair measured once bisection is over (GroupTestingStep::links): a
  // suspect with a sound node, the two ends of a crossing link, or two sound
  // nodes. Judged as every ring, never bisected.
  bool pair = false;
};

// The rounds in which every pair of `nodes` meets once, no node in two pairs
// of one round (the circle method: nodes − 1 rounds, nodes rounds when odd).
// Each `repeat` seats the nodes in another order (the same on every rank),
// so that the pairs measured at once differ from repeat to repeat: where
// two pairs' flows share a switch uplink under static routing, they do so
// in one repeat, not in all, and the link's upper quartile of repeats is
// its own.
std::vector<std::vector<std::pair<int, int>>> pairing_rounds(int nodes, unsigned repeat = 0);

// Group testing's next step, from the tests done so far (judged by `rules`
// against the first round's rings): the next round's rings, or,
// once no ring is left to bisect, the links to measure, each as (lower,
// higher) and once: each suspect (a node bisection left alone) with a node
// known to be sound; the links that joined the halves of a failed ring none
// of whose halves failed; and ⌈√nodes⌉ pairs of sound nodes (3 at least, as
// there are sound nodes for) as the reference. Nothing to do when both are
// empty.
struct GroupTestingStep {
  std::vector<std::vector<int>> rings;
  std::vector<std::pair<int, int>> links;
};
GroupTestingStep next_group_tests(int nodes, const std::vector<RingTest>& done, const Rules& rules = {});

// The first round's rings: ⌈√nodes⌉ consecutive nodes each (fewer where that
// makes fewer than 4 rings, 2 at least), a last node left alone joining the
// ring before it (every node is tested). Two nodes or more.
std::vector<std::vector<int>> first_rings(int nodes);

// Group testing judges each ring against the median of the first round's,
// which needs 4 rings, so that one bad ring moves neither the median nor the
// spread about it: kGroupTestingFrom nodes.
inline constexpr int kGroupTestingFrom = 8;
// `auto` screens all pairs up to this many nodes (nodes − 1 rounds), and
// tests groups above, where all pairs would take thousands of rounds.
inline constexpr int kAllPairsUpTo = 128;
// The screen `--links` names for `nodes` nodes: "pairs", "groups", or
// "auto". Throws Error for group testing on fewer than kGroupTestingFrom
// nodes, and for another name.
LinkScreen link_screen_for(std::string_view option, int nodes);

}  // namespace rankscope::acceptance
