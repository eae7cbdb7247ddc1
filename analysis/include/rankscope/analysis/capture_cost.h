// What capture cost each rank's process (docs/agent-reference.md, "What capture costs").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// What capture cost one rank's process, from its agent's counters: the fixed
// parts measured, the per-call parts estimated (recorded calls and counted
// polls times the cost of one, calibrated on the rank's machine when it
// started). Where a poll's cost could not be calibrated, the polls' part is
// not known: polls_unmeasured says why, and the total leaves it out.
struct CaptureCost {
  int32_t rank = -1;
  int64_t capture_ns = 0;       // agent start to shard close: the time the costs are a share of
  int64_t start_ns = 0;         // starting the agent in the process
  int64_t mpi_init_ns = 0;      // the MPI shim's own work in MPI_Init (clock sync round included)
  int64_t mpi_finalize_ns = 0;  // ... in MPI_Finalize, before the shard's last flush
  int64_t finish_ns = 0;        // the last flush of the shard
  int64_t flusher_cpu_ns = 0;   // CPU time of the agent's writer thread, beside the application
  uint64_t host_events = 0;     // calls recorded on the application's threads (timed polls included)
  int64_t events_ns = 0;        // estimated: host_events times the calibrated cost of one
  uint64_t polls_counted = 0;   // MPI polls counted, not recorded
  int64_t polls_ns = 0;         // estimated: polls_counted times the calibrated cost of one
  std::string polls_unmeasured;  // why polls_ns is not known; empty where it is
  uint64_t buffer_bytes = 0;    // event buffer memory the rank used (of --buffer-mb)
  int64_t python_hook_ns = 0;   // measured: the Python hook's own code on the program's threads
  int64_t total_ns() const {
    return start_ns + mpi_init_ns + mpi_finalize_ns + finish_ns + flusher_cpu_ns + events_ns + polls_ns +
           python_hook_ns;
  }
  double share_pct() const { return capture_ns > 0 ? 100.0 * static_cast<double>(total_ns()) / static_cast<double>(capture_ns) : 0; }
};
// Ranks whose agent measured its cost (not imported traces), in rank order.
std::vector<CaptureCost> capture_cost(const Timeline& timeline);
// The rank capture cost the largest share of its run; `costs` is not empty.
const CaptureCost& largest_share(const std::vector<CaptureCost>& costs);

}  // namespace rankscope::analysis
