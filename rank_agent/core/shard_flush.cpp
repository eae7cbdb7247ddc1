// The agent's threads: the flusher, which writes what the recorder took to
// the rank's shard, and the closer, which closes it when a signal or _exit
// ends the process.

#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <string>

#include "agent_parts.h"
#include "rankscope/model/process_usage.h"
#include "rankscope/model/text.h"

namespace rankscope::agent {

Counters Agent::counters() const {
  Counters c;
  {
    std::lock_guard lock(source_counters_mutex_);
    c = source_counters_;
  }
  c.set(counter::kEventsDropped, recorder_.dropped());
  c.set(counter::kAgentErrors, agent_errors_.load(std::memory_order_relaxed));
  c.set(counter::kShardWriteErrors, shard_write_errors_);
  c.set(counter::kEventsUnwritten, events_unwritten_.load(std::memory_order_relaxed));
  c.set(counter::kNamesDropped, names_dropped_.load(std::memory_order_relaxed));
  c.set(counter::kSourcesOff, sources_off_.load(std::memory_order_relaxed));
  c.set(counter::kTerminatedBySignal, static_cast<uint64_t>(g_terminating_signal.load(std::memory_order_acquire)));
  if (g_exit_called.load(std::memory_order_acquire) != 0) {
    c.set(counter::kEndedByExitCall, 1);
    c.set(counter::kExitStatus, static_cast<uint64_t>(g_exit_status.load(std::memory_order_relaxed) & 0xff));
  }
  if (const int crash = g_crash_signal.load(std::memory_order_acquire); crash != 0) {
    c.set(counter::kCrashSignal, static_cast<uint64_t>(crash));
    c.set(counter::kCrashSignalCode, static_cast<uint64_t>(g_crash_code.load(std::memory_order_relaxed)));
    c.set(counter::kCrashAddress, g_crash_address.load(std::memory_order_relaxed));
    c.set(counter::kCrashThread, static_cast<uint64_t>(g_crash_thread.load(std::memory_order_relaxed)));
    if (const int sender = g_crash_sender.load(std::memory_order_relaxed); sender != 0) {
      c.set(counter::kCrashSenderPid, static_cast<uint64_t>(sender));
    }
  }
  c.set(counter::kHangDumps, hang_dumped_ ? 1 : 0);
  const uint64_t windows = windows_opened_ + range_windows_.windows_opened();
  if (const uint64_t outside = recorder_.outside_window(); outside != 0 || windows != 1) {
    c.set(counter::kEventsOutsideWindow, outside);
    c.set(counter::kCaptureWindows, windows);
  }
  if (windows_unrecorded_ != 0) c.set(counter::kCaptureWindowsUnrecorded, windows_unrecorded_);
  if (writer_.reopened() != 0) c.set(counter::kShardReopened, writer_.reopened());
  if (ring_on()) {
    c.set(counter::kRingDumps, ring_dumps_);
    c.set(counter::kRingEventsAgedOut, ring_losses_.aged_out);
    c.set(counter::kRingEventsCrowdedOut, ring_losses_.crowded_out);
  }
  c.set(counter::kCostCaptureNs, static_cast<uint64_t>(clock_.now_ns() - metadata_.start_local_ns));
  c.set(counter::kCostStartNs, start_cost_ns_);
  c.set(counter::kCostFlusherCpuNs, flusher_cpu_ns_.load(std::memory_order_relaxed));
  c.set(counter::kCostFinishNs, finish_cost_ns_);
  c.set(counter::kCostEventPs, event_cost_ps_);
  c.set(counter::kCostBufferBytes, recorder_.buffer_bytes_used());
  // Each time counters are written (about once a second): a rank killed
  // outright keeps figures at most that old, until its launcher writes its own.
  if (rusage usage{}; ::getrusage(RUSAGE_SELF, &usage) == 0) set_usage_counters(c, usage);
  return c;
}

void Agent::flush_once(Flush how, int64_t dump_at_ns) {
  const bool final_flush = how == Flush::kFinal;
  const auto failed = [&] {
    ++shard_write_errors_;
    if (!write_failed_) {
      write_failed_ = true;
      report("writing the shard failed: " + writer_.error() +
             "; what was written before is kept, events from now on are dropped");
    }
  };
  // Names and tracks before the events, so that a write failing among the
  // events keeps the names of those written; and after them, for the names
  // interned while this batch was recorded.
  const auto write_names = [&] {
    const int64_t now = clock_.now_ns();
    string_batch_.clear();
    StringTable::Cursor strings_end = strings_written_;
    recorder_.strings().collect(strings_end, string_batch_);
    if (!string_batch_.empty() && !writer_.write_strings(string_batch_, now)) return false;
    strings_written_ = strings_end;
    track_batch_.clear();
    const uint32_t tracks_end = recorder_.tracks().collect(tracks_written_, track_batch_);
    if (!track_batch_.empty() && !writer_.write_tracks(track_batch_, now)) return false;
    tracks_written_ = tracks_end;
    return true;
  };
  if (!write_failed_ && !write_names()) failed();
  const auto write_events = [&](std::span<Event> events) {
    if (write_failed_ || !writer_.write_events(events)) {
      if (!write_failed_) failed();
      events_unwritten_.fetch_add(events.size(), std::memory_order_relaxed);
    }
  };
  if (!ring_on()) {
    recorder_.drain(write_events);
  } else if (how == Flush::kRoutine) {
    recorder_.keep(clock_.now_ns() - ring_ns_, ring_losses_);
  } else {
    const int64_t until = how == Flush::kFinal ? INT64_MAX : dump_at_ns;
    const int64_t cutoff = std::min(clock_.now_ns(), until) - ring_ns_;
    recorder_.drain_ring(cutoff, until, write_events, ring_losses_);
    ++ring_dumps_;
    const CaptureWindow dumped{std::max(cutoff, capture_started_ns()), std::min(until, clock_.now_ns())};
    if (!write_failed_ && !writer_.write_capture_windows({&dumped, 1}, WindowHolds::kEventsEnded, dumped.until_ns)) {
      failed();
    }
  }
  if (write_failed_) return;
  if (!write_names()) return failed();
  const int64_t now = clock_.now_ns();
  if (!write_steered_windows(now, final_flush)) return failed();

  const uint32_t sync_end = sync_points_ready_.load(std::memory_order_acquire);
  if (sync_end > sync_points_written_ &&
      !writer_.write_sync_points({sync_points_ + sync_points_written_, sync_end - sync_points_written_}, now)) {
    return failed();
  }
  sync_points_written_ = sync_end;

  {
    std::lock_guard lock(metadata_mutex_);
    if (metadata_changed_ && !writer_.write_metadata(metadata_, now)) return failed();
    metadata_changed_ = false;
  }
  // Counters now and then, so a rank that dies keeps most of them.
  if (!final_flush && now - counters_written_at_ > 1'000'000'000) {
    if (!writer_.write_counters(counters(), now)) return failed();
    counters_written_at_ = now;
  }
}


void Agent::closer_loop() {
  pthread_setname_np(pthread_self(), "rankscope-close");
  t_own_thread = OwnThread::kCloser;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (g_end_asked.load(std::memory_order_acquire) == 0) closer_bell_.wait(-1);
  finish();
}

void Agent::flusher_loop() {
  pthread_setname_np(pthread_self(), "rankscope-flush");
  t_own_thread = OwnThread::kFlusher;
  // The lowest priority among the process's threads: where the application
  // has a core per rank, the flusher takes only what the application leaves
  // (its writes are short and few, and buffers cover the wait; on Linux a
  // thread's nice value is its own).
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  // Signals go to the application's threads: the termination handler waits
  // for this thread, so it must never run here.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  bool woken_before = false;
  for (;;) {
    flusher_bell_.wait(flush_ms_);
    if (!woken_before) {
      woken_before = true;
      place_crash_handlers_once();
    }
    // Busy before it looks at stopping_, which the closer sets before it
    // looks at busy (both sequentially consistent): either this thread sees
    // the close coming and does nothing more, or the closer waits for it.
    flusher_busy_.store(true);
    if (stopping_.load() || g_end_asked.load() != 0) {
      flusher_busy_.store(false);
      return;
    }
    // mpirun passes one SIGUSR2 on to some ranks twice: signals within a second of a dump are that dump's.
    const int64_t asked_at = ring_dump_asked_at_ns_.exchange(0, std::memory_order_relaxed);
    if (asked_at != 0 && asked_at - signal_dumped_at_ns_ >= 1'000'000'000) {
      signal_dumped_at_ns_ = asked_at;
      dump_ring("SIGUSR2", asked_at);
    } else {
      flush_once(Flush::kRoutine);
    }
    recorder_.strings().grow();
    watch_for_hang();
    steer_window();
    flusher_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
    flusher_busy_.store(false);
  }
}


}  // namespace rankscope::agent
