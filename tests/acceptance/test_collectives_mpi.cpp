// The collectives check measured for real over MPI, as many processes as
// nodes on this one machine: every collective at full scale and over each
// group of node_groups(), the groups at once and one at a time, gathered on
// rank 0 with every size and every iteration.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "collective_transport.h"
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

// MPI's collectives, but a set of nodes that holds `broken` cannot be set
// up, or gives up at `failing_collective`: as NCCL's transport does, every
// rank of the set agrees, and throws with its own reason (only `broken` has one).
class FailingTransport final : public CollectiveTransport {
 public:
  FailingTransport(MPI_Comm group, const Level& level, int broken, std::string_view failing_collective)
      : inner_(open_mpi_collectives(group, level)), group_(group), failing_collective_(failing_collective) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mine_broken_ = rank == broken;
    if (failing_collective_.empty()) agree();
  }
  int ranks() const override { return inner_->ranks(); }
  std::vector<CollectivePoint> sweep(std::string_view collective) override {
    if (collective == failing_collective_) agree();
    return inner_->sweep(collective);
  }

 private:
  void agree() const {
    const int mine = mine_broken_ ? 1 : 0;
    int any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, group_);
    if (any) throw TransportUnavailable(mine_broken_ ? "the broken node's part" : "");
  }
  std::unique_ptr<CollectiveTransport> inner_;
  MPI_Comm group_;
  std::string failing_collective_;
  bool mine_broken_ = false;
};

// With 5 nodes (groups 0-2 and 3-4) and node 4 broken: full scale and the
// group with node 4 are left out, the other group still measured, only node
// 4 says why, and no rank is left waiting.
TEST(SweepEveryScale, ASetOfNodesThatCannotBeSetUpIsLeftOutAndTheRestMeasured) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ASSERT_EQ(size, 5);
  const Level level = small_level(false);
  std::string unavailable;
  const std::vector<CollectiveSweep> sweeps = sweep_every_scale(
      MPI_COMM_WORLD, level, "test",
      [&](MPI_Comm group) { return std::make_unique<FailingTransport>(group, level, 4, ""); },
      [](const std::string&) {}, unavailable);
  EXPECT_EQ(unavailable, rank == 4 ? "the broken node's part" : "") << rank;
  if (rank != 0) return;
  ASSERT_EQ(sweeps.size(), std::size(kCollectives));
  for (const CollectiveSweep& sweep : sweeps) {
    EXPECT_EQ(sweep.nodes, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(sweep.transport, "test");
    EXPECT_FALSE(sweep.points.empty());
  }
}

// A transport that gives up within a scale keeps what that scale measured
// before, and the groups are still measured.
TEST(SweepEveryScale, ATransportThatGivesUpMidScaleKeepsWhatCameBefore) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const Level level = small_level(true);
  std::string unavailable;
  const std::vector<CollectiveSweep> sweeps = sweep_every_scale(
      MPI_COMM_WORLD, level, "test",
      [&](MPI_Comm group) { return std::make_unique<FailingTransport>(group, level, 4, "reduce_scatter"); },
      [](const std::string&) {}, unavailable);
  EXPECT_EQ(unavailable, rank == 4 ? "the broken node's part" : "") << rank;
  if (rank != 0) return;
  // Full scale: allreduce and allgather; group 0-2: all four; group 3-4: allreduce and allgather.
  std::vector<std::pair<std::string, size_t>> seen;
  for (const CollectiveSweep& sweep : sweeps) seen.emplace_back(sweep.collective, sweep.nodes.size());
  const std::vector<std::pair<std::string, size_t>> expected = {
      {"allreduce", 5}, {"allgather", 5}, {"allreduce", 3}, {"allgather", 3}, {"reduce_scatter", 3},
      {"alltoall", 3},  {"allreduce", 2}, {"allgather", 2}};
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace rankscope::acceptance
