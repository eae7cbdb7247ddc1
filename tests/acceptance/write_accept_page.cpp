// Writes summary_html() of hand-built measurements (fleet_fixtures.h)
// for the headless-browser test: write_accept_page OUT.html NODES. A node
// computes at 0.4 of the others, one link is slow, and collectives were
// swept, so that every part of the page is drawn with failures marked.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "rankscope/acceptance/acceptance.h"
#include "fleet_fixtures.h"

int main(int argc, char** argv) {
  namespace acceptance = rankscope::acceptance;
  if (argc != 3 || std::atoi(argv[2]) < 3) {
    std::fprintf(stderr, "usage: %s OUT.html NODES (3 or more)\n", argv[0]);
    return 2;
  }
  const int nodes = std::atoi(argv[2]);
  acceptance::Measurements measurements = acceptance::healthy_fleet(nodes);
  // Host names that need escaping show whether the browser still sees the plots.
  measurements.nodes[0].inventory.host = "<b>&\"x";
  measurements.nodes[1].gemm_gflops = {40};
  for (acceptance::LinkMeasurements& link : measurements.links) {
    if (link.a == 0 && link.b == 2) link.bandwidth_gbps = {0.1};
  }
  measurements.collectives = acceptance::sample_sweeps(nodes);
  std::ofstream out(argv[1], std::ios::binary);
  out << acceptance::summary_html(acceptance::judge(measurements), measurements);
  return out.good() ? 0 : 1;
}
