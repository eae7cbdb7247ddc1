/* A job that hangs the way real ones do: every rank makes a few collectives,
 * then one rank is late to an MPI_Allreduce (it sleeps, or waits for a
 * message nobody sends) while the others wait inside it; with "nonblocking",
 * the others post an MPI_Iallreduce and wait in MPI_Wait. The late rank's
 * wait for a message: "recv", an MPI_Recv from any rank with tag 99; "wait",
 * "waitany" or "waitall", an MPI_Irecv from rank 0 with tag 98 (for
 * "waitall", after an MPI_Isend to rank 0 with tag 97) and that wait;
 * "sendrecv", an MPI_Sendrecv to rank 0 with tag 97, from rank 0 with tag 98;
 * "mprobe", an MPI_Mprobe from any rank with any tag; "test", an MPI_Irecv
 * from rank 0 with tag 98 polled with MPI_Test, "iprobe" the same message
 * polled with MPI_Iprobe, each poll a millisecond of other work apart;
 * "tested", a message to itself polled until received, then a sleep;
 * "checked", that receive from rank 0 tested once, then a sleep; "freed",
 * tested twice, then cancelled and freed, then a sleep. With
 * "ring", no rank is late: each waits in an MPI_Recv from the next (tag 5),
 * a deadlock; with "ring test", each polls its MPI_Irecv with MPI_Test.
 * Built with NVTX (HANG_APP_NVTX), every rank is inside the range "step 4"
 * from the barrier on, and the late rank inside "late work" too.
 * Usage: hang_app LATE_RANK sleep SECONDS [nonblocking]
 *        hang_app LATE_RANK recv|wait|waitany|waitall|sendrecv|mprobe|test|iprobe|tested|checked|freed
 *        hang_app LATE_RANK sleep SECONDS polled: the others poll an MPI_Iallreduce with MPI_Test
 *        hang_app 0 ring [test] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if HANG_APP_NVTX
#include <nvtx3/nvToolsExt.h>
#define RANGE_PUSH(name) nvtxRangePushA(name)
#define RANGE_POP() nvtxRangePop()
#else
#define RANGE_PUSH(name) ((void)0)
#define RANGE_POP() ((void)0)
#endif

/* Polls `request` with MPI_Test until it completes. */
static void poll_until_complete(MPI_Request* request) {
  int received = 0;
  for (;;) {
    MPI_Test(request, &received, MPI_STATUS_IGNORE);
    if (received) return;
    usleep(1000);
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hang_app LATE_RANK sleep SECONDS [nonblocking] | "
                    "LATE_RANK recv|wait|waitany|waitall|sendrecv|mprobe|test|iprobe|tested|checked|freed | 0 ring [test]\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int value = rank, sum = 0;
  for (int i = 0; i < 3; ++i) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  RANGE_PUSH("step 4");
  if (strcmp(argv[2], "ring") == 0) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 3 && strcmp(argv[3], "test") == 0) {
      MPI_Request request;
      MPI_Irecv(&value, 1, MPI_INT, (rank + 1) % size, 5, MPI_COMM_WORLD, &request);
      poll_until_complete(&request);
    } else {
      MPI_Recv(&value, 1, MPI_INT, (rank + 1) % size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (rank == atoi(argv[1])) {
    RANGE_PUSH("late work");
    const char* how = argv[2];
    int sent = rank, index = 0;
    MPI_Request requests[2];
    if (strcmp(how, "recv") == 0) {
      MPI_Recv(&value, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(how, "wait") == 0 || strcmp(how, "waitany") == 0) {
      MPI_Irecv(&value, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, &requests[0]);
      if (how[4] == 'a') MPI_Waitany(1, requests, &index, MPI_STATUS_IGNORE);
      else MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
    } else if (strcmp(how, "waitall") == 0) {
      MPI_Isend(&sent, 1, MPI_INT, 0, 97, MPI_COMM_WORLD, &requests[0]);
      MPI_Irecv(&value, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, &requests[1]);
      MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    } else if (strcmp(how, "sendrecv") == 0) {
      MPI_Sendrecv(&sent, 1, MPI_INT, 0, 97, &value, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(how, "mprobe") == 0) {
      MPI_Message message;
      MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &message, MPI_STATUS_IGNORE);
    } else if (strcmp(how, "test") == 0) {
      MPI_Irecv(&value, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, &requests[0]);
      poll_until_complete(&requests[0]);
    } else if (strcmp(how, "tested") == 0) {
      int received = 0;
      MPI_Irecv(&value, 1, MPI_INT, rank, 96, MPI_COMM_WORLD, &requests[0]);
      MPI_Test(&requests[0], &received, MPI_STATUS_IGNORE);
      MPI_Test(&requests[0], &received, MPI_STATUS_IGNORE);
      MPI_Isend(&sent, 1, MPI_INT, rank, 96, MPI_COMM_WORLD, &requests[1]);
      poll_until_complete(&requests[0]);
      poll_until_complete(&requests[1]);
      sleep(60);
    } else if (strcmp(how, "checked") == 0 || strcmp(how, "freed") == 0) {
      int received = 0;
      MPI_Irecv(&value, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, &requests[0]);
      MPI_Test(&requests[0], &received, MPI_STATUS_IGNORE);
      if (how[0] == 'f') {
        MPI_Test(&requests[0], &received, MPI_STATUS_IGNORE);
        MPI_Cancel(&requests[0]);
        MPI_Request_free(&requests[0]);
      }
      sleep(60);
    } else if (strcmp(how, "iprobe") == 0) {
      int found = 0;
      for (;;) {
        MPI_Iprobe(0, 98, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);
        if (found) break;
        usleep(1000);
      }
    } else if (strcmp(how, "sleep") == 0) {
      sleep((unsigned)atoi(argc > 3 ? argv[3] : "60"));
    } else {
      fprintf(stderr, "hang_app: no such way to be late: %s\n", how);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    RANGE_POP();
  }
  if (argc > 4 && (strcmp(argv[4], "nonblocking") == 0 || strcmp(argv[4], "polled") == 0)) {
    MPI_Request request;
    MPI_Iallreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
    if (argv[4][0] == 'p') poll_until_complete(&request);
    else MPI_Wait(&request, MPI_STATUS_IGNORE);
  } else {
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  RANGE_POP();
  if (rank == 0) printf("sum %d\n", sum);
  MPI_Finalize();
  return 0;
}
