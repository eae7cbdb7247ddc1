// Cluster acceptance: what `rankscope accept` measured on each node and
// link, and the verdicts drawn from it. judge() and the renderers are pure
// functions of the measurements; measuring them is measure.h's. Checks,
// rules and outputs: docs/accept.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rankscope::acceptance {

// What a node is and runs. Every field is compared across the fleet.
struct Inventory {
  std::string host;
  std::string cpu_model;
  int cpus = 0;                // usable by the process (its affinity)
  int64_t memory_bytes = 0;    // MemTotal
  std::string kernel;          // uname -r
  std::string mpi_library;     // MPI_Get_library_version, first line
  std::string rankscope_version;
};

// Every repeat of every measurement, so that the verdicts can be robust.
struct NodeMeasurements {
  Inventory inventory;
  std::vector<double> gemm_gflops;  // double-precision GEMM through the BLAS, all the process's CPUs
  std::vector<double> triad_gbps;   // STREAM triad, all the process's CPUs
};

// A link between two nodes (indexes into Measurements::nodes, a < b).
struct LinkMeasurements {
  int a = 0, b = 0;
  std::vector<double> bandwidth_gbps;  // the slower direction of each repeat
  std::vector<double> latency_us;      // half the shortest round trip of each repeat
};

// One size of a collective's sweep: S as nccl-tests counts it (the buffer
// for allreduce and alltoall, the whole gathered or scattered buffer for
// allgather and reduce-scatter) and each timed iteration, as long as its
// slowest rank took.
struct CollectivePoint {
  size_t bytes = 0;
  std::vector<double> iteration_us;
};

// A collective over one group of nodes, swept over sizes.
inline constexpr std::string_view kCollectives[] = {"allreduce", "allgather", "reduce_scatter", "alltoall"};
struct CollectiveSweep {
  std::string collective;   // one of kCollectives
  std::vector<int> nodes;   // indexes into Measurements::nodes; every node at full scale
  std::vector<CollectivePoint> points;  // by size, smallest first
};

struct Measurements {
  std::vector<NodeMeasurements> nodes;
  std::vector<LinkMeasurements> links;
  std::vector<CollectiveSweep> collectives;
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
CollectiveFigures collective_figures(const CollectivePoint& point, std::string_view collective, int ranks);

enum class Verdict { pass, retest, fail };
const char* verdict_name(Verdict verdict);

// A figure against its reference, as a ratio where lower is worse, and the
// rule that judged it.
struct Check {
  std::string name;      // "compute", "memory", "network", "inventory.kernel", ...
  std::string value;     // as measured, with its unit
  std::string reference; // what it was compared with
  double ratio = 1;      // value / reference (for latency: reference / value); 1 for inventory
  std::string rule;
  Verdict verdict = Verdict::pass;
};

struct NodeVerdict {
  std::string host;
  Verdict verdict = Verdict::pass;
  std::vector<Check> checks;
};

struct LinkVerdict {
  std::pair<std::string, std::string> hosts;
  Verdict verdict = Verdict::pass;
  double bandwidth_gbps = 0, latency_us = 0;
  double bandwidth_ratio = 1, latency_ratio = 1;  // to the median link; latency: median / this
  std::string cause;  // for a link that is not passed: "this link", or the node whose every link is slow
};

// A figure fails below `fail_below` of its reference where it also lies
// beyond `robust_z` median absolute deviations (scaled to a standard
// deviation, and no less than 5 % of the median) of the fleet, and is to be
// retested where it does not (on a noisy fleet a low figure may be noise);
// between `fail_below` and `retest_below` it is to be retested only where it
// lies beyond them.
struct Rules {
  double fail_below = 0.8;
  double retest_below = 0.9;
  double robust_z = 3;
};

// A collective over all nodes (full scale) or over one group of them, one
// per CollectiveSweep, in the same order. A group's peak busbw is judged
// against the median of the groups' peaks, where there are 3 groups or more;
// full scale has no peers, and is reported.
struct CollectiveVerdict {
  std::string collective;
  std::vector<std::string> hosts;
  bool full_scale = false;
  Verdict verdict = Verdict::pass;
  double peak_busbw_gbps = 0;       // the most over the sizes (as NVCRE judges a group)
  size_t peak_bytes = 0;            // the size it was reached at
  double small_message_us = 0;      // the median iteration at the smallest size
  double small_message_p99_us = 0;
  double largest_cv = 0;            // of the iterations of a size, the most over the sizes
  std::optional<double> ratio;      // peak / median of the groups' peaks; unset when not judged against peers
  std::string cause;  // why it is not judged against peers, or, for a group not passed, where the fault lies
};

struct Acceptance {
  Verdict verdict = Verdict::pass;  // fail when any node, link or collective fails
  std::vector<NodeVerdict> nodes;
  std::vector<LinkVerdict> links;
  std::vector<CollectiveVerdict> collectives;
};

Acceptance judge(const Measurements& measurements, const Rules& rules = {});

// The rounds in which every pair of `nodes` meets once, no node in two pairs
// of one round (the circle method: nodes − 1 rounds, nodes rounds when odd).
std::vector<std::vector<std::pair<int, int>>> pairing_rounds(int nodes);

// The groups whose collectives are measured besides full scale: ⌈√nodes⌉
// consecutive nodes each (NVCRE's screen where nodes carry no topology
// labels), the last one smaller where they do not divide evenly. A group of
// one node is left out (no network to measure), and so is a single group of
// every node (full scale already measures it).
std::vector<std::vector<int>> node_groups(int nodes);

// One screen, failed items first.
std::string summary_text(const Acceptance& acceptance);
std::string summary_json(const Acceptance& acceptance, const Measurements& measurements);

}  // namespace rankscope::acceptance
