// Measurements built by hand for the acceptance tests and the page the
// browser test renders: a fleet of like nodes, to be spoiled by each test,
// collective sweeps, and what the tests ask of the verdicts.
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/verdict.h"

namespace rankscope::acceptance {

// `nodes` alike (compute 100 GFLOP/s, memory 10 GB/s, links 1 GB/s and 50 µs: the upper quartile of
// three repeats, one a little worse; the lower for latency; every link unless `with_links` is false),
// to be spoiled by each test.
inline Measurements healthy_fleet(int nodes, bool with_links = true) {
  Measurements m;
  for (int n = 0; n < nodes; ++n) {
    NodeMeasurements node;
    Inventory& inventory = node.inventory;
    inventory.host = "node" + std::to_string(n);
    inventory.cpu_model = "Some CPU";
    inventory.cpus = 16;
    inventory.memory_bytes = int64_t{64} << 30;
    inventory.kernel = "6.1.0";
    inventory.mpi_library = "Open MPI v4.1.4";
    inventory.rankscope_version = "0.1.0";
    const double wobble = 1 + 0.01 * (n % 3);
    node.gemm_gflops = {95 * wobble, 100 * wobble, 100 * wobble};
    node.triad_gbps = {9.5 * wobble, 10 * wobble, 10 * wobble};
    m.nodes.push_back(node);
  }
  if (!with_links) return m;
  for (const auto& round : pairing_rounds(nodes))
    for (const auto& [a, b] : round) m.links.push_back({a, b, {0.97, 1.0, 1.0}, {52, 50, 50}});
  return m;
}

// `per_node` GPUs on each node of `m`, alike (bf16 GEMM 700 TFLOP/s, triad
// 4000 GB/s: the upper quartile of three repeats), with one driver, CUDA and NCCL.
inline void add_gpus(Measurements& m, int per_node) {
  for (size_t n = 0; n < m.nodes.size(); ++n) {
    NodeMeasurements& node = m.nodes[n];
    node.inventory.gpus = per_node;
    node.inventory.gpu_model = "NVIDIA H200";
    node.inventory.gpu_driver = "580.82.07";
    node.inventory.cuda_version = "13.0";
    node.inventory.nccl_version = "2.28.3";
    for (int g = 0; g < per_node; ++g) {
      const double wobble = 1 + 0.005 * static_cast<double>((n + static_cast<size_t>(g)) % 3);
      node.gpus.push_back({g, "NVIDIA H200", "GPU-" + std::to_string(n) + "-" + std::to_string(g), int64_t{141} << 30,
                           {690 * wobble, 700 * wobble, 700 * wobble}, {3950 * wobble, 4000 * wobble, 4000 * wobble},
                           {695 * wobble, 680 * wobble, 672 * wobble, 670 * wobble, 671 * wobble}, ""});
    }
  }
}

inline std::set<std::string> failed_nodes(const Acceptance& a) {
  std::set<std::string> out;
  for (const NodeVerdict& n : a.nodes)
    if (n.verdict == Verdict::fail) out.insert(n.host);
  return out;
}

inline const Check& check_named(const NodeVerdict& node, const std::string& name) {
  for (const Check& c : node.checks)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}

// allreduce and allgather over every node, 4 B to 64 MiB by powers of 4:
// latency-bound at small sizes, levelling off towards 10 GB/s of bus bandwidth.
inline std::vector<CollectiveSweep> sample_sweeps(int nodes) {
  std::vector<CollectiveSweep> sweeps;
  for (const char* collective : {"allreduce", "allgather"}) {
    CollectiveSweep sweep{collective, {}, {}, "mpi", nodes};
    for (int n = 0; n < nodes; ++n) sweep.nodes.push_back(n);
    const double factor = busbw_factor(collective, nodes);
    for (size_t bytes = 4; bytes <= (size_t{64} << 20); bytes *= 4) {
      // 20 µs of latency, then the bytes at 10 GB/s of bus bandwidth.
      const double us = 20 + static_cast<double>(bytes) * factor / 10e9 * 1e6;
      sweep.points.push_back({bytes, {us, us * 1.02, us * 0.99, us * 1.1}});
    }
    sweeps.push_back(sweep);
  }
  return sweeps;
}

}  // namespace rankscope::acceptance
