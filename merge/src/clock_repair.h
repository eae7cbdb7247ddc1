// The minimal repair of the clock correction (merge --repair-clock): one
// constant shift per rank, added to all its times, that removes the
// happens-before violations the check finds.
//
// Shifting a rank that left a collective too early moves all of its
// collectives, so it can make the rank enter another one after someone left:
// the shifts are not independent, and are solved together as a system of
// difference constraints over ranks, one per pair of ranks that broke causality:
//
//   shift[left] - shift[entered] >= gap
//
// A message received too early gives the same constraint, with the receiver
// as `left` and the sender as `entered`: the two kinds share one system.
//
// The check reports only the worst pair of each instance (the last to enter,
// the first to leave), so a check of the times moved by the current shifts
// may find pairs not seen before: learn() adds them and solve() meets them
// all, round after round, until a check finds nothing new. Which of the many
// solutions solve() takes, and why: docs/design/clock-sync.md.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "happens_before.h"

namespace rankscope {

class ClockRepair {
 public:
  explicit ClockRepair(int32_t world_size)
      : shifts_(static_cast<size_t>(world_size), 0), contradictory_(static_cast<size_t>(world_size), false) {}

  // Learns from a check of the times as moved by shifts(). Returns false
  // when there is nothing new: no violation, or only ones involving ranks
  // that no constant shift repairs.
  bool learn(const std::vector<HappensBeforeCheck::Violation>& violations);

  // Recomputes shifts() to meet every constraint learned. Ranks whose
  // constraints contradict each other are set aside with shift 0.
  void solve();

  // Per rank, in ns; rank 0's is always 0.
  const std::vector<int64_t>& shifts() const { return shifts_; }

  // Ranks that must be later than some rank by more than they may be: a
  // cycle of constraints that adds up to more than nothing, which happens
  // when a clock stepped or drifted between measurements. They keep their
  // measured times.
  std::vector<int32_t> contradictory() const;

 private:
  // shift[later] - shift[earlier] >= gap
  struct Constraint {
    size_t later;
    size_t earlier;
    int64_t gap;
  };

  std::vector<Constraint> constraints() const;
  void set_aside_contradictions();

  std::map<std::pair<int32_t, int32_t>, int64_t> gaps_;  // (left, entered) -> gap
  std::vector<int64_t> shifts_;
  std::vector<bool> contradictory_;
};

}  // namespace rankscope
