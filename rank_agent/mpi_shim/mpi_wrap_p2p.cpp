// The point-to-point wrappers: blocking sends and receives recorded whole,
// nonblocking ones posted for their completion, probes and the messages they
// match, and persistent requests, posted anew at each start.
#include "mpi_shim.h"

using namespace rankscope;
using namespace rankscope::agent;

// ----------------------------------------------------- point-to-point ---

namespace {

template <typename Run>
int blocking_send(Call call, int dest, int tag, int count, MPI_Datatype type, MPI_Comm comm, Run&& run) {
  const int64_t begin = now();
  int rc;
  {
    // A large message waits for its receive; numbered at completion, 0 while it waits.
    InProgress shown;
    if (dest != MPI_PROC_NULL) {
      shown.show(p2p_event(call, begin, 0, info_for(comm), CommOp::kSend, dest, tag, bytes_of(count, type), type, 0));
    }
    rc = run();
  }
  if (dest != MPI_PROC_NULL) {
    const Event e =
        p2p_event(call, begin, now(), info_for(comm), CommOp::kSend, dest, tag, bytes_of(count, type), type, kSeqAtCompletion);
    rankscope_agent_record(&e);
  }
  return rc;
}

template <typename Run>
int nonblocking_send(Call call, int dest, int tag, int count, MPI_Datatype type, MPI_Comm comm, MPI_Request* request,
                     Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  if (rc == MPI_SUCCESS && dest != MPI_PROC_NULL) {
    post(call, begin, *request, info_for(comm), CommOp::kSend, dest, tag, bytes_of(count, type), type);
  }
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Send(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kSend, dest, tag, count, type, comm, [&] { return PMPI_Send(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ssend(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kSsend, dest, tag, count, type, comm, [&] { return PMPI_Ssend(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Bsend(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kBsend, dest, tag, count, type, comm, [&] { return PMPI_Bsend(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Rsend(buf, count, type, dest, tag, comm));
  return blocking_send(Call::kRsend, dest, tag, count, type, comm, [&] { return PMPI_Rsend(buf, count, type, dest, tag, comm); });
}

RANKSCOPE_EXPORT int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                               MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Isend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIsend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Isend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Issend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIssend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Issend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ibsend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIbsend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Ibsend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Irsend(buf, count, type, dest, tag, comm, request));
  return nonblocking_send(Call::kIrsend, dest, tag, count, type, comm, request,
                          [&] { return PMPI_Irsend(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                              MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Recv(buf, count, type, source, tag, comm, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  int rc;
  {
    // Numbered at completion, where the sender is known: 0 while it waits.
    const InProgress shown(p2p_event(Call::kRecv, begin, 0, info_for(comm), CommOp::kRecv, source, tag,
                                     bytes_of(count, type), type, 0));
    rc = PMPI_Recv(buf, count, type, source, tag, comm, kept);
  }
  if (rc == MPI_SUCCESS) record_received(Call::kRecv, begin, now(), comm, *kept, type);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                               MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Irecv(buf, count, type, source, tag, comm, request));
  const int64_t begin = now();
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
  if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) {
    post(Call::kIrecv, begin, *request, info_for(comm), CommOp::kRecv, source, tag,
         bytes_of(count, type), type);
  }
  return rc;
}

namespace {

// What a Sendrecv sends and receives.
struct Exchange {
  int dest, send_tag, send_count;
  MPI_Datatype send_type;
  int source, recv_tag, recv_count;
  MPI_Datatype recv_type;
};

// Sendrecv and Sendrecv_replace: shown as their receive while they run, as
// that is the half that waits for another rank (the send of a message small
// enough to go eagerly completes on its own); recorded as both halves.
template <typename Run>
int exchange(Call call, const Exchange& x, MPI_Comm comm, MPI_Status* status, Run&& run) {
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  int rc;
  {
    InProgress shown;
    if (x.source != MPI_PROC_NULL) {
      shown.show(p2p_event(call, begin, 0, info_for(comm), CommOp::kRecv, x.source, x.recv_tag,
                           bytes_of(x.recv_count, x.recv_type), x.recv_type, 0));
    } else if (x.dest != MPI_PROC_NULL) {
      shown.show(p2p_event(call, begin, 0, info_for(comm), CommOp::kSend, x.dest, x.send_tag,
                           bytes_of(x.send_count, x.send_type), x.send_type, 0));
    }
    rc = run(kept);
  }
  const int64_t end = now();
  if (rc == MPI_SUCCESS) {
    if (x.dest != MPI_PROC_NULL) {
      const Event e = p2p_event(call, begin, end, info_for(comm), CommOp::kSend, x.dest, x.send_tag,
                                bytes_of(x.send_count, x.send_type), x.send_type, kSeqAtCompletion);
      rankscope_agent_record(&e);
    }
    record_received(call, begin, end, comm, *kept, x.recv_type);
  }
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Sendrecv(const void* send, int send_count, MPI_Datatype send_type, int dest, int send_tag,
                                  void* recv, int recv_count, MPI_Datatype recv_type, int source, int recv_tag,
                                  MPI_Comm comm, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Sendrecv(send, send_count, send_type, dest, send_tag, recv, recv_count, recv_type, source,
                                       recv_tag, comm, status));
  return exchange(Call::kSendrecv, {dest, send_tag, send_count, send_type, source, recv_tag, recv_count, recv_type}, comm,
                  status, [&](MPI_Status* kept) {
                    return PMPI_Sendrecv(send, send_count, send_type, dest, send_tag, recv, recv_count, recv_type,
                                         source, recv_tag, comm, kept);
                  });
}

RANKSCOPE_EXPORT int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int send_tag, int source,
                                          int recv_tag, MPI_Comm comm, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Sendrecv_replace(buf, count, type, dest, send_tag, source, recv_tag, comm, status));
  return exchange(Call::kSendrecv_replace, {dest, send_tag, count, type, source, recv_tag, count, type}, comm, status,
                  [&](MPI_Status* kept) {
                    return PMPI_Sendrecv_replace(buf, count, type, dest, send_tag, source, recv_tag, comm, kept);
                  });
}

// ------------------------------------------------------------- probes ---

namespace {

// A blocking probe, shown as a receive while it runs; `run(begin)` probes.
template <typename Run>
int blocking_probe(Call call, int source, int tag, MPI_Comm comm, Run&& run) {
  const Event probing = probe_event(call, source, tag, comm);
  int rc;
  {
    const InProgress shown(probing);
    rc = run(probing.begin_ns);
  }
  record_call(call, probing.begin_ns);
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Probe(source, tag, comm, status));
  return blocking_probe(Call::kProbe, source, tag, comm, [&](int64_t) { return PMPI_Probe(source, tag, comm, status); });
}

namespace {

[[gnu::noinline]] int iprobe_answered(int source, int tag, MPI_Comm comm, const int* flag, int rc, PollTimer poll) {
  if (poll.finish(rc == MPI_SUCCESS && *flag)) record_poll(Call::kIprobe, poll);
  if (polling_to_show(rc != MPI_SUCCESS || *flag)) show_probing(Call::kIprobe, source, tag, comm);
  return rc;
}

// As the Test family's (mpi_wrap_completion.cpp): a quick poll answered with nothing returns at once.
[[gnu::noinline]] int iprobe_captured(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  if (poll_quickly()) {
    const int rc = PMPI_Iprobe(source, tag, comm, flag, status);
    if (rc == MPI_SUCCESS && !*flag) [[likely]] return rc;
    return iprobe_answered(source, tag, comm, flag, rc, PollTimer::quick_answer());
  }
  PollTimer poll;
  const int rc = PMPI_Iprobe(source, tag, comm, flag, status);
  return iprobe_answered(source, tag, comm, flag, rc, poll);
}

// A message matched by Mprobe or Improbe, for the Mrecv or Imrecv that
// receives it: MPI does not say which communicator a message came on.
void note_matched(MPI_Message message, MPI_Comm comm, const MPI_Status& status, int64_t begin) {
  if (message == MPI_MESSAGE_NULL || message == MPI_MESSAGE_NO_PROC) return;
  g_requests->put(key_of(message), Pending{begin, info_for(comm), Call::kMrecv, EventKind::kMpiP2p, CommOp::kRecv,
                                           status.MPI_SOURCE, status.MPI_TAG, 0, kSeqAtCompletion, MPI_DATATYPE_NULL});
}

[[gnu::noinline]] int improbe_answered(int source, int tag, MPI_Comm comm, const int* flag, const MPI_Message* message,
                                       const MPI_Status* kept, int rc, PollTimer poll) {
  const bool matched = rc == MPI_SUCCESS && *flag;
  if (poll.finish(matched)) record_poll(Call::kImprobe, poll);
  if (matched) note_matched(*message, comm, *kept, poll.begin());
  if (polling_to_show(rc != MPI_SUCCESS || *flag)) show_probing(Call::kImprobe, source, tag, comm);
  return rc;
}

[[gnu::noinline]] int improbe_captured(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                                       MPI_Status* status) {
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  if (poll_quickly()) {
    const int rc = PMPI_Improbe(source, tag, comm, flag, message, kept);
    if (rc == MPI_SUCCESS && !*flag) [[likely]] return rc;
    return improbe_answered(source, tag, comm, flag, message, kept, rc, PollTimer::quick_answer());
  }
  PollTimer poll;
  const int rc = PMPI_Improbe(source, tag, comm, flag, message, kept);
  return improbe_answered(source, tag, comm, flag, message, kept, rc, poll);
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  return pass_through_or<PMPI_Iprobe, iprobe_captured>(source, tag, comm, flag, status);
}

RANKSCOPE_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Mprobe(source, tag, comm, message, status));
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  return blocking_probe(Call::kMprobe, source, tag, comm, [&](int64_t begin) {
    const int rc = PMPI_Mprobe(source, tag, comm, message, kept);
    if (rc == MPI_SUCCESS) note_matched(*message, comm, *kept, begin);
    return rc;
  });
}

RANKSCOPE_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                                 MPI_Status* status) {
  return pass_through_or<PMPI_Improbe, improbe_captured>(source, tag, comm, flag, message, status);
}

RANKSCOPE_EXPORT int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Mrecv(buf, count, type, message, status));
  const MPI_Message handle = *message;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = PMPI_Mrecv(buf, count, type, message, kept);
  const int64_t end = now();
  Pending matched;
  if (rc == MPI_SUCCESS && g_requests->take(key_of(handle), matched)) {
    int received = 0;
    PMPI_Get_count(kept, type, &received);
    const Event e = p2p_event(Call::kMrecv, begin, end, matched.comm, CommOp::kRecv, kept->MPI_SOURCE, kept->MPI_TAG,
                              received == MPI_UNDEFINED ? 0 : bytes_of(received, type), type, kSeqAtCompletion);
    rankscope_agent_record(&e);
  } else {
    record_call(Call::kMrecv, begin);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Imrecv(buf, count, type, message, request));
  const MPI_Message handle = *message;
  const int64_t begin = now();
  const int rc = PMPI_Imrecv(buf, count, type, message, request);
  Pending matched;
  if (rc == MPI_SUCCESS && g_requests->take(key_of(handle), matched)) {
    post(Call::kImrecv, begin, *request, matched.comm, CommOp::kRecv, matched.peer, matched.tag, bytes_of(count, type),
         type);
  } else {
    record_call(Call::kImrecv, begin);
  }
  return rc;
}

// --------------------------------------------------- persistent requests ---

namespace {

// Remembers what a persistent request does; each MPI_Start posts it anew.
template <typename Run>
int persistent_init(Call call, CommOp op, int peer, int tag, int count, MPI_Datatype type, MPI_Comm comm,
                    MPI_Request* request, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  record_call(call, begin);
  if (rc == MPI_SUCCESS && peer != MPI_PROC_NULL) {
    Pending stale;
    g_persistent->take(key_of(*request), stale);
    g_persistent->put(key_of(*request), Pending{0, info_for(comm), call, EventKind::kMpiP2p, op, peer, tag,
                                                bytes_of(count, type), 0, type});
  }
  return rc;
}

void start_persistent(MPI_Request request, int64_t begin) {
  Pending p;
  if (request == MPI_REQUEST_NULL || !g_persistent->find(key_of(request), p)) return;
  const bool named = p.peer != MPI_ANY_SOURCE && p.tag != MPI_ANY_TAG;
  p.begin = begin;
  p.seq = named ? message_seq(p.comm, p.op, p.peer, p.tag) : kSeqAtCompletion;
  g_requests->put(key_of(request), p);
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                   MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Send_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kSend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Send_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Ssend_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kSsend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Ssend_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Bsend_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kBsend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Bsend_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Rsend_init(buf, count, type, dest, tag, comm, request));
  return persistent_init(Call::kRsend_init, CommOp::kSend, dest, tag, count, type, comm, request,
                         [&] { return PMPI_Rsend_init(buf, count, type, dest, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                   MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Recv_init(buf, count, type, source, tag, comm, request));
  return persistent_init(Call::kRecv_init, CommOp::kRecv, source, tag, count, type, comm, request,
                         [&] { return PMPI_Recv_init(buf, count, type, source, tag, comm, request); });
}

RANKSCOPE_EXPORT int MPI_Start(MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Start(request));
  const int64_t begin = now();
  const int rc = PMPI_Start(request);
  record_call(Call::kStart, begin);
  if (rc == MPI_SUCCESS) start_persistent(*request, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Startall(int count, MPI_Request requests[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Startall(count, requests));
  const int64_t begin = now();
  const int rc = PMPI_Startall(count, requests);
  record_call(Call::kStartall, begin);
  if (rc == MPI_SUCCESS) {
    for (int i = 0; i < count; ++i) start_persistent(requests[i], begin);
  }
  return rc;
}

RANKSCOPE_EXPORT int MPI_Request_free(MPI_Request* request) {
  RANKSCOPE_PASS_THROUGH(PMPI_Request_free(request));
  // A freed handle may come back for the next request: what it did must go.
  const uintptr_t key = key_of(*request);
  const int64_t begin = now();
  const int rc = PMPI_Request_free(request);
  record_call(Call::kRequest_free, begin);
  // An active send freed before it completes (posted and forgotten) is
  // still a message: it is recorded as ending here.
  Pending active;
  if (g_requests->take(key, active)) record_completed(active, nullptr, now());
  g_persistent->take(key, active);
  end_polling();  // it may have been the request polled for
  return rc;
}
