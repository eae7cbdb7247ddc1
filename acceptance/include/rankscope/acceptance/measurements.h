// What `rankscope accept` measured on each node and link, every repeat of
// it: what judge() judges (verdict.h); measuring it is measure.h's. Checks:
// docs/accept-reference.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/link_screen.h"

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

// A node the straggler analysis names (rankscope/analysis/stragglers.h,
// find_stragglers).
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

}  // namespace rankscope::acceptance
