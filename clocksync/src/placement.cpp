#include "rankscope/clocksync/sync_mpi.h"

#include <time.h>

namespace rankscope::clocksync {

Placement placement(MPI_Comm comm) {
  Placement where;
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &where.world_size);
  MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &where.local_rank);
  MPI_Comm_size(node, &where.local_size);
  MPI_Comm_split(comm, where.local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &where.node_id);
    MPI_Comm_free(&leaders);
  }
  MPI_Bcast(&where.node_id, 1, MPI_INT, 0, node);
  MPI_Comm_free(&node);
  return where;
}

int64_t job_start_wall_ns(MPI_Comm comm) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t start = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  MPI_Bcast(&start, 1, MPI_INT64_T, 0, comm);
  return start;
}

}  // namespace rankscope::clocksync
