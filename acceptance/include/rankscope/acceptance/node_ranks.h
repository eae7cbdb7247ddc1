// Which of the job's ranks accept measures with. It measures nodes, one rank
// each; a job launched with a rank per GPU (as nccl-tests' jobs are) has more.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

namespace rankscope::acceptance {

// The job's ranks as accept uses them: the first rank of each node measures
// the node, the others wait for the verdict (share_status).
class NodeRanks {
 public:
  // Collective over `job`. A node's first rank then uses what the node gives
  // the job, not what the launcher gave that rank: every CPU the node lets the
  // job use (mpirun binds a rank to a core or a socket), and every GPU that
  // any of the node's ranks may use (launchers that give each rank a GPU of
  // its own set CUDA_VISIBLE_DEVICES), before CUDA is first called.
  explicit NodeRanks(MPI_Comm job);
  ~NodeRanks();
  NodeRanks(const NodeRanks&) = delete;
  NodeRanks& operator=(const NodeRanks&) = delete;

  bool measures() const { return nodes_ != MPI_COMM_NULL; }
  // The first rank of each node, in the job's order; MPI_COMM_NULL on the others.
  MPI_Comm nodes() const { return nodes_; }
  int node_count() const { return node_count_; }
  int job_ranks() const { return job_ranks_; }

 private:
  MPI_Comm nodes_ = MPI_COMM_NULL;
  int node_count_ = 0;
  int job_ranks_ = 0;
};

// The GPUs that ranks with these CUDA_VISIBLE_DEVICES (nullopt: not set, so
// every GPU) may use between them: nullopt where one of them may use every
// GPU, else each GPU named, once, in the order first named.
std::optional<std::string> visible_to_any(const std::vector<std::optional<std::string>>& per_rank);

// The GPUs CUDA should find in a process with this CUDA_VISIBLE_DEVICES
// (nullptr: not set) on a node whose driver sees `driver_gpus`: all of
// them, or as many as it names. CUDA finding fewer means GPUs accept would
// not measure: MIG mode (CUDA shows one instance), or CUDA started (by MPI's
// CUDA support, in MPI_Init) before accept could widen the variable.
int gpus_cuda_should_find(int driver_gpus, const char* visible);

// Collective over `job`: `status` of the job's rank 0, on every rank. The
// ranks that do not measure wait for it without taking a core from the ones
// that do.
int share_status(MPI_Comm job, int status);

}  // namespace rankscope::acceptance
