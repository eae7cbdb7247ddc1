// A fleet of like nodes for the acceptance tests to spoil, and what they ask of its verdicts.
#pragma once

#include <set>
#include <stdexcept>
#include <string>

#include "rankscope/acceptance/acceptance.h"

namespace rankscope::acceptance {

// `nodes` alike (compute 100 GFLOP/s, memory 10 GB/s, links 1 GB/s and 50 µs, three repeats each with a
// little noise), to be spoiled by each test.
inline Measurements healthy_fleet(int nodes) {
  Measurements m;
  for (int n = 0; n < nodes; ++n) {
    NodeMeasurements node;
    node.inventory = {"node" + std::to_string(n), "Some CPU", 16, int64_t{64} << 30, "6.1.0", "Open MPI v4.1.4", "0.1.0"};
    const double wobble = 1 + 0.01 * (n % 3);
    node.gemm_gflops = {95 * wobble, 100 * wobble, 97 * wobble};
    node.triad_gbps = {9.5 * wobble, 10 * wobble, 9.8 * wobble};
    m.nodes.push_back(node);
  }
  for (const auto& round : pairing_rounds(nodes))
    for (const auto& [a, b] : round) m.links.push_back({a, b, {0.97, 1.0, 0.99}, {52, 50, 51}});
  return m;
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

}  // namespace rankscope::acceptance
