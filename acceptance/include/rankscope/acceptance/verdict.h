// The verdicts drawn from the measurements, as pure functions: each node,
// link, ring test and collective against the fleet and the rules
// (docs/accept-reference.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"

namespace rankscope::acceptance {

enum class Verdict { pass, retest, fail };
const char* verdict_name(Verdict verdict);

// A figure against its reference, as a ratio where lower is worse, and the
// rule that judged it.
struct Check {
  std::string name;      // "compute", "memory", "network", "inventory.kernel", ...
  std::string value;     // as measured, with its unit
  std::string reference; // what it was compared with
  double ratio = 1;      // value / reference (for latency: reference / value); 1 for inventory
  std::string rule;
  Verdict verdict = Verdict::pass;
};

struct NodeVerdict {
  std::string host;
  Verdict verdict = Verdict::pass;
  std::vector<Check> checks;
};

struct LinkVerdict {
  std::pair<std::string, std::string> hosts;
  Verdict verdict = Verdict::pass;
  double bandwidth_gbps = 0, latency_us = 0;
  double bandwidth_ratio = 1, latency_ratio = 1;  // to the median link; latency: median / this
  std::string cause;  // for a link that is not passed: "this link", or the node whose every link is slow
};

// A collective over all nodes (full scale) or over one group of them, one
// per CollectiveSweep, in the same order. A group's peak busbw is judged
// against the median of the groups' peaks, where there are 3 groups or more;
// full scale has no peers, and is reported.
struct CollectiveVerdict {
  std::string collective;
  std::string transport;  // CollectiveSweep's
  int ranks = 0;
  std::vector<std::string> hosts;
  bool full_scale = false;
  Verdict verdict = Verdict::pass;
  double peak_busbw_gbps = 0;       // the most over the sizes (as NVCRE judges a group)
  size_t peak_bytes = 0;            // the size it was reached at
  double small_message_us = 0;      // the median iteration at the smallest size
  double small_message_p99_us = 0;
  double largest_cv = 0;            // of the iterations of a size, the most over the sizes
  std::optional<double> ratio;      // peak / median of the groups' peaks; unset when not judged against peers
  std::string cause;  // why it is not judged against peers, or, for a group not passed, where the fault lies
};

// A group test: its slowest node's figure against the first round's median
// ring, or the baseline's. A failed ring is bisected; a retest ring's nodes are to be retested.
struct RingVerdict {
  int round = 0;
  bool pair = false;  // RingTest::pair
  std::vector<std::string> hosts;  // in ring order
  Verdict verdict = Verdict::pass;
  double gbps = 0;   // the slowest node's
  // To the first round's median ring, or to the baseline's (Rules::ring_baseline_gbps); a pair's to the
  // reference pairs where those ran slower than either.
  double ratio = 1;
};

struct Acceptance {
  Verdict verdict = Verdict::pass;  // fail when any node, link or collective fails, or the run was cut short
  std::optional<CutShort> cut_short;
  LinkScreen link_screen = LinkScreen::all_pairs;
  std::vector<NodeVerdict> nodes;
  std::vector<RingVerdict> ring_tests;  // group testing's, one per RingTest
  std::vector<std::string> suspects;    // group testing's: the hosts bisection left alone, in the order found
  std::vector<LinkVerdict> links;
  std::vector<CollectiveVerdict> collectives;
  std::string nccl_not_measured;  // Measurements'
  ReferenceJob reference_job;
};

Acceptance judge(const Measurements& measurements, const Rules& rules = {});

// The check `clock` of one node: its sync bound against the limit; a node
// whose sync failed fails with the reason.
Check clock_check(const NodeClock& clock, const Rules& rules = {});

// The check `reference_job` of every node (in node order): its own time per
// step (its step time less its exposed wait for others) against the
// fleet's, by the rules of compute. A node the straggler analysis names
// fails where that figure is beyond noise and is to be retested where it is
// not; a node it does not name is at worst to be retested.
std::vector<Check> reference_job_checks(const Measurements& measurements, const Rules& rules = {});

}  // namespace rankscope::acceptance
