// bench_clocksync ROUNDS GAP_MS: sync rounds under RANKSCOPE_FAKE_CLOCK; prints
// one line: ranks, error against the injected truth (max, p99), bound (median,
// max), coverage (share of measurements whose bound holds the truth), time per
// round (median, max) and ping-pongs per pair.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/error.h"

using namespace rankscope::clocksync;

namespace {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  const int gap_ms = argc > 2 ? std::atoi(argv[2]) : 50;
  try {
    const Clock clock = Clock::for_rank(rank);
    const char* spec = std::getenv(kFakeClockVariable);
    const std::vector<FakeClockEntry> injected = spec ? parse_fake_clock(spec) : std::vector<FakeClockEntry>{};
    std::vector<double> mine;  // error, bound, seconds per round
    const MPI_Comm comm = MPI_COMM_WORLD;
    ClockSynchronizer synchronizer(comm, clock);
    synchronizer.round();  // wire-up
    for (int r = 0; r < rounds; ++r) {
      usleep(static_cast<useconds_t>(gap_ms) * 1000);
      MPI_Barrier(comm);
      const double start = MPI_Wtime();
      const std::optional<SyncPoint> measured = synchronizer.round();
      const double seconds = MPI_Wtime() - start;
      if (!measured) throw rankscope::Error(synchronizer.error());
      const SyncPoint point = *measured;
      const double error = static_cast<double>(point.offset_ns) - injected_offset_ns(injected, rank, point.local_ns);
      mine.insert(mine.end(), {error, static_cast<double>(point.bound_ns), seconds});
    }
    std::vector<double> all(mine.size() * static_cast<size_t>(size));
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
               MPI_DOUBLE, 0, comm);
    if (rank == 0) {
      std::vector<double> errors, bounds, round_seconds(static_cast<size_t>(rounds), 0.0);
      size_t covered = 0;
      for (int p = 0; p < size; ++p) {
        for (int r = 0; r < rounds; ++r) {
          const double* m = &all[(static_cast<size_t>(p) * static_cast<size_t>(rounds) + static_cast<size_t>(r)) * 3];
          round_seconds[static_cast<size_t>(r)] = std::max(round_seconds[static_cast<size_t>(r)], m[2]);
          if (p == 0) continue;  // the reference itself
          errors.push_back(std::fabs(m[0]));
          bounds.push_back(m[1]);
          covered += std::fabs(m[0]) <= m[1];
        }
      }
      std::printf("ranks %d rounds %d error_max_ns %.0f error_p99_ns %.0f bound_median_ns %.0f bound_max_ns %.0f "
                  "coverage %.4f round_median_ms %.3f round_max_ms %.3f\n",
                  size, rounds, percentile(errors, 1.0), percentile(errors, 0.99), percentile(bounds, 0.5),
                  percentile(bounds, 1.0), errors.empty() ? 1.0 : static_cast<double>(covered) / errors.size(),
                  percentile(round_seconds, 0.5) * 1e3, percentile(round_seconds, 1.0) * 1e3);
    }
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "bench_clocksync: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
