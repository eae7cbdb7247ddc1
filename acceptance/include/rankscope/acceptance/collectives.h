// Collectives swept over sizes, across every node and over groups of them,
// and nccl-tests' figures of each size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::acceptance {

// One size of a collective's sweep: S as nccl-tests counts it (the buffer
// for allreduce and alltoall, the whole gathered or scattered buffer for
// allgather and reduce-scatter) and each timed iteration, as long as its
// slowest rank took.
struct CollectivePoint {
  size_t bytes = 0;
  std::vector<double> iteration_us;
};

// A collective over one group of nodes, swept over sizes: over MPI, a rank
// per node; over NCCL, a rank per GPU of those nodes.
inline constexpr std::string_view kCollectives[] = {"allreduce", "allgather", "reduce_scatter", "alltoall"};
struct CollectiveSweep {
  std::string collective;   // one of kCollectives
  std::vector<int> nodes;   // indexes into Measurements::nodes; every node at full scale
  std::vector<CollectivePoint> points;  // by size, smallest first
  std::string transport = "mpi";  // or "nccl"
  int ranks = 0;                  // the collective's: nodes over MPI, their GPUs over NCCL
};

// nccl-tests' figures of one size over `ranks` ranks (GB = 1e9 B): algbw is
// S over the median iteration, busbw algbw times the collective's factor
// (allreduce 2(n-1)/n; allgather, reduce_scatter and alltoall (n-1)/n), so
// that it reflects the hardware's bottleneck whatever the collective.
struct CollectiveFigures {
  double median_us = 0, p99_us = 0;
  double cv = 0;  // standard deviation over mean of the iterations
  double algbw_gbps = 0, busbw_gbps = 0;
};
double busbw_factor(std::string_view collective, int ranks);
// The check a group's collective carries ("collectives.allreduce" over MPI,
// "collectives.nccl.allreduce" over NCCL), and its name in summaries
// ("allreduce", "nccl allreduce").
std::string collective_check_name(std::string_view transport, std::string_view collective);
std::string collective_label(std::string_view transport, std::string_view collective);
CollectiveFigures collective_figures(const CollectivePoint& point, std::string_view collective, int ranks);

// The groups whose collectives are measured besides full scale: ⌈√nodes⌉
// consecutive nodes each (NVCRE's screen where nodes carry no topology
// labels), the last one smaller where they do not divide evenly. A group of
// one node is left out (no network to measure), and so is a single group of
// every node (full scale already measures it).
std::vector<std::vector<int>> node_groups(int nodes);

}  // namespace rankscope::acceptance
