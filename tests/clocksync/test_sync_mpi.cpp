// Sync rounds over real MPI with skew injected through RANKSCOPE_FAKE_CLOCK:
// the recovered offsets must match the injected truth within the reported bound.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <optional>

#include "rankscope/clocksync/sync_mpi.h"

namespace rankscope::clocksync {
namespace {

int comm_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::vector<FakeClockEntry> injected_clocks() {
  const char* spec = std::getenv(kFakeClockVariable);
  return spec ? parse_fake_clock(spec) : std::vector<FakeClockEntry>{};
}

double injected_drift_ppm(int32_t rank) {
  for (const FakeClockEntry& e : injected_clocks()) {
    if (e.rank == rank) return e.drift_ppm;
  }
  return 0;
}

double true_offset(int32_t rank, int64_t local_ns) { return injected_offset_ns(injected_clocks(), rank, local_ns); }

TEST(SyncRound, RecoversInjectedOffsetsWithinTheBound) {
  ClockSynchronizer synchronizer(MPI_COMM_WORLD, Clock::for_rank(comm_rank()));
  const std::optional<SyncPoint> first_round = synchronizer.round();
  usleep(300000);
  const std::optional<SyncPoint> second_round = synchronizer.round();
  ASSERT_TRUE(first_round && second_round) << synchronizer.error();
  const SyncPoint first = *first_round, second = *second_round;
  for (const SyncPoint& p : {first, second}) {
    const double error = static_cast<double>(p.offset_ns) - true_offset(comm_rank(), p.local_ns);
    EXPECT_LE(std::fabs(error), static_cast<double>(p.bound_ns))
        << "rank " << comm_rank() << " offset " << p.offset_ns << " bound " << p.bound_ns;
    EXPECT_LT(p.bound_ns, 1'000'000) << "a bound of a millisecond is no measurement";
  }
  if (comm_rank() == 0) {
    EXPECT_EQ(first.offset_ns, 0);
    EXPECT_EQ(first.bound_ns, 0);
  }

  // Between the two rounds the model follows the drift.
  const ClockModel model({first, second});
  for (int i = 0; i <= 10; ++i) {
    const int64_t local = first.local_ns + (second.local_ns - first.local_ns) * i / 10;
    const MappedTime mapped = model.to_reference(local);
    const double truth = static_cast<double>(local) - true_offset(comm_rank(), local);
    EXPECT_LE(std::fabs(static_cast<double>(mapped.time_ns) - truth), static_cast<double>(mapped.bound_ns))
        << "rank " << comm_rank() << " step " << i;
  }
  const double injected_drift = injected_drift_ppm(comm_rank()) - injected_drift_ppm(0);
  // Two points each within its bound pin the slope to (bound1 + bound2) / span.
  const double slope_bound_ppm = static_cast<double>(first.bound_ns + second.bound_ns) /
                                 static_cast<double>(second.local_ns - first.local_ns) * 1e6;
  if (comm_rank() != 0) {
    EXPECT_NEAR(model.drift_ppm(), injected_drift, slope_bound_ppm + 0.01) << "rank " << comm_rank();
  }
}

TEST(SyncRound, RanksSharingAClockTakeTheLeadersExactly) {
  ClockSynchronizer synchronizer(MPI_COMM_WORLD, Clock());
  const std::optional<SyncPoint> point = synchronizer.round();
  ASSERT_TRUE(point) << synchronizer.error();
  // One machine: one node, one physical clock.
  EXPECT_EQ(point->offset_ns, 0);
  EXPECT_EQ(point->bound_ns, 0);
}

// Ranks that read the machine's shared TSC calibration run one clock, and
// take their node leader's measurement as those on CLOCK_MONOTONIC_RAW do.
TEST(SyncRound, RanksOnTheMachinesCalibrationTakeTheLeadersExactly) {
  const BaseClock& machine = process_base_clock();
  if (!machine.uses_tsc()) GTEST_SKIP() << "no invariant TSC here";
  const uint64_t identity = machine.identity();
  uint64_t lowest = 0, highest = 0;
  MPI_Allreduce(&identity, &lowest, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&identity, &highest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (lowest != highest) GTEST_SKIP() << "the ranks calibrated apart (no shared calibration file)";
  ClockSynchronizer synchronizer(MPI_COMM_WORLD, Clock(machine, {comm_rank(), 0, 0}));
  const std::optional<SyncPoint> point = synchronizer.round();
  ASSERT_TRUE(point) << synchronizer.error();
  EXPECT_EQ(point->offset_ns, 0);
  EXPECT_EQ(point->bound_ns, 0);
}

// Ranks of one node on different base clocks, none virtual (as when each
// process calibrated the TSC for itself): each is measured. Rank r's clock
// here reads r ms ahead of rank 0's.
TEST(SyncRound, RanksOnDifferentBaseClocksAreEachMeasured) {
  const BaseClock& machine = process_base_clock();
  if (!machine.uses_tsc()) GTEST_SKIP() << "no invariant TSC here";
  TscCalibration own = machine.tsc();
  own.base_ns += int64_t{comm_rank()} * 1'000'000;
  ClockSynchronizer synchronizer(MPI_COMM_WORLD, Clock(BaseClock(own), {comm_rank(), 0, 0}));
  const std::optional<SyncPoint> point = synchronizer.round();
  ASSERT_TRUE(point) << synchronizer.error();
  EXPECT_LE(std::llabs(point->offset_ns - int64_t{comm_rank()} * 1'000'000), point->bound_ns)
      << "rank " << comm_rank() << " offset " << point->offset_ns << " bound " << point->bound_ns;
  EXPECT_LT(point->bound_ns, 1'000'000) << "a bound of a millisecond is no measurement";
}

// The last rank arrives three timeouts late: the others finish in bounded
// time, the late rank gets no measurement and says why, and the next round
// (everyone on time) measures every rank again.
TEST(SyncRound, ASilentRankDoesNotHangTheOthers) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  SyncOptions options;
  options.timeout_ms = 300;
  // Virtual clocks make every rank take part in the tree.
  ClockSynchronizer synchronizer(MPI_COMM_WORLD, Clock(1000 * comm_rank() + 1, 0), options);
  const bool late = comm_rank() == size - 1;
  if (late) usleep(3 * 300 * 1000);
  const double started = MPI_Wtime();
  const std::optional<SyncPoint> point = synchronizer.round();
  const double seconds = MPI_Wtime() - started;
  if (late) {
    EXPECT_FALSE(point);
    EXPECT_NE(synchronizer.error().find("no measurement"), std::string::npos) << synchronizer.error();
  } else {
    // Each level waits at most one timeout for a silent peer.
    EXPECT_LT(seconds, 0.3 * (std::log2(size) + 2)) << "rank " << comm_rank();
  }
  int parent_of_late = size - 1;
  for (int d = 1; d < size; d *= 2) {
    if ((size - 1) % (2 * d) == d) parent_of_late = size - 1 - d;
  }
  if (comm_rank() == parent_of_late) {
    EXPECT_NE(synchronizer.error().find("rank " + std::to_string(size - 1) + " did not answer"), std::string::npos)
        << synchronizer.error();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::optional<SyncPoint> next = synchronizer.round();
  ASSERT_TRUE(next) << "rank " << comm_rank() << ": " << synchronizer.error();
  EXPECT_LE(std::fabs(static_cast<double>(next->offset_ns) - 1000.0 * comm_rank()), static_cast<double>(next->bound_ns));
}

}  // namespace
}  // namespace rankscope::clocksync
