// Fortran entry points of the MPI shim. Open MPI's Fortran bindings call
// PMPI_* directly, so the C wrappers never see a Fortran program's calls.
// These take the calls first, under the names the application binds to:
// mpi_send_ (mpif.h and `use mpi`, as gfortran and most compilers name them,
// also mpi_send__) and ompi_send_f (what `use mpi_f08`'s mpi_send_f08_
// calls across libraries). Each turns its Fortran arguments into C ones and
// calls the C wrapper, so a Fortran call is recorded exactly as a C call is.
//
// Calls not listed here still work (the application's own binding runs) but
// are not recorded; docs/agent-reference.md lists both.
#include <mpi.h>

#include <cstddef>
#include <vector>

#define RANKSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

// Open MPI's Fortran constants are the addresses of these common blocks.
extern "C" char mpi_fortran_bottom_;
extern "C" char mpi_fortran_in_place_;
extern "C" char mpi_fortran_status_ignore_;
extern "C" char mpi_fortran_statuses_ignore_;

namespace {

using Fint = MPI_Fint;

// MPI_STATUS_SIZE of Open MPI's mpif.h: a Fortran status is the C struct's bytes.
constexpr ptrdiff_t kStatusSize = sizeof(MPI_Status) / sizeof(Fint);

void* c_buffer(void* buffer) {
  if (buffer == &mpi_fortran_bottom_) return MPI_BOTTOM;
  if (buffer == &mpi_fortran_in_place_) return MPI_IN_PLACE;
  return buffer;
}

bool ignored(const Fint* status) { return reinterpret_cast<const char*>(status) == &mpi_fortran_status_ignore_; }
bool all_ignored(const Fint* statuses) {
  return reinterpret_cast<const char*>(statuses) == &mpi_fortran_statuses_ignore_;
}

// `use mpi_f08` makes ierror optional: absent, it arrives as a null pointer.
void set_error(Fint* ierror, int rc) {
  if (ierror) *ierror = rc;
}

MPI_Comm comm(const Fint* handle) { return PMPI_Comm_f2c(*handle); }
MPI_Datatype type(const Fint* handle) { return PMPI_Type_f2c(*handle); }
MPI_Op op(const Fint* handle) { return PMPI_Op_f2c(*handle); }

// A C status, or MPI_STATUS_IGNORE when the Fortran one is ignored; copied
// back by `done`.
class StatusOut {
 public:
  explicit StatusOut(Fint* fortran) : fortran_(fortran) {}
  MPI_Status* get() { return ignored(fortran_) ? MPI_STATUS_IGNORE : &status_; }
  void done(int rc) {
    if (rc == MPI_SUCCESS && !ignored(fortran_)) PMPI_Status_c2f(&status_, fortran_);
  }

 private:
  Fint* fortran_;
  MPI_Status status_{};
};

// Request arrays converted both ways; thread-local and grown only when a
// call passes more requests than ever before.
struct RequestArrays {
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  void take(int count, const Fint* fortran) {
    if (requests.size() < static_cast<size_t>(count)) {
      requests.resize(static_cast<size_t>(count));
      statuses.resize(static_cast<size_t>(count));
    }
    for (int i = 0; i < count; ++i) requests[static_cast<size_t>(i)] = PMPI_Request_f2c(fortran[i]);
  }
  void give_back(int count, Fint* fortran, Fint* fortran_statuses, int rc) {
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) return;
    for (int i = 0; i < count; ++i) {
      fortran[i] = PMPI_Request_c2f(requests[static_cast<size_t>(i)]);
      if (!all_ignored(fortran_statuses)) {
        PMPI_Status_c2f(&statuses[static_cast<size_t>(i)], fortran_statuses + static_cast<ptrdiff_t>(i) * kStatusSize);
      }
    }
  }
};
thread_local RequestArrays t_arrays;

}  // namespace

// Each binding is defined once as ompi_NAME_f and exported under the other names.
#define RANKSCOPE_FORTRAN_ALIASES(name, params)                                                    \
  RANKSCOPE_EXPORT void mpi_##name##_ params __attribute__((alias("ompi_" #name "_f")));           \
  RANKSCOPE_EXPORT void mpi_##name##__ params __attribute__((alias("ompi_" #name "_f")));
// The mpi_f08 bindings with a LOGICAL argument convert it themselves and call
// PMPI_* instead of ompi_NAME_f; their arguments are laid out the same.
#define RANKSCOPE_F08_ALIAS(name, params) \
  RANKSCOPE_EXPORT void mpi_##name##_f08_ params __attribute__((alias("ompi_" #name "_f")));

// ------------------------------------------------------------ set-up ---

#define PARAMS (Fint * ierror)
RANKSCOPE_EXPORT void ompi_init_f PARAMS { set_error(ierror, MPI_Init(nullptr, nullptr)); }
RANKSCOPE_FORTRAN_ALIASES(init, PARAMS)
RANKSCOPE_EXPORT void ompi_finalize_f PARAMS { set_error(ierror, MPI_Finalize()); }
RANKSCOPE_FORTRAN_ALIASES(finalize, PARAMS)
#undef PARAMS

#define PARAMS (Fint * required, Fint * provided, Fint * ierror)
RANKSCOPE_EXPORT void ompi_init_thread_f PARAMS {
  int c_provided = 0;
  const int rc = MPI_Init_thread(nullptr, nullptr, *required, &c_provided);
  *provided = c_provided;
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(init_thread, PARAMS)
#undef PARAMS

#define PARAMS (Fint * comm_handle, Fint * errorcode, Fint * ierror)
RANKSCOPE_EXPORT void ompi_abort_f PARAMS { set_error(ierror, MPI_Abort(comm(comm_handle), *errorcode)); }
RANKSCOPE_FORTRAN_ALIASES(abort, PARAMS)
#undef PARAMS

// -------------------------------------------------------- collectives ---

#define PARAMS (Fint * comm_handle, Fint * ierror)
RANKSCOPE_EXPORT void ompi_barrier_f PARAMS { set_error(ierror, MPI_Barrier(comm(comm_handle))); }
RANKSCOPE_FORTRAN_ALIASES(barrier, PARAMS)
#undef PARAMS

#define PARAMS (char* buffer, Fint* count, Fint* datatype, Fint* root, Fint* comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_bcast_f PARAMS {
  set_error(ierror, MPI_Bcast(c_buffer(buffer), *count, type(datatype), *root, comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(bcast, PARAMS)
#undef PARAMS

#define PARAMS \
  (char* send, char* recv, Fint* count, Fint* datatype, Fint* op_handle, Fint* root, Fint* comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_reduce_f PARAMS {
  set_error(ierror, MPI_Reduce(c_buffer(send), c_buffer(recv), *count, type(datatype), op(op_handle), *root,
                               comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(reduce, PARAMS)
#undef PARAMS

#define PARAMS (char* send, char* recv, Fint* count, Fint* datatype, Fint* op_handle, Fint* comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_allreduce_f PARAMS {
  set_error(ierror, MPI_Allreduce(c_buffer(send), c_buffer(recv), *count, type(datatype), op(op_handle),
                                  comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(allreduce, PARAMS)
#undef PARAMS

#define PARAMS                                                                                                      \
  (char* send, Fint* send_count, Fint* send_type, char* recv, Fint* recv_count, Fint* recv_type, Fint* root, \
   Fint* comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_gather_f PARAMS {
  set_error(ierror, MPI_Gather(c_buffer(send), *send_count, type(send_type), c_buffer(recv), *recv_count,
                               type(recv_type), *root, comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(gather, PARAMS)
RANKSCOPE_EXPORT void ompi_scatter_f PARAMS {
  set_error(ierror, MPI_Scatter(c_buffer(send), *send_count, type(send_type), c_buffer(recv), *recv_count,
                                type(recv_type), *root, comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(scatter, PARAMS)
#undef PARAMS

#define PARAMS                                                                                         \
  (char* send, Fint* send_count, Fint* send_type, char* recv, Fint* recv_count, Fint* recv_type, \
   Fint* comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_allgather_f PARAMS {
  set_error(ierror, MPI_Allgather(c_buffer(send), *send_count, type(send_type), c_buffer(recv), *recv_count,
                                  type(recv_type), comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(allgather, PARAMS)
RANKSCOPE_EXPORT void ompi_alltoall_f PARAMS {
  set_error(ierror, MPI_Alltoall(c_buffer(send), *send_count, type(send_type), c_buffer(recv), *recv_count,
                                 type(recv_type), comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(alltoall, PARAMS)
#undef PARAMS

// ------------------------------------------------------ point-to-point ---

#define PARAMS (char* buffer, Fint* count, Fint* datatype, Fint* peer, Fint* tag, Fint* comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_send_f PARAMS {
  set_error(ierror, MPI_Send(c_buffer(buffer), *count, type(datatype), *peer, *tag, comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(send, PARAMS)
RANKSCOPE_EXPORT void ompi_ssend_f PARAMS {
  set_error(ierror, MPI_Ssend(c_buffer(buffer), *count, type(datatype), *peer, *tag, comm(comm_handle)));
}
RANKSCOPE_FORTRAN_ALIASES(ssend, PARAMS)
#undef PARAMS

#define PARAMS \
  (char* buffer, Fint* count, Fint* datatype, Fint* peer, Fint* tag, Fint* comm_handle, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_recv_f PARAMS {
  StatusOut out(status);
  const int rc = MPI_Recv(c_buffer(buffer), *count, type(datatype), *peer, *tag, comm(comm_handle), out.get());
  out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(recv, PARAMS)
#undef PARAMS

#define PARAMS \
  (char* buffer, Fint* count, Fint* datatype, Fint* peer, Fint* tag, Fint* comm_handle, Fint* request, Fint* ierror)
RANKSCOPE_EXPORT void ompi_isend_f PARAMS {
  MPI_Request c_request = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(c_buffer(buffer), *count, type(datatype), *peer, *tag, comm(comm_handle), &c_request);
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(c_request);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(isend, PARAMS)
RANKSCOPE_EXPORT void ompi_irecv_f PARAMS {
  MPI_Request c_request = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(c_buffer(buffer), *count, type(datatype), *peer, *tag, comm(comm_handle), &c_request);
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(c_request);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(irecv, PARAMS)
#undef PARAMS

#define PARAMS                                                                                                   \
  (char* send, Fint* send_count, Fint* send_type, Fint* dest, Fint* send_tag, char* recv, Fint* recv_count, \
   Fint* recv_type, Fint* source, Fint* recv_tag, Fint* comm_handle, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_sendrecv_f PARAMS {
  StatusOut out(status);
  const int rc = MPI_Sendrecv(c_buffer(send), *send_count, type(send_type), *dest, *send_tag, c_buffer(recv),
                              *recv_count, type(recv_type), *source, *recv_tag, comm(comm_handle), out.get());
  out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(sendrecv, PARAMS)
#undef PARAMS

#define PARAMS (Fint * source, Fint* tag, Fint* comm_handle, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_probe_f PARAMS {
  StatusOut out(status);
  const int rc = MPI_Probe(*source, *tag, comm(comm_handle), out.get());
  out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(probe, PARAMS)
#undef PARAMS

#define PARAMS (Fint * source, Fint* tag, Fint* comm_handle, Fint* flag, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_iprobe_f PARAMS {
  StatusOut out(status);
  int c_flag = 0;
  const int rc = MPI_Iprobe(*source, *tag, comm(comm_handle), &c_flag, out.get());
  *flag = c_flag ? 1 : 0;
  if (c_flag) out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(iprobe, PARAMS)
RANKSCOPE_F08_ALIAS(iprobe, PARAMS)
#undef PARAMS

// ------------------------------------------------------ Wait and Test ---

#define PARAMS (Fint * request, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_wait_f PARAMS {
  MPI_Request c_request = PMPI_Request_f2c(*request);
  StatusOut out(status);
  const int rc = MPI_Wait(&c_request, out.get());
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(c_request);
  out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(wait, PARAMS)
#undef PARAMS

#define PARAMS (Fint * request, Fint* flag, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_test_f PARAMS {
  MPI_Request c_request = PMPI_Request_f2c(*request);
  StatusOut out(status);
  int c_flag = 0;
  const int rc = MPI_Test(&c_request, &c_flag, out.get());
  *flag = c_flag ? 1 : 0;
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(c_request);
  if (c_flag) out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(test, PARAMS)
RANKSCOPE_F08_ALIAS(test, PARAMS)
#undef PARAMS

#define PARAMS (Fint * count, Fint* requests, Fint* statuses, Fint* ierror)
RANKSCOPE_EXPORT void ompi_waitall_f PARAMS {
  RequestArrays& arrays = t_arrays;
  arrays.take(*count, requests);
  const int rc = MPI_Waitall(*count, arrays.requests.data(),
                             all_ignored(statuses) ? MPI_STATUSES_IGNORE : arrays.statuses.data());
  arrays.give_back(*count, requests, statuses, rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(waitall, PARAMS)
#undef PARAMS

#define PARAMS (Fint * count, Fint* requests, Fint* flag, Fint* statuses, Fint* ierror)
RANKSCOPE_EXPORT void ompi_testall_f PARAMS {
  RequestArrays& arrays = t_arrays;
  arrays.take(*count, requests);
  int c_flag = 0;
  const int rc = MPI_Testall(*count, arrays.requests.data(), &c_flag,
                             all_ignored(statuses) ? MPI_STATUSES_IGNORE : arrays.statuses.data());
  *flag = c_flag ? 1 : 0;
  if (c_flag) arrays.give_back(*count, requests, statuses, rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(testall, PARAMS)
RANKSCOPE_F08_ALIAS(testall, PARAMS)
#undef PARAMS

namespace {

// Fortran indices count from 1; MPI_UNDEFINED stays as it is.
Fint fortran_index(int index) { return index == MPI_UNDEFINED ? index : index + 1; }

}  // namespace

#define PARAMS (Fint * count, Fint* requests, Fint* index, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_waitany_f PARAMS {
  RequestArrays& arrays = t_arrays;
  arrays.take(*count, requests);
  StatusOut out(status);
  int c_index = MPI_UNDEFINED;
  const int rc = MPI_Waitany(*count, arrays.requests.data(), &c_index, out.get());
  if (rc == MPI_SUCCESS && c_index != MPI_UNDEFINED) {
    requests[c_index] = PMPI_Request_c2f(arrays.requests[static_cast<size_t>(c_index)]);
  }
  *index = fortran_index(c_index);
  out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(waitany, PARAMS)
#undef PARAMS

#define PARAMS (Fint * count, Fint* requests, Fint* index, Fint* flag, Fint* status, Fint* ierror)
RANKSCOPE_EXPORT void ompi_testany_f PARAMS {
  RequestArrays& arrays = t_arrays;
  arrays.take(*count, requests);
  StatusOut out(status);
  int c_index = MPI_UNDEFINED, c_flag = 0;
  const int rc = MPI_Testany(*count, arrays.requests.data(), &c_index, &c_flag, out.get());
  if (rc == MPI_SUCCESS && c_flag && c_index != MPI_UNDEFINED) {
    requests[c_index] = PMPI_Request_c2f(arrays.requests[static_cast<size_t>(c_index)]);
  }
  *index = fortran_index(c_index);
  *flag = c_flag ? 1 : 0;
  if (c_flag) out.done(rc);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(testany, PARAMS)
RANKSCOPE_F08_ALIAS(testany, PARAMS)
#undef PARAMS

// ------------------------------------------------------ communicators ---

#define PARAMS (Fint * comm_handle, Fint* made, Fint* ierror)
RANKSCOPE_EXPORT void ompi_comm_dup_f PARAMS {
  MPI_Comm c_made = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(comm(comm_handle), &c_made);
  if (rc == MPI_SUCCESS) *made = PMPI_Comm_c2f(c_made);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(comm_dup, PARAMS)
#undef PARAMS

#define PARAMS (Fint * comm_handle, Fint* color, Fint* key, Fint* made, Fint* ierror)
RANKSCOPE_EXPORT void ompi_comm_split_f PARAMS {
  MPI_Comm c_made = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(comm(comm_handle), *color, *key, &c_made);
  if (rc == MPI_SUCCESS) *made = PMPI_Comm_c2f(c_made);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(comm_split, PARAMS)
#undef PARAMS

#define PARAMS (Fint * comm_handle, Fint* ierror)
RANKSCOPE_EXPORT void ompi_comm_free_f PARAMS {
  MPI_Comm c_comm = comm(comm_handle);
  const int rc = MPI_Comm_free(&c_comm);
  if (rc == MPI_SUCCESS) *comm_handle = PMPI_Comm_c2f(c_comm);
  set_error(ierror, rc);
}
RANKSCOPE_FORTRAN_ALIASES(comm_free, PARAMS)
#undef PARAMS
