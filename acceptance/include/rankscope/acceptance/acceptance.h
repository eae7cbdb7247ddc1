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

namespace rankscope {
class JsonWriter;
}

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
  // GPUs, where CUDA finds any. Every node's are compared, the count too: a
  // GPU the driver lost is a node short of one.
  int gpus = 0;
  std::string gpu_model;        // the devices' names, each distinct one once, " + " between
  std::string gpu_driver;       // NVIDIA's driver (NVML), as nvidia-smi prints it
  std::string cuda_version;     // the CUDA version the driver supports
  std::string nccl_version;     // libnccl.so.2's, where the node has one (with or without GPUs)
  std::string gpu_unavailable;  // why no GPU was found (no driver, built without CUDA); not compared
};

// The node's event clock against rank 0's, from the run's clock sync rounds
// (clocksync's ClockSynchronizer: at the start, between stages, at the end).
struct NodeClock {
  int64_t offset_ns = 0;  // its clock minus rank 0's, at the first round
  int64_t bound_ns = 0;   // the median error bound of the rounds
  std::string error;      // why a round measured nothing; empty when every round measured
};

// The node in the reference training job (reference_job.h), as the
// straggler analysis saw it.
struct ReferenceJobNode {
  bool measured = false;        // the rank had steps in the timeline
  int64_t own_step_ns = 0;      // median over steps of its step time less its exposed wait for others
  int64_t blame_ns = 0;         // time the others waited for it, over the job
  double last_arriver_rate = 0; // share of the gradient allreduces it posted last
};

// One GPU of a node, each repeat of its figures.
struct GpuMeasurements {
  int index = 0;  // its CUDA device ordinal on the node
  std::string model, uuid;
  int64_t memory_bytes = 0;
  std::vector<double> gemm_tflops;  // bf16 GEMM through cuBLAS, fp32 accumulation
  std::vector<double> triad_gbps;   // STREAM triad over device memory
  // The GEMM held for Level::gpu_sustain_seconds on every GPU of the node at
  // once: TFLOP/s of each slice of about a second, in order.
  std::vector<double> sustained_tflops;
  // NVML's reasons the clocks were held back as the held GEMM ended ("SW
  // power cap", "HW thermal slowdown"...); empty when none, or without NVML.
  std::string clocks_held_back;
};

// Every repeat of every measurement, so that the verdicts can be robust.
struct NodeMeasurements {
  Inventory inventory;
  std::vector<double> gemm_gflops;  // double-precision GEMM through the BLAS, all the process's CPUs
  std::vector<double> triad_gbps;   // STREAM triad, all the process's CPUs
  std::vector<GpuMeasurements> gpus;  // one per GPU of inventory.gpus, once measured
  std::string gpu_error;  // why its GPUs could not be measured (cuBLAS missing, a CUDA error); empty when they were
  std::string nccl_error;  // why it could not set up its part of NCCL's collectives; empty when it could
  NodeClock clock;
  ReferenceJobNode reference_job;
};

// A node the straggler analysis names (analysis.h, find_stragglers).
struct NamedStraggler {
  int node = -1;  // index into Measurements::nodes
  std::string cause;
  double score = 0;
  std::string evidence;
};

// The reference training job as the job profile and the straggler analysis
// found it in the run's timeline.
struct ReferenceJob {
  int steps = 0;
  int64_t median_step_ns = 0;  // a step's time: the mean over the ranks of their step's duration
  double step_cv = 0;          // standard deviation over mean of the steps' times
  std::vector<NamedStraggler> stragglers;  // most likely first; empty when none
  std::string unmeasured;  // why the ranks could not be compared (a single node); empty when they were
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

// A run that ended before its end (a node lost, the job ended by a signal):
// where it was, and the nodes it was waiting for there. Those fail; where two
// went silent while measuring the link between them, either may be the lost
// one, and both are to be retested. The rest is judged on what was measured.
struct CutShort {
  std::string stage;
  std::string why;
  std::vector<int> silent_nodes;
  std::vector<std::pair<int, int>> silent_pairs;  // among silent_nodes
};

// How links are screened. All pairs measures every link; it finds a bad
// link between two sound nodes, and takes nodes − 1 rounds. Group testing
// (in the spirit of NVIDIA's Cluster Readiness Engine) measures rings of
// nodes and bisects the slow ones down to single nodes, then confirms each
// suspect over a link with a node known to be sound: about d·log(N/d)
// tests in a handful of rounds for d bad nodes among N, but a bad link
// between two sound nodes goes unseen unless they are ring neighbours.
enum class LinkScreen { all_pairs, group_testing };
const char* link_screen_name(LinkScreen screen);

// One group test: every node of a ring sends to the next and receives from
// the one before, all at once. A node's figure is the bytes over the time
// both its transfers took, the best of the repeats; the test's figure is its
// slowest node's, as a collective over the group would take.
struct RingTest {
  int round = 0;             // 0: the first groups; each later round bisects the failed tests of the one before
  std::vector<int> nodes;    // indexes into Measurements::nodes, in ring order
  std::vector<double> gbps;  // per node of `nodes`
  // A pair measured once bisection is over (GroupTestingStep::links): a
  // suspect with a sound node, the two ends of a crossing link, or two sound
  // nodes. Judged as every ring, never bisected.
  bool pair = false;
};

struct Measurements {
  std::vector<NodeMeasurements> nodes;
  LinkScreen link_screen = LinkScreen::all_pairs;
  std::vector<RingTest> ring_tests;  // group testing's, in the order measured
  // All pairs: every link. Group testing: its pairs (GroupTestingStep::links),
  // each also a ring test of two, which judges it.
  std::vector<LinkMeasurements> links;
  std::vector<CollectiveSweep> collectives;
  // Where nodes have GPUs but NCCL's collectives were not measured, why
  // (a node without GPUs or NCCL, NCCL versions that differ).
  std::string nccl_not_measured;
  std::optional<CutShort> cut_short;
  ReferenceJob reference_job;
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
  // A node whose clock sync bound is wider than this fails `clock`: its
  // events cannot be ordered against other nodes' at the scale of a
  // collective. Test hosts sharing two cores measure bounds of 13-36 µs
  // (median) and at most 0.5 ms since ranks wait idle (bench/RESULTS.md,
  // "Clock sync across test hosts"); InfiniBand's round trips bound it to a
  // few µs (docs/clocksync.md).
  int64_t clock_bound_limit_ns = 1'000'000;
  // Group testing's reference ring from a baseline (Baseline::ring_gbps), 0
  // for none. Given one, rings are judged against it instead of the first
  // round's median ring, and by the ratio alone: where most rings hold a
  // bad node, the median ring is a bad one and its spread hides them all.
  double ring_baseline_gbps = 0;
  // The baseline's node count (Baseline::nodes), 0 for unknown: its ring
  // judges only rings as wide as its own were.
  int ring_baseline_nodes = 0;
};

// A collective over all nodes (full scale) or over one group of them, one
// per CollectiveSweep, in the same order. A group's peak busbw is judged
// against the median of the groups' peaks, where there are 3 groups or more;
// full scale has no peers, and is reported.
struct CollectiveVerdict {
  std::string collective;
  std::string transport;  // CollectiveSweep's
  int ranks = 0;
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

// A group test: its slowest node's figure against the first round's median
// ring, or the baseline's. A failed ring is bisected; a retest ring's nodes are to be retested.
struct RingVerdict {
  int round = 0;
  bool pair = false;  // RingTest::pair
  std::vector<std::string> hosts;  // in ring order
  Verdict verdict = Verdict::pass;
  double gbps = 0;   // the slowest node's
  // To the first round's median ring, or to the baseline's (Rules::ring_baseline_gbps); a pair's to the
  // reference pairs where those ran slower than either.
  double ratio = 1;
};

struct Acceptance {
  Verdict verdict = Verdict::pass;  // fail when any node, link or collective fails, or the run was cut short
  std::optional<CutShort> cut_short;
  LinkScreen link_screen = LinkScreen::all_pairs;
  std::vector<NodeVerdict> nodes;
  std::vector<RingVerdict> ring_tests;  // group testing's, one per RingTest
  std::vector<std::string> suspects;    // group testing's: the hosts bisection left alone, in the order found
  std::vector<LinkVerdict> links;
  std::vector<CollectiveVerdict> collectives;
  std::string nccl_not_measured;  // Measurements'
  ReferenceJob reference_job;
};

Acceptance judge(const Measurements& measurements, const Rules& rules = {});

// What a first pass left unpassed, measured once more before the verdict
// (docs/accept.md, "Retests"): a burst of a neighbour's load spoils every
// repeat of the figure measured while it lasts, and a second pass minutes
// later tells it from a fault, which stays. The nodes (indices) whose
// compute or memory check, the fleet's or a rule's, is not passed, and,
// screening every pair, the links not passed; group testing's second look
// is its own (bisection, and confirmation with a sound node).
struct Retests {
  std::vector<int> compute, memory;
  std::vector<std::pair<int, int>> links;  // as LinkMeasurements' (a < b)
  bool empty() const { return compute.empty() && memory.empty() && links.empty(); }
};
Retests retests_of(const Acceptance& so_far, const Measurements& measured);

// The check `clock` of one node: its sync bound against the limit; a node
// whose sync failed fails with the reason.
Check clock_check(const NodeClock& clock, const Rules& rules = {});

// The check `reference_job` of every node (in node order): its own time per
// step (its step time less its exposed wait for others) against the
// fleet's, by the rules of compute. A node the straggler analysis names
// fails where that figure is beyond noise and is to be retested where it is
// not; a node it does not name is at worst to be retested.
std::vector<Check> reference_job_checks(const Measurements& measurements, const Rules& rules = {});

// The rounds in which every pair of `nodes` meets once, no node in two pairs
// of one round (the circle method: nodes − 1 rounds, nodes rounds when odd).
// Each `repeat` seats the nodes in another order (the same on every rank),
// so that the pairs measured at once differ from repeat to repeat: where
// two pairs' flows share a switch uplink under static routing, they do so
// in one repeat, not in all, and the link's upper quartile of repeats is
// its own.
std::vector<std::vector<std::pair<int, int>>> pairing_rounds(int nodes, unsigned repeat = 0);

// Group testing's next step, from the tests done so far (judged by `rules`
// against the first round's rings): the next round's rings, or,
// once no ring is left to bisect, the links to measure, each as (lower,
// higher) and once: each suspect (a node bisection left alone) with a node
// known to be sound; the links that joined the halves of a failed ring none
// of whose halves failed; and ⌈√nodes⌉ pairs of sound nodes (3 at least, as
// there are sound nodes for) as the reference. Nothing to do when both are
// empty.
struct GroupTestingStep {
  std::vector<std::vector<int>> rings;
  std::vector<std::pair<int, int>> links;
};
GroupTestingStep next_group_tests(int nodes, const std::vector<RingTest>& done, const Rules& rules = {});

// The first round's rings: ⌈√nodes⌉ consecutive nodes each (fewer where that
// makes fewer than 4 rings, 2 at least), a last node left alone joining the
// ring before it (every node is tested). Two nodes or more.
std::vector<std::vector<int>> first_rings(int nodes);

// Group testing judges each ring against the median of the first round's,
// which needs 4 rings, so that one bad ring moves neither the median nor the
// spread about it: kGroupTestingFrom nodes.
inline constexpr int kGroupTestingFrom = 8;
// `auto` screens all pairs up to this many nodes (nodes − 1 rounds), and
// tests groups above, where all pairs would take thousands of rounds.
inline constexpr int kAllPairsUpTo = 128;
// The screen `--links` names for `nodes` nodes: "pairs", "groups", or
// "auto". Throws Error for group testing on fewer than kGroupTestingFrom
// nodes, and for another name.
LinkScreen link_screen_for(std::string_view option, int nodes);

// The groups whose collectives are measured besides full scale: ⌈√nodes⌉
// consecutive nodes each (NVCRE's screen where nodes carry no topology
// labels), the last one smaller where they do not divide evenly. A group of
// one node is left out (no network to measure), and so is a single group of
// every node (full scale already measures it).
std::vector<std::vector<int>> node_groups(int nodes);

// One screen, failed items first.
std::string summary_text(const Acceptance& acceptance);
std::string summary_json(const Acceptance& acceptance, const Measurements& measurements);
// One self-contained page (docs/accept.md, "The HTML page"): the verdict,
// what failed with its evidence, the links as a heatmap, compute and memory
// as bars against `rules`' fail line, the collectives' bus bandwidth by size,
// the inventory.
std::string summary_html(const Acceptance& acceptance, const Measurements& measurements, const Rules& rules = {});

// The run-level section of the reference job: text lines, and the value of
// the JSON key `reference_job`.
std::string reference_job_text(const ReferenceJob& job, const std::vector<NodeVerdict>& nodes);
void write_reference_job_json(JsonWriter& json, const ReferenceJob& job, const std::vector<NodeVerdict>& nodes);

}  // namespace rankscope::acceptance
