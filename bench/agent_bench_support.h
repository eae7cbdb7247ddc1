// Shared by bench_agent and bench_agent_mpi: keeping the capturing agent in
// its steady state while a benchmark records as fast as it can, and checking
// afterwards, in the shard, how many of the recorded events arrived.
//
// The agent's flusher wakes every RANKSCOPE_FLUSH_MS and writes what the
// threads' blocks hold; a producer faster than that fills the pool and the
// agent drops events (by design: the application never waits). A `Pacer`
// keeps the backlog (events recorded and not yet in the shard, judged from
// the shard's size) under half the pool: past it, the benchmark's timer is
// paused until the flusher has caught up. The timed part is then the hot path
// as it is when nothing drops, with the flusher writing beside it. With
// pacing off, the benchmark measures the agent saturated: the pool full, the
// drop path, and the flusher writing as fast as it can.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rankscope/model/counters.h"
#include "rankscope/model/event.h"
#include "rankscope/model/shard.h"

namespace agent_bench {

using Clock = std::chrono::steady_clock;
inline constexpr uint64_t kEventBytes = sizeof(rankscope::Event);
// Events between two looks at the backlog: one agent block.
inline constexpr uint64_t kBatch = 4096;

inline uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  return *end == '\0' ? value : fallback;
}

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Pacer {
 public:
  // `shard` is the capturing agent's shard, "" when nothing captures.
  void init(const std::string& shard) {
    shard_ = shard;
    const uint64_t buffer_bytes = env_u64("RANKSCOPE_BUFFER_MB", 64) << 20;
    flush_ms_ = std::max<uint64_t>(10, env_u64("RANKSCOPE_FLUSH_MS", 200));
    // Half the pool, less a block in progress for each of up to 8 threads.
    limit_bytes_ = buffer_bytes / 2 > (9u << 18) ? buffer_bytes / 2 - (8u << 18) : buffer_bytes / 4;
  }
  bool capturing() const { return !shard_.empty(); }
  const std::string& shard() const { return shard_; }

  uint64_t shard_bytes() const {
    struct stat st {};
    return !shard_.empty() && ::stat(shard_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  }

  // Until the shard has not grown for two flush periods: what earlier runs
  // left in the pool is written (or was dropped).
  void wait_until_quiet() const {
    if (shard_.empty()) return;
    uint64_t size = shard_bytes();
    auto still_since = Clock::now();
    const auto quiet = std::chrono::milliseconds(2 * flush_ms_ + 50);
    while (Clock::now() - still_since < quiet) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const uint64_t now = shard_bytes();
      if (now != size) {
        size = now;
        still_since = Clock::now();
      }
    }
  }

  // Thread 0, before the timed loop (the other threads wait at its start).
  // After a saturated run (and before the first), waits until the flusher
  // is done and starts the count of recorded and written bytes afresh; a
  // paced run goes on from the previous one's count.
  void begin_run(bool paced) {
    if (!shard_.empty() && (!paced_ || !counted_)) {
      wait_until_quiet();
      base_bytes_ = shard_bytes();
      written_bytes_.store(0, std::memory_order_relaxed);
      recorded_bytes_.store(0, std::memory_order_relaxed);
      counted_ = true;
    }
    paced_ = paced && !shard_.empty();
    run_start_bytes_ = shard_bytes();
    run_start_ = Clock::now();
  }

  // Called by every thread after each `events` it recorded (kBatch at a
  // time); in a paced run, pauses the timer while the backlog is too long.
  void recorded(benchmark::State& state, uint64_t events) {
    const uint64_t mine = add(events);
    if (!paced_ || !behind(mine)) return;
    state.PauseTiming();
    wait_for(mine);
    state.ResumeTiming();
  }
  // The same outside a benchmark (the warm-up), always paced.
  void recorded(uint64_t events) {
    const uint64_t mine = add(events);
    if (!shard_.empty() && behind(mine)) wait_for(mine);
  }

  // Thread 0, after the timed loop: the shard's growth during the run, in
  // MB/s and M events/s, as counters.
  void end_run(benchmark::State& state) {
    if (shard_.empty()) return;
    const double seconds = seconds_since(run_start_);
    const double bytes = static_cast<double>(shard_bytes() - run_start_bytes_);
    state.counters["shard_MB/s"] = bytes / seconds / 1e6;
    state.counters["shard_Mev/s"] = bytes / kEventBytes / seconds / 1e6;
  }

  uint64_t stalls() const { return stalls_.load(); }

 private:
  uint64_t add(uint64_t events) {
    return recorded_bytes_.fetch_add(events * kEventBytes, std::memory_order_relaxed) + events * kEventBytes;
  }
  bool behind(uint64_t mine) const { return mine > written_bytes_.load(std::memory_order_relaxed) + limit_bytes_; }
  void wait_for(uint64_t mine) {
    uint64_t last = shard_bytes();
    auto progress_at = Clock::now();
    for (;;) {
      const uint64_t size = shard_bytes();
      uint64_t seen = written_bytes_.load(std::memory_order_relaxed);
      while (size - base_bytes_ > seen &&
             !written_bytes_.compare_exchange_weak(seen, size - base_bytes_, std::memory_order_relaxed)) {
      }
      if (!behind(mine)) return;
      if (size != last) {
        last = size;
        progress_at = Clock::now();
      } else if (Clock::now() - progress_at > std::chrono::milliseconds(3 * flush_ms_ + 500)) {
        // Nothing more is coming: events were dropped. Count the backlog as written.
        stalls_.fetch_add(1, std::memory_order_relaxed);
        written_bytes_.store(recorded_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  std::string shard_;
  uint64_t flush_ms_ = 200;
  uint64_t limit_bytes_ = 0;
  bool paced_ = false;
  bool counted_ = false;
  uint64_t base_bytes_ = 0;
  uint64_t run_start_bytes_ = 0;
  Clock::time_point run_start_;
  std::atomic<uint64_t> recorded_bytes_{0};
  std::atomic<uint64_t> written_bytes_{0};
  std::atomic<uint64_t> stalls_{0};
};

// Events each benchmark recorded (every run, every thread), by the name id
// its events carry; printed beside the count found in the shard.
class Tally {
 public:
  void add(uint32_t name_id, const std::string& label, uint64_t events) {
    std::lock_guard lock(mutex_);
    Entry& e = entries_[name_id];
    if (e.label.empty()) e.label = label;
    e.recorded += events;
  }

  // Reads the finished shard and prints, per benchmark, events recorded,
  // events in the shard, and the difference (dropped).
  void report(const std::string& shard_path) const {
    std::map<uint32_t, uint64_t> found;
    uint64_t dropped_counter = 0, total = 0;
    try {
      rankscope::ShardFile file(shard_path);
      const rankscope::ShardScan scan = file.scan();
      dropped_counter = scan.counters.get(rankscope::counter::kEventsDropped);
      std::vector<rankscope::Event> events;
      for (const auto& chunk : scan.event_chunks) {
        events.clear();
        file.read_events(chunk, events);
        for (const auto& e : events) ++found[e.name_id];
        total += events.size();
      }
      if (scan.damage.any()) std::printf("shard damage: %zu problems\n", scan.damage.problems.size());
    } catch (const std::exception& e) {
      std::printf("cannot read the shard %s: %s\n", shard_path.c_str(), e.what());
      return;
    }
    std::printf("\nEvents recorded by each benchmark (all runs, all threads) and found in the shard %s:\n",
                shard_path.c_str());
    std::printf("%-44s %14s %14s %14s %9s\n", "events named", "recorded", "in shard", "dropped", "dropped %");
    for (const auto& [id, entry] : entries_) {
      const auto it = found.find(id);
      const uint64_t in_shard = it == found.end() ? 0 : it->second;
      const uint64_t lost = entry.recorded > in_shard ? entry.recorded - in_shard : 0;
      std::printf("%-44s %14llu %14llu %14llu %8.2f%%\n", entry.label.c_str(),
                  static_cast<unsigned long long>(entry.recorded), static_cast<unsigned long long>(in_shard),
                  static_cast<unsigned long long>(lost),
                  entry.recorded ? 100.0 * static_cast<double>(lost) / static_cast<double>(entry.recorded) : 0.0);
    }
    std::printf("shard: %llu events in all; the agent's events_dropped counter: %llu\n",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(dropped_counter));
  }

 private:
  struct Entry {
    std::string label;
    uint64_t recorded = 0;
  };
  mutable std::mutex mutex_;
  std::map<uint32_t, Entry> entries_;
};

}  // namespace agent_bench
