#include "clock_repair.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <iterator>

namespace rankscope {
namespace {

// Repeats `pass` until it changes nothing. Once no cycle of constraints adds
// up to more than nothing (set_aside_contradictions), every longest path has
// fewer constraints than there are ranks, so that takes at most as many passes.
template <typename Pass>
void until_stable(Pass pass) {
  while (pass()) {
  }
}

// How much a solution moves: in total, then how many ranks.
std::pair<int64_t, size_t> movement(const std::vector<int64_t>& shifts) {
  int64_t total = 0;
  size_t moved = 0;
  for (int64_t shift : shifts) {
    total += std::llabs(shift);
    moved += shift != 0;
  }
  return {total, moved};
}

}  // namespace

bool ClockRepair::learn(const std::vector<HappensBeforeCheck::Violation>& violations) {
  bool learned = false;
  for (const HappensBeforeCheck::Violation& v : violations) {
    const auto left = static_cast<size_t>(v.left), entered = static_cast<size_t>(v.entered);
    if (contradictory_[left] || contradictory_[entered]) continue;
    // The check saw the times moved by the current shifts; the gap is between the measured ones.
    const int64_t gap = v.excess_ns + shifts_[left] - shifts_[entered];
    const auto [known, added] = gaps_.try_emplace({v.left, v.entered}, gap);
    if (added || gap > known->second) {
      known->second = gap;
      learned = true;
    }
  }
  return learned;
}

std::vector<ClockRepair::Constraint> ClockRepair::constraints() const {
  std::vector<Constraint> out;
  for (const auto& [pair, gap] : gaps_) {
    out.push_back({static_cast<size_t>(pair.first), static_cast<size_t>(pair.second), gap});
  }
  return out;
}

void ClockRepair::set_aside_contradictions() {
  const std::vector<Constraint> all = constraints();
  const size_t n = shifts_.size();
  // Longest paths into every rank (raised) and out of it (lowered), from
  // everywhere at once. They settle within n - 1 passes unless a cycle adds
  // up to more than nothing; such a cycle moves on every pass, so whatever
  // still moves on pass n comes after one (raised) or before one (lowered).
  std::vector<int64_t> raised(n, 0), lowered(n, 0);
  std::vector<bool> after_cycle(n, false), before_cycle(n, false);
  bool moving = true;
  for (size_t pass = 1; pass <= n && moving; ++pass) {
    moving = false;
    for (const Constraint& c : all) {
      if (raised[c.earlier] + c.gap > raised[c.later]) {
        raised[c.later] = raised[c.earlier] + c.gap;
        moving = true;
        if (pass == n) after_cycle[c.later] = true;
      }
      if (lowered[c.later] - c.gap < lowered[c.earlier]) {
        lowered[c.earlier] = lowered[c.later] - c.gap;
        moving = true;
        if (pass == n) before_cycle[c.earlier] = true;
      }
    }
  }
  if (!moving) return;
  until_stable([&] {
    bool changed = false;
    for (const Constraint& c : all) {
      if (after_cycle[c.earlier] && !after_cycle[c.later]) {
        after_cycle[c.later] = true;
        changed = true;
      }
      if (before_cycle[c.later] && !before_cycle[c.earlier]) {
        before_cycle[c.earlier] = true;
        changed = true;
      }
    }
    return changed;
  });
  // Every rank on such a cycle is both after and before one.
  for (size_t r = 0; r < n; ++r) {
    if (after_cycle[r] && before_cycle[r]) contradictory_[r] = true;
  }
  for (auto it = gaps_.begin(); it != gaps_.end();) {
    const bool dropped = contradictory_[static_cast<size_t>(it->first.first)] ||
                         contradictory_[static_cast<size_t>(it->first.second)];
    it = dropped ? gaps_.erase(it) : std::next(it);
  }
}

void ClockRepair::solve() {
  set_aside_contradictions();
  const std::vector<Constraint> all = constraints();
  const size_t n = shifts_.size();
  // With rank 0 held at 0, the earliest and the latest each rank may be:
  // the longest paths from rank 0 and to it.
  std::vector<int64_t> earliest(n, INT64_MIN), latest(n, INT64_MAX);
  earliest[0] = latest[0] = 0;
  until_stable([&] {
    bool changed = false;
    for (const Constraint& c : all) {
      if (earliest[c.earlier] != INT64_MIN && earliest[c.earlier] + c.gap > earliest[c.later]) {
        earliest[c.later] = earliest[c.earlier] + c.gap;
        changed = true;
      }
      if (latest[c.later] != INT64_MAX && latest[c.later] - c.gap < latest[c.earlier]) {
        latest[c.earlier] = latest[c.later] - c.gap;
        changed = true;
      }
    }
    return changed;
  });
  // Two candidates, each the least movement in one direction: every rank as
  // little later as the constraints allow (earlier only as far as rank 0
  // forces it), or as little earlier (later only as far as rank 0 forces it).
  // Both keep rank 0 at 0. A rank whose clock reads early moves later by the
  // largest gap it left by, one whose clock reads late moves earlier by the
  // largest gap it entered by, and in either case no other rank moves:
  // taking the candidate that moves less picks the right one.
  std::vector<int64_t> later(n), earlier(n);
  for (size_t r = 0; r < n; ++r) {
    later[r] = std::min<int64_t>(0, latest[r]);
    earlier[r] = std::max<int64_t>(0, earliest[r]);
  }
  until_stable([&] {
    bool changed = false;
    for (const Constraint& c : all) {
      if (later[c.earlier] + c.gap > later[c.later]) {
        later[c.later] = later[c.earlier] + c.gap;
        changed = true;
      }
      if (earlier[c.later] - c.gap < earlier[c.earlier]) {
        earlier[c.earlier] = earlier[c.later] - c.gap;
        changed = true;
      }
    }
    return changed;
  });
  shifts_ = movement(later) <= movement(earlier) ? later : earlier;
}

std::vector<int32_t> ClockRepair::contradictory() const {
  std::vector<int32_t> out;
  for (size_t r = 0; r < contradictory_.size(); ++r) {
    if (contradictory_[r]) out.push_back(static_cast<int32_t>(r));
  }
  return out;
}

}  // namespace rankscope
