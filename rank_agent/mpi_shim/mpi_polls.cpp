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

// What a poll that is only counted adds to the application's, in
// picoseconds: the wrapper's test and count, timed here in a few batches
// (what they count is taken back), so that the figure is this machine's; the
// fastest batch counts, as one the scheduler interrupted says nothing of the poll.
uint64_t calibrate_poll_cost_ps() {
  constexpr int kBatches = 8, kRounds = 512;
  PollThread& thread = t_poll;
  if (!thread.counts) claim_poll_counts(thread);
  if (thread.shared) return 0;  // its counts could not be taken back
  PollCounts& counts = *thread.counts;
  const uint64_t unrecorded = counts.unrecorded.load(std::memory_order_relaxed);
  const uint64_t timed = counts.timed.load(std::memory_order_relaxed);
  const uint64_t timed_ns = counts.timed_ns.load(std::memory_order_relaxed);
  const uint32_t until_timed = thread.until_timed;
  int64_t fastest = INT64_MAX;
  for (int batch = 0; batch < kBatches; ++batch) {
    const int64_t began = now();
    for (int i = 0; i < kRounds; ++i) {
      PollTimer poll;
      poll.finish(__atomic_load_n(g_capture_bits, __ATOMIC_RELAXED) == ~0u);  // never true, unknown to the compiler
    }
    fastest = std::min(fastest, now() - began);
  }
  counts.unrecorded.store(unrecorded, std::memory_order_relaxed);
  counts.timed.store(timed, std::memory_order_relaxed);
  counts.timed_ns.store(timed_ns, std::memory_order_relaxed);
  thread.until_timed = until_timed;
  return static_cast<uint64_t>(fastest) * 1000 / kRounds;
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
