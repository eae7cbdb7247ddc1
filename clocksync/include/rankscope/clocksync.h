// One timeline for every rank: the local event clock, offset measurement
// between two processes with an error bound, and the piecewise-linear model
// that maps a rank's local times onto the reference (rank 0's) clock.
// Background and measured figures: docs/clocksync.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "rankscope/metadata.h"

namespace rankscope::clocksync {

// CLOCK_MONOTONIC_RAW: never slewed by NTP; drift is modelled, not corrected by the OS.
int64_t raw_now_ns();

// RANKSCOPE_FAKE_CLOCK="rank:offset_ns:drift_ppm[,rank:offset_ns:drift_ppm...]"
// makes the named ranks read offset + (1 + drift) * t, so one machine can carry
// known skew for tests.
inline constexpr const char* kFakeClockVariable = "RANKSCOPE_FAKE_CLOCK";

struct FakeClockEntry {
  int32_t rank;
  int64_t offset_ns;
  double drift_ppm;
};

// Throws Error naming the entry and what is wrong with it.
std::vector<FakeClockEntry> parse_fake_clock(std::string_view spec);

// The true offset of `rank` to rank 0 when `rank`'s clock reads `local_ns`,
// under injected clocks (ranks not listed run the raw clock): the ground
// truth that tests and benchmarks hold measurements against.
double injected_offset_ns(const std::vector<FakeClockEntry>& clocks, int32_t rank, int64_t local_ns);

// The event clock of one rank: the raw clock, or a virtual one for tests.
class Clock {
 public:
  Clock() = default;
  Clock(int64_t offset_ns, double drift_ppm) : offset_ns_(offset_ns), drift_(drift_ppm * 1e-6) {}

  // The clock for `rank`, virtual if RANKSCOPE_FAKE_CLOCK names it; throws
  // Error when the variable is malformed.
  static Clock for_rank(int32_t rank);

  int64_t now_ns() const { return from_raw(raw_now_ns()); }
  int64_t from_raw(int64_t raw_ns) const {
    return drift_ == 0 ? raw_ns + offset_ns_
                       : raw_ns + offset_ns_ + std::llround(static_cast<double>(raw_ns) * drift_);
  }
  bool is_virtual() const { return offset_ns_ != 0 || drift_ != 0; }

 private:
  int64_t offset_ns_ = 0;
  double drift_ = 0;
};

// SKaMPI's interval estimator over ping-pongs between a parent and a child.
// Each exchange bounds the child's offset (child clock minus parent clock) to
// [child_time - parent_receive, child_time - parent_send]; the estimate is the
// middle of the intersection and its half-width a bound that always holds for
// symmetric or asymmetric delays alike.
class OffsetEstimator {
 public:
  void add(int64_t parent_send_ns, int64_t child_ns, int64_t parent_receive_ns);

  int count() const { return count_; }
  int64_t min_rtt_ns() const { return min_rtt_; }
  // False when the intervals do not intersect (a clock stepped or drifted
  // during the measurement); the estimate then falls back to the fastest
  // exchange with a bound widened by the disagreement.
  bool consistent() const { return low_ <= high_; }
  int64_t offset_ns() const;
  int64_t bound_ns() const;
  // The parent's clock at the middle of the fastest exchange, and the child's then.
  int64_t parent_time_ns() const { return best_parent_mid_; }
  int64_t child_time_ns() const { return best_parent_mid_ + best_offset_; }

 private:
  int count_ = 0;
  int64_t low_ = INT64_MIN;
  int64_t high_ = INT64_MAX;
  int64_t min_rtt_ = INT64_MAX;
  int64_t best_offset_ = 0;  // of the fastest exchange, by its midpoint
  int64_t best_parent_mid_ = 0;
};

using rankscope::SyncPoint;

struct MappedTime {
  int64_t time_ns;   // on the reference clock
  int64_t bound_ns;  // error bound of time_ns
  bool outside;      // before the first or after the last measurement
};

// Piecewise-linear offset between measurements. Beyond the measured span the
// nearest segment's slope is kept and the bound grows by kDriftChangePpm per
// unit of distance: the model never claims more than it measured.
class ClockModel {
 public:
  static constexpr double kDriftChangePpm = 50.0;

  ClockModel() = default;  // the reference clock itself: identity, bound 0
  explicit ClockModel(std::vector<SyncPoint> points);

  MappedTime to_reference(int64_t local_ns) const;
  const std::vector<SyncPoint>& points() const { return points_; }
  // Offset and bound at the first measurement, and the mean drift (ppm) over the span.
  int64_t offset_ns() const { return points_.empty() ? 0 : points_.front().offset_ns; }
  int64_t max_bound_ns() const;
  double drift_ppm() const;

 private:
  std::vector<SyncPoint> points_;
};

// Maps through two models in turn (a GPU's timer to its host's clock, then
// the host's clock to the reference); the bounds add up.
MappedTime map_through(const ClockModel& first, const ClockModel& second, int64_t time_ns);

// Puts a GPU's own timer (%globaltimer, which NCCL's KernelCh stamps carry)
// on the host event clock. A calibration sample is a host clock read, the GPU
// timer read by a kernel, another host read: the GPU read happened between
// the two, so the interval estimator bounds the offset exactly as for a
// ping-pong. Points from calibrations at different times make a ClockModel
// from GPU time to host time.
class GpuTimerCalibration {
 public:
  void add(int64_t host_before_ns, int64_t gpu_ns, int64_t host_after_ns) {
    estimator_.add(host_before_ns, gpu_ns, host_after_ns);
  }
  int count() const { return estimator_.count(); }
  // local_ns is in GPU time; offset_ns is GPU timer minus host clock.
  SyncPoint point() const { return {estimator_.child_time_ns(), estimator_.offset_ns(), estimator_.bound_ns()}; }

 private:
  OffsetEstimator estimator_;
};

// The clock every component of this process stamps events with, and the
// function CUPTI calls for its timestamps (cuptiActivityRegisterTimestampCallback
// wants a uint64_t(void)), so GPU records land on the same clock as host events.
void set_process_clock(const Clock& clock);
const Clock& process_clock();
uint64_t process_clock_now();

// Maps a rank's events, which arrive in time order, without searching for the
// segment each time.
class ClockMapper {
 public:
  explicit ClockMapper(const ClockModel& model) : model_(model) {}
  MappedTime map(int64_t local_ns) {
    const auto& points = model_.points();
    if (!primed_ || local_ns < points[segment_].local_ns || local_ns > points[segment_ + 1].local_ns) {
      return search(local_ns);
    }
    const SyncPoint& a = points[segment_];
    const double offset = static_cast<double>(a.offset_ns) + slope_ * static_cast<double>(local_ns - a.local_ns);
    return {local_ns - std::llround(offset), inner_bound_, false};
  }

 private:
  MappedTime search(int64_t local_ns);

  const ClockModel& model_;
  bool primed_ = false;  // segment_, slope_ and inner_bound_ describe a segment
  size_t segment_ = 0;
  double slope_ = 0;
  int64_t inner_bound_ = 0;
};

}  // namespace rankscope::clocksync
