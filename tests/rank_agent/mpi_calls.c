/* MPI calls beyond messages and collectives, each a known number of times:
   probes and matched probes, persistent requests, MPI-IO and one-sided, on
   2 ranks. With "abort" as its argument, rank 1 calls MPI_Abort(…, 7) at the end;
   with "fatal", rank 1 sends to a rank that does not exist, an error that
   MPI_ERRORS_ARE_FATAL (MPI_COMM_WORLD's default) makes MPI end the job for.
   With "kill", rank 1 sends itself SIGKILL, as the OOM killer would
   (crashes: crash_app). With "exit", every rank calls exit(5) without
   MPI_Finalize.
   Usage: mpi_calls FILE_FOR_MPI_IO [abort|fatal|kill|exit] */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/* Every poll (Test family, Iprobe, Improbe), counted: each is either recorded
   or counted by the agent, and the test adds them up to this. */
static long polls = 0;
#define POLL(call) (++polls, (call))

/* Polls a receive of one request with Test (kind 0), Testany, Testall or Testsome. */
static int test_once(int kind, MPI_Request* request) {
  int done = 0, index, outcount;
  MPI_Status status;
  switch (kind) {
    case 0: POLL(MPI_Test(request, &done, MPI_STATUS_IGNORE)); break;
    case 1: POLL(MPI_Testany(1, request, &index, &done, &status)); break;
    case 2: POLL(MPI_Testall(1, request, &done, MPI_STATUSES_IGNORE)); break;
    default: POLL(MPI_Testsome(1, request, &outcount, &index, &status)); done = outcount > 0; break;
  }
  return done;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int peer = 1 - rank;
  double out[64], in[64];
  for (int i = 0; i < 64; ++i) out[i] = rank + i;

  /* Matched probes: rank 0 sends 2 messages, rank 1 takes them with Mprobe+Mrecv and Improbe+Imrecv. */
  if (rank == 0) {
    MPI_Send(out, 64, MPI_DOUBLE, 1, 10, MPI_COMM_WORLD);
    MPI_Send(out, 32, MPI_DOUBLE, 1, 11, MPI_COMM_WORLD);
  } else {
    MPI_Message message;
    MPI_Status status;
    MPI_Mprobe(0, 10, MPI_COMM_WORLD, &message, &status);
    MPI_Mrecv(in, 64, MPI_DOUBLE, &message, MPI_STATUS_IGNORE);
    int flag = 0;
    while (!flag) POLL(MPI_Improbe(0, 11, MPI_COMM_WORLD, &flag, &message, &status));
    MPI_Request request;
    MPI_Imrecv(in, 64, MPI_DOUBLE, &message, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  /* Probe and Iprobe. */
  MPI_Send(out, 8, MPI_DOUBLE, peer, 12, MPI_COMM_WORLD);
  MPI_Status status;
  MPI_Probe(peer, 12, MPI_COMM_WORLD, &status);
  int flag = 0;
  while (!flag) POLL(MPI_Iprobe(peer, 12, MPI_COMM_WORLD, &flag, &status));
  MPI_Recv(in, 8, MPI_DOUBLE, peer, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  /* Each of the Test family polls a receive of 1 double: 1000 times before
     the peer sends it, then until it is there. */
  for (int kind = 0; kind < 4; ++kind) {
    double value = 0;
    MPI_Request request;
    MPI_Irecv(&value, 1, MPI_DOUBLE, peer, 40 + kind, MPI_COMM_WORLD, &request);
    for (int poll = 0; poll < 1000; ++poll) {
      if (test_once(kind, &request)) {
        fprintf(stderr, "rank %d: a receive completed before its message was sent\n", rank);
        return 1;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Send(out, 1, MPI_DOUBLE, peer, 40 + kind, MPI_COMM_WORLD);
    while (!test_once(kind, &request)) continue;
    if (value != peer) {
      fprintf(stderr, "rank %d: the Test family received %g\n", rank, value);
      return 1;
    }
  }

  /* Persistent requests: 3 rounds of Startall over a send and a receive, then a lone Start. */
  MPI_Request persistent[2];
  MPI_Send_init(out, 16, MPI_DOUBLE, peer, 20, MPI_COMM_WORLD, &persistent[0]);
  MPI_Recv_init(in, 16, MPI_DOUBLE, peer, 20, MPI_COMM_WORLD, &persistent[1]);
  for (int round = 0; round < 3; ++round) {
    MPI_Startall(2, persistent);
    MPI_Waitall(2, persistent, MPI_STATUSES_IGNORE);
  }
  MPI_Start(&persistent[1]);
  MPI_Start(&persistent[0]);
  MPI_Wait(&persistent[0], MPI_STATUS_IGNORE);
  MPI_Wait(&persistent[1], MPI_STATUS_IGNORE);
  MPI_Request_free(&persistent[0]);
  MPI_Request_free(&persistent[1]);
  /* A send posted and forgotten: still a message. */
  MPI_Request forgotten;
  MPI_Isend(out, 4, MPI_DOUBLE, peer, 30, MPI_COMM_WORLD, &forgotten);
  MPI_Request_free(&forgotten);
  MPI_Recv(in, 4, MPI_DOUBLE, peer, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

  /* MPI-IO: each rank writes 64 doubles at its offset, all together, then reads them back. */
  MPI_File file;
  MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &file);
  const MPI_Offset offset = (MPI_Offset)rank * sizeof(out);
  MPI_File_write_at_all(file, offset, out, 64, MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_write_at(file, offset, out, 32, MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_read_at_all(file, offset, in, 64, MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_read_at(file, offset, in, 16, MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_File_close(&file);
  if (memcmp(in, out, sizeof(in)) != 0) {
    fprintf(stderr, "rank %d: MPI-IO read back other data\n", rank);
    return 1;
  }

  /* One-sided: fences around a Put and a Get, a lock around an Accumulate. */
  double window_memory[64] = {0};
  MPI_Win window;
  MPI_Win_create(window_memory, sizeof(window_memory), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &window);
  MPI_Win_fence(0, window);
  MPI_Put(out, 64, MPI_DOUBLE, peer, 0, 64, MPI_DOUBLE, window);
  MPI_Win_fence(0, window);
  MPI_Get(in, 8, MPI_DOUBLE, peer, 0, 8, MPI_DOUBLE, window);
  MPI_Win_fence(0, window);
  MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, window);
  MPI_Accumulate(out, 4, MPI_DOUBLE, peer, 0, 4, MPI_DOUBLE, MPI_SUM, window);
  MPI_Win_unlock(peer, window);
  MPI_Win_free(&window);

  if (argc > 2 && strcmp(argv[2], "abort") == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 7);
    for (;;) MPI_Barrier(MPI_COMM_WORLD); /* rank 0 waits to be ended by mpirun */
  }
  if (argc > 2 && strcmp(argv[2], "fatal") == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) MPI_Send(out, 1, MPI_DOUBLE, size, 0, MPI_COMM_WORLD);
    for (;;) MPI_Barrier(MPI_COMM_WORLD);
  }
  if (argc > 2 && strcmp(argv[2], "exit") == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    exit(5);
  }
  if (argc > 2 && strcmp(argv[2], "close-shard") == 0) {
    int closed = 0;
    for (int fd = 3; fd < 1024; ++fd) {
      char link_path[64], target[4096];
      snprintf(link_path, sizeof link_path, "/proc/self/fd/%d", fd);
      const ssize_t n = readlink(link_path, target, sizeof target - 1);
      if (n < 6) continue;
      target[n] = '\0';
      if (strcmp(target + n - 6, ".shard") == 0 && close(fd) == 0) ++closed;
    }
    char own_path[4096];
    snprintf(own_path, sizeof own_path, "%s.own-%d", argv[1], rank);
    const int own = open(own_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i < 30; ++i) {
      MPI_Allreduce(out, in, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      char line[32];
      const int length = snprintf(line, sizeof line, "line %d\n", i);
      if (write(own, line, (size_t)length) != length) return 3;
      usleep(40000);
    }
    close(own);
    printf("rank %d: closed %d shard descriptors, then 30 allreduces\n", rank, closed);
  }
  if (argc > 2 && strcmp(argv[2], "kill") == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) raise(SIGKILL);
    for (;;) MPI_Barrier(MPI_COMM_WORLD);
  }
  /* Testall of two receives, which is never a quick poll: 1000 times
     before their messages are sent, then until both are there. */
  {
    double values[2] = {0, 0};
    MPI_Request pair[2];
    for (int i = 0; i < 2; ++i) MPI_Irecv(&values[i], 1, MPI_DOUBLE, peer, 50 + i, MPI_COMM_WORLD, &pair[i]);
    int done = 0;
    for (int poll = 0; poll < 1000; ++poll) POLL(MPI_Testall(2, pair, &done, MPI_STATUSES_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 2; ++i) MPI_Send(out, 1, MPI_DOUBLE, peer, 50 + i, MPI_COMM_WORLD);
    while (!done) POLL(MPI_Testall(2, pair, &done, MPI_STATUSES_IGNORE));
  }
  /* Polls that find nothing, the last calls before MPI_Finalize: a tag nobody sends. */
  for (int poll = 0; poll < 100; ++poll) POLL(MPI_Iprobe(peer, 99, MPI_COMM_WORLD, &flag, &status));
  printf("rank %d made %ld polls\n", rank, polls);
  MPI_Finalize();
  return 0;
}
