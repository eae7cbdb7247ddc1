#include "rankscope/clocksync/sync_mpi.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

#include "rankscope/clocksync/clock.h"

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
  int64_t start = wall_now_ns();
  MPI_Bcast(&start, 1, MPI_INT64_T, 0, comm);
  return start;
}


int ranks_not_sharing_folder(MPI_Comm comm, const std::string& folder) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  char name[96] = {};
  std::string probe;
  if (rank == 0) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    std::snprintf(name, sizeof(name), ".rankscope-shared-%d-%lld-%ld", static_cast<int>(::getpid()),
                  static_cast<long long>(now.tv_sec), now.tv_nsec);
    probe = folder + "/" + name;
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) name[0] = '\0';
    else ::close(fd);
  }
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, comm);
  int not_sharing = 0;
  if (rank != 0 && name[0] != '\0') not_sharing = ::access((folder + "/" + name).c_str(), F_OK) == 0 ? 0 : 1;
  int total = 0;
  MPI_Allreduce(&not_sharing, &total, 1, MPI_INT, MPI_SUM, comm);
  if (rank == 0 && name[0] != '\0') ::unlink(probe.c_str());
  return total;
}

}  // namespace rankscope::clocksync
