/* A rank ended by a fatal signal, on 2 ranks. Both make COUNT MPI_Allreduce (20);
   then rank 1 ends as MODE says while rank 0 waits in MPI_Barrier for
   mpirun to end it:
     segv      writes through a null pointer
     thread    the same, on a thread of its own
     abort     calls abort(), as an assert or std::terminate does
     overflow  recurses until its stack overflows
     fpe       divides an integer by zero
     term      the same, while another thread sends the process SIGTERM
               (as mpirun would) once the crash came
     term_held the same, with SIGTERM held back on every thread but the
               crashing one (the sender's, and Open MPI's, which inherit the
               mask MPI_Init is called with), so that none other takes it
     exit      the same, while the main thread calls exit(0) once the crash
               came (crashes on a thread of its own)
     _exit     the same, with _exit(0)
     mended    writes to a page it made inaccessible, which another thread
               makes writable again once the crash came: the write would
               not fault again, and yet the crash must end the process
     late_init as segv, MPI_Init called 0.5 s after the start, once the
               agent's flusher has put its crash handlers in place
     chain     the same, under a SIGSEGV handler of its own set after
               MPI_Init that passes faults on to the action it found, as a
               JVM's does (it says so on stderr)
     finalized both call MPI_Finalize, and then rank 1 writes through a
               null pointer, after its capture ended
     recover   its own SIGSEGV handler, set before MPI_Init, recovers from
               the fault (siglongjmp), and the job ends normally.
     constructor dlopen()s a library whose constructor writes through a
               null pointer: the crash comes inside dlopen, under the
               loader's lock (the library is CRASH_CONSTRUCTOR_MODULE).
   Usage: crash_app MODE [COUNT] */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf recovery;
static volatile sig_atomic_t faults_recovered = 0;

static void recover_from_fault(int signal_number) {
  (void)signal_number;
  ++faults_recovered;
  siglongjmp(recovery, 1);
}

static struct sigaction action_found;

static void pass_fault_on(int signal_number, siginfo_t* info, void* context) {
  static const char line[] = "crash_app: a fault not ours: passing it on\n";
  if (write(2, line, sizeof line - 1) < 0) return;
  if (action_found.sa_flags & SA_SIGINFO) {
    action_found.sa_sigaction(signal_number, info, context);
  } else if (action_found.sa_handler != SIG_DFL && action_found.sa_handler != SIG_IGN) {
    action_found.sa_handler(signal_number);
  } else {
    signal(signal_number, SIG_DFL);
  }
}

static void write_through_null(void) {
  volatile int* nowhere = NULL;
  *nowhere = 1;
}

static void* crash_on_thread(void* unused) {
  (void)unused;
  write_through_null();
  return NULL;
}

/* Set just before a crash, for the thread that then ends the process otherwise. */
static atomic_int crashing = 0;

static void crash_after_flag(void) {
  atomic_store(&crashing, 1);
  write_through_null();
}

static void* crash_after_flag_on_thread(void* unused) {
  (void)unused;
  crash_after_flag();
  return NULL;
}

/* Until the crash came, and a millisecond on: its close under way. */
static void wait_for_the_crash(void) {
  while (!atomic_load(&crashing)) {
  }
  const struct timespec millisecond = {0, 1000000};
  nanosleep(&millisecond, NULL);
}

/* SIGTERM during the crash's close, as mpirun sends. */
static void* terminate_when_crashing(void* unused) {
  (void)unused;
  wait_for_the_crash();
  kill(getpid(), SIGTERM);
  /* The crash, or the SIGTERM, ends the process meanwhile. */
  const struct timespec a_while = {60, 0};
  nanosleep(&a_while, NULL);
  return NULL;
}

/* A page the main thread writes to while it is inaccessible. */
static char* mended_page;

/* The page made writable during the crash's close. */
static void* mend_when_crashing(void* unused) {
  (void)unused;
  wait_for_the_crash();
  mprotect(mended_page, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE);
  return NULL;
}

/* Far deeper than any stack: read at run time, so the recursion is not known to be infinite. */
static volatile int deepest = 1 << 30;

static int recurse(int depth) {
  if (depth >= deepest) return 0;
  volatile char frame[4096];
  frame[0] = (char)depth;
  return recurse(depth + 1) + frame[0];
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "recover") == 0) {
    struct sigaction handler;
    memset(&handler, 0, sizeof handler);
    handler.sa_handler = recover_from_fault;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGSEGV, &handler, NULL);
  }
  sigset_t termination;
  sigemptyset(&termination);
  sigaddset(&termination, SIGTERM);
  if (strcmp(mode, "term_held") == 0) pthread_sigmask(SIG_BLOCK, &termination, NULL);
  if (strcmp(mode, "late_init") == 0) {
    const struct timespec half_a_second = {0, 500000000};
    nanosleep(&half_a_second, NULL);
  }
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* Rank 0 takes mpirun's SIGTERM at the end; rank 1 only on its crashing thread, below. */
  if (strcmp(mode, "term_held") == 0 && rank == 0) pthread_sigmask(SIG_UNBLOCK, &termination, NULL);
  double value = rank, sum = 0;
  const long count = argc > 2 ? atol(argv[2]) : 20;
  for (long i = 0; i < count; ++i) MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (strcmp(mode, "recover") == 0) {
    if (rank == 1 && sigsetjmp(recovery, 1) == 0) write_through_null();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1 && faults_recovered != 1) {
      fprintf(stderr, "crash_app: the program's own handler did not recover from the fault\n");
      return 3;
    }
    MPI_Finalize();
    return 0;
  }
  if (strcmp(mode, "finalized") == 0) {
    MPI_Finalize();
    if (rank == 1) write_through_null();
    return 0;
  }
  if (rank == 1) {
    if (strcmp(mode, "segv") == 0 || strcmp(mode, "late_init") == 0) write_through_null();
    if (strcmp(mode, "chain") == 0) {
      struct sigaction handler;
      memset(&handler, 0, sizeof handler);
      handler.sa_sigaction = pass_fault_on;
      handler.sa_flags = SA_SIGINFO;
      sigemptyset(&handler.sa_mask);
      sigaction(SIGSEGV, &handler, &action_found);
      write_through_null();
    }
    if (strcmp(mode, "term") == 0 || strcmp(mode, "term_held") == 0) {
      pthread_t thread;
      pthread_create(&thread, NULL, terminate_when_crashing, NULL);
      /* The sender, like Open MPI's threads, holds SIGTERM back, as it was when they began. */
      if (strcmp(mode, "term_held") == 0) pthread_sigmask(SIG_UNBLOCK, &termination, NULL);
      crash_after_flag();
    }
    if (strcmp(mode, "mended") == 0) {
      mended_page = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      pthread_t thread;
      pthread_create(&thread, NULL, mend_when_crashing, NULL);
      atomic_store(&crashing, 1);
      *(volatile char*)mended_page = 1;
      fprintf(stderr, "crash_app: the write went on after its fault\n");
      return 3;
    }
    if (strcmp(mode, "exit") == 0 || strcmp(mode, "_exit") == 0) {
      pthread_t thread;
      pthread_create(&thread, NULL, crash_after_flag_on_thread, NULL);
      wait_for_the_crash();
      if (strcmp(mode, "_exit") == 0) _exit(0);
      exit(0);
    }
    if (strcmp(mode, "thread") == 0) {
      pthread_t thread;
      pthread_create(&thread, NULL, crash_on_thread, NULL);
      pthread_join(thread, NULL);
    }
    if (strcmp(mode, "constructor") == 0 && !dlopen(CRASH_CONSTRUCTOR_MODULE, RTLD_NOW)) {
      fprintf(stderr, "crash_app: %s\n", dlerror());
      return 3;
    }
    if (strcmp(mode, "abort") == 0) abort();
    if (strcmp(mode, "overflow") == 0) return recurse(0);
    if (strcmp(mode, "fpe") == 0) {
      /* Both volatile: 1 / x compiles to a comparison, with no division to fault. */
      volatile int numerator = 7, zero = 0;
      return numerator / zero;
    }
    fprintf(stderr, "crash_app: unknown mode '%s'\n", mode);
    return 2;
  }
  for (;;) MPI_Barrier(MPI_COMM_WORLD);
}
