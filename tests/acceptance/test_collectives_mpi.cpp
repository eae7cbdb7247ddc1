// The collectives check measured for real over MPI, as many processes as
// nodes on this one machine: every collective at full scale and over each
// group of node_groups(), the groups at once and one at a time, gathered on
// rank 0 with every size and every iteration.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "rankscope/acceptance/measure.h"

namespace rankscope::acceptance {
namespace {

// Small and few: the shape is tested, not the figures.
Level small_level(bool one_at_a_time) {
  Level level;
  level.collective_max_bytes = 64u << 10;
  level.collective_step = 8;
  level.collective_warmup = 1;
  level.collective_iterations = 3;
  level.one_at_a_time = one_at_a_time;
  return level;
}

void expect_every_sweep(const Level& level) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::string> lines;
  const std::vector<CollectiveSweep> sweeps =
      measure_collectives(MPI_COMM_WORLD, level, [&](const std::string& line) { lines.push_back(line); });
  if (rank != 0) {
    EXPECT_TRUE(sweeps.empty());
    EXPECT_TRUE(lines.empty()) << "progress on rank 0 only";
    return;
  }
  EXPECT_FALSE(lines.empty());
  // Full scale first, then each group, each with every collective in order.
  std::vector<std::vector<int>> scopes(1);
  for (int n = 0; n < size; ++n) scopes[0].push_back(n);
  for (const std::vector<int>& group : node_groups(size)) scopes.push_back(group);
  ASSERT_EQ(sweeps.size(), scopes.size() * std::size(kCollectives));
  for (size_t s = 0; s < sweeps.size(); ++s) {
    const CollectiveSweep& sweep = sweeps[s];
    EXPECT_EQ(sweep.collective, kCollectives[s % std::size(kCollectives)]);
    EXPECT_EQ(sweep.nodes, scopes[s / std::size(kCollectives)]);
    EXPECT_EQ(sweep.transport, "mpi");
    EXPECT_EQ(sweep.ranks, static_cast<int>(sweep.nodes.size()));
    const std::vector<size_t> sizes = collective_sizes(sweep.collective, sweep.ranks, level);
    ASSERT_EQ(sweep.points.size(), sizes.size()) << sweep.collective;
    for (size_t p = 0; p < sizes.size(); ++p) {
      EXPECT_EQ(sweep.points[p].bytes, sizes[p]);
      ASSERT_EQ(sweep.points[p].iteration_us.size(), static_cast<size_t>(level.collective_iterations));
      for (double us : sweep.points[p].iteration_us) EXPECT_GT(us, 0);
      EXPECT_GT(collective_figures(sweep.points[p], sweep.collective, sweep.ranks).busbw_gbps, 0);
    }
  }
}

TEST(MeasureCollectives, GroupsAtOnce) { expect_every_sweep(small_level(false)); }

TEST(MeasureCollectives, GroupsOneAtATime) { expect_every_sweep(small_level(true)); }

TEST(MeasureCollectives, OneNodeAloneHasNone) {
  EXPECT_TRUE(measure_collectives(MPI_COMM_SELF, small_level(false), [](const std::string&) {}).empty());
}

}  // namespace
}  // namespace rankscope::acceptance
