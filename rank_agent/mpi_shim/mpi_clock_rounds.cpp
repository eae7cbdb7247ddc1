// Clock sync rounds while the application runs, in in-process mode
// (docs/clocksync.md, "Rounds during the run"). Between the rounds at
// MPI_Init and MPI_Finalize the correction is a straight line; a clock that
// changes its rate in between (a long job, a host's oscillator warming) is
// followed only by measuring it meanwhile. That takes a thread of the
// agent's own calling MPI beside the application's, which MPI allows where
// it runs with MPI_THREAD_MULTIPLE: mpi4py's default, and what
// `--clock-thread always` asks for at MPI_Init. Rank 0's thread says when
// (a round every --sync-interval seconds, then the end); the others wait for
// its word idle, on a communicator no one else uses.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <limits>
#include <mutex>
#include <thread>

#include "mpi_shim.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope::agent {
namespace {

enum Word : int { kRound = 1, kEnd = 2 };

// The agent keeps 4,096 measurements a rank, the last at MPI_Finalize among
// them: past half of this many rounds, each half of what is left comes at
// twice the interval before (a job of months stays within it).
constexpr int kRoundsKept = 4000;

// A waiting thread polls this often at most: a round begins at most this late on some rank, which its
// peers' timed exchanges wait out.
constexpr long kLongestIdleSleepNs = 20'000'000;

struct Rounds {
  MPI_Comm comm = MPI_COMM_NULL;
  std::chrono::duration<double> interval;
  void (*measure)() = nullptr;
  std::mutex mutex;
  std::condition_variable wake;
  bool end_asked = false;
  std::thread thread;
};
// Never freed while its thread may run: a process that ends without
// MPI_Finalize leaves it, thread and all, to the exit.
Rounds* g_rounds = nullptr;

void run(Rounds& rounds) {
  pthread_setname_np(pthread_self(), "rankscope-clock");
  // Signals go to the application's threads, whose handlers expect them there.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  AgentScope agent_calls;
  int rank = 0;
  PMPI_Comm_rank(rounds.comm, &rank);
  auto interval = rounds.interval;
  auto next = std::chrono::steady_clock::now() + interval;
  int done = 0, next_doubling = kRoundsKept / 2;
  for (;;) {
    int word = kRound;
    if (rank == 0) {
      std::unique_lock lock(rounds.mutex);
      rounds.wake.wait_until(lock, std::chrono::time_point_cast<std::chrono::steady_clock::duration>(next),
                             [&] { return rounds.end_asked; });
      if (rounds.end_asked) word = kEnd;
    }
    MPI_Request request;
    PMPI_Ibcast(&word, 1, MPI_INT, 0, rounds.comm, &request);
    clocksync::wait_idle(request, std::numeric_limits<double>::infinity(), kLongestIdleSleepNs);
    if (word == kEnd) return;
    rounds.measure();
    // None leaves to spin in the application beside pairs still measuring.
    clocksync::idle_barrier(rounds.comm);
    if (++done >= next_doubling) {
      interval *= 2;
      next_doubling += std::max(1, (kRoundsKept - next_doubling) / 2);
    }
    next = std::chrono::steady_clock::now() + interval;
  }
}

}  // namespace

ClockRoundSettings clock_round_settings() {
  const AgentSettings* given = rankscope_agent_settings();
  if (!given) return {AgentSettings().sync_interval_s};
  ClockRoundSettings settings{given->sync_interval_s};
  if (given->clock_thread == "always") settings.thread = ClockRoundSettings::Thread::kAlways;
  if (given->clock_thread == "never") settings.thread = ClockRoundSettings::Thread::kNever;
  return settings;
}

bool start_clock_rounds(MPI_Comm agent_comm, void (*measure)()) {
  const ClockRoundSettings settings = clock_round_settings();
  int level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&level);
  int mine = settings.thread != ClockRoundSettings::Thread::kNever && level == MPI_THREAD_MULTIPLE, everywhere = 0;
  // Every rank's thread takes part in every round, or none runs.
  PMPI_Allreduce(&mine, &everywhere, 1, MPI_INT, MPI_MIN, agent_comm);
  if (!everywhere) return false;
  g_rounds = new Rounds();
  g_rounds->interval = std::chrono::duration<double>(settings.interval_s);
  g_rounds->measure = measure;
  PMPI_Comm_dup(agent_comm, &g_rounds->comm);
  g_rounds->thread = std::thread([rounds = g_rounds] { run(*rounds); });
  return true;
}

void stop_clock_rounds() {
  if (!g_rounds) return;
  {
    std::lock_guard lock(g_rounds->mutex);
    g_rounds->end_asked = true;
  }
  g_rounds->wake.notify_one();
  g_rounds->thread.join();
  PMPI_Comm_free(&g_rounds->comm);
  delete g_rounds;
  g_rounds = nullptr;
}

}  // namespace rankscope::agent
