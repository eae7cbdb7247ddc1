#include "recorder.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "rankscope/model/hash.h"

namespace rankscope::agent {

// ------------------------------------------------------------- BlockPool ---

bool BlockPool::init(uint64_t bytes) {
  count_ = static_cast<uint32_t>(std::max<uint64_t>(1, bytes / sizeof(Block)));
  mapped_bytes_ = uint64_t{count_} * sizeof(Block);
  void* memory = ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    count_ = 0;
    return false;
  }
  // Blocks are constructed when first taken: the kernel's zero pages of a
  // block nobody uses never become the process's memory.
  blocks_ = static_cast<Block*>(memory);
  return true;
}

BlockPool::~BlockPool() {
  if (blocks_) ::munmap(blocks_, mapped_bytes_);
}

Block* BlockPool::take() {
  uint64_t head = free_head_.load(std::memory_order_acquire);
  for (;;) {
    const auto index = static_cast<uint32_t>(head);
    if (index == 0) return take_untouched();
    Block* block = &blocks_[index - 1];
    const uint64_t next = ((head >> 32) + 1) << 32 | block->next_free.load(std::memory_order_relaxed);
    if (free_head_.compare_exchange_weak(head, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return block;
    }
  }
}

Block* BlockPool::take_untouched() {
  uint32_t next = untouched_.load(std::memory_order_relaxed);
  do {
    if (next == count_) return nullptr;
  } while (!untouched_.compare_exchange_weak(next, next + 1, std::memory_order_relaxed));
  // Default-initialised: only the header is written, the events stay untouched until recorded.
  return new (&blocks_[next]) Block;
}

void BlockPool::give_back(Block* block) {
  block->committed.store(0, std::memory_order_relaxed);
  block->flushed = 0;
  block->next_full = nullptr;
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    block->next_free.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
    next = ((head >> 32) + 1) << 32 | (index_of(block) + 1);
  } while (!free_head_.compare_exchange_weak(head, next, std::memory_order_release, std::memory_order_relaxed));
}

void BlockPool::hand_in(Block* block) {
  Block* head = full_head_.load(std::memory_order_relaxed);
  do {
    block->next_full = head;
  } while (!full_head_.compare_exchange_weak(head, block, std::memory_order_release, std::memory_order_relaxed));
}

Block* BlockPool::take_full() { return full_head_.exchange(nullptr, std::memory_order_acquire); }

// ----------------------------------------------------------- StringTable ---

struct StringTable::Segment {
  struct Entry {
    uint32_t offset;
    uint32_t length;
  };
  explicit Segment(uint32_t strings, uint32_t arena_bytes)
      : capacity(strings), ids(strings * 2, strings), entries(new Entry[strings]), arena(new char[arena_bytes]),
        arena_bytes(arena_bytes) {}

  bool same(uint32_t id, std::string_view text) const {
    const Entry& e = entries[id];
    return e.length == text.size() && std::memcmp(arena.get() + e.offset, text.data(), text.size()) == 0;
  }
  uint32_t find(uint64_t hash, std::string_view text) {
    return ids.find(hash, [&](uint32_t id) { return same(id, text); });
  }
  uint32_t find_or_add(uint64_t hash, std::string_view text) {
    return ids.find_or_add(
        hash, [&](uint32_t id) { return same(id, text); },
        [&](uint32_t id) {
          // Claimed only when it fits, so one oversized name does not use up the arena.
          uint32_t offset = arena_used.load(std::memory_order_relaxed);
          do {
            if (text.size() > arena_bytes - offset) return false;
          } while (!arena_used.compare_exchange_weak(offset, offset + static_cast<uint32_t>(text.size()),
                                                     std::memory_order_relaxed));
          std::memcpy(arena.get() + offset, text.data(), text.size());
          entries[id] = {offset, static_cast<uint32_t>(text.size())};
          return true;
        });
  }
  std::string_view text(uint32_t id) const {
    if (id >= ids.size() || ids.state(id) != ConcurrentIdTable::IdState::kReady) return {};
    return {arena.get() + entries[id].offset, entries[id].length};
  }

  const uint32_t capacity;
  ConcurrentIdTable ids;
  std::unique_ptr<Entry[]> entries;
  std::unique_ptr<char[]> arena;
  const uint32_t arena_bytes;
  std::atomic<uint32_t> arena_used{0};
};

StringTable::StringTable() {
  segments_[0] = new Segment(kFirstSegmentStrings, kArenaBytes);
  count_.store(1, std::memory_order_release);
}

StringTable::~StringTable() {
  for (Segment* segment : segments_) delete segment;
}

uint32_t StringTable::intern(std::string_view text) {
  const uint64_t hash = hash_bytes(text.data(), text.size());
  for (;;) {
    const uint32_t count = count_.load(std::memory_order_acquire);
    // Older segments take no new names, but keep the ids they gave.
    for (uint32_t s = 0; s + 1 < count; ++s) {
      if (const uint32_t id = segments_[s]->find(hash, text); id != kNoId) return first_id(s) + id;
    }
    if (const uint32_t id = segments_[count - 1]->find_or_add(hash, text); id != kNoId) return first_id(count - 1) + id;
    // A burst of names (100,000 step names registered up front) fills the
    // newest segment before the writer thread next wakes to add room: the
    // one time an application's thread allocates.
    if (!add_segment_after(count)) return kNoId;
  }
}

std::string_view StringTable::text(uint32_t id) const {
  const uint32_t count = count_.load(std::memory_order_acquire);
  for (uint32_t s = 0; s < count; ++s) {
    if (id < first_id(s + 1)) return segments_[s]->text(id - first_id(s));
  }
  return {};
}

void StringTable::collect(Cursor& cursor, std::vector<std::pair<uint32_t, std::string_view>>& out) const {
  const uint32_t count = count_.load(std::memory_order_acquire);
  for (uint32_t s = 0; s < count; ++s) {
    const Segment& segment = *segments_[s];
    const uint32_t size = segment.ids.size();
    uint32_t id = cursor.written[s];
    for (; id < size; ++id) {
      const auto state = segment.ids.state(id);
      if (state == ConcurrentIdTable::IdState::kFilling) break;
      if (state == ConcurrentIdTable::IdState::kReady) out.emplace_back(first_id(s) + id, segment.text(id));
    }
    cursor.written[s] = id;
  }
}

void StringTable::grow() { add_segment_after(count_.load(std::memory_order_acquire)); }

bool StringTable::add_segment_after(uint32_t count) {
  bool idle = false;
  if (!growing_.compare_exchange_strong(idle, true, std::memory_order_acq_rel)) {
    // Another thread adds one: a few microseconds.
    while (growing_.load(std::memory_order_acquire)) sched_yield();
    return count_.load(std::memory_order_acquire) > count;
  }
  const auto done = [&](bool added) {
    growing_.store(false, std::memory_order_release);
    return added;
  };
  if (count_.load(std::memory_order_acquire) != count) return done(true);  // added since the caller looked
  const Segment& newest = *segments_[count - 1];
  const bool ids_short = newest.ids.size() >= newest.capacity / 4 * 3;
  const bool text_short = newest.arena_used.load(std::memory_order_relaxed) >= newest.arena_bytes / 4 * 3;
  // A name too long for the room left in a segment with room to spare is dropped, not given a segment.
  if (count == kMaxSegments || !(ids_short || text_short)) return done(false);
  // Text and entries are mapped as they are written; the hash slots, spread
  // evenly, are all mapped once a segment holds some thousands of names.
  try {
    segments_[count] = new Segment(newest.capacity * 2, std::min(newest.arena_bytes * 2, 64u << 20));
  } catch (const std::bad_alloc&) {
    return done(false);
  }
  count_.store(count + 1, std::memory_order_release);
  return done(true);
}

// ------------------------------------------------------------ TrackTable ---

TrackTable::TrackTable() : ids_(kMaxTracks * 2, kMaxTracks), tracks_(new Track[kMaxTracks]) {}

uint32_t TrackTable::find_or_add(TrackType type, uint64_t os_id, int16_t device, uint32_t name_id) {
  const uint64_t key = mix64(os_id ^ mix64(uint64_t{static_cast<uint8_t>(type)} << 16 | static_cast<uint16_t>(device)));
  return ids_.find_or_add(
      key,
      [&](uint32_t id) {
        const Track& t = tracks_[id];
        return t.type == type && t.os_id == os_id && t.device == device;
      },
      [&](uint32_t id) {
        Track& t = tracks_[id];
        t = Track{};
        t.os_id = os_id;
        t.id = id;
        t.name_id = name_id;
        t.device = device;
        t.type = type;
        return true;
      });
}

uint32_t TrackTable::collect(uint32_t from, std::vector<Track>& out) const {
  const uint32_t size = ids_.size();
  uint32_t id = from;
  for (; id < size; ++id) {
    const auto state = ids_.state(id);
    if (state == ConcurrentIdTable::IdState::kFilling) break;
    if (state == ConcurrentIdTable::IdState::kReady) out.push_back(tracks_[id]);
  }
  return id;
}

// -------------------------------------------------------------- Recorder ---

struct Recorder::ThreadState {
  uint64_t owner;  // the Recorder's id_
  Block* block;
  uint32_t count;  // events in block, the owner's copy of block->committed
  uint32_t slot;
  uint16_t track;
};

namespace {

// Plain thread-local data (no constructor, no destructor), so that reaching
// it costs no guard check; a pthread key runs the clean-up at thread exit.
// initial-exec: one instruction to reach, not a call to __tls_get_addr. The
// capture library is preloaded; where NVTX's loader dlopens it instead, these
// 72 bytes come from glibc's surplus static TLS, which has room for them.
[[gnu::tls_model("initial-exec")]] thread_local Recorder::ThreadState* t_state = nullptr;
[[gnu::tls_model("initial-exec")]] alignas(64) thread_local unsigned char t_state_storage[64];
pthread_key_t g_thread_exit_key;
pthread_once_t g_thread_exit_once = PTHREAD_ONCE_INIT;
Recorder* g_exit_recorder = nullptr;

void on_thread_exit(void* state) {
  if (g_exit_recorder) g_exit_recorder->release_thread(state);
}

}  // namespace

bool Recorder::init(uint64_t buffer_bytes) {
  g_exit_recorder = this;
  pthread_once(&g_thread_exit_once, [] { pthread_key_create(&g_thread_exit_key, on_thread_exit); });
  return pool_.init(buffer_bytes);
}

Recorder::ThreadState* Recorder::claim_thread() {
  static_assert(sizeof(ThreadState) <= sizeof(t_state_storage));
  uint32_t slot = 0;
  for (; slot < kMaxThreads; ++slot) {
    bool expected = false;
    if (!slots_[slot].taken.load(std::memory_order_relaxed) &&
        slots_[slot].taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      break;
    }
  }
  if (slot == kMaxThreads) return nullptr;

  // Once per thread: naming its track costs a system call or two.
  const auto tid = static_cast<uint64_t>(::syscall(SYS_gettid));
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  const std::string label = std::string(name[0] ? name : "thread") + " " + std::to_string(tid);
  const uint32_t name_id = strings_.intern(label);
  const uint32_t track = tracks_.find_or_add(TrackType::kThread, tid, -1, name_id == kNoId ? 0 : name_id);

  slots_[slot].track.store(static_cast<uint16_t>(track), std::memory_order_relaxed);
  auto* state = new (t_state_storage) ThreadState{id_, nullptr, 0, slot, static_cast<uint16_t>(track)};
  t_state = state;
  pthread_setspecific(g_thread_exit_key, state);
  return state;
}

bool Recorder::refill(ThreadState& state) {
  ThreadSlot& slot = slots_[state.slot];
  if (state.block != nullptr) {
    slot.block.store(nullptr, std::memory_order_release);
    pool_.hand_in(state.block);
    state.block = nullptr;
  }
  Block* block = pool_.take();
  if (block == nullptr) {
    slot.dropped.store(slot.dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return false;
  }
  state.block = block;
  state.count = 0;
  slot.block.store(block, std::memory_order_release);
  return true;
}

void Recorder::record(const Event& event) {
  ThreadState* state = t_state;
  if (state == nullptr || state->owner != id_) {
    state = claim_thread();
    if (state == nullptr) {
      dropped_without_slot_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  if (!in_window(event.begin_ns)) {
    std::atomic<uint64_t>& outside = slots_[state->slot].outside_window;
    outside.store(outside.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  if ((state->block == nullptr || state->count == kBlockEvents) && !refill(*state)) return;
  Event& slot = state->block->events[state->count];
  slot = event;
  if (slot.track == kThreadTrack) slot.track = state->track;
  state->block->committed.store(++state->count, std::memory_order_release);
}

uint32_t Recorder::thread_track() {
  ThreadState* state = t_state;
  if (state == nullptr || state->owner != id_) state = claim_thread();
  return state ? state->track : kNoId;
}

CallInProgress* Recorder::call_in_progress() {
  ThreadState* state = t_state;
  if (state == nullptr || state->owner != id_) state = claim_thread();
  return state ? &slots_[state->slot].call : nullptr;
}

void Recorder::release_thread(void* opaque) {
  auto* state = static_cast<ThreadState*>(opaque);
  if (state->owner != id_) return;
  ThreadSlot& slot = slots_[state->slot];
  if (state->block != nullptr) {
    slot.block.store(nullptr, std::memory_order_release);
    pool_.hand_in(state->block);
  }
  slot.call.leave();
  slot.taken.store(false, std::memory_order_release);
  t_state = nullptr;
}

void Recorder::keep(int64_t cutoff_ns, RingLosses& lost) {
  // The full list comes newest first.
  std::vector<Block*> handed_in;
  for (Block* block = pool_.take_full(); block != nullptr; block = block->next_full) handed_in.push_back(block);
  for (auto block = handed_in.rbegin(); block != handed_in.rend(); ++block) {
    const uint32_t committed = (*block)->committed.load(std::memory_order_acquire);
    int64_t newest = INT64_MIN;
    for (uint32_t i = (*block)->flushed; i < committed; ++i) newest = std::max(newest, (*block)->events[i].end_ns);
    ring_.push_back({*block, newest});
  }
  while (!ring_.empty() && ring_.front().newest_end_ns < cutoff_ns) recycle_oldest(lost.aged_out);
  // Room for every thread's next block and an eighth of the pool besides,
  // so that recording never waits for the window to pass.
  uint32_t in_threads = 0;
  for (const ThreadSlot& slot : slots_) in_threads += slot.block.load(std::memory_order_relaxed) != nullptr;
  const uint32_t spare = std::max<uint32_t>(2, pool_.block_count() / 8) + in_threads;
  while (!ring_.empty() && ring_.size() + spare > pool_.block_count()) recycle_oldest(lost.crowded_out);
}

void Recorder::recycle_oldest(uint64_t& lost) {
  Block* block = ring_.front().block;
  lost += block->committed.load(std::memory_order_relaxed) - block->flushed;
  ring_.pop_front();
  pool_.give_back(block);
}

void Recorder::open_window(int64_t from_ns, int64_t until_ns) {
  const auto [was_from, was_until] = window();
  if (was_from < std::min(was_until, from_ns)) {
    const uint32_t count = past_windows_count_.load(std::memory_order_relaxed);
    PastWindow& past = past_windows_[count % kWindowLog];
    past.from_ns.store(was_from, std::memory_order_relaxed);
    past.until_ns.store(std::min(was_until, from_ns), std::memory_order_relaxed);
    past_windows_until_ns_.store(std::max(past_windows_until_ns_.load(std::memory_order_relaxed), std::min(was_until, from_ns)),
                                 std::memory_order_relaxed);
    past_windows_count_.store(count + 1, std::memory_order_release);
  }
  set_window(from_ns, until_ns);
}

bool Recorder::in_past_window(int64_t ns) const {
  // Most events outside a window are newer than every past window.
  if (ns >= past_windows_until_ns_.load(std::memory_order_relaxed)) return false;
  const uint32_t count = past_windows_count_.load(std::memory_order_acquire);
  for (uint32_t i = count > kPastWindows ? count - kPastWindows : 0; i < count; ++i) {
    const PastWindow& past = past_windows_[i % kWindowLog];
    if (ns >= past.from_ns.load(std::memory_order_relaxed) && ns < past.until_ns.load(std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

uint32_t Recorder::windows_closed_since(uint32_t& cursor, std::vector<CaptureWindow>& out) const {
  const uint32_t count = past_windows_count_.load(std::memory_order_acquire);
  const size_t first = out.size();
  uint32_t from = count - cursor > kWindowLog ? count - kWindowLog : cursor;
  for (uint32_t i = from; i != count; ++i) {
    const PastWindow& past = past_windows_[i % kWindowLog];
    out.push_back({past.from_ns.load(std::memory_order_relaxed), past.until_ns.load(std::memory_order_relaxed)});
  }
  // Slots reused while they were read, the oldest first: lost, not misread.
  const uint32_t now_count = past_windows_count_.load(std::memory_order_acquire);
  const uint32_t reused = std::min(now_count - from > kWindowLog ? now_count - from - kWindowLog : 0, count - from);
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(first),
            out.begin() + static_cast<std::ptrdiff_t>(first + reused));
  const uint32_t lost = (from - cursor) + reused;
  cursor = count;
  return lost;
}

uint64_t Recorder::outside_window() const {
  uint64_t total = 0;
  for (const ThreadSlot& slot : slots_) total += slot.outside_window.load(std::memory_order_relaxed);
  return total;
}

uint64_t Recorder::dropped() const {
  uint64_t total = dropped_without_slot_.load(std::memory_order_relaxed);
  for (const ThreadSlot& slot : slots_) total += slot.dropped.load(std::memory_order_relaxed);
  return total;
}

}  // namespace rankscope::agent
