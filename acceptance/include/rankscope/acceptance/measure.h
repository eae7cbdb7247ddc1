// Measuring what judge() judges, on one rank per node, over MPI.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/acceptance/acceptance.h"
#include "rankscope/acceptance/run_timeline.h"

namespace rankscope::acceptance {

// How much is measured. quick: a minute or less on a few nodes; full: longer
// runs of each, more repeats.
struct Level {
  int gemm_n = 1024;                 // the GEMM's matrices are n × n doubles
  size_t triad_bytes = 256u << 20;   // three arrays together
  size_t link_bytes = 16u << 20;     // one transfer each way per repeat
  int latency_exchanges = 200;       // ping-pongs of 8 bytes per repeat
  int repeats = 5;
  // One node and one link at a time instead of all nodes and a round's pairs
  // together: for nodes that share cores, memory or an uplink (test hosts,
  // virtual machines on one host), where measuring together measures the sharing.
  bool one_at_a_time = false;
};
// "quick" or "full"; throws Error for anything else.
Level level_named(std::string_view name);

// This process's node, as the inventory compares it.
Inventory take_inventory();

// One multiplication of n × n doubles per thread, each through the BLAS on
// one thread, all at once: the compute check's work, and each layer's of
// the reference job. Not through the BLAS's own thread pool, whose threads
// spin for a while after each call and would take the cores of the next node
// to be measured where nodes share them.
class GemmWorkers {
 public:
  GemmWorkers(int n, int threads);
  void run();  // every thread's multiplication once
  double flops() const;  // of one run

 private:
  struct Operands {
    std::vector<double> a, b, c;
  };
  int n_;
  std::vector<Operands> operands_;
};

// One run each, on `threads` threads at once (GemmWorkers for GEMM).
double gemm_gflops(int n, int threads);
double triad_gbps(size_t bytes, int threads);

// Collective over `comm` (one rank per node): every measurement of every
// node, and of every pair of nodes in rounds in which no node is in two
// pairs. Repeats go round the whole fleet (repeat 1 of everything, then
// repeat 2), so that a passing disturbance spoils one repeat of several
// figures, not every repeat of one. The result is complete on rank 0. `progress` is called on rank 0
// with a line to show.
// Every measurement goes into `timeline` too.
Measurements measure(MPI_Comm comm, const Level& level, RunTimeline& timeline,
                     const std::function<void(const std::string&)>& progress);

}  // namespace rankscope::acceptance
