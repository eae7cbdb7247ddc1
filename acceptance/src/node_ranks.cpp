#include "rankscope/acceptance/node_ranks.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/mpi_exchange/gather.h"

namespace rankscope::acceptance {
namespace {

// Asks for every CPU: the kernel keeps those of them that the job's cpuset
// allows, so this undoes the launcher's binding and nothing more.
void use_every_cpu_of_the_job() {
  cpu_set_t every;
  CPU_ZERO(&every);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &every);
  sched_setaffinity(0, sizeof(every), &every);
}

// As the node's ranks see CUDA_VISIBLE_DEVICES: a set flag, then the value.
constexpr char kUnset = '-', kSet = '=';

void use_every_gpu_of_the_node(MPI_Comm node) {
  const char* mine = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> all =
      allgather_strings(node, {mine ? std::string(1, kSet) + mine : std::string(1, kUnset)});
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  if (node_rank != 0) return;
  std::vector<std::optional<std::string>> per_rank;
  for (const std::string& seen : all) {
    per_rank.push_back(seen[0] == kSet ? std::optional<std::string>(seen.substr(1)) : std::nullopt);
  }
  const std::optional<std::string> union_of_all = visible_to_any(per_rank);
  if (union_of_all) {
    setenv("CUDA_VISIBLE_DEVICES", union_of_all->c_str(), 1);
  } else {
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

}  // namespace

NodeRanks::NodeRanks(MPI_Comm job) {
  int rank = 0;
  MPI_Comm_rank(job, &rank);
  MPI_Comm_size(job, &job_ranks_);
  MPI_Comm node;
  MPI_Comm_split_type(job, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  use_every_gpu_of_the_node(node);
  MPI_Comm_free(&node);
  MPI_Comm_split(job, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &nodes_);
  int first = node_rank == 0 ? 1 : 0;
  MPI_Allreduce(&first, &node_count_, 1, MPI_INT, MPI_SUM, job);
  if (measures()) use_every_cpu_of_the_job();
}

NodeRanks::~NodeRanks() {
  if (nodes_ != MPI_COMM_NULL) MPI_Comm_free(&nodes_);
}

namespace {

// The GPUs a CUDA_VISIBLE_DEVICES value names, in its order.
std::vector<std::string> gpus_named(const std::string& visible) {
  std::vector<std::string> named;
  std::istringstream list(visible);
  for (std::string gpu; std::getline(list, gpu, ',');) {
    const size_t begin = gpu.find_first_not_of(" \t"), end = gpu.find_last_not_of(" \t");
    if (begin != std::string::npos) named.push_back(gpu.substr(begin, end - begin + 1));
  }
  return named;
}

}  // namespace

std::optional<std::string> visible_to_any(const std::vector<std::optional<std::string>>& per_rank) {
  std::vector<std::string> named;
  for (const std::optional<std::string>& visible : per_rank) {
    if (!visible) return std::nullopt;
    for (const std::string& gpu : gpus_named(*visible))
      if (std::find(named.begin(), named.end(), gpu) == named.end()) named.push_back(gpu);
  }
  std::string joined;
  for (const std::string& gpu : named) joined += (joined.empty() ? "" : ",") + gpu;
  return joined;
}

int gpus_cuda_should_find(int driver_gpus, const char* visible) {
  return visible ? static_cast<int>(gpus_named(visible).size()) : driver_gpus;
}

int share_status(MPI_Comm job, int status) {
  MPI_Request request;
  MPI_Ibcast(&status, 1, MPI_INT, 0, job, &request);
  // The ranks that wait poll 50 times a second: every 0.2 ms, as other waits
  // do, a node's eight would take half a core from the measurement.
  constexpr long kLongestSleepNs = 20'000'000;
  clocksync::wait_idle(request, std::numeric_limits<double>::infinity(), kLongestSleepNs);
  return status;
}

}  // namespace rankscope::acceptance
