// Shapes of an MPI_Testany wrapper, one per build (-DSHAPE=...), each a
// library preloaded into bench/poll_table.c: what each thing a wrapper does
// around MPI's call costs a poll between memory-bound updates
// (bench/poll_shapes.sh). Every shape keeps the request's handle and a
// status of its own, as a capturing wrapper must, and tests the flag after
// the call; `lean` does nothing else.
//   lean          the above
//   branch        and a thread-local flag tested before the call
//   count         and a thread-local count after the call
//   branch_count  both
//   call          lean, and a call to an empty function before MPI's
//   jump          lean, reached by a jump from the exported function
//   reload        lean, with the flag's pointer reloaded from the stack
//   loads         lean, and 8 loads of a global before the call
#include <mpi.h>
#include <stdint.h>

enum { lean, branch, count, branch_count, call, jump, reload, loads };

volatile MPI_Request g_answered;
volatile uint64_t g_words[8];
__attribute__((tls_model("initial-exec"))) __thread uint32_t t_allowed = 1;
__attribute__((tls_model("initial-exec"))) __thread uint64_t t_count;

__attribute__((noinline)) int answered(MPI_Request handle, int rc) {
  g_answered = handle;
  return rc;
}
__attribute__((noinline)) void empty(void) { __asm__ volatile(""); }
__attribute__((noinline)) int not_allowed(int n, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return PMPI_Testany(n, requests, index, flag, status);
}

static inline __attribute__((always_inline)) int body(int n, MPI_Request requests[], int* index, int* flag,
                                                     MPI_Status* status) {
  if ((SHAPE == branch || SHAPE == branch_count) && !t_allowed) return not_allowed(n, requests, index, flag, status);
  if (SHAPE == call) empty();
  uint64_t sum = 0;
  if (SHAPE == loads)
    for (int i = 0; i < 8; ++i) sum += g_words[i];
  __asm__ volatile("" ::"r"(sum));
  MPI_Status own;
  const MPI_Request handle = requests[0];
  const int rc = PMPI_Testany(n, requests, index, flag, status == MPI_STATUS_IGNORE ? &own : status);
  if (SHAPE == reload) __asm__ volatile("" ::: "rbx", "rbp", "r12", "r13", "r14", "r15");
  if (rc == MPI_SUCCESS && !*flag) {
    if (SHAPE == count || SHAPE == branch_count) ++t_count;
    return rc;
  }
  return answered(handle, rc);
}

__attribute__((noinline)) static int body_elsewhere(int n, MPI_Request requests[], int* index, int* flag,
                                                    MPI_Status* status) {
  return body(n, requests, index, flag, status);
}

int MPI_Testany(int n, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (SHAPE == jump) return body_elsewhere(n, requests, index, flag, status);
  return body(n, requests, index, flag, status);
}
