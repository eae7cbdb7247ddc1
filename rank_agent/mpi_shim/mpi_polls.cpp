// The polls that were only counted: each thread's counts, their totals for
// the shard, and what one such poll costs the application on this machine.
#include <time.h>

#include <algorithm>
#include <array>

#include "mpi_shim.h"

namespace rankscope::agent {

[[gnu::tls_model("initial-exec")]] constinit thread_local PollThread t_poll{};

namespace {

constexpr uint32_t kPollCountSlots = 256;
PollCounts g_poll_counts[kPollCountSlots];
std::atomic<uint32_t> g_poll_slots_taken{0};
PollCounts g_poll_counts_shared;  // for threads beyond the slots, with locked adds

// CPU time of the calling thread: the time a batch of polls costs it, not
// the time it waited while others ran (preempted, or giving way in MPI's
// sched_yield, which Open MPI calls in every idle poll when oversubscribed).
int64_t thread_cpu_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void claim_poll_counts(PollThread& thread) {
  const uint32_t slot = g_poll_slots_taken.fetch_add(1, std::memory_order_relaxed);
  thread.shared = slot >= kPollCountSlots;
  thread.counts = thread.shared ? &g_poll_counts_shared : &g_poll_counts[slot];
}

// What a quick poll adds to MPI's own call, in picoseconds, on this machine
// in a tight loop: pairs of batches of Iprobes for a tag that no message on
// `comm` carries, one through the wrapper and one straight to MPI, first
// one then the other in turn, each timed by the thread's CPU time. The
// median of the pairs' differences counts: a batch an interrupt, a cache
// refill or a costly sched_yield slowed moves one pair, not the figure.
// The few nanoseconds the wrapper adds are at the edge of what a pair
// resolves, so a median at or below zero is none: too little to tell from
// MPI's own call, not a cost of zero. The thread's poll state and counts
// are put back after.
std::optional<uint64_t> calibrate_poll_cost_ps(MPI_Comm comm) {
  constexpr int kPairs = 31, kRounds = 256, kTagNoneSends = 31999;
  PollThread& thread = t_poll;
  if (!thread.counts) claim_poll_counts(thread);
  if (thread.shared) return std::nullopt;  // others add to the shared counts: none to set aside
  const PollThread before = thread;
  const uint64_t unrecorded = thread.counts->unrecorded.load(std::memory_order_relaxed);
  int found = 0;
  const auto batch_ns = [&](bool wrapped) {
    thread.quick_polls = thread.quick_granted = kRounds;
    const int64_t began = thread_cpu_now_ns();
    for (int i = 0; i < kRounds; ++i) {
      if (wrapped) MPI_Iprobe(MPI_ANY_SOURCE, kTagNoneSends, comm, &found, MPI_STATUS_IGNORE);
      else PMPI_Iprobe(MPI_ANY_SOURCE, kTagNoneSends, comm, &found, MPI_STATUS_IGNORE);
    }
    return thread_cpu_now_ns() - began;
  };
  std::array<int64_t, kPairs> differences{};
  for (int pair = 0; pair < kPairs; ++pair) {
    const bool wrapped_first = pair % 2 == 0;
    const int64_t first = batch_ns(wrapped_first), second = batch_ns(!wrapped_first);
    differences[pair] = wrapped_first ? first - second : second - first;
  }
  thread = before;
  thread.counts->unrecorded.store(unrecorded, std::memory_order_relaxed);
  std::nth_element(differences.begin(), differences.begin() + kPairs / 2, differences.end());
  const int64_t median = differences[kPairs / 2];
  if (median <= 0) return std::nullopt;
  return static_cast<uint64_t>(median) * 1000 / kRounds;
}

// Out of line: the wrappers inline polling_to_show, and a thread that spins
// is past this after its first polls.
bool poll_completes_run() {
  PollThread& thread = t_poll;
  const CallInProgress* call = thread_call();
  const uint32_t other_calls = call ? call->other_calls() : 0;
  if (other_calls != thread.other_calls_at_poll) thread.unanswered_polls = 0;
  thread.other_calls_at_poll = other_calls;
  if (thread.unanswered_polls + 1 < kPollsBeforeShown) {
    ++thread.unanswered_polls;
    return false;
  }
  return true;
}

namespace {

void show_as_polling(Event& event) {
  CallInProgress* call = thread_call();
  if (!call) return;
  event.flags |= kFlagPolling;
  call->enter(event);
  t_poll.unanswered_polls = kPollsBeforeShown;
}

}  // namespace

void show_polled(Call call, int count, const MPI_Request requests[]) {
  if (Event polled; waited_operation(call, count, requests, now(), polled)) show_as_polling(polled);
}

void show_probing(Call call, int source, int tag, MPI_Comm comm) {
  Event probing = probe_event(call, source, tag, comm);
  show_as_polling(probing);
}

PollTotals poll_totals() {
  PollTotals totals;
  const uint32_t taken = std::min(g_poll_slots_taken.load(std::memory_order_relaxed), kPollCountSlots);
  const auto sum = [&](const PollCounts& counts) {
    totals.unrecorded += counts.unrecorded.load(std::memory_order_relaxed);
    totals.timed += counts.timed.load(std::memory_order_relaxed);
    totals.timed_ns += counts.timed_ns.load(std::memory_order_relaxed);
  };
  for (uint32_t slot = 0; slot < taken; ++slot) sum(g_poll_counts[slot]);
  sum(g_poll_counts_shared);
  return totals;
}

}  // namespace rankscope::agent
