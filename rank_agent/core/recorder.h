// Where the capture sources put events: per-thread blocks taken from one
// pool sized by --buffer-mb. Recording an event is a copy into the calling
// thread's block and one release store; no lock, no allocation, no system
// call. Full blocks go to the flusher thread, which writes them to the shard
// and returns them to the pool. When the pool is empty, events are dropped
// and counted: the application never waits for the agent.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "id_table.h"
#include "rankscope/model/capture_windows.h"
#include "rankscope/model/event.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::agent {

inline constexpr uint32_t kBlockEvents = 4096;  // 256 KiB
inline constexpr uint32_t kMaxThreads = 1024;

struct Block {
  std::atomic<uint32_t> committed{0};  // events written and visible to the flusher
  uint32_t flushed = 0;                // events the flusher has written; its own
  std::atomic<uint32_t> next_free{0};  // free-stack link: index + 1, 0 ends
  Block* next_full = nullptr;          // full-list link
  Event events[kBlockEvents];
};

class BlockPool {
 public:
  // Maps `bytes` of blocks (at least one); false if the memory is not there.
  bool init(uint64_t bytes);
  ~BlockPool();

  Block* take();                // a free block, or nullptr
  void give_back(Block* block);  // emptied, to the free stack
  void hand_in(Block* block);    // full, for the flusher
  Block* take_full();            // every full block handed in, as a list
  uint32_t block_count() const { return count_; }
  uint64_t bytes_used() const { return uint64_t{untouched_.load(std::memory_order_relaxed)} * sizeof(Block); }

 private:
  uint32_t index_of(const Block* block) const { return static_cast<uint32_t>(block - blocks_); }
  Block* take_untouched();  // a block never used before, or nullptr when all have been

  Block* blocks_ = nullptr;
  uint32_t count_ = 0;
  uint64_t mapped_bytes_ = 0;
  std::atomic<uint64_t> free_head_{0};  // (ABA tag << 32) | (index + 1)
  std::atomic<uint32_t> untouched_{0};  // blocks [untouched_, count_) were never taken
  std::atomic<Block*> full_head_{nullptr};
};

// The job's strings of one rank: names of calls, NVTX messages, thread names.
// A long job names things without end (ProfilerStep#N): the table is
// segments, each twice the last, which the writer thread adds ahead of need
// (grow), so that intern never allocates. A name seen for the first time on
// two threads just as a segment is added may get one id in each; the merge
// joins names by their text.
class StringTable {
 public:
  static constexpr uint32_t kFirstSegmentStrings = 1 << 16;
  static constexpr uint32_t kArenaBytes = 8u << 20;  // the first segment's text
  static constexpr uint32_t kMaxSegments = 8;        // 16.7 million strings in all, 8 to 64 MiB of text each

  StringTable();
  ~StringTable();
  // The id of `text`, added if new; kNoId when the table is full.
  uint32_t intern(std::string_view text);
  // The text of an id intern() returned; empty for any other.
  std::string_view text(uint32_t id) const;
  // How far the writer has written each segment.
  struct Cursor {
    uint32_t written[kMaxSegments] = {};
  };
  // Appends the strings ready to write since `cursor` to `out`, and moves it past them.
  void collect(Cursor& cursor, std::vector<std::pair<uint32_t, std::string_view>>& out) const;
  // The writer thread, each time it wakes, adds a segment once the newest's
  // ids or text are three quarters used; intern() does when it finds the
  // newest full. None past kMaxSegments, or without memory: the names that
  // do not fit are then dropped (kNoId), and counted.
  void grow();
  uint32_t segments() const { return count_.load(std::memory_order_acquire); }

 private:
  struct Segment;
  static uint32_t first_id(uint32_t segment) { return kFirstSegmentStrings * ((1u << segment) - 1); }
  // Adds segment `count` when `count` are published and the newest is three
  // quarters used; whether there are now more than `count`. One thread adds
  // at a time; the others wait for it.
  bool add_segment_after(uint32_t count);
  Segment* segments_[kMaxSegments] = {};  // [0, count_) published, owned
  std::atomic<uint32_t> count_{0};
  std::atomic<bool> growing_{false};
};

// Tracks of one rank: threads, CUDA streams, communicators.
class TrackTable {
 public:
  static constexpr uint32_t kMaxTracks = 1 << 14;

  TrackTable();
  // The track of (type, os_id, device), added with `name_id` if new; kNoId when full.
  uint32_t find_or_add(TrackType type, uint64_t os_id, int16_t device, uint32_t name_id);
  uint32_t collect(uint32_t from, std::vector<Track>& out) const;

 private:
  ConcurrentIdTable ids_;
  std::unique_ptr<Track[]> tracks_;
};

// One per thread that has recorded: its current block, seen by the flusher.
struct ThreadSlot {
  std::atomic<Block*> block{nullptr};
  std::atomic<uint64_t> dropped{0};  // written by the owner only
  std::atomic<uint64_t> outside_window{0};  // the same
  std::atomic<bool> taken{false};
  std::atomic<uint16_t> track{0};
  CallInProgress call;
};

class Recorder {
 public:
  bool init(uint64_t buffer_bytes);

  // The hot path. `event.track` is set to the calling thread's track when it
  // is kThreadTrack (agent.h).
  void record(const Event& event);
  uint32_t thread_track();  // the calling thread's track, registered on first use
  CallInProgress* call_in_progress();  // the calling thread's; nullptr without a slot

  // Flusher side: every thread's call in progress, its track set.
  template <typename Visit>
  void for_each_call_in_progress(Visit&& visit) const {
    for (const ThreadSlot& slot : slots_) {
      Event event;
      if (!slot.taken.load(std::memory_order_acquire) || !slot.call.read(event)) continue;
      if (event.track == kThreadTrack) event.track = slot.track.load(std::memory_order_relaxed);
      visit(event);
    }
  }

  // Flusher side: visits every event recorded since the last visit, in
  // blocks; write(span) returns false when the span could not be written.
  template <typename Write>
  void drain(Write&& write);

  // The flight recorder (--ring, docs/design/flight-recorder.md): the flusher keeps full
  // blocks in memory, oldest first, instead of writing them. keep() takes the
  // blocks handed in since the last call and recycles those whose newest
  // event ended before `cutoff_ns`, and the oldest while the pool is short of
  // spare blocks; drain_ring() writes every unwritten event that ended in
  // [cutoff_ns, until_ns), the ring's and the threads' current blocks', and
  // recycles what it emptied: a block's events from the first that ended at
  // or after `until_ns` stay for the next write, so that every rank's window
  // ends at the instant the write was asked for, not when its flusher woke.
  // The events recycled unwritten are counted in `lost`.
  struct RingLosses {
    uint64_t aged_out = 0;     // older than the window
    uint64_t crowded_out = 0;  // recycled within it, for room (the window held more than the buffers)
  };
  void keep(int64_t cutoff_ns, RingLosses& lost);
  template <typename Write>
  void drain_ring(int64_t cutoff_ns, int64_t until_ns, Write&& write, RingLosses& lost);

  // Capture windows: record() keeps the events that begin in [from_ns,
  // until_ns) of the rank's clock, or in one of the last kPastWindows
  // windows (a GPU's records arrive in buffers, seconds after they began),
  // and counts the others. Edges are set ahead of time where they can be,
  // so that every rank cuts at the same instant rather than when its
  // flusher next wakes. set_window moves the current window's edges;
  // open_window begins a new one, the current one, cut where the new one
  // begins, kept among the past ones. The flusher writes the past ones to
  // the shard from a log of the last kWindowLog (windows_closed_since).
  static constexpr uint32_t kPastWindows = 8;
  static constexpr uint32_t kWindowLog = 256;
  void set_window(int64_t from_ns, int64_t until_ns) {
    window_from_ns_.store(from_ns, std::memory_order_relaxed);
    window_until_ns_.store(until_ns, std::memory_order_relaxed);
  }
  void open_window(int64_t from_ns, int64_t until_ns);
  std::pair<int64_t, int64_t> window() const {
    return {window_from_ns_.load(std::memory_order_relaxed), window_until_ns_.load(std::memory_order_relaxed)};
  }
  bool in_window(int64_t ns) const {
    return (ns >= window_from_ns_.load(std::memory_order_relaxed) &&
            ns < window_until_ns_.load(std::memory_order_relaxed)) ||
           in_past_window(ns);
  }
  uint64_t outside_window() const;
  // The past windows after the first `cursor` ever kept, oldest first, into
  // `out`; moves `cursor` past them. Returns how many were lost from the
  // log before they were read (more than kWindowLog between two reads).
  uint32_t windows_closed_since(uint32_t& cursor, std::vector<CaptureWindow>& out) const;
  uint32_t windows_closed() const { return past_windows_count_.load(std::memory_order_acquire); }

  uint64_t dropped() const;
  uint64_t buffer_bytes_used() const { return pool_.bytes_used(); }  // blocks ever taken
  StringTable& strings() { return strings_; }
  TrackTable& tracks() { return tracks_; }

  // Called when a thread exits: its block goes to the flusher, its slot is freed.
  void release_thread(void* state);

  struct ThreadState;  // the calling thread's block and track, in thread-local storage

 private:
  ThreadState* claim_thread();
  bool refill(ThreadState& state);
  void recycle_oldest(uint64_t& lost);

  struct KeptBlock {
    Block* block;
    int64_t newest_end_ns;
  };
  std::deque<KeptBlock> ring_;  // the flusher's, oldest first

  // Never reused, unlike an address: a thread's state left by a recorder
  // that is gone (in the tests, one after another) is not this one's.
  static inline std::atomic<uint64_t> next_id_{1};
  const uint64_t id_ = next_id_.fetch_add(1, std::memory_order_relaxed);
  BlockPool pool_;
  StringTable strings_;
  TrackTable tracks_;
  ThreadSlot slots_[kMaxThreads];
  std::atomic<uint64_t> dropped_without_slot_{0};
  std::atomic<int64_t> window_from_ns_{INT64_MIN};
  std::atomic<int64_t> window_until_ns_{INT64_MAX};
  // Written once each, then published by past_windows_count_; a reader that
  // races a slot's reuse, kWindowLog windows later, misjudges one late event
  // at most, and the flusher counts the window lost.
  struct PastWindow {
    std::atomic<int64_t> from_ns{0}, until_ns{0};
  };
  PastWindow past_windows_[kWindowLog];
  std::atomic<uint32_t> past_windows_count_{0};
  std::atomic<int64_t> past_windows_until_ns_{INT64_MIN};  // the latest end of any past window
  bool in_past_window(int64_t ns) const;
};

template <typename Write>
void Recorder::drain(Write&& write) {
  auto flush = [&](Block* block) {
    const uint32_t committed = block->committed.load(std::memory_order_acquire);
    if (committed > block->flushed) {
      write(std::span<Event>(block->events + block->flushed, committed - block->flushed));
      block->flushed = committed;
    }
  };
  // Full blocks first: only this thread recycles blocks, so the pointers read
  // from the slots below stay valid until the next drain.
  for (Block* block = pool_.take_full(); block != nullptr;) {
    Block* next = block->next_full;
    flush(block);
    pool_.give_back(block);
    block = next;
  }
  for (ThreadSlot& slot : slots_) {
    if (Block* block = slot.block.load(std::memory_order_acquire)) flush(block);
  }
}

template <typename Write>
void Recorder::drain_ring(int64_t cutoff_ns, int64_t until_ns, Write&& write, RingLosses& lost) {
  // Each block's unwritten events that ended within the window, in runs;
  // true when the block is emptied.
  auto flush = [&](Block* block) {
    const uint32_t committed = block->committed.load(std::memory_order_acquire);
    uint32_t run = block->flushed;
    uint32_t i = block->flushed;
    for (; i < committed && block->events[i].end_ns < until_ns; ++i) {
      if (block->events[i].end_ns >= cutoff_ns) continue;
      if (i > run) write(std::span<Event>(block->events + run, i - run));
      ++lost.aged_out;
      run = i + 1;
    }
    if (i > run) write(std::span<Event>(block->events + run, i - run));
    block->flushed = i;
    return i == committed;
  };
  keep(cutoff_ns, lost);
  std::erase_if(ring_, [&](const KeptBlock& kept) {
    if (!flush(kept.block)) return false;
    pool_.give_back(kept.block);
    return true;
  });
  for (ThreadSlot& slot : slots_) {
    if (Block* block = slot.block.load(std::memory_order_acquire)) flush(block);
  }
}

}  // namespace rankscope::agent
