// Writes summary_html() of hand-built measurements (fleet_fixtures.h)
// for the headless-browser test: write_accept_page OUT.html NODES [groups].
// A node computes at 0.4 of the others, one link is slow (with `groups`,
// links screened by group testing with node 2 bad: simulated_fleet.h), and
// collectives were swept, so that every part of the page is drawn with
// failures marked.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "fleet_fixtures.h"
#include "simulated_fleet.h"

int main(int argc, char** argv) {
  namespace acceptance = rankscope::acceptance;
  const bool groups = argc == 4 && std::string(argv[3]) == "groups";
  if ((argc != 3 && !groups) || std::atoi(argv[2]) < (groups ? acceptance::kGroupTestingFrom : 3)) {
    std::fprintf(stderr, "usage: %s OUT.html NODES (3 or more) | OUT.html NODES (8 or more) groups\n", argv[0]);
    return 2;
  }
  const int nodes = std::atoi(argv[2]);
  acceptance::Measurements measurements = acceptance::healthy_fleet(nodes);
  if (groups) measurements = acceptance::SimulatedFleet{nodes, {2}}.run().first;
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
