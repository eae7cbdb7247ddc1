// The wrappers of the rest: MPI_Init and MPI_Finalize (where the shim starts
// and stops), communicator creation (where a communicator's identity is
// made), MPI-IO, one-sided communication, and MPI_Abort.
#include <utility>
#include <vector>

#include "mpi_shim.h"

using namespace rankscope;
using namespace rankscope::agent;

// ------------------------------------------------------ start and stop ---

namespace {

template <typename Init>
int init(Call call, Init&& run_init) {
  const int64_t begin = now();
  int crash_handlers_aside = 0;
  rankscope_agent_before_mpi_init(&crash_handlers_aside);
  const int rc = run_init();
  rankscope_agent_after_mpi_init(crash_handlers_aside);
  if (rc == MPI_SUCCESS) start_after_init(call, begin);
  return rc;
}

// `--clock-thread always`: MPI_THREAD_MULTIPLE, which the clock rounds' thread
// needs, asked for whatever the program asks; MPI tells the program what it got.
bool clock_thread_asked() { return clock_round_settings().thread == ClockRoundSettings::Thread::kAlways; }

}  // namespace

RANKSCOPE_EXPORT int MPI_Init(int* argc, char*** argv) {
  return init(Call::kInit, [&] {
    int provided = MPI_THREAD_SINGLE;
    return clock_thread_asked() ? PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) : PMPI_Init(argc, argv);
  });
}

RANKSCOPE_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return init(Call::kInit_thread, [&] {
    return PMPI_Init_thread(argc, argv, clock_thread_asked() ? MPI_THREAD_MULTIPLE : required, provided);
  });
}

RANKSCOPE_EXPORT int MPI_Finalize() {
  stop_before_finalize();
  return PMPI_Finalize();
}

// ------------------------------------------------------ communicators ---

namespace {

constexpr uint64_t kDup = 0x6475700000000000ull;

template <typename Run>
int make_comm(Call call, MPI_Comm parent, MPI_Comm* made, uint64_t discriminator, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  if (rc == MPI_SUCCESS) {
    AgentScope agent_calls;
    note_new_comm(parent, *made, discriminator);
  }
  record_call(call, begin);
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_dup(comm, made));
  return make_comm(Call::kComm_dup, comm, made, kDup, [&] { return PMPI_Comm_dup(comm, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_split(comm, color, key, made));
  return make_comm(Call::kComm_split, comm, made, uint32_t(color), [&] { return PMPI_Comm_split(comm, color, key, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_split_type(comm, type, key, info, made));
  return make_comm(Call::kComm_split_type, comm, made, uint32_t(type),
                   [&] { return PMPI_Comm_split_type(comm, type, key, info, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_create(comm, group, made));
  return make_comm(Call::kComm_create, comm, made, 0, [&] { return PMPI_Comm_create(comm, group, made); });
}

RANKSCOPE_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* made) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_create_group(comm, group, tag, made));
  // Only the group's members call this, so the parent's count of children
  // differs between ranks: the tag and the members identify it instead.
  const int64_t begin = now();
  const int rc = PMPI_Comm_create_group(comm, group, tag, made);
  if (rc == MPI_SUCCESS && *made != MPI_COMM_NULL) {
    AgentScope agent_calls;
    std::vector<int> world_ranks;
    const uint64_t members = membership(*made, world_ranks);
    register_comm(*made, mix64(info_for(comm)->hash ^ mix64(uint32_t(tag)) ^ members), std::move(world_ranks));
  }
  record_call(Call::kComm_create_group, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Comm_free(MPI_Comm* comm) {
  RANKSCOPE_PASS_THROUGH(PMPI_Comm_free(comm));
  const int64_t begin = now();
  const int rc = PMPI_Comm_free(comm);
  record_call(Call::kComm_free, begin);
  return rc;
}

// --------------------------------------------------------------- MPI-IO ---

namespace {

void record_io(Call call, int64_t begin, uint64_t bytes) {
  Event e = make_event(EventKind::kMpiCall, call, begin, now());
  e.bytes = bytes;
  rankscope_agent_record(&e);
}

// The bytes a read or write moved, as its status says.
template <typename Run>
int file_access(Call call, MPI_Status* status, MPI_Datatype type, Run&& run) {
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  const int rc = run(kept);
  int count = 0;
  if (rc != MPI_SUCCESS || PMPI_Get_count(kept, type, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) count = 0;
  record_io(call, begin, bytes_of(count, type));
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_File_open(MPI_Comm comm, const char* filename, int amode, MPI_Info info, MPI_File* fh) {
  RANKSCOPE_PASS_THROUGH(PMPI_File_open(comm, filename, amode, info, fh));
  const int64_t begin = now();
  int rc;
  {
    // MPI-IO's own collectives are not the application's.
    AgentScope library_calls;
    rc = PMPI_File_open(comm, filename, amode, info, fh);
  }
  record_call(Call::kFile_open, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_File_close(MPI_File* fh) {
  RANKSCOPE_PASS_THROUGH(PMPI_File_close(fh));
  const int64_t begin = now();
  int rc;
  {
    AgentScope library_calls;
    rc = PMPI_File_close(fh);
  }
  record_call(Call::kFile_close, begin);
  return rc;
}

#define RANKSCOPE_FILE_ACCESS(Name, Buffer, ...)                                                                  \
  RANKSCOPE_EXPORT int MPI_##Name(MPI_File fh, __VA_ARGS__ Buffer buf, int count, MPI_Datatype type,             \
                                  MPI_Status* status) {                                                          \
    RANKSCOPE_PASS_THROUGH(PMPI_##Name(fh, RANKSCOPE_OFFSET_ARG buf, count, type, status));                      \
    return file_access(Call::k##Name, status, type, [&](MPI_Status* kept) {                                      \
      AgentScope library_calls;                                                                                  \
      return PMPI_##Name(fh, RANKSCOPE_OFFSET_ARG buf, count, type, kept);                                       \
    });                                                                                                          \
  }

#define RANKSCOPE_OFFSET_ARG
RANKSCOPE_FILE_ACCESS(File_read, void*, )
RANKSCOPE_FILE_ACCESS(File_read_all, void*, )
RANKSCOPE_FILE_ACCESS(File_write, const void*, )
RANKSCOPE_FILE_ACCESS(File_write_all, const void*, )
#undef RANKSCOPE_OFFSET_ARG
#define RANKSCOPE_OFFSET_ARG offset,
RANKSCOPE_FILE_ACCESS(File_read_at, void*, MPI_Offset offset, )
RANKSCOPE_FILE_ACCESS(File_read_at_all, void*, MPI_Offset offset, )
RANKSCOPE_FILE_ACCESS(File_write_at, const void*, MPI_Offset offset, )
RANKSCOPE_FILE_ACCESS(File_write_at_all, const void*, MPI_Offset offset, )
#undef RANKSCOPE_OFFSET_ARG
#undef RANKSCOPE_FILE_ACCESS

// ------------------------------------------------------------ one-sided ---

namespace {

// Put, Get and Accumulate: the bytes of the origin buffer.
template <typename Run>
int one_sided(Call call, int origin_count, MPI_Datatype origin_type, Run&& run) {
  const int64_t begin = now();
  const int rc = run();
  record_io(call, begin, bytes_of(origin_count, origin_type));
  return rc;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Put(const void* origin, int origin_count, MPI_Datatype origin_type, int target,
                             MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Put(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win));
  return one_sided(Call::kPut, origin_count, origin_type, [&] {
    return PMPI_Put(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win);
  });
}

RANKSCOPE_EXPORT int MPI_Get(void* origin, int origin_count, MPI_Datatype origin_type, int target,
                             MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Get(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win));
  return one_sided(Call::kGet, origin_count, origin_type, [&] {
    return PMPI_Get(origin, origin_count, origin_type, target, target_disp, target_count, target_type, win);
  });
}

RANKSCOPE_EXPORT int MPI_Accumulate(const void* origin, int origin_count, MPI_Datatype origin_type, int target,
                                    MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Op op,
                                    MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(
      PMPI_Accumulate(origin, origin_count, origin_type, target, target_disp, target_count, target_type, op, win));
  return one_sided(Call::kAccumulate, origin_count, origin_type, [&] {
    return PMPI_Accumulate(origin, origin_count, origin_type, target, target_disp, target_count, target_type, op, win);
  });
}

RANKSCOPE_EXPORT int MPI_Win_fence(int assertion, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Win_fence(assertion, win));
  const int64_t begin = now();
  const int rc = PMPI_Win_fence(assertion, win);
  record_call(Call::kWin_fence, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Win_lock(int lock_type, int target, int assertion, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Win_lock(lock_type, target, assertion, win));
  const int64_t begin = now();
  const int rc = PMPI_Win_lock(lock_type, target, assertion, win);
  record_call(Call::kWin_lock, begin);
  return rc;
}

RANKSCOPE_EXPORT int MPI_Win_unlock(int target, MPI_Win win) {
  RANKSCOPE_PASS_THROUGH(PMPI_Win_unlock(target, win));
  const int64_t begin = now();
  const int rc = PMPI_Win_unlock(target, win);
  record_call(Call::kWin_unlock, begin);
  return rc;
}

// ---------------------------------------------------------------- abort ---

RANKSCOPE_EXPORT int MPI_Abort(MPI_Comm comm, int errorcode) {
  stop_at_abort(errorcode);
  return PMPI_Abort(comm, errorcode);
}
