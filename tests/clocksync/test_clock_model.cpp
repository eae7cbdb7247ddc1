// The clock-sync arithmetic without MPI: a simulated transport with seeded
// delays checks that the estimator's bound always covers the injected truth.
// And the base clocks: the TSC against CLOCK_MONOTONIC_RAW, the choice
// between them, the calibration the processes of a machine share, and the
// clock handed to the agent's MPI shim and to the program a sidecar starts.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rankscope/clocksync/clock.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/error.h"

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
  for (const char* spec : {"1:2", "1:x:3", "1:2:3,two:1:1", "-1:0:0", "1:0:1e9", "1:0:0:5", "1:0:0:x:5", "1:0:0:5:1e9",
                           "1:0:0:5:1:1"}) {
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

// A clock whose rate changes mid-run: continuous at the change, each rate on its side, and the truth
// (injected_offset_ns) the inverse of what the clock reads.
TEST(FakeClock, RateChangesAtTheNamedReading) {
  const auto entries = parse_fake_clock("1:+2000000000:0:5000000000:+400");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].change_at_ns, 5'000'000'000);
  EXPECT_DOUBLE_EQ(entries[0].later_drift_ppm, 400);
  EXPECT_DOUBLE_EQ(parse_fake_clock("1:0:30")[0].later_drift_ppm, 30);  // no change: one rate throughout
  const Clock clock(BaseClock(), entries[0]);
  EXPECT_EQ(clock.from_raw(4'000'000'000), 6'000'000'000);
  EXPECT_EQ(clock.from_raw(5'000'000'000), 7'000'000'000);
  EXPECT_EQ(clock.from_raw(6'000'000'000), 8'000'400'000);
  for (const int64_t raw : {int64_t{1'000'000'000}, int64_t{5'000'000'000}, int64_t{9'000'000'000}}) {
    const int64_t local = clock.from_raw(raw);
    EXPECT_NEAR(injected_offset_ns(entries, 1, local), static_cast<double>(local - raw), 1) << raw;
  }
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
    const OffsetEstimator::Estimate drifting = e.estimate(std::fabs(drift));
    ASSERT_LE(std::llabs(drifting.offset_ns - truth), drifting.bound_ns) << "trial " << trial << " drift " << drift;
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

// Exchanges spread over 30 ms on a loaded machine, the child's clock 400 ppm
// fast: the intervals, each true when it was taken, intersect around an
// offset that was never the offset at the fastest exchange's middle.
TEST(OffsetEstimator, ExchangesSpreadInTimeNeedTheDriftOverTheirSpread) {
  const Clock child(0, 400);
  OffsetEstimator e;
  const auto exchange = [&](int64_t send, int64_t rtt) {
    e.add(send, child.from_raw(send + rtt / 2), send + rtt);
  };
  exchange(1'000'000'000, 40'000);   // the first, slow: [380, 420] µs
  exchange(1'010'000'000, 300);      // the fastest, 10 ms later: 404 µs ± 150 ns
  exchange(1'030'000'000, 15'900);   // 20 ms after, 412 µs ± 7.95 µs: cuts off 404
  ASSERT_TRUE(e.consistent());
  EXPECT_EQ(e.spread_ns(), 20'015'750);
  const int64_t truth = child.from_raw(e.parent_time_ns()) - e.parent_time_ns();
  EXPECT_GT(std::llabs(e.offset_ns() - truth), e.bound_ns()) << "the intersection alone held the truth";
  const auto drift = static_cast<int64_t>(std::ceil(static_cast<double>(e.spread_ns()) * 400e-6));
  EXPECT_LE(std::llabs(e.offset_ns() - truth), e.bound_ns() + drift);
  // The drift over 20 ms (8 µs) costs more than the fastest exchange's
  // 150 ns: the estimate takes that exchange alone, and holds the truth.
  const OffsetEstimator::Estimate estimate = e.estimate(400);
  EXPECT_LE(estimate.bound_ns, 151);
  EXPECT_LE(std::llabs(estimate.offset_ns - truth), estimate.bound_ns);
  // Without drift the intersection (50 ns) is the tighter.
  EXPECT_EQ(e.estimate(0).bound_ns, e.bound_ns());
  EXPECT_EQ(e.estimate(0).offset_ns, e.offset_ns());
}

// Two exchanges 200 ns apart, each of a 100 ns round trip, whose intervals
// overlap by 70 ns: together they beat either alone, drift and all.
TEST(OffsetEstimator, ExchangesCloseTogetherBeatTheFastestAlone) {
  OffsetEstimator e;
  e.add(0, 1060, 100);    // offset 1000: [960, 1060]
  e.add(200, 1290, 300);  // [990, 1090]
  const OffsetEstimator::Estimate estimate = e.estimate(1000);
  EXPECT_EQ(estimate.offset_ns, 1025);
  EXPECT_EQ(estimate.bound_ns, 35 + 1);  // and 1000 ppm of the 250 ns spread
  EXPECT_LE(std::llabs(estimate.offset_ns - 1000), estimate.bound_ns);
}

TEST(OffsetEstimator, ClockStepMakesItInconsistentWithAWiderBound) {
  OffsetEstimator e;
  e.add(0, 1000, 200);      // offset in [800, 1000]
  e.add(1000, 5000, 1200);  // the child stepped by 4 µs: [3800, 4000]
  EXPECT_FALSE(e.consistent());
  EXPECT_GE(e.bound_ns(), 2800);
}

// Past its 10 ms, only the reference goes on, to 100 ms, and only while the
// bound is over half as wide again as the pair's narrowest earlier one.
TEST(SyncPatience, OnlyTheReferenceGoesOnAndOnlyOnALinkShownToDoBetter) {
  const SyncOptions options{.wide_bound_ns = 25'000, .patience_ms = 10, .reference_patience_ms = 100};
  EXPECT_FALSE(earns_another_exchange(options, 25'000, 1, true, std::nullopt)) << "narrow enough";
  EXPECT_TRUE(earns_another_exchange(options, 40'000, 9, false, std::nullopt)) << "within every parent's patience";
  EXPECT_FALSE(earns_another_exchange(options, 40'000, 11, false, 20'000)) << "another parent's children pay for it";
  EXPECT_FALSE(earns_another_exchange(options, 40'000, 11, true, std::nullopt)) << "no earlier round to go on";
  EXPECT_TRUE(earns_another_exchange(options, 40'000, 11, true, 20'000)) << "the link did better before";
  EXPECT_FALSE(earns_another_exchange(options, 30'000, 11, true, 20'000)) << "within half again of its narrowest";
  EXPECT_FALSE(earns_another_exchange(options, 40'000, 101, true, 20'000)) << "the reference's patience is over";
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

// Offsets as large as epoch times (a trace's baseTimeNanoseconds) map to the
// ns: a double would keep them only to 256 ns.
TEST(ClockMapper, LargeOffsetsMapExactly) {
  const int64_t offset = -1'711'964'646'123'456'789;
  const std::vector<SyncPoint> points = {{1'000, offset, 5}, {10'000'001'000, offset, 5}};
  const ClockModel model(points);
  ClockMapper mapper(model);
  for (int64_t local : {int64_t{1'000}, int64_t{1'001}, int64_t{4'567'890'123}, int64_t{10'000'001'000}}) {
    EXPECT_EQ(model.to_reference(local).time_ns, local - offset) << local;
    EXPECT_EQ(mapper.map(local).time_ns, local - offset) << local;
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


// ------------------------------------------------------- base clocks ---

namespace fs = std::filesystem;

bool counter_readable() {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("flags")) return line.find(" rdtscp") != std::string::npos;
  }
#endif
  return false;
}

bool machine_has_invariant_tsc() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.starts_with("flags")) {
      flags = line;
      break;
    }
  }
  std::ifstream source_file("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string clocksource;
  std::getline(source_file, clocksource);
  return tsc_is_invariant(flags, clocksource);
}

// Sets environment variables for one test, and puts back what was there.
class ScopedEnvironment {
 public:
  ScopedEnvironment& set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
    return *this;
  }
  ScopedEnvironment& unset(const char* name) {
    remember(name);
    ::unsetenv(name);
    return *this;
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  void remember(const char* name) {
    if (saved_.count(name)) return;
    const char* value = std::getenv(name);
    saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

fs::path fresh_directory(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string file_text(const fs::path& path) {
  std::ifstream file(path);
  std::string text;
  std::getline(file, text);
  return text;
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text << "\n"; }

TEST(TscCalibration, MapsTicksLinearlyEitherSideOfTheBase) {
  const TscCalibration half_ns{1'000'000, 5'000, uint64_t{1} << 31};
  EXPECT_EQ(half_ns.ns_at(1'000'000), 5'000);
  EXPECT_EQ(half_ns.ns_at(1'000'010), 5'005);
  EXPECT_EQ(half_ns.ns_at(999'990), 4'995);
  // Ten years of a 4 GHz counter at a quarter nanosecond per tick: no overflow.
  const TscCalibration quarter_ns{0, 0, uint64_t{1} << 30};
  const uint64_t ten_years = 4'000'000'000ull * 86'400 * 3'650;
  EXPECT_EQ(quarter_ns.ns_at(ten_years), static_cast<int64_t>(ten_years / 4));
}

TEST(BaseClockText, RoundTripsAndNamesWhatIsWrong) {
  EXPECT_EQ(BaseClock::parse("raw").text(), "raw");
  EXPECT_FALSE(BaseClock::parse("raw").uses_tsc());
#if defined(__x86_64__)
  const BaseClock tsc = BaseClock::parse("tsc:123:-456:1651910334");
  EXPECT_TRUE(tsc.uses_tsc());
  EXPECT_EQ(tsc.tsc(), (TscCalibration{123, -456, 1651910334}));
  EXPECT_EQ(tsc.text(), "tsc:123:-456:1651910334");
  EXPECT_NE(tsc.identity(), BaseClock().identity());
  EXPECT_NE(tsc.identity(), BaseClock::parse("tsc:123:-455:1651910334").identity());
#endif
  for (const char* bad : {"", "tsc", "tsc:1:2", "tsc:1:2:3:4", "tsc:1:x:3", "tsc:1:2:0", "hpet"}) {
    try {
      BaseClock::parse(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("clock base '" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(BaseClockChoice, TheCounterOnlyWhereItIsInvariantAndKeepsTheKernelsTime) {
  const std::string flags = "flags\t\t: fpu tsc rdtscp constant_tsc nonstop_tsc tsc_known_freq";
  EXPECT_TRUE(tsc_is_invariant(flags, "tsc\n"));
  EXPECT_FALSE(tsc_is_invariant(flags, "hpet\n"));
  EXPECT_FALSE(tsc_is_invariant(flags, "kvm-clock"));
  EXPECT_FALSE(tsc_is_invariant("flags\t\t: fpu tsc rdtscp constant_tsc", "tsc"));
  EXPECT_FALSE(tsc_is_invariant("flags\t\t: fpu tsc constant_tsc nonstop_tsc", "tsc"));
  EXPECT_FALSE(tsc_is_invariant("flags\t\t: fpu tsc rdtscp constant_tsc_x nonstop_tsc", "tsc"));
}

TEST(BaseClockChoice, RawWhenAskedFor) {
  ScopedEnvironment environment;
  environment.unset(kClockBaseVariable).set(kClockVariable, "raw");
  const BaseClock raw = BaseClock::from_environment();
  EXPECT_FALSE(raw.uses_tsc());
  const int64_t before = raw_now_ns();
  const int64_t now = raw.now_ns();
  EXPECT_LE(before, now);
  EXPECT_LE(now, raw_now_ns());
}

TEST(BaseClockChoice, AutoTakesTheInvariantCounterThroughTheMachinesFile) {
  if (!machine_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC here: auto is CLOCK_MONOTONIC_RAW";
  const fs::path dir = fresh_directory("rankscope-auto-clock");
  ScopedEnvironment environment;
  environment.unset(kClockBaseVariable).unset(kClockVariable).set(kClockFileVariable, (dir / "tsc").string());
  const BaseClock chosen = BaseClock::from_environment();
  EXPECT_TRUE(chosen.uses_tsc());
  EXPECT_EQ(file_text(dir / "tsc"), chosen.text());
  environment.set(kClockVariable, "tsc");
  EXPECT_EQ(BaseClock::from_environment().text(), chosen.text());
  fs::remove_all(dir);
}

TEST(BaseClockChoice, AHandedDownClockIsTakenAsItIs) {
  ScopedEnvironment environment;
  environment.set(kClockVariable, "raw").set(kClockBaseVariable, "raw");
  EXPECT_FALSE(BaseClock::from_environment().uses_tsc());
#if defined(__x86_64__)
  environment.set(kClockBaseVariable, "tsc:5:6:7");
  EXPECT_EQ(BaseClock::from_environment().tsc(), (TscCalibration{5, 6, 7}));
#endif
}

TEST(BaseClockChoice, MalformedSettingsAreNamed) {
  ScopedEnvironment environment;
  environment.unset(kClockBaseVariable).set(kClockVariable, "fast");
  try {
    BaseClock::from_environment();
    ADD_FAILURE() << "RANKSCOPE_CLOCK=fast was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RANKSCOPE_CLOCK='fast'"), std::string::npos) << e.what();
  }
  environment.set(kClockBaseVariable, "tsc:1:2");
  try {
    BaseClock::from_environment();
    ADD_FAILURE() << "a clock base of two fields was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RANKSCOPE_CLOCK_BASE: clock base 'tsc:1:2'"), std::string::npos) << e.what();
  }
}

// How far the clock is from CLOCK_MONOTONIC_RAW, taken in the narrowest of
// many (raw, clock, raw) brackets.
int64_t ahead_of_raw(const BaseClock& clock) {
  int64_t narrowest = INT64_MAX, ahead = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t before = raw_now_ns();
    const int64_t now = clock.now_ns();
    const int64_t after = raw_now_ns();
    if (after - before < narrowest) {
      narrowest = after - before;
      ahead = now - before - (after - before) / 2;
    }
  }
  return ahead;
}

TEST(TscClock, AgreesWithMonotonicRawAfterCalibration) {
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  const BaseClock tsc(calibrate_tsc());
  const int64_t at_first = ahead_of_raw(tsc);
  ::usleep(300'000);
  const int64_t later = ahead_of_raw(tsc);
  EXPECT_LE(std::llabs(at_first), 2'000) << "ns";
  EXPECT_LE(std::llabs(later), 2'000) << "ns";
  // A 20 ms calibration is good to about 0.05 ppm: 15 ns over these 0.3 s. 1 ppm allows for a loaded machine.
  EXPECT_LE(std::llabs(later - at_first), 300) << "ns of drift in 0.3 s";
}

// Every read comes after the latest read any thread has published: the
// clock is monotonic across threads, as clock_gettime is.
TEST(TscClock, IsMonotonicAcrossThreads) {
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  const BaseClock tsc(calibrate_tsc(2'000'000));
  std::atomic<int64_t> latest{INT64_MIN};
  std::atomic<uint64_t> backwards{0}, reads{0};
  const auto read_and_publish = [&] {
    int64_t own_last = INT64_MIN;
    for (int i = 0; i < 300'000; ++i) {
      const int64_t published = latest.load(std::memory_order_acquire);
      const int64_t now = tsc.now_ns();
      if (now < published || now < own_last) backwards.fetch_add(1, std::memory_order_relaxed);
      own_last = now;
      int64_t seen = published;
      while (seen < now && !latest.compare_exchange_weak(seen, now, std::memory_order_release, std::memory_order_acquire)) {
      }
    }
    reads.fetch_add(300'000, std::memory_order_relaxed);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(read_and_publish);
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(backwards.load(), 0u) << "of " << reads.load() << " reads";
}

TEST(TscClock, FakeClocksRunOnTopOfIt) {
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  const BaseClock tsc(calibrate_tsc(2'000'000));
  ScopedEnvironment environment;
  environment.set(kFakeClockVariable, "1:+2500000000:+80");
  const Clock rank1 = Clock::for_rank(1, tsc);
  EXPECT_TRUE(rank1.is_virtual());
  EXPECT_EQ(rank1.base().text(), tsc.text());
  const int64_t base_before = tsc.now_ns();
  const int64_t virtual_now = rank1.now_ns();
  const int64_t base_after = tsc.now_ns();
  EXPECT_GE(virtual_now, rank1.from_raw(base_before));
  EXPECT_LE(virtual_now, rank1.from_raw(base_after));
  EXPECT_EQ(rank1.from_raw(1'000'000'000), 1'000'000'000 + 2'500'000'000 + 80'000);
  EXPECT_FALSE(Clock::for_rank(0, tsc).is_virtual());
}

TEST(NodeCalibration, TheProcessesOfAMachineShareOne) {
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  const fs::path dir = fresh_directory("rankscope-node-clock");
  const std::string path = (dir / "tsc").string();
  const TscCalibration first = node_tsc_calibration(path);
  EXPECT_EQ(file_text(path), BaseClock(first).text());
  EXPECT_EQ(node_tsc_calibration(path), first);
  // Another process finds the same.
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string text = BaseClock(node_tsc_calibration(path)).text();
    const bool sent = ::write(report[1], text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::_exit(sent ? 0 : 1);
  }
  ::close(report[1]);
  char text[128] = {};
  const ssize_t length = ::read(report[0], text, sizeof(text) - 1);
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(std::string(text, static_cast<size_t>(std::max<ssize_t>(length, 0))), BaseClock(first).text());
  // An empty path shares nothing.
  EXPECT_NE(node_tsc_calibration(""), first);
  fs::remove_all(dir);
}

TEST(NodeCalibration, AStaleOrUntrustedFileIsReplaced) {
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  const fs::path dir = fresh_directory("rankscope-stale-clock");
  const fs::path path = dir / "tsc";
  const TscCalibration good = calibrate_tsc(2'000'000);
  TscCalibration stepped = good;
  stepped.base_ns += 50'000'000;  // as if the counter had been reset under a running clock
  for (const std::string& stale : {std::string("garbage"), std::string("raw"), BaseClock(stepped).text()}) {
    write_file(path, stale);
    const TscCalibration chosen = node_tsc_calibration(path.string());
    EXPECT_NE(BaseClock(chosen).text(), stale);
    EXPECT_EQ(file_text(path), BaseClock(chosen).text()) << "after " << stale;
  }
  // Anyone could have written a file others may write: it is not trusted.
  write_file(path, BaseClock(good).text());
  ::chmod(path.c_str(), 0666);
  EXPECT_NE(node_tsc_calibration(path.string()), good);
  write_file(path, BaseClock(good).text());
  ::chmod(path.c_str(), 0644);
  EXPECT_EQ(node_tsc_calibration(path.string()), good);
  fs::remove_all(dir);
}

// ------------------------------------ the clock in other processes ---

// Set for a process the tests below start: "FROM_PARENT_FD:TO_PARENT_FD".
constexpr const char* kChildPipesVariable = "RANKSCOPE_TEST_CLOCK_CHILD";

// Runs only in such a process. It reports the clock it would stamp events
// with: its base clock, the agent's (when the capture library is loaded)
// and the base clock it was handed, one line each; then, for each byte it
// receives, a reading of its rank-0 clock.
TEST(ClockHandoff, ChildReportsItsClock) {
  const char* pipes = std::getenv(kChildPipesVariable);
  if (!pipes) GTEST_SKIP() << "runs in the processes the other ClockHandoff tests start";
  int from_parent = -1, to_parent = -1;
  ASSERT_EQ(std::sscanf(pipes, "%d:%d", &from_parent, &to_parent), 2);
  const Clock clock = Clock::for_rank(0);
  using AgentClockBase = const char* (*)();
  const auto agent_clock_base = reinterpret_cast<AgentClockBase>(::dlsym(RTLD_DEFAULT, "rankscope_agent_clock_base"));
  const char* handed = std::getenv(kClockBaseVariable);
  const std::string report = clock.base().text() + "\n" + (agent_clock_base ? agent_clock_base() : "-") + "\n" +
                             (handed ? handed : "-") + "\n";
  ASSERT_EQ(::write(to_parent, report.data(), report.size()), static_cast<ssize_t>(report.size()));
  for (char request = 0; ::read(from_parent, &request, 1) == 1 && request == 'r';) {
    const int64_t now = clock.now_ns();
    ASSERT_EQ(::write(to_parent, &now, sizeof(now)), static_cast<ssize_t>(sizeof(now)));
  }
}

// A child of this test binary running ChildReportsItsClock, through `command`
// in front of it (nothing: the binary itself).
class ReportingChild {
 public:
  explicit ReportingChild(std::vector<std::string> command) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return;
    command.push_back(fs::read_symlink("/proc/self/exe").string());
    command.push_back("--gtest_filter=ClockHandoff.ChildReportsItsClock");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::setenv(kChildPipesVariable, (std::to_string(to_child[0]) + ":" + std::to_string(from_child[1])).c_str(), 1);
      std::vector<char*> argv;
      for (std::string& arg : command) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_child_ = to_child[1];
    from_child_ = from_child[0];
  }
  ~ReportingChild() { finish(); }

  // The report's lines: base clock, agent's base clock, handed-down base clock.
  std::vector<std::string> report() {
    std::vector<std::string> lines(1);
    for (char c; lines.size() <= 3 && ::read(from_child_, &c, 1) == 1;) {
      if (c == '\n') {
        lines.emplace_back();
      } else {
        lines.back() += c;
      }
    }
    lines.pop_back();
    return lines;
  }
  int64_t reading() {
    const char request = 'r';
    int64_t now = 0;
    if (::write(to_child_, &request, 1) != 1 || ::read(from_child_, &now, sizeof(now)) != sizeof(now)) return INT64_MIN;
    return now;
  }
  // The child's exit status.
  int finish() {
    if (pid_ <= 0) return -1;
    ::close(to_child_);
    ::close(from_child_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
};

// A process the program was handed a clock by stamps on exactly that clock,
// virtual clock on top included: each reading of the child lies between two
// of the parent's.
TEST(ClockHandoff, AChildStampsOnTheClockItWasHanded) {
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  // A calibration of this process's own, which no other process could make:
  // the child is on it only if the handoff works.
  const BaseClock mine(calibrate_tsc(2'000'000));
  ScopedEnvironment environment;
  environment.set(kClockBaseVariable, mine.text()).set(kFakeClockVariable, "0:+5000000:+100");
  const Clock parent_clock = Clock::for_rank(0, mine);
  ReportingChild child({});
  const std::vector<std::string> report = child.report();
  ASSERT_EQ(report.size(), 3u);
  EXPECT_EQ(report[0], mine.text());
  int out_of_order = 0;
  for (int i = 0; i < 1000; ++i) {
    const int64_t before = parent_clock.now_ns();
    const int64_t child_now = child.reading();
    const int64_t after = parent_clock.now_ns();
    if (child_now < before || child_now > after) ++out_of_order;
  }
  EXPECT_EQ(out_of_order, 0);
  EXPECT_EQ(child.finish(), 0);
}

// `rankscope run` in sidecar mode measures clock sync in its own process, and
// the program it starts, with the agent inside, must stamp on that clock.
// No calibration file is shared here, so the program has the sidecar's clock
// only if the sidecar hands it down.
TEST(ClockHandoff, TheSidecarHandsItsClockToTheProgram) {
  const fs::path rankscope = RANKSCOPE_TEST_COMMAND;
  const fs::path dir = fresh_directory("rankscope-sidecar-clock");
  ScopedEnvironment environment;
  environment.set(kClockFileVariable, "").unset(kClockBaseVariable).unset(kClockVariable).unset(kFakeClockVariable);
  environment.set("OMPI_ALLOW_RUN_AS_ROOT", "1").set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  ReportingChild child({rankscope.string(), "run", "--mode", "sidecar", "--capture", "mpi", "-o",
                        (dir / "job.h5").string(), "--"});
  const std::vector<std::string> report = child.report();
  ASSERT_EQ(report.size(), 3u);
  EXPECT_NE(report[2], "-") << "the sidecar handed down no clock";
  EXPECT_EQ(report[0], report[2]);
  EXPECT_EQ(report[1], report[2]) << "the agent does not stamp on the handed-down clock";
  if (machine_has_invariant_tsc()) {
    EXPECT_TRUE(report[2].starts_with("tsc:")) << report[2];
  }
  EXPECT_EQ(child.finish(), 0);
  fs::remove_all(dir);
}

// The MPI shim has its own copy of the clock library. It builds its clock
// from the agent's base clock (mpi_lifecycle.cpp, measure_clock), as this test
// does with its own copy, and must read exactly the agent's times. The agent
// is given a clock no other copy would choose: a calibration a second off.
TEST(AgentClock, TheShimsCopyReadsTheAgentsClock) {
  const fs::path library = RANKSCOPE_TEST_CAPTURE_LIBRARY;
  if (!counter_readable()) GTEST_SKIP() << "no TSC readable in order here";
  TscCalibration second_off = calibrate_tsc(2'000'000);
  second_off.base_ns += 1'000'000'000;
  const fs::path dir = fresh_directory("rankscope-agent-clock");
  ScopedEnvironment environment;
  environment.set("RANKSCOPE_SHARD_DIR", dir.string())
      .set("RANKSCOPE_AGENT_PID", std::to_string(::getpid()))
      .set("RANKSCOPE_CAPTURE", "mpi")
      .set("RANKSCOPE_RANK", "3")
      .set(kFakeClockVariable, "3:+7000:+50")
      .set(kClockBaseVariable, BaseClock(second_off).text());
  void* agent = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(agent, nullptr) << ::dlerror();
  const auto agent_now = reinterpret_cast<int64_t (*)()>(::dlsym(agent, "rankscope_agent_now"));
  const auto agent_clock_base = reinterpret_cast<const char* (*)()>(::dlsym(agent, "rankscope_agent_clock_base"));
  const auto agent_finish = reinterpret_cast<bool (*)()>(::dlsym(agent, "rankscope_agent_finish"));
  ASSERT_TRUE(agent_now && agent_clock_base && agent_finish);

  const Clock shim_clock = Clock::for_rank(3, BaseClock::parse(agent_clock_base()));
  EXPECT_EQ(shim_clock.base().text(), BaseClock(second_off).text());
  int out_of_order = 0;
  for (int i = 0; i < 100'000; ++i) {
    const int64_t agent_before = agent_now();
    const int64_t shim = shim_clock.now_ns();
    const int64_t agent_after = agent_now();
    if (shim < agent_before || shim > agent_after) ++out_of_order;
  }
  EXPECT_EQ(out_of_order, 0);
  EXPECT_TRUE(agent_finish());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rankscope::clocksync
