// How judge() compares a figure with the fleet's: the thresholds of the
// fleet comparison (docs/accept.md, "Rules and baselines": fleet.*).
#pragma once

#include <cstdint>

namespace rankscope::acceptance {

// A figure fails below `fail_below` of its reference where it also lies
// beyond `robust_z` median absolute deviations (scaled to a standard
// deviation, and no less than 5 % of the median) of the fleet, and is to be
// retested where it does not (on a noisy fleet a low figure may be noise);
// between `fail_below` and `retest_below` it is to be retested only where it
// lies beyond them.
struct Rules {
  double fail_below = 0.8;
  double retest_below = 0.9;
  double robust_z = 3;
  // A node whose clock sync bound is wider than this fails `clock`: its
  // events cannot be ordered against other nodes' at the scale of a
  // collective. Test hosts sharing two cores measure bounds of 13-36 µs
  // (median) and at most 0.5 ms since ranks wait idle (bench/results/clock-sync.md,
  // "Clock sync across test hosts"); InfiniBand's round trips bound it to a
  // few µs (docs/design/clock-sync.md).
  int64_t clock_bound_limit_ns = 1'000'000;
  // Group testing's reference ring from a baseline (Baseline::ring_gbps), 0
  // for none. Given one, rings are judged against it instead of the first
  // round's median ring, and by the ratio alone: where most rings hold a
  // bad node, the median ring is a bad one and its spread hides them all.
  double ring_baseline_gbps = 0;
  // The baseline's node count (Baseline::nodes), 0 for unknown: its ring
  // judges only rings as wide as its own were.
  int ring_baseline_nodes = 0;
};

}  // namespace rankscope::acceptance
