// The collectives' wrappers: a blocking one recorded whole when it returns, a
// nonblocking one posted here and recorded by the Wait or Test that completes
// it; each with its shape (operation, bytes as nccl-tests counts them,
// datatype and root).
#include "mpi_shim.h"

using namespace rankscope;
using namespace rankscope::agent;

namespace {

// A blocking collective: what it is, shown as the thread's call in progress
// while it runs (a hang's dump reads it), then recorded with its end. Its
// sequence number is taken as it starts, the order MPI issues collectives in.
template <typename Run>
int blocking(Call call, MPI_Comm comm, Run&& run, const CollectiveShape& shape) {
  Event e = collective_event(call, now(), 0, comm, shape);
  int rc;
  {
    const InProgress shown(e);
    rc = run();
    e.end_ns = now();
  }
  rankscope_agent_record(&e);
  return rc;
}

template <typename Run>
int nonblocking(Call call, MPI_Comm comm, MPI_Request* request, Run&& run, const CollectiveShape& shape) {
  const int64_t begin = now();
  const int rc = run();
  if (rc == MPI_SUCCESS) post_collective(call, begin, request, comm, shape);
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Barrier(MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Barrier(comm));
  return blocking(Call::kBarrier, comm, [&] { return PMPI_Barrier(comm); }, {CommOp::kBarrier, 0, MPI_DATATYPE_NULL, -1});
}

RANKSCOPE_EXPORT int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Bcast(buffer, count, type, root, comm));
  return blocking(Call::kBcast, comm, [&] { return PMPI_Bcast(buffer, count, type, root, comm); },
                  {CommOp::kBroadcast, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                                MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Reduce(send, recv, count, type, op, root, comm));
  return blocking(Call::kReduce, comm, [&] { return PMPI_Reduce(send, recv, count, type, op, root, comm); },
                  {CommOp::kReduce, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                                   MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Allreduce(send, recv, count, type, op, comm));
  return blocking(Call::kAllreduce, comm, [&] { return PMPI_Allreduce(send, recv, count, type, op, comm); },
                  {CommOp::kAllReduce, bytes_of(count, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Gather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                                MPI_Datatype recv_type, int root, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm));
  return blocking(Call::kGather, comm,
                  [&] { return PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm); },
                  {CommOp::kGather, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, root});
}

RANKSCOPE_EXPORT int MPI_Gatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                 const int recv_counts[], const int displs[], MPI_Datatype recv_type, int root,
                                 MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm));
  return blocking(Call::kGatherv, comm,
                  [&] { return PMPI_Gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm); },
                  {CommOp::kGather, bytes_of(send_count, send_type), send_type, root});
}

RANKSCOPE_EXPORT int MPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                   int recv_count, MPI_Datatype recv_type, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm));
  return blocking(Call::kAllgather, comm,
                  [&] { return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm); },
                  {CommOp::kAllGather, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, -1});
}

RANKSCOPE_EXPORT int MPI_Allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                    const int recv_counts[], const int displs[], MPI_Datatype recv_type,
                                    MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm));
  return blocking(Call::kAllgatherv, comm,
                  [&] { return PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm); },
                  {CommOp::kAllGather, total_bytes(recv_counts, comm, recv_type), recv_type, -1});
}

RANKSCOPE_EXPORT int MPI_Scatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                                 MPI_Datatype recv_type, int root, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm));
  return blocking(Call::kScatter, comm,
                  [&] { return PMPI_Scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm); },
                  {CommOp::kScatter, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, root});
}

RANKSCOPE_EXPORT int MPI_Scatterv(const void* send, const int send_counts[], const int displs[],
                                  MPI_Datatype send_type, void* recv, int recv_count, MPI_Datatype recv_type, int root,
                                  MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm));
  return blocking(Call::kScatterv, comm,
                  [&] { return PMPI_Scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm); },
                  {CommOp::kScatter, bytes_of(recv_count, recv_type), recv_type, root});
}

RANKSCOPE_EXPORT int MPI_Alltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                  int recv_count, MPI_Datatype recv_type, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm));
  return blocking(Call::kAlltoall, comm,
                  [&] { return PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm); },
                  {CommOp::kAllToAll, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, -1});
}

RANKSCOPE_EXPORT int MPI_Alltoallv(const void* send, const int send_counts[], const int send_displs[],
                                   MPI_Datatype send_type, void* recv, const int recv_counts[],
                                   const int recv_displs[], MPI_Datatype recv_type, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs,
                                        recv_type, comm));
  return blocking(Call::kAlltoallv, comm,
                  [&] {
                    return PMPI_Alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs,
                                          recv_type, comm);
                  },
                  {CommOp::kAllToAll, total_bytes(send_counts, comm, send_type), send_type, -1});
}

RANKSCOPE_EXPORT int MPI_Alltoallw(const void* send, const int send_counts[], const int send_displs[],
                                   const MPI_Datatype send_types[], void* recv, const int recv_counts[],
                                   const int recv_displs[], const MPI_Datatype recv_types[], MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Alltoallw(send, send_counts, send_displs, send_types, recv, recv_counts, recv_displs,
                                        recv_types, comm));
  uint64_t bytes = 0;
  for (int i = 0, n = comm_size(comm); i < n; ++i) bytes += bytes_of(send_counts[i], send_types[i]);
  return blocking(Call::kAlltoallw, comm,
                  [&] {
                    return PMPI_Alltoallw(send, send_counts, send_displs, send_types, recv, recv_counts, recv_displs,
                                          recv_types, comm);
                  },
                  {CommOp::kAllToAll, bytes, MPI_DATATYPE_NULL, -1});
}

RANKSCOPE_EXPORT int MPI_Reduce_scatter(const void* send, void* recv, const int recv_counts[], MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Reduce_scatter(send, recv, recv_counts, type, op, comm));
  return blocking(Call::kReduce_scatter, comm, [&] { return PMPI_Reduce_scatter(send, recv, recv_counts, type, op, comm); },
                  {CommOp::kReduceScatter, total_bytes(recv_counts, comm, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Reduce_scatter_block(const void* send, void* recv, int recv_count, MPI_Datatype type,
                                              MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Reduce_scatter_block(send, recv, recv_count, type, op, comm));
  return blocking(Call::kReduce_scatter_block, comm,
                  [&] { return PMPI_Reduce_scatter_block(send, recv, recv_count, type, op, comm); },
                  {CommOp::kReduceScatter, bytes_of(recv_count, type) * uint64_t(comm_size(comm)), type, -1});
}

RANKSCOPE_EXPORT int MPI_Scan(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Scan(send, recv, count, type, op, comm));
  return blocking(Call::kScan, comm, [&] { return PMPI_Scan(send, recv, count, type, op, comm); },
                  {CommOp::kScan, bytes_of(count, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Exscan(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Exscan(send, recv, count, type, op, comm));
  return blocking(Call::kExscan, comm, [&] { return PMPI_Exscan(send, recv, count, type, op, comm); },
                  {CommOp::kExscan, bytes_of(count, type), type, -1});
}

// ------------------------------------------- nonblocking collectives ---

RANKSCOPE_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ibarrier(comm, request));
  return nonblocking(Call::kIbarrier, comm, request, [&] { return PMPI_Ibarrier(comm, request); },
                     {CommOp::kBarrier, 0, MPI_DATATYPE_NULL, -1});
}

RANKSCOPE_EXPORT int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ibcast(buffer, count, type, root, comm, request));
  return nonblocking(Call::kIbcast, comm, request, [&] { return PMPI_Ibcast(buffer, count, type, root, comm, request); },
                     {CommOp::kBroadcast, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                                 MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ireduce(send, recv, count, type, op, root, comm, request));
  return nonblocking(Call::kIreduce, comm, request,
                     [&] { return PMPI_Ireduce(send, recv, count, type, op, root, comm, request); },
                     {CommOp::kReduce, bytes_of(count, type), type, root});
}

RANKSCOPE_EXPORT int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                                    MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iallreduce(send, recv, count, type, op, comm, request));
  return nonblocking(Call::kIallreduce, comm, request,
                     [&] { return PMPI_Iallreduce(send, recv, count, type, op, comm, request); },
                     {CommOp::kAllReduce, bytes_of(count, type), type, -1});
}

RANKSCOPE_EXPORT int MPI_Igather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                                 MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request));
  return nonblocking(
      Call::kIgather, comm, request,
      [&] { return PMPI_Igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request); },
      {CommOp::kGather, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, root});
}

RANKSCOPE_EXPORT int MPI_Iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                    int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, request));
  return nonblocking(
      Call::kIallgather, comm, request,
      [&] { return PMPI_Iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, request); },
      {CommOp::kAllGather, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, -1});
}

RANKSCOPE_EXPORT int MPI_Iscatter(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm,
                                  MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Iscatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request));
  return nonblocking(
      Call::kIscatter, comm, request,
      [&] { return PMPI_Iscatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request); },
      {CommOp::kScatter, bytes_of(recv_count, recv_type) * uint64_t(comm_size(comm)), recv_type, root});
}

RANKSCOPE_EXPORT int MPI_Ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv,
                                   int recv_count, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ialltoall(send, send_count, send_type, recv, recv_count, recv_type, comm, request));
  return nonblocking(
      Call::kIalltoall, comm, request,
      [&] { return PMPI_Ialltoall(send, send_count, send_type, recv, recv_count, recv_type, comm, request); },
      {CommOp::kAllToAll, bytes_of(send_count, send_type) * uint64_t(comm_size(comm)), send_type, -1});
}

RANKSCOPE_EXPORT int MPI_Ireduce_scatter_block(const void* send, void* recv, int recv_count, MPI_Datatype type,
                                               MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ireduce_scatter_block(send, recv, recv_count, type, op, comm, request));
  return nonblocking(Call::kIreduce_scatter_block, comm, request,
                     [&] { return PMPI_Ireduce_scatter_block(send, recv, recv_count, type, op, comm, request); },
                     {CommOp::kReduceScatter, bytes_of(recv_count, type) * uint64_t(comm_size(comm)), type, -1});
}
