// Nonblocking operations in flight: what the post knew, kept under its request
// until the Wait or Test that completes it records the operation whole.
#include "mpi_shim.h"

namespace rankscope::agent {

RequestTable* g_requests = nullptr;
bool g_show_waits = false;
RequestTable* g_persistent = nullptr;

// A nonblocking send or receive: the post now, the message at completion.
void post(Call call, int64_t begin, MPI_Request request, CommInfo* info, CommOp op, int peer, int tag, uint64_t bytes,
          MPI_Datatype type) {
  record_call(call, begin);
  const bool named = peer != MPI_ANY_SOURCE && tag != MPI_ANY_TAG;
  const uint64_t seq = named ? message_seq(info, op, peer, tag) : kSeqAtCompletion;
  g_requests->put(key_of(request), Pending{begin, info, call, EventKind::kMpiP2p, op, peer, tag, bytes, seq, type});
}

void post_collective(Call call, int64_t begin, MPI_Request* request, MPI_Comm comm, const CollectiveShape& shape) {
  CommInfo* info = info_for(comm);
  record_call(call, begin);
  Pending pending{begin, info, call, EventKind::kMpiCollective, shape.op, shape.root, 0, shape.bytes, 0, shape.type};
  pending.seq = next_collective_seq(*info, shape.op);
  g_requests->put(key_of(*request), pending);
}

// A nonblocking operation, complete at `end`; `status` is null where none was kept.
void record_completed(const Pending& p, const MPI_Status* status, int64_t end) {
  Event e;
  if (p.kind == EventKind::kMpiCollective) {
    e = pending_collective_event(p, p.begin, end);
  } else {
    int peer = p.peer, tag = p.tag;
    uint64_t bytes = p.bytes;
    if (p.op == CommOp::kRecv && status) {
      if (status->MPI_SOURCE == MPI_PROC_NULL) return;
      peer = status->MPI_SOURCE;
      tag = status->MPI_TAG;
      int count = 0;
      PMPI_Get_count(status, p.type, &count);
      if (count != MPI_UNDEFINED) bytes = bytes_of(count, p.type);
    }
    if (peer < 0) return;  // a receive from any source whose status was not kept
    e = p2p_event(p.call, p.begin, end, p.comm, p.op, peer, tag, bytes, p.type, p.seq);
  }
  e.track = static_cast<uint16_t>(p.comm->track);
  rankscope_agent_record(&e);
}

}  // namespace rankscope::agent
