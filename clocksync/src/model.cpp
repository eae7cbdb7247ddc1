#include <algorithm>
#include <cmath>

#include "rankscope/clocksync/clock.h"

namespace rankscope::clocksync {

void OffsetEstimator::add(int64_t parent_send_ns, int64_t child_ns, int64_t parent_receive_ns) {
  ++count_;
  first_send_ = std::min(first_send_, parent_send_ns);
  last_receive_ = std::max(last_receive_, parent_receive_ns);
  low_ = std::max(low_, child_ns - parent_receive_ns);
  high_ = std::min(high_, child_ns - parent_send_ns);
  const int64_t rtt = parent_receive_ns - parent_send_ns;
  if (rtt < min_rtt_) {
    min_rtt_ = rtt;
    best_parent_mid_ = parent_send_ns + rtt / 2;
    best_offset_ = child_ns - best_parent_mid_;
  }
}

int64_t OffsetEstimator::offset_ns() const {
  if (!consistent()) return best_offset_;
  // Floor of the midpoint, so that bound_ns() (rounded up) covers both ends.
  const int64_t sum = low_ + high_;
  return sum >= 0 ? sum / 2 : -((-sum + 1) / 2);
}

int64_t OffsetEstimator::spread_ns() const {
  if (count_ == 0) return 0;
  return std::max(best_parent_mid_ - first_send_, last_receive_ - best_parent_mid_);
}

int64_t OffsetEstimator::bound_ns() const {
  if (count_ == 0) return INT64_MAX;
  if (!consistent()) return (min_rtt_ + 1) / 2 + (low_ - high_);
  return std::max(high_ - offset_ns(), offset_ns() - low_);
}

OffsetEstimator::Estimate OffsetEstimator::estimate(double drift_ppm) const {
  if (count_ == 0) return {0, INT64_MAX};
  const auto drift_over = [&](int64_t span_ns) {
    return static_cast<int64_t>(std::ceil(static_cast<double>(span_ns) * drift_ppm * 1e-6));
  };
  const Estimate together{offset_ns(), bound_ns() + drift_over(spread_ns())};
  // A clock that stepped (or drifted) during the exchanges keeps the bound
  // widened by their disagreement.
  if (!consistent()) return together;
  // The child read its clock within the exchange, at most half of it from the middle.
  const Estimate fastest{best_offset_, (min_rtt_ + 1) / 2 + drift_over((min_rtt_ + 1) / 2)};
  return fastest.bound_ns < together.bound_ns ? fastest : together;
}

ClockModel::ClockModel(std::vector<SyncPoint> points) : points_(std::move(points)) {
  std::sort(points_.begin(), points_.end(), [](const SyncPoint& a, const SyncPoint& b) { return a.local_ns < b.local_ns; });
  // Points at the same local time add nothing; keep the tighter one.
  std::vector<SyncPoint> unique;
  for (const SyncPoint& p : points_) {
    if (!unique.empty() && unique.back().local_ns == p.local_ns) {
      if (p.bound_ns < unique.back().bound_ns) unique.back() = p;
    } else {
      unique.push_back(p);
    }
  }
  points_ = std::move(unique);
}

MappedTime ClockModel::to_reference(int64_t local_ns) const {
  if (points_.empty()) return {local_ns, 0, false};
  if (points_.size() == 1) {
    const SyncPoint& p = points_.front();
    const double distance = std::fabs(static_cast<double>(local_ns - p.local_ns));
    return {local_ns - p.offset_ns, p.bound_ns + static_cast<int64_t>(std::ceil(distance * kDriftChangePpm * 1e-6)),
            local_ns != p.local_ns};
  }
  // The segment that holds local_ns, or the nearest one.
  const auto after = std::upper_bound(points_.begin(), points_.end(), local_ns,
                                      [](int64_t t, const SyncPoint& p) { return t < p.local_ns; });
  const size_t right = std::clamp<size_t>(static_cast<size_t>(after - points_.begin()), 1, points_.size() - 1);
  const SyncPoint& a = points_[right - 1];
  const SyncPoint& b = points_[right];
  const double slope = static_cast<double>(b.offset_ns - a.offset_ns) / static_cast<double>(b.local_ns - a.local_ns);
  // The measured offset stays an integer (offsets can be as large as epoch
  // times, beyond a double's ns); only the drift since it is rounded.
  const int64_t offset = a.offset_ns + std::llround(slope * static_cast<double>(local_ns - a.local_ns));
  int64_t bound = std::max(a.bound_ns, b.bound_ns);
  bool outside = false;
  if (local_ns < points_.front().local_ns || local_ns > points_.back().local_ns) {
    const int64_t edge = local_ns < points_.front().local_ns ? points_.front().local_ns : points_.back().local_ns;
    const double distance = std::fabs(static_cast<double>(local_ns - edge));
    bound = (local_ns < edge ? a.bound_ns : b.bound_ns) + static_cast<int64_t>(std::ceil(distance * kDriftChangePpm * 1e-6));
    outside = true;
  }
  // Rounding the drift can cost half a nanosecond.
  return {local_ns - offset, bound + 1, outside};
}

int64_t ClockModel::max_bound_ns() const {
  int64_t bound = 0;
  for (const SyncPoint& p : points_) bound = std::max(bound, p.bound_ns);
  return bound;
}

double ClockModel::drift_ppm() const {
  if (points_.size() < 2) return 0;
  const SyncPoint& a = points_.front();
  const SyncPoint& b = points_.back();
  // Per unit of reference time, as the drift of a clock is stated.
  const int64_t reference_span = (b.local_ns - b.offset_ns) - (a.local_ns - a.offset_ns);
  return static_cast<double>(b.offset_ns - a.offset_ns) / static_cast<double>(reference_span) * 1e6;
}

MappedTime map_through(const ClockModel& first, const ClockModel& second, int64_t time_ns) {
  const MappedTime middle = first.to_reference(time_ns);
  const MappedTime last = second.to_reference(middle.time_ns);
  return {last.time_ns, middle.bound_ns + last.bound_ns, middle.outside || last.outside};
}

MappedTime ClockMapper::search(int64_t local_ns) {
  const auto& points = model_.points();
  if (points.size() >= 2 && local_ns >= points.front().local_ns && local_ns <= points.back().local_ns) {
    const auto after = std::upper_bound(points.begin(), points.end(), local_ns,
                                        [](int64_t t, const SyncPoint& p) { return t < p.local_ns; });
    segment_ = std::min(static_cast<size_t>(after - points.begin()), points.size() - 1) - 1;
    const SyncPoint& a = points[segment_];
    const SyncPoint& b = points[segment_ + 1];
    slope_ = static_cast<double>(b.offset_ns - a.offset_ns) / static_cast<double>(b.local_ns - a.local_ns);
    inner_bound_ = std::max(a.bound_ns, b.bound_ns) + 1;
    primed_ = true;
  }
  return model_.to_reference(local_ns);
}

}  // namespace rankscope::clocksync
