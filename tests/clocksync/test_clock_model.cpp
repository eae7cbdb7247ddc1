// The clock-sync arithmetic without MPI: a simulated transport with seeded
// delays checks that the estimator's bound always covers the injected truth.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "rankscope/clocksync.h"
#include "rankscope/error.h"

namespace rankscope::clocksync {
namespace {

TEST(FakeClock, ParsesTheDocumentedForm) {
  const auto entries = parse_fake_clock("1:+2500000000:+80,3:-730000:-150,0:0:0.5");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].rank, 1);
  EXPECT_EQ(entries[0].offset_ns, 2500000000);
  EXPECT_DOUBLE_EQ(entries[0].drift_ppm, 80);
  EXPECT_EQ(entries[1].rank, 3);
  EXPECT_EQ(entries[1].offset_ns, -730000);
  EXPECT_DOUBLE_EQ(entries[1].drift_ppm, -150);
  EXPECT_DOUBLE_EQ(entries[2].drift_ppm, 0.5);
  EXPECT_TRUE(parse_fake_clock("").empty());
}

TEST(FakeClock, BadEntriesAreNamed) {
  for (const char* spec : {"1:2", "1:x:3", "1:2:3,two:1:1", "-1:0:0", "1:0:1e9"}) {
    try {
      parse_fake_clock(spec);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RANKSCOPE_FAKE_CLOCK: entry"), std::string::npos) << e.what();
    }
  }
}

TEST(FakeClock, VirtualClockIsOffsetPlusScaledTime) {
  const Clock clock(-1000, 200);
  EXPECT_EQ(clock.from_raw(1'000'000'000), 1'000'000'000 - 1000 + 200'000);
  EXPECT_TRUE(clock.is_virtual());
  EXPECT_FALSE(Clock().is_virtual());
  EXPECT_EQ(Clock().from_raw(42), 42);
}

TEST(FakeClock, ForRankReadsTheEnvironment) {
  ::setenv(kFakeClockVariable, "2:5000:10", 1);
  EXPECT_EQ(Clock::for_rank(2).from_raw(0), 5000);
  EXPECT_FALSE(Clock::for_rank(1).is_virtual());
  ::setenv(kFakeClockVariable, "2:oops:10", 1);
  EXPECT_THROW(Clock::for_rank(2), Error);
  ::unsetenv(kFakeClockVariable);
}

// Simulated ping-pongs: the parent reads the raw clock, the child a virtual one.
struct Transport {
  std::mt19937_64 random;
  double median_ns;
  double asymmetry_ns;  // extra delay on the reply leg

  int64_t delay() {
    std::lognormal_distribution<double> tail(std::log(median_ns), 0.6);
    return static_cast<int64_t>(tail(random));
  }
};

OffsetEstimator measure(const Clock& child, Transport& transport, int64_t start, int exchanges) {
  OffsetEstimator estimator;
  int64_t t = start;
  for (int i = 0; i < exchanges; ++i) {
    const int64_t send = t;
    const int64_t arrive = send + transport.delay();
    const int64_t child_time = child.from_raw(arrive + 20);
    const int64_t back = arrive + 40 + transport.delay() + static_cast<int64_t>(transport.asymmetry_ns);
    estimator.add(send, child_time, back);
    t = back + 100;
  }
  return estimator;
}

TEST(OffsetEstimator, BoundCoversTruthUnderDelayTailsAndAsymmetry) {
  std::mt19937_64 seeds(2024);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t offset = static_cast<int64_t>(seeds() % 20'000'000'000ULL) - 10'000'000'000LL;
    const double drift = static_cast<double>(static_cast<int64_t>(seeds() % 401) - 200);
    const double asymmetry = (trial % 3 == 0) ? static_cast<double>(seeds() % 10000) : 0.0;
    const Clock child(offset, drift);
    Transport transport{std::mt19937_64(seeds()), 150.0 + static_cast<double>(seeds() % 5000), asymmetry};
    const int64_t start = 1'000'000'000 + static_cast<int64_t>(seeds() % 1'000'000'000);
    const OffsetEstimator e = measure(child, transport, start, 16);
    ASSERT_TRUE(e.consistent());
    const int64_t truth = child.from_raw(e.parent_time_ns()) - e.parent_time_ns();
    ASSERT_LE(std::llabs(e.offset_ns() - truth), e.bound_ns())
        << "trial " << trial << " offset " << offset << " drift " << drift << " asymmetry " << asymmetry;
    // SKaMPI's bound is never looser than half the best round trip.
    ASSERT_LE(e.bound_ns(), (e.min_rtt_ns() + 1) / 2 + 1);
  }
}

TEST(OffsetEstimator, AsymmetryBiasesByHalfAndStaysInsideTheBound) {
  const Clock child(123456789, 0);
  Transport transport{std::mt19937_64(5), 200, 2000};
  const OffsetEstimator e = measure(child, transport, 1'000'000, 32);
  const int64_t error = e.offset_ns() - 123456789;
  EXPECT_NEAR(static_cast<double>(error), -1000.0, 300.0);  // the reply leg is 2 µs slower
  EXPECT_LE(std::llabs(error), e.bound_ns());
}

TEST(OffsetEstimator, ClockStepMakesItInconsistentWithAWiderBound) {
  OffsetEstimator e;
  e.add(0, 1000, 200);      // offset in [800, 1000]
  e.add(1000, 5000, 1200);  // the child stepped by 4 µs: [3800, 4000]
  EXPECT_FALSE(e.consistent());
  EXPECT_GE(e.bound_ns(), 2800);
}

TEST(ClockModel, InterpolatesBetweenPointsWithinTheBound) {
  const Clock rank(-730000, -150);
  std::vector<SyncPoint> points;
  for (int64_t raw : {1'000'000'000LL, 6'000'000'000LL, 11'000'000'000LL}) {
    const int64_t local = rank.from_raw(raw);
    points.push_back({local, local - raw, 40});
  }
  const ClockModel model(points);
  EXPECT_NEAR(model.drift_ppm(), -150.0, 0.01);
  for (int64_t raw = 1'000'000'000; raw <= 11'000'000'000; raw += 333'333'333) {
    const MappedTime mapped = model.to_reference(rank.from_raw(raw));
    EXPECT_FALSE(mapped.outside);
    EXPECT_LE(std::llabs(mapped.time_ns - raw), mapped.bound_ns) << raw;
    EXPECT_LE(mapped.bound_ns, 41);
  }
}

TEST(ClockModel, OutsideTheSpanTheBoundGrows) {
  const Clock rank(5'000'000, 80);
  std::vector<SyncPoint> points;
  for (int64_t raw : {2'000'000'000LL, 4'000'000'000LL}) {
    const int64_t local = rank.from_raw(raw);
    points.push_back({local, local - raw, 30});
  }
  const ClockModel model(points);
  const MappedTime before = model.to_reference(rank.from_raw(1'000'000'000));
  const MappedTime after = model.to_reference(rank.from_raw(14'000'000'000));
  EXPECT_TRUE(before.outside);
  EXPECT_TRUE(after.outside);
  EXPECT_GE(before.bound_ns, 30 + 50'000);   // 1 s at 50 ppm
  EXPECT_GE(after.bound_ns, 30 + 500'000);   // 10 s at 50 ppm
  EXPECT_LE(std::llabs(after.time_ns - 14'000'000'000), after.bound_ns);
}

TEST(ClockMapper, AgreesWithTheModelOnTimesInOrder) {
  const Clock rank(3'000'000'000, -120);
  std::vector<SyncPoint> points;
  for (int64_t raw : {1'000'000'000LL, 3'000'000'000LL, 3'500'000'000LL, 9'000'000'000LL}) {
    const int64_t local = rank.from_raw(raw);
    points.push_back({local, local - raw + (raw % 7), 20});
  }
  const ClockModel model(points);
  ClockMapper mapper(model);
  std::mt19937_64 random(3);
  for (int64_t raw = 500'000'000; raw < 9'500'000'000; raw += static_cast<int64_t>(random() % 50'000'000)) {
    const int64_t local = rank.from_raw(raw);
    const MappedTime fast = mapper.map(local), exact = model.to_reference(local);
    ASSERT_EQ(fast.time_ns, exact.time_ns) << raw;
    ASSERT_EQ(fast.bound_ns, exact.bound_ns) << raw;
    ASSERT_EQ(fast.outside, exact.outside) << raw;
  }
}

// A GPU timer with its own offset and drift, calibrated by host-bracketed reads
// whose legs are unequal (launch slower than return), as a kernel's would be.
TEST(GpuTimer, CalibrationsPutGpuStampsOnTheReferenceWithinTheBound) {
  const Clock host(-730000, -150);  // the rank's host clock
  const Clock gpu(86'400'000'000'000, 3);
  const Clock reference(0, 0);
  std::mt19937_64 random(11);
  std::vector<SyncPoint> gpu_points;
  for (int64_t raw : {1'000'000'000LL, 6'000'000'000LL}) {
    GpuTimerCalibration calibration;
    for (int i = 0; i < 16; ++i) {
      const int64_t launch = 4000 + static_cast<int64_t>(random() % 3000);
      const int64_t back = 1500 + static_cast<int64_t>(random() % 500);
      const int64_t t = raw + i * 20000;
      calibration.add(host.from_raw(t), gpu.from_raw(t + launch), host.from_raw(t + launch + back));
    }
    gpu_points.push_back(calibration.point());
    EXPECT_LE(calibration.point().bound_ns, 3000);
  }
  std::vector<SyncPoint> host_points;
  for (int64_t raw : {500'000'000LL, 7'000'000'000LL}) {
    host_points.push_back({host.from_raw(raw), host.from_raw(raw) - reference.from_raw(raw), 40});
  }
  const ClockModel gpu_to_host(gpu_points), host_to_reference(host_points);
  for (int64_t raw = 1'100'000'000; raw <= 5'900'000'000; raw += 200'000'000) {
    const MappedTime mapped = map_through(gpu_to_host, host_to_reference, gpu.from_raw(raw));
    EXPECT_FALSE(mapped.outside);
    EXPECT_LE(std::llabs(mapped.time_ns - reference.from_raw(raw)), mapped.bound_ns) << raw;
  }
}

TEST(ProcessClock, IsWhatCuptiWillRead) {
  set_process_clock(Clock(5'000'000'000, 0));
  const uint64_t before = static_cast<uint64_t>(raw_now_ns()) + 5'000'000'000;
  const uint64_t now = process_clock_now();
  EXPECT_GE(now, before);
  EXPECT_LT(now - before, 1'000'000'000u);
  set_process_clock(Clock());
}

TEST(ClockModel, OnePointAndNoPoint) {
  const ClockModel identity;
  EXPECT_EQ(identity.to_reference(77).time_ns, 77);
  EXPECT_EQ(identity.to_reference(77).bound_ns, 0);
  const ClockModel one({{1000, 400, 10}});
  EXPECT_EQ(one.to_reference(1000).time_ns, 600);
  EXPECT_EQ(one.to_reference(1000).bound_ns, 10);
  EXPECT_GT(one.to_reference(1'000'001'000).bound_ns, 10);
}

}  // namespace
}  // namespace rankscope::clocksync
