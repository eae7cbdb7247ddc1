// Measuring what judge() judges, on one rank per node, over MPI.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/acceptance/acceptance.h"

namespace rankscope::acceptance {

// How much is measured. quick: a minute or less on a few nodes; full: longer
// runs of each, more repeats.
struct Level {
  int gemm_n = 1024;                 // the GEMM's matrices are n × n doubles
  size_t triad_bytes = 256u << 20;   // three arrays together
  size_t link_bytes = 16u << 20;     // one transfer each way per repeat
  int latency_exchanges = 200;       // ping-pongs of 8 bytes per repeat
  int repeats = 5;
  // Collectives: sizes from 8 B, each `collective_step` times the last, up
  // to collective_max_bytes (the last size); at each size, warm-up
  // iterations, then the timed ones.
  size_t collective_max_bytes = 1u << 20;
  int collective_step = 8;
  int collective_warmup = 2;
  int collective_iterations = 20;
  // One node and one link at a time instead of all nodes and a round's pairs
  // together: for nodes that share cores, memory or an uplink (test hosts,
  // virtual machines on one host), where measuring together measures the sharing.
  bool one_at_a_time = false;
};
// "quick" or "full"; throws Error for anything else.
Level level_named(std::string_view name);

// This process's node, as the inventory compares it.
Inventory take_inventory();

// One run each, on `threads` threads at once (for GEMM, each its own
// multiplication with the BLAS on one thread).
double gemm_gflops(int n, int threads);
double triad_gbps(size_t bytes, int threads);

// The sizes (S as nccl-tests counts it) of `collective`'s sweep over `ranks`
// ranks: a whole number of floats for each rank (the smallest sizes rounded
// up to one, the others down), smallest first, no size twice.
std::vector<size_t> collective_sizes(std::string_view collective, int ranks, const Level& level);

// Collective over `comm` (one rank per node): each of kCollectives swept over
// every node, then over each group of node_groups(), the groups at once or,
// with one_at_a_time, one after another. Complete on rank 0; `progress` is
// called there with a line to show.
std::vector<CollectiveSweep> measure_collectives(MPI_Comm comm, const Level& level,
                                                 const std::function<void(const std::string&)>& progress);

// Collective over `comm` (one rank per node): every measurement of every
// node, and of every pair of nodes in rounds in which no node is in two
// pairs, and the collectives. Repeats go round the whole fleet (repeat 1 of everything, then
// repeat 2), so that a passing disturbance spoils one repeat of several
// figures, not every repeat of one. The result is complete on rank 0. `progress` is called on rank 0
// with a line to show.
Measurements measure(MPI_Comm comm, const Level& level, const std::function<void(const std::string&)>& progress);

}  // namespace rankscope::acceptance
