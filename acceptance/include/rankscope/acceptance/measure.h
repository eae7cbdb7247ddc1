// Measuring what judge() judges, on one rank per node, over MPI.
#pragma once

#include <mpi.h>

#include <barrier>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/acceptance/run_timeline.h"

namespace rankscope::acceptance {

// How much is measured. quick: a minute or less on a few nodes; full: longer
// runs of each, more repeats.
struct Level {
  int gemm_n = 1024;                 // the GEMM's matrices are n × n doubles
  size_t triad_bytes = 256u << 20;   // three arrays together
  // --memory-mb: the triad's three arrays together as the user gave them (0:
  // triad_bytes_for's, the STREAM rule within the memory available).
  size_t memory_bytes = 0;
  int gpu_gemm_n = 4096;             // each GPU's GEMM: n × n bf16 matrices
  size_t gpu_triad_bytes = 1u << 30; // each GPU's triad: three arrays together
  double gpu_sustain_seconds = 5;    // the GEMM held on every GPU of a node at once (0: not held)
  size_t link_bytes = 16u << 20;     // one transfer each way per repeat
  int latency_exchanges = 200;       // ping-pongs of 8 bytes per repeat
  int repeats = 5;
  int retest_repeats = 3;  // of each figure a first pass left unpassed (retests_of)
  // Collectives: sizes from 8 B, each `collective_step` times the last, up
  // to collective_max_bytes (the last size); at each size, warm-up
  // iterations, then the timed ones.
  size_t collective_max_bytes = 1u << 20;
  size_t nccl_max_bytes = 64u << 20;  // the same sweep between GPUs, through NCCL
  int collective_step = 8;
  int collective_warmup = 2;
  int collective_iterations = 20;
  // One node and one link at a time instead of all nodes and a round's pairs
  // together: for nodes that share cores, memory or an uplink (test hosts,
  // virtual machines on one host), where measuring together measures the sharing.
  bool one_at_a_time = false;
  LinkScreen link_screen = LinkScreen::all_pairs;
};
// "quick" or "full"; throws Error for anything else.
Level level_named(std::string_view name);

// This process's node, as the inventory compares it.
Inventory take_inventory();

// The CPUs `allowed`, in the order workers take them: one of each core
// first (the lowest), then the second of each core, and so on; and how many
// cores they make. A core's hardware threads share its floating-point units
// and caches, so the GEMM and the triad run a worker per core, as STREAM's
// threads are placed (OMP_PLACES=cores). Cores are told by
// `cpu_folder`/cpuN/topology/core_cpus_list; a CPU listed without one is a
// core of its own.
struct CpusByCore {
  std::vector<int> cpus;
  int cores = 0;
};
CpusByCore cpus_by_core(const std::vector<int>& allowed, const std::string& cpu_folder = "/sys/devices/system/cpu");
// cpus_by_core of the CPUs this process may use.
CpusByCore usable_cpus_by_core();

// `threads` workers, worker t held on the t-th CPU of
// usable_cpus_by_core() (round again where there are fewer), kept for the
// object's life, so that
// a run times the work and not the start of hundreds of threads. A worker
// that allocates and first touches what it works on gets it in its own
// socket's memory, and finds it there on its next run, as STREAM's threads
// do with OMP_PROC_BIND: touched by one thread and worked on by threads the
// scheduler places anywhere, a two-socket node measures one socket's
// memory, half of it across the link between the sockets.
class PinnedWorkers {
 public:
  explicit PinnedWorkers(int threads);
  ~PinnedWorkers();
  PinnedWorkers(const PinnedWorkers&) = delete;
  PinnedWorkers& operator=(const PinnedWorkers&) = delete;

  // work(t) on every worker t at once; returns when all are done.
  void run(const std::function<void(size_t)>& work);
  size_t size() const { return threads_.size(); }

 private:
  std::barrier<> start_, done_;
  const std::function<void(size_t)>* work_ = nullptr;  // nullptr: the workers end
  std::vector<std::thread> threads_;
};

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
  PinnedWorkers workers_;
};

// The node's last-level caches, each counted once (by the CPUs that share
// it), from `cpu_folder` (/sys/devices/system/cpu); 0 where none is listed.
size_t last_level_cache_bytes(const std::string& cpu_folder = "/sys/devices/system/cpu");
// The triad's three arrays together: the level's size, or where the
// fleet's largest last-level cache would hold a good part of that, enough
// for each array to be four times that cache (STREAM's rule), so that it
// measures memory and not cache (an EPYC of 12 dies has 384 MiB of L3 a
// socket), though at most a quarter of the smallest memory available on a
// node.
size_t triad_bytes_for(size_t level_bytes, size_t largest_cache_bytes, size_t least_available_bytes);

// One run each, on `threads` threads at once (GemmWorkers for GEMM).
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

// What rank 0 knows of a run while it goes on: the stage, what has been
// measured, and whom it waits for. Should the run be cut short (a node lost,
// and the job ended by mpirun), another thread draws the verdict from it
// while the measuring thread is stuck wherever the loss left it.
class RunRecord {
 public:
  // `progress` is called with each stage's line, on rank 0.
  explicit RunRecord(std::function<void(const std::string&)> progress) : progress_(std::move(progress)) {}

  void begin_stage(const std::string& line);
  void measured(const Measurements& so_far);
  // A roll call of `nodes` begins (rank 0 answers at once); node answers it.
  void call_roll(int nodes);
  void answered(int node);
  // Rank 0 waits for `peer`, over their link or to hear rank 0 (-1: for no
  // one); the pairs measured at once by everyone.
  void waiting_on(int peer);
  void measuring_pairs(const std::vector<std::pair<int, int>>& pairs);
  // The verdict is being given: the run is no longer to be cut short.
  void finish();

  // What was measured, and where the run stands as if it ended now, for
  // `why`; nothing once finished.
  std::optional<Measurements> cut_short(const std::string& why) const;
  // The same, once the run has stood still for `still` (a roll call waiting
  // for the same nodes), or after `at_most`: mpirun signals every rank at
  // once, and those still alive answer the roll call open at that moment,
  // or the next, within milliseconds, while the lost never do.
  std::optional<Measurements> cut_short_when_still(const std::string& why, std::chrono::milliseconds still,
                                                   std::chrono::milliseconds at_most) const;

 private:
  mutable std::mutex mutex_;
  std::function<void(const std::string&)> progress_;
  std::string stage_;
  Measurements so_far_;
  std::vector<bool> answered_;  // empty between roll calls
  int peer_ = -1;
  std::vector<std::pair<int, int>> pairs_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point changed_ = std::chrono::steady_clock::now();
};

// Collective over `comm` (one rank per node): every measurement of every
// node, and of every pair of nodes in rounds in which no node is in two
// pairs (or, with group testing, rings of nodes and the links that confirm
// suspects), and the collectives. Repeats go round the whole fleet (repeat 1
// of everything, then repeat 2), so that a passing disturbance spoils one
// repeat of several figures, not every repeat of one; a ring test's repeats
// come together, as each round's rings depend on the last. The result is
// complete on rank 0, which keeps `record` up to date as it goes and plans
// group testing by `rules`. Before the collectives, rank 0 judges what it has
// by `judge_so_far` (the fleet's rules and the rule file's) and every node
// measures again what retests_of() names. Every measurement goes into
// `timeline` too.
Measurements measure(MPI_Comm comm, const Level& level, RunTimeline& timeline, RunRecord& record, const Rules& rules,
                     const std::function<Acceptance(const Measurements&)>& judge_so_far);

}  // namespace rankscope::acceptance
