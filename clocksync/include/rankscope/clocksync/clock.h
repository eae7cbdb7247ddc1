// One timeline for every rank: the local event clock, offset measurement
// between two processes with an error bound, and the piecewise-linear model
// that maps a rank's local times onto the reference (rank 0's) clock.
// Background and measured figures: docs/design/clock-sync.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/model/metadata.h"

namespace rankscope::clocksync {

// CLOCK_MONOTONIC_RAW: never slewed by NTP; drift is modelled, not corrected by the OS.
int64_t raw_now_ns();
// CLOCK_REALTIME, ns since the epoch: the instant every node names alike (as
// far as NTP or PTP keeps the nodes' wall clocks together).
int64_t wall_now_ns();

// The switch between the two base clocks below: auto (the default: the TSC
// where it is invariant and the kernel keeps time with it), tsc or raw.
inline constexpr const char* kClockVariable = "RANKSCOPE_CLOCK";
// The base clock a process hands to the programs it starts (BaseClock::text()),
// so that they stamp events on exactly the clock it measures: `rankscope run`
// sets it for the program in sidecar mode. When set, it is taken as it is.
inline constexpr const char* kClockBaseVariable = "RANKSCOPE_CLOCK_BASE";

// A linear map from the CPU's time-stamp counter to nanoseconds, measured
// against CLOCK_MONOTONIC_RAW: ns = base_ns + (tsc - base_tsc) * ns_per_tick.
struct TscCalibration {
  uint64_t base_tsc = 0;
  int64_t base_ns = 0;             // CLOCK_MONOTONIC_RAW when the counter read base_tsc
  uint64_t ns_per_tick_q32 = 0;    // nanoseconds per tick, 32 fraction bits: steps of 0.6 ppb at 2.6 GHz

  int64_t ns_at(uint64_t tsc) const {
    // Signed, so that a counter read before base_tsc maps before base_ns;
    // 128 bits, so that years of ticks times the scale cannot overflow.
    __extension__ using Wide = __int128;
    const auto ticks = static_cast<Wide>(static_cast<int64_t>(tsc - base_tsc));
    return base_ns + static_cast<int64_t>((ticks * static_cast<Wide>(ns_per_tick_q32)) >> 32);
  }
  bool operator==(const TscCalibration&) const = default;
};

#if defined(__x86_64__)
// rdtscp waits for every earlier instruction, loads included, as the vDSO's
// own read does: a thread that saw another's store reads a later time than
// the other read before storing. The memory clobber keeps the compiler from
// moving memory accesses across it either.
inline uint64_t read_tsc_ordered() {
  uint32_t low, high;
  asm volatile("rdtscp" : "=a"(low), "=d"(high) : : "rcx", "memory");
  return uint64_t{high} << 32 | low;
}
#endif

// Measures a TscCalibration now, over `window_ns` (it sleeps that long): the
// narrowest of many (counter, CLOCK_MONOTONIC_RAW, counter) brackets at each
// end. 20 ms pin the rate to about 0.05 ppm. Throws Error when the counter
// does not advance with the clock.
TscCalibration calibrate_tsc(int64_t window_ns = 20'000'000);

// Whether the TSC counts at a constant rate in every power state and the
// kernel keeps time with it (so it is synchronised across CPUs), from
// /proc/cpuinfo's flags and the current clocksource; rdtscp is needed too.
bool tsc_is_invariant(std::string_view cpu_flags, std::string_view clocksource);

// The calibration shared by every process of one user on this machine,
// through the file at `path`: the first process measures and publishes it,
// later ones read it. Ranks on one node then run one clock, so that they can
// share their node leader's sync measurement. A file that is not the user's,
// does not parse, or disagrees with CLOCK_MONOTONIC_RAW by more than the
// rate error allows (the counter was reset by a suspend) is replaced; where
// no file can be written (or `path` is empty), the process's own
// calibration is returned.
TscCalibration node_tsc_calibration(const std::string& path);

// Where node_tsc_calibration keeps it: RANKSCOPE_CLOCK_FILE when set (empty:
// nowhere, each process calibrates its own), else /dev/shm/rankscope-tsc-UID
// (memory, gone at reboot).
inline constexpr const char* kClockFileVariable = "RANKSCOPE_CLOCK_FILE";
std::string node_tsc_calibration_path();

// The physical clock under a process's event clock: CLOCK_MONOTONIC_RAW
// through clock_gettime, or the TSC through a calibration against it (a
// third of the cost). Both are monotonic and never slewed.
class BaseClock {
 public:
  BaseClock() = default;  // CLOCK_MONOTONIC_RAW
  explicit BaseClock(const TscCalibration& tsc) : tsc_(tsc) {}

  int64_t now_ns() const {
#if defined(__x86_64__)
    if (uses_tsc()) return tsc_.ns_at(read_tsc_ordered());
#endif
    return raw_now_ns();
  }
  bool uses_tsc() const { return tsc_.ns_per_tick_q32 != 0; }
  const TscCalibration& tsc() const { return tsc_; }

  // "raw", or "tsc:BASE_TSC:BASE_NS:NS_PER_TICK_Q32" (decimal): the form of
  // RANKSCOPE_CLOCK_BASE, of the node's calibration file, and of the agent's
  // rankscope_agent_clock_base(). parse() throws Error naming what is wrong.
  std::string text() const;
  static BaseClock parse(std::string_view text);
  // Equal in two processes exactly when they read one clock.
  uint64_t identity() const;

  // The base clock RANKSCOPE_CLOCK_BASE or RANKSCOPE_CLOCK asks for, on this
  // machine; throws Error naming a malformed variable, or tsc forced where
  // the CPU cannot read its counter in order.
  static BaseClock from_environment();

 private:
  TscCalibration tsc_;
};

// This process's base clock: BaseClock::from_environment(), chosen on the
// first call and the same ever after (the calibration is never changed, so
// the clock never jumps). Throws what from_environment throws until a call succeeds.
const BaseClock& process_base_clock();

// RANKSCOPE_FAKE_CLOCK="rank:offset_ns:drift_ppm[:at_ns:later_drift_ppm][,...]"
// makes the named ranks read offset + (1 + drift) * t, so one machine can carry
// known skew for tests; with at_ns, from the base clock's reading at_ns on the
// clock runs at later_drift_ppm instead (a clock whose rate changes mid-run).
inline constexpr const char* kFakeClockVariable = "RANKSCOPE_FAKE_CLOCK";

struct FakeClockEntry {
  int32_t rank;
  int64_t offset_ns;
  double drift_ppm;
  int64_t change_at_ns = std::numeric_limits<int64_t>::max();  // a base clock reading
  double later_drift_ppm = drift_ppm;
  // The virtual clock's reading when the base clock reads `raw_ns`, and back.
  double virtual_ns(double raw_ns) const;
  double raw_ns(double virtual_ns) const;
};

// Throws Error naming the entry and what is wrong with it.
std::vector<FakeClockEntry> parse_fake_clock(std::string_view spec);

// The true offset of `rank` to rank 0 when `rank`'s clock reads `local_ns`,
// under injected clocks (ranks not listed run their base clock): the ground
// truth that tests and benchmarks hold measurements against.
double injected_offset_ns(const std::vector<FakeClockEntry>& clocks, int32_t rank, int64_t local_ns);

// The event clock of one rank: a base clock, or a virtual one on top of it for tests.
class Clock {
 public:
  Clock() = default;  // CLOCK_MONOTONIC_RAW
  Clock(int64_t offset_ns, double drift_ppm) : Clock(BaseClock(), {0, offset_ns, drift_ppm}) {}
  Clock(const BaseClock& base, const FakeClockEntry& virtual_clock)
      : base_(base),
        offset_ns_(virtual_clock.offset_ns),
        drift_(virtual_clock.drift_ppm * 1e-6),
        change_at_ns_(virtual_clock.change_at_ns),
        later_drift_(virtual_clock.later_drift_ppm * 1e-6) {}

  // The clock for `rank` on `base`, virtual if RANKSCOPE_FAKE_CLOCK names
  // it; throws Error when the variable is malformed.
  static Clock for_rank(int32_t rank) { return for_rank(rank, process_base_clock()); }
  static Clock for_rank(int32_t rank, const BaseClock& base);

  int64_t now_ns() const { return from_raw(base_.now_ns()); }
  // `raw_ns` is a reading of the base clock.
  int64_t from_raw(int64_t raw_ns) const {
    if (drift_ == 0 && later_drift_ == 0) return raw_ns + offset_ns_;
    const double drifted = raw_ns <= change_at_ns_ ? static_cast<double>(raw_ns) * drift_
                                                    : static_cast<double>(change_at_ns_) * drift_ +
                                                          static_cast<double>(raw_ns - change_at_ns_) * later_drift_;
    return raw_ns + offset_ns_ + std::llround(drifted);
  }
  bool is_virtual() const { return offset_ns_ != 0 || drift_ != 0 || later_drift_ != 0; }
  const BaseClock& base() const { return base_; }

 private:
  BaseClock base_;
  int64_t offset_ns_ = 0;
  double drift_ = 0;
  int64_t change_at_ns_ = std::numeric_limits<int64_t>::max();
  double later_drift_ = 0;
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
  // How far, on the parent's clock, the exchanges reach from the middle of
  // the fastest one. The bound holds for an offset that stays put while they
  // run; one that drifts moves by up to its drift times this (exchanges on a
  // loaded machine spread over tens of milliseconds, 10 µs of a 400 ppm
  // drift).
  int64_t spread_ns() const;

  struct Estimate {
    int64_t offset_ns;  // at the middle of the fastest exchange
    int64_t bound_ns;
  };
  // The offset allowing it to drift by up to `drift_ppm` while the exchanges
  // ran: the tighter of every exchange's interval together, widened by the
  // drift over their spread, and the fastest exchange alone, half its round
  // trip. Exchanges close together narrow the first; spread over a loaded
  // machine's tens of milliseconds, their drift can cost more than one
  // quick exchange's width.
  Estimate estimate(double drift_ppm) const;

 private:
  int count_ = 0;
  int64_t low_ = INT64_MIN;
  int64_t high_ = INT64_MAX;
  int64_t min_rtt_ = INT64_MAX;
  int64_t best_offset_ = 0;  // of the fastest exchange, by its midpoint
  int64_t best_parent_mid_ = 0;
  int64_t first_send_ = INT64_MAX;
  int64_t last_receive_ = INT64_MIN;
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
    const int64_t offset = a.offset_ns + std::llround(slope_ * static_cast<double>(local_ns - a.local_ns));
    return {local_ns - offset, inner_bound_, false};
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
