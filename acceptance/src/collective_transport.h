// How `accept` sweeps collectives, whatever carries them (MPI between
// nodes, NCCL between their GPUs): one transport per set of nodes, and one
// driver over every scale.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/acceptance/measure.h"
#include "rankscope/model/error.h"

namespace rankscope::acceptance {

// Thrown by a transport's opening on every rank of its group at once, so
// that the group gives up together rather than leave ranks waiting on one
// that failed: what() is this rank's own reason, empty where it had none.
class TransportUnavailable : public Error {
 public:
  using Error::Error;
};

// Collectives over one group of nodes, through one transport (MPI, NCCL),
// set up once for the group: sweep() runs one of kCollectives at each size
// of collective_sizes() over ranks(), as nccl-tests runs them (warm-up,
// then timed iterations back to back, each as long as its slowest rank
// took), complete on the group's rank 0. Collective over the group.
class CollectiveTransport {
 public:
  virtual ~CollectiveTransport() = default;
  virtual int ranks() const = 0;
  virtual std::vector<CollectivePoint> sweep(std::string_view collective) = 0;
};

// Collective over `group`: MPI's collectives between its ranks, one per node.
std::unique_ptr<CollectiveTransport> open_mpi_collectives(MPI_Comm group, const Level& level);

// Each of kCollectives through one transport, `open(group)` for each set of
// nodes: every node, then each group of node_groups(), the groups at once or,
// with one_at_a_time, one after another. Complete on rank 0. A set of nodes
// the transport cannot open over (TransportUnavailable) is left out, and the
// others still measured, so that the groups narrow down a node at fault;
// so is the rest of a sweep the transport gave up on. This node's reason, if
// it had one, goes to `unavailable`. Collective over `comm`.
std::vector<CollectiveSweep> sweep_every_scale(MPI_Comm comm, const Level& level, const std::string& transport,
                                               const std::function<std::unique_ptr<CollectiveTransport>(MPI_Comm)>& open,
                                               const std::function<void(const std::string&)>& progress,
                                               std::string& unavailable);

}  // namespace rankscope::acceptance
