// The polls that were only counted: each thread's counts, their totals for
// the shard, and what one such poll costs the application on this machine.
#include <algorithm>

#include "mpi_shim.h"

namespace rankscope::agent {

[[gnu::tls_model("initial-exec")]] constinit thread_local PollThread t_poll{};

namespace {

constexpr uint32_t kPollCountSlots = 256;
PollCounts g_poll_counts[kPollCountSlots];
std::atomic<uint32_t> g_poll_slots_taken{0};
PollCounts g_poll_counts_shared;  // for threads beyond the slots, with locked adds

}  // namespace

void claim_poll_counts(PollThread& thread) {
  const uint32_t slot = g_poll_slots_taken.fetch_add(1, std::memory_order_relaxed);
  thread.shared = slot >= kPollCountSlots;
  thread.counts = thread.shared ? &g_poll_counts_shared : &g_poll_counts[slot];
}

// What a quick poll adds to MPI's own call, in picoseconds, on this machine
// in a tight loop: batches of Iprobes for a tag that no message on `comm`
// carries, through the wrapper and straight to MPI in turn; the fastest
// batch of each counts, as one the scheduler interrupted says nothing of the
// poll. The thread's poll state and counts are put back after.
uint64_t calibrate_poll_cost_ps(MPI_Comm comm) {
  constexpr int kBatches = 8, kRounds = 512, kTagNoneSends = 31999;
  PollThread& thread = t_poll;
  if (!thread.counts) claim_poll_counts(thread);
  if (thread.shared || !capturing()) return 0;
  const PollThread before = thread;
  const uint64_t unrecorded = thread.counts->unrecorded.load(std::memory_order_relaxed);
  int64_t wrapped = INT64_MAX, bare = INT64_MAX;
  int found = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    thread.quick_polls = thread.quick_granted = kRounds;
    int64_t began = now();
    for (int i = 0; i < kRounds; ++i) MPI_Iprobe(MPI_ANY_SOURCE, kTagNoneSends, comm, &found, MPI_STATUS_IGNORE);
    wrapped = std::min(wrapped, now() - began);
    began = now();
    for (int i = 0; i < kRounds; ++i) PMPI_Iprobe(MPI_ANY_SOURCE, kTagNoneSends, comm, &found, MPI_STATUS_IGNORE);
    bare = std::min(bare, now() - began);
  }
  thread = before;
  thread.counts->unrecorded.store(unrecorded, std::memory_order_relaxed);
  return static_cast<uint64_t>(std::max<int64_t>(wrapped - bare, 0)) * 1000 / kRounds;
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
