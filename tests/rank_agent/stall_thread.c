/* Holds one thread of another process stopped, the others running: the
 * thread of PID whose name (/proc/PID/task/TID/comm) is NAME, stopped with
 * ptrace for SECONDS or until the process ends. As a thread that finds no
 * core for seconds on a node where every core runs a rank: what the agent's
 * end of run must not depend on. Prints "stalled TID" once the thread is
 * stopped. Needs ptrace rights over PID (root, or its owner with
 * kernel.yama.ptrace_scope 0).
 * Usage: stall_thread PID NAME SECONDS */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t find_thread(const char* pid, const char* name) {
  char path[256];
  snprintf(path, sizeof path, "/proc/%s/task", pid);
  DIR* tasks = opendir(path);
  if (!tasks) return -1;
  pid_t found = -1;
  for (struct dirent* task; found < 0 && (task = readdir(tasks));) {
    if (task->d_name[0] == '.') continue;
    char comm_path[sizeof path + sizeof task->d_name + 8], comm[64] = "";
    snprintf(comm_path, sizeof comm_path, "%s/%s/comm", path, task->d_name);
    FILE* file = fopen(comm_path, "r");
    if (!file) continue;
    if (fgets(comm, sizeof comm, file)) comm[strcspn(comm, "\n")] = '\0';
    fclose(file);
    if (strcmp(comm, name) == 0) found = (pid_t)atoi(task->d_name);
  }
  closedir(tasks);
  return found;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: stall_thread PID NAME SECONDS\n");
    return 2;
  }
  const pid_t tid = find_thread(argv[1], argv[2]);
  if (tid < 0) {
    fprintf(stderr, "stall_thread: process %s has no thread named %s\n", argv[1], argv[2]);
    return 1;
  }
  if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0 || ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0) {
    fprintf(stderr, "stall_thread: ptrace of thread %d: %s\n", (int)tid, strerror(errno));
    return 1;
  }
  int status = 0;
  if (waitpid(tid, &status, __WALL) != tid || !WIFSTOPPED(status)) {
    fprintf(stderr, "stall_thread: thread %d did not stop\n", (int)tid);
    return 1;
  }
  printf("stalled %d\n", (int)tid);
  fflush(stdout);
  /* Stopped until the time is up; a process that ends meanwhile ends the wait. */
  const time_t until = time(NULL) + atoi(argv[3]);
  while (time(NULL) < until && kill(tid, 0) == 0) {
    if (waitpid(tid, &status, __WALL | WNOHANG) == tid && (WIFEXITED(status) || WIFSIGNALED(status))) return 0;
    usleep(10000);
  }
  ptrace(PTRACE_DETACH, tid, NULL, NULL);
  return 0;
}
