// The agent's buffers without the agent: blocks, threads, drops, names, tracks.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rankscope/rank_agent/agent.h"
#include "range_windows.h"
#include "recorder.h"

namespace rankscope::agent {
namespace {

Event numbered(uint64_t thread, uint64_t n) {
  Event e{};
  e.begin_ns = static_cast<int64_t>(n);
  e.end_ns = e.begin_ns + 1;
  e.kind = EventKind::kNvtxRange;
  e.seq = n;
  e.comm_hash = thread;
  e.track = kThreadTrack;
  return e;
}

// Drains everything into a map: thread -> sequence numbers, in drained order.
std::map<uint64_t, std::vector<uint64_t>> drain_all(Recorder& recorder) {
  std::map<uint64_t, std::vector<uint64_t>> seen;
  recorder.drain([&](std::span<Event> events) {
    for (const Event& e : events) seen[e.comm_hash].push_back(e.seq);
  });
  return seen;
}

TEST(Recorder, KeepsEveryEventOfOneThreadAcrossBlocks) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(8 * sizeof(Block)));
  const uint64_t n = 3 * kBlockEvents + 17;
  for (uint64_t i = 0; i < n; ++i) recorder.record(numbered(1, i));
  const auto seen = drain_all(recorder);
  ASSERT_EQ(seen.at(1).size(), n);
  std::vector<uint64_t> sorted = seen.at(1);
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(recorder.dropped(), 0u);
}

TEST(Recorder, PartialBlocksAreDrainedOnceAndTheRestLater) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  for (uint64_t i = 0; i < 10; ++i) recorder.record(numbered(1, i));
  EXPECT_EQ(drain_all(recorder).at(1).size(), 10u);
  EXPECT_TRUE(drain_all(recorder).empty()) << "nothing new: nothing written twice";
  for (uint64_t i = 10; i < 25; ++i) recorder.record(numbered(1, i));
  const auto seen = drain_all(recorder);
  ASSERT_EQ(seen.at(1).size(), 15u);
  EXPECT_EQ(seen.at(1).front(), 10u);
}

TEST(Recorder, DropsAndCountsWhenThePoolIsEmptyNeverBlocks) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(2 * sizeof(Block)));  // two blocks, nobody drains
  const uint64_t n = 5 * uint64_t{kBlockEvents};
  for (uint64_t i = 0; i < n; ++i) recorder.record(numbered(1, i));
  EXPECT_EQ(recorder.dropped(), n - 2 * kBlockEvents);
  EXPECT_EQ(drain_all(recorder).at(1).size(), 2u * kBlockEvents);
  // Drained blocks are free again: recording resumes.
  for (uint64_t i = 0; i < 10; ++i) recorder.record(numbered(2, i));
  EXPECT_EQ(drain_all(recorder).at(2).size(), 10u);
}

// The buffer memory becomes the process's only as blocks are used: a rank
// that records little costs little memory, whatever --buffer-mb says.
// The flight recorder: what drain_ring writes, as sequence numbers in order.
std::vector<uint64_t> drain_ring_all(Recorder& recorder, int64_t cutoff_ns, Recorder::RingLosses& lost,
                                     int64_t until_ns = INT64_MAX) {
  std::vector<uint64_t> written;
  recorder.drain_ring(cutoff_ns, until_ns, [&](std::span<Event> events) {
    for (const Event& e : events) written.push_back(e.seq);
  }, lost);
  return written;
}

// Records events [from, to) on a thread of their own (which hands in its
// block as it ends), the flusher's routine keep(cutoff_ns) every 1000.
void record_on_a_thread(Recorder& recorder, uint64_t from, uint64_t to, int64_t cutoff_ns, Recorder::RingLosses& lost) {
  std::thread([&] {
    for (uint64_t n = from; n < to; ++n) {
      recorder.record(numbered(1, n));
      if (n % 1000 == 0) recorder.keep(cutoff_ns, lost);
    }
  }).join();
}

TEST(Ring, KeepsTheWindowWritesItOnceAndCountsWhatAgedOut) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(16 * sizeof(Block)));
  // Ten blocks and a half of events; event n ends at n + 1. The window holds everything so far.
  const uint64_t total = 10 * kBlockEvents + kBlockEvents / 2;
  Recorder::RingLosses lost;
  record_on_a_thread(recorder, 0, total, 0, lost);
  EXPECT_EQ(recorder.dropped(), 0u);
  // The last four blocks' time: whole blocks before it go at once, the rest event by event.
  const int64_t cutoff = static_cast<int64_t>(total - 4 * kBlockEvents) + 1;
  recorder.keep(cutoff, lost);
  EXPECT_EQ(lost.aged_out, 6u * kBlockEvents) << "blocks wholly before the window are recycled";
  const std::vector<uint64_t> written = drain_ring_all(recorder, cutoff, lost);
  ASSERT_EQ(written.size(), 4u * kBlockEvents);
  EXPECT_EQ(written.front(), total - 4 * kBlockEvents);
  EXPECT_EQ(written.back(), total - 1);
  EXPECT_TRUE(std::is_sorted(written.begin(), written.end()));
  EXPECT_EQ(lost.aged_out + written.size(), total);
  EXPECT_EQ(lost.crowded_out, 0u);
  // Written once: the next dump has only what came after.
  record_on_a_thread(recorder, total, total + 1, cutoff, lost);
  EXPECT_EQ(drain_ring_all(recorder, cutoff, lost), std::vector<uint64_t>{total});
}

// A dump asked for at one instant ends there on every rank, however late
// its flusher wakes: what ended since stays for the next write.
TEST(Ring, ADumpEndsAtTheInstantItWasAskedForAndKeepsWhatCameAfter) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(16 * sizeof(Block)));
  Recorder::RingLosses lost;
  const uint64_t total = 3 * kBlockEvents + 100;  // event n ends at n + 1
  record_on_a_thread(recorder, 0, total, INT64_MIN, lost);
  // Asked for at 2 * kBlockEvents + 12, after event 2 * kBlockEvents + 10 ended; a window of kBlockEvents.
  const int64_t asked_at = 2 * kBlockEvents + 12;
  const std::vector<uint64_t> first = drain_ring_all(recorder, asked_at - kBlockEvents, lost, asked_at);
  ASSERT_EQ(first.size(), kBlockEvents);
  EXPECT_EQ(first.front(), kBlockEvents + 11);
  EXPECT_EQ(first.back(), 2 * kBlockEvents + 10);
  EXPECT_EQ(lost.aged_out, kBlockEvents + 11u);
  // The next write has the rest: blocks the first write emptied only in part stayed in the ring.
  const std::vector<uint64_t> rest = drain_ring_all(recorder, INT64_MIN, lost);
  ASSERT_EQ(rest.size(), total - 2 * kBlockEvents - 11);
  EXPECT_EQ(rest.front(), 2 * kBlockEvents + 11);
  EXPECT_EQ(rest.back(), total - 1);
  EXPECT_EQ(first.size() + rest.size() + lost.aged_out, total);
}

TEST(Ring, AWindowLargerThanTheBuffersKeepsTheNewestAndCountsTheRest) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(16 * sizeof(Block)));
  Recorder::RingLosses lost;
  const uint64_t total = 40 * kBlockEvents;
  record_on_a_thread(recorder, 0, total, INT64_MIN, lost);
  EXPECT_EQ(recorder.dropped(), 0u) << "recording never finds the pool empty";
  EXPECT_GT(lost.crowded_out, 0u);
  EXPECT_EQ(lost.aged_out, 0u);
  const std::vector<uint64_t> written = drain_ring_all(recorder, INT64_MIN, lost);
  EXPECT_EQ(written.back(), total - 1);
  EXPECT_TRUE(std::is_sorted(written.begin(), written.end()));
  EXPECT_EQ(written.size() + lost.crowded_out, total);
  EXPECT_GE(written.size(), 12u * kBlockEvents) << "the ring holds all but the spare blocks";
}

TEST(Window, KeepsWhatBeginsInsideAndCountsTheRest) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  recorder.set_window(100, 200);
  std::thread([&] {
    for (uint64_t n = 0; n < 300; ++n) recorder.record(numbered(1, n));  // event n begins at n
  }).join();
  const auto seen = drain_all(recorder);
  ASSERT_EQ(seen.at(1).size(), 100u);
  EXPECT_EQ(seen.at(1).front(), 100u);
  EXPECT_EQ(seen.at(1).back(), 199u);
  EXPECT_EQ(recorder.outside_window(), 200u);
  EXPECT_EQ(recorder.dropped(), 0u);
}

TEST(Window, LateEventsOfAPastWindowAreKept) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  recorder.set_window(INT64_MAX, INT64_MAX);  // paused
  recorder.open_window(10, INT64_MAX);
  recorder.set_window(10, 20);  // closed at 20
  recorder.open_window(50, 60);  // [10, 20) is a past window now
  std::thread([&] {
    // As a GPU's records come: the second window's events first, the first's after.
    for (uint64_t n = 40; n < 70; ++n) recorder.record(numbered(1, n));
    for (uint64_t n = 0; n < 30; ++n) recorder.record(numbered(1, n));
  }).join();
  auto kept = drain_all(recorder).at(1);
  std::sort(kept.begin(), kept.end());
  ASSERT_EQ(kept.size(), 20u);
  EXPECT_EQ(kept.front(), 10u);
  EXPECT_EQ(kept[9], 19u);
  EXPECT_EQ(kept[10], 50u);
  EXPECT_EQ(kept.back(), 59u);
  EXPECT_EQ(recorder.outside_window(), 40u);
  // Only the last kPastWindows windows are remembered.
  for (int64_t w = 0; w < int64_t{Recorder::kPastWindows}; ++w) recorder.open_window(100 + 2 * w, 101 + 2 * w);
  recorder.open_window(1000, 1001);
  std::thread([&] {
    recorder.record(numbered(2, 15));   // in [10, 20): forgotten by now
    recorder.record(numbered(2, 100));  // in the oldest remembered
  }).join();
  EXPECT_EQ(drain_all(recorder).at(2), std::vector<uint64_t>{100});
}

// The flusher reads the windows closed since it last looked, in order; more
// than the log holds between two reads lose the oldest, counted.
TEST(Window, ClosedWindowsAreReadOnceAndLossesCounted) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  recorder.set_window(INT64_MAX, INT64_MAX);
  uint32_t cursor = 0;
  std::vector<CaptureWindow> read;
  EXPECT_EQ(recorder.windows_closed_since(cursor, read), 0u);
  EXPECT_TRUE(read.empty()) << "a window never opened is none";
  recorder.open_window(10, INT64_MAX);
  recorder.set_window(10, 20);
  recorder.open_window(30, 40);
  recorder.open_window(50, 60);
  EXPECT_EQ(recorder.windows_closed_since(cursor, read), 0u);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].from_ns, 10);
  EXPECT_EQ(read[0].until_ns, 20);
  EXPECT_EQ(read[1].from_ns, 30);
  EXPECT_EQ(read[1].until_ns, 40);
  read.clear();
  EXPECT_EQ(recorder.windows_closed_since(cursor, read), 0u);
  EXPECT_TRUE(read.empty()) << "each window is read once";
  const uint32_t more = Recorder::kWindowLog + 5;
  for (uint32_t w = 0; w < more; ++w) recorder.open_window(100 + 2 * w, 101 + 2 * w);
  EXPECT_EQ(recorder.windows_closed_since(cursor, read), 5u);
  ASSERT_EQ(read.size(), Recorder::kWindowLog);
  EXPECT_EQ(read.front().from_ns, 100 + 2 * 4) << "the oldest five lost: [50, 60) and the first four of the loop";
  EXPECT_EQ(read.back().from_ns, 100 + 2 * (more - 2));
}

// Steps 0..count-1 of ProfilerStep#N ranges, step n over [10n, 10n + 9].
void run_steps(Recorder& recorder, RangeWindows& windows, uint64_t count) {
  for (uint64_t n = 0; n < count; ++n) {
    const uint32_t name = recorder.strings().intern("ProfilerStep#" + std::to_string(n));
    const uint32_t inner = recorder.strings().intern("forward");
    const auto at = static_cast<int64_t>(10 * n);
    windows.range_edge(name, 1, at, true);
    windows.range_edge(inner, 1, at + 1, true);
    windows.range_edge(inner, 1, at + 8, false);
    windows.range_edge(name, 1, at + 9, false);
  }
}

class RangeWindowsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(recorder.init(4 * sizeof(Block))); }
  Recorder recorder;
  RangeWindows windows{recorder};
};

TEST_F(RangeWindowsTest, StepsOpenAtTheFirstSelectedStepAndCloseWhereTheLastEnds) {
  windows.steer_by_steps(*parse_step_selection("3:5"), "--steps 3:5");
  EXPECT_FALSE(recorder.in_window(0));
  run_steps(recorder, windows, 8);
  EXPECT_EQ(recorder.window(), std::make_pair(int64_t{30}, int64_t{59}));
  EXPECT_EQ(windows.windows_opened(), 1u);
  EXPECT_EQ(windows.highest_step_seen(), 7u);
}

TEST_F(RangeWindowsTest, AnOpenStartIsTheFirstWindow) {
  windows.steer_by_steps(*parse_step_selection(":2"), "--steps :2");
  EXPECT_TRUE(recorder.in_window(-5));
  run_steps(recorder, windows, 5);
  EXPECT_EQ(recorder.window(), std::make_pair(INT64_MIN, int64_t{29}));
  EXPECT_EQ(windows.windows_opened(), 1u);
}

TEST_F(RangeWindowsTest, APeriodOpensAWindowEachPeriod) {
  windows.steer_by_steps(*parse_step_selection("1:2/5"), "--steps 1:2/5");
  run_steps(recorder, windows, 14);
  EXPECT_EQ(windows.windows_opened(), 3u);  // 1-2, 6-7, 11-12
  for (int64_t at : {10, 28, 60, 78, 110, 128}) EXPECT_TRUE(recorder.in_window(at)) << at;
  for (int64_t at : {5, 29, 30, 59, 80, 109, 129, 135}) EXPECT_FALSE(recorder.in_window(at)) << at;
}

TEST_F(RangeWindowsTest, ANamedRangeInItsDomainStopsWhenTheLastCopyEnds) {
  const uint32_t name = recorder.strings().intern("capture");
  const uint32_t other = recorder.strings().intern("other");
  windows.steer_by_range(name, 7, "--capture-range nvtx:capture@d");
  windows.range_edge(name, 7, 5, false);   // one that began before: not counted
  windows.range_edge(name, 8, 10, true);   // another domain
  windows.range_edge(other, 7, 12, true);  // another name
  EXPECT_EQ(windows.windows_opened(), 0u);
  windows.range_edge(name, 7, 20, true);   // one thread
  windows.range_edge(name, 7, 25, true);   // another, overlapping
  windows.range_edge(name, 7, 30, false);
  EXPECT_EQ(recorder.window(), std::make_pair(int64_t{20}, INT64_MAX));
  windows.range_edge(name, 7, 40, false);
  EXPECT_EQ(recorder.window(), std::make_pair(int64_t{20}, int64_t{40}));
  EXPECT_EQ(windows.windows_opened(), 1u);
}

TEST_F(RangeWindowsTest, ProfilerApiStartsAndStopsAndATriggerTakesOver) {
  windows.steer_by_profiler_api("--capture-range cudaProfilerApi");
  windows.profiler_api(false, 1);
  windows.profiler_api(true, 5);
  windows.profiler_api(true, 6);  // already started
  windows.profiler_api(false, 9);
  windows.profiler_api(true, 20);
  EXPECT_EQ(windows.windows_opened(), 2u);
  EXPECT_TRUE(recorder.in_window(7));
  EXPECT_FALSE(recorder.in_window(12));
  windows.stop_steering();
  windows.profiler_api(false, 30);
  EXPECT_EQ(recorder.window(), std::make_pair(int64_t{20}, INT64_MAX));
  EXPECT_FALSE(windows.steering());
}

TEST(Window, TriggerLinesParseWholeOrNotAtAll) {
  Trigger t;
  ASSERT_TRUE(parse_trigger("3 stop 1795826077128000000\n", t));
  EXPECT_EQ(t.serial, 3u);
  EXPECT_EQ(t.action, TriggerAction::kStop);
  EXPECT_EQ(t.at_wall_ns, 1795826077128000000);
  ASSERT_TRUE(parse_trigger("1 start 5", t));
  EXPECT_EQ(t.action, TriggerAction::kStart);
  ASSERT_TRUE(parse_trigger("2 dump 7\n", t));
  EXPECT_EQ(t.action, TriggerAction::kDump);
  for (const char* bad : {"", "\n", "start 5", "1 pause 5", "1 start", "1 start 5 6", "x start 5", "1  start 5",
                          "1 start 5x", "1 start -5"}) {
    EXPECT_FALSE(parse_trigger(bad, t)) << bad;
  }
}

TEST(BlockPool, TouchesOnlyTheBlocksItHandsOut) {
  BlockPool pool;
  constexpr uint32_t kBlocks = 64;
  ASSERT_TRUE(pool.init(kBlocks * sizeof(Block)));
  Block* first = pool.take();
  ASSERT_NE(first, nullptr);
  std::fill(std::begin(first->events), std::end(first->events), Event{});  // a whole block written
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Resident pages among those wholly inside [from, to), and how many there are.
  const auto resident = [&](const void* from, const void* to) {
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(from) + page - 1) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(to) / page * page;
    std::vector<unsigned char> pages((end - begin) / page);
    EXPECT_EQ(::mincore(reinterpret_cast<void*>(begin), end - begin, pages.data()), 0);
    return std::pair<long, long>(std::count_if(pages.begin(), pages.end(), [](unsigned char p) { return p & 1; }),
                                 static_cast<long>(pages.size()));
  };
  const auto [written, pages_of_block] = resident(first, first + 1);
  EXPECT_EQ(written, pages_of_block);
  EXPECT_EQ(resident(first + 1, first + kBlocks).first, 0);
  // The block given back is the one taken next; a second one is touched only when both are out.
  pool.give_back(first);
  EXPECT_EQ(pool.take(), first);
  Block* second = pool.take();
  EXPECT_EQ(second, first + 1);
  EXPECT_EQ(resident(first + 2, first + kBlocks).first, 0);
  for (uint32_t i = 2; i < kBlocks; ++i) EXPECT_NE(pool.take(), nullptr);
  EXPECT_EQ(pool.take(), nullptr);
}

TEST(Recorder, ManyThreadsWithAConcurrentDrainLoseNothingUncounted) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(16 * sizeof(Block)));
  constexpr int kThreads = 8;
  constexpr uint64_t kPerThread = 200000;
  std::atomic<bool> done{false};
  std::map<uint64_t, std::vector<uint64_t>> seen;
  std::thread drainer([&] {
    auto collect = [&] {
      recorder.drain([&](std::span<Event> events) {
        for (const Event& e : events) seen[e.comm_hash].push_back(e.seq);
      });
    };
    while (!done.load()) collect();
    collect();
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) recorder.record(numbered(static_cast<uint64_t>(t), i));
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  drainer.join();

  uint64_t kept = 0;
  for (const auto& [thread, sequence] : seen) {
    // No event twice, none invented.
    std::set<uint64_t> unique(sequence.begin(), sequence.end());
    EXPECT_EQ(unique.size(), sequence.size()) << "thread " << thread;
    EXPECT_LT(*unique.rbegin(), kPerThread);
    kept += sequence.size();
  }
  EXPECT_EQ(kept + recorder.dropped(), kThreads * kPerThread);
}

TEST(Recorder, AThreadThatExitsHandsInItsEventsAndFreesItsSlot) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  uint64_t drained = 0;
  for (int round = 0; round < 3 * static_cast<int>(kMaxThreads); ++round) {
    std::thread([&] { recorder.record(numbered(7, static_cast<uint64_t>(round))); }).join();
    const auto seen = drain_all(recorder);
    drained += seen.count(7) ? seen.at(7).size() : 0;
  }
  EXPECT_EQ(drained, 3u * kMaxThreads);
  std::thread([&] { recorder.record(numbered(8, 1)); }).join();
  EXPECT_EQ(drain_all(recorder).at(8).size(), 1u) << "slots are reused: threads beyond kMaxThreads over time still record";
  EXPECT_EQ(recorder.dropped(), 0u);
}

std::vector<Event> calls_in_progress(const Recorder& recorder) {
  std::vector<Event> calls;
  recorder.for_each_call_in_progress([&](const Event& e) { calls.push_back(e); });
  return calls;
}

TEST(CallInProgress, ShownWhileInsideOnTheThreadsTrackAndGoneAfter) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  std::atomic<int> stage{0};
  uint32_t track = kNoId;
  std::thread worker([&] {
    track = recorder.thread_track();
    CallInProgress* call = recorder.call_in_progress();
    call->enter(numbered(5, 42));
    stage = 1;
    while (stage != 2) std::this_thread::yield();
    call->leave();
    stage = 3;
    while (stage != 4) std::this_thread::yield();
  });
  while (stage != 1) std::this_thread::yield();
  std::vector<Event> calls = calls_in_progress(recorder);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].seq, 42u);
  EXPECT_EQ(calls[0].track, track) << "kThreadTrack is resolved to the thread's track";
  stage = 2;
  while (stage != 3) std::this_thread::yield();
  EXPECT_TRUE(calls_in_progress(recorder).empty());
  stage = 4;
  worker.join();
}

// The reader never sees half of one call and half of the next.
TEST(CallInProgress, ReadsAreWholeWhileTheThreadWrites) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  std::atomic<bool> done{false};
  std::thread writer([&] {
    CallInProgress* call = recorder.call_in_progress();
    for (uint64_t n = 1; !done; ++n) {
      Event e = numbered(n, n);  // every field from n
      e.bytes = n;
      call->enter(e);  // over the last call, as a thread's next call would be
      if (n % 16 == 0) call->leave();
    }
  });
  uint64_t seen = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (seen < 10000 && std::chrono::steady_clock::now() < until) {
    for (const Event& e : calls_in_progress(recorder)) {
      ASSERT_TRUE(e.seq == e.comm_hash && e.seq == e.bytes && static_cast<int64_t>(e.seq) == e.begin_ns) << e.seq;
      ++seen;
    }
  }
  done = true;
  writer.join();
  EXPECT_EQ(seen, 10000u) << "the writer's calls were seen that often";
}

TEST(Recorder, EachThreadGetsItsOwnNamedTrack) {
  Recorder recorder;
  ASSERT_TRUE(recorder.init(4 * sizeof(Block)));
  uint32_t main_track = recorder.thread_track();
  uint32_t other_track = kNoId;
  std::thread([&] {
    pthread_setname_np(pthread_self(), "worker");
    other_track = recorder.thread_track();
    recorder.record(numbered(3, 0));
  }).join();
  EXPECT_NE(main_track, other_track);
  std::vector<Track> tracks;
  EXPECT_EQ(recorder.tracks().collect(0, tracks), 2u);
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[other_track].type, TrackType::kThread);
  std::vector<std::pair<uint32_t, std::string_view>> strings;
  StringTable::Cursor cursor;
  recorder.strings().collect(cursor, strings);
  bool named = false;
  for (const auto& [id, text] : strings) named |= id == tracks[other_track].name_id && text.rfind("worker ", 0) == 0;
  EXPECT_TRUE(named);
  const auto seen = [&] {
    std::vector<Event> events;
    recorder.drain([&](std::span<Event> batch) { events.insert(events.end(), batch.begin(), batch.end()); });
    return events;
  }();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].track, other_track) << "kThreadTrack is replaced by the recording thread's track";
}

TEST(StringTable, SameTextSameIdFromManyThreads) {
  StringTable strings;
  constexpr int kThreads = 4, kNames = 5000;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kNames; ++i) ids[t][i] = strings.intern("name " + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint32_t> distinct;
  for (int i = 0; i < kNames; ++i) {
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(ids[t][i], ids[0][i]) << "name " << i;
    distinct.insert(ids[0][i]);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kNames));
  std::vector<std::pair<uint32_t, std::string_view>> out;
  StringTable::Cursor cursor;
  strings.collect(cursor, out);
  EXPECT_EQ(out.size(), static_cast<size_t>(kNames));
  for (const auto& [id, text] : out) EXPECT_EQ(ids[0][std::stoi(std::string(text.substr(5)))], id);
  // Collecting from where the last collect stopped gives only new names.
  out.clear();
  strings.intern("late");
  strings.collect(cursor, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].second, "late");
}

// A burst of names, faster than the writer thread wakes: the name that
// finds the newest segment full adds the next one itself.
TEST(StringTable, TheNameThatFindsItFullAddsASegment) {
  StringTable strings;
  uint32_t last = 0;
  for (uint32_t i = 0; i < StringTable::kFirstSegmentStrings; ++i) last = strings.intern("s" + std::to_string(i));
  EXPECT_NE(last, kNoId);
  EXPECT_EQ(strings.segments(), 1u);
  const uint32_t next = strings.intern("one more");
  EXPECT_EQ(next, StringTable::kFirstSegmentStrings) << "the first id of the second segment";
  EXPECT_EQ(strings.segments(), 2u);
  EXPECT_EQ(strings.text(next), "one more");
  EXPECT_EQ(strings.intern("s0"), 0u) << "known names still resolve";
  EXPECT_EQ(strings.intern("one more"), next);
}

TEST(StringTable, ANameBeyondTheRoomLeftIsRefusedWithoutASegment) {
  StringTable strings;
  const std::string huge(StringTable::kArenaBytes, 'x');
  EXPECT_EQ(strings.intern(huge + "y"), kNoId) << "a name beyond the arena is refused, not cut";
  EXPECT_EQ(strings.segments(), 1u) << "a segment with room to spare is not grown for one oversized name";
  std::vector<std::pair<uint32_t, std::string_view>> out;
  strings.intern("after");
  StringTable::Cursor cursor;
  strings.collect(cursor, out);
  ASSERT_EQ(out.size(), 1u) << "the refused name leaves a hole that collect skips";
  EXPECT_EQ(out[0].second, "after");
}

// A name per step, as a long job has: grown as the writer thread grows it
// (here every 1,000 names), the table takes 200,000 names in three
// segments, each name once, its id kept, and collect gives each once.
TEST(StringTable, GrownAheadOfNeedItTakesANamePerStepWithoutEnd) {
  StringTable strings;
  constexpr uint32_t kNames = 200'000;
  std::vector<uint32_t> ids(kNames);
  std::vector<std::pair<uint32_t, std::string_view>> out;
  StringTable::Cursor cursor;
  for (uint32_t i = 0; i < kNames; ++i) {
    ids[i] = strings.intern("ProfilerStep#" + std::to_string(i));
    ASSERT_NE(ids[i], kNoId) << "name " << i;
    if (i % 1000 == 999) {
      strings.grow();
      strings.collect(cursor, out);  // the writer thread writes as it goes
    }
  }
  strings.collect(cursor, out);
  EXPECT_EQ(strings.segments(), 3u);
  EXPECT_EQ(std::set<uint32_t>(ids.begin(), ids.end()).size(), size_t{kNames});
  for (uint32_t i = 0; i < kNames; i += 997) {
    EXPECT_EQ(strings.intern("ProfilerStep#" + std::to_string(i)), ids[i]) << "name " << i;
    EXPECT_EQ(strings.text(ids[i]), "ProfilerStep#" + std::to_string(i));
  }
  ASSERT_EQ(out.size(), size_t{kNames});
  std::set<uint32_t> collected;
  for (const auto& [id, text] : out) {
    collected.insert(id);
    EXPECT_EQ(strings.text(id), text);
  }
  EXPECT_EQ(collected.size(), size_t{kNames}) << "each name collected once";
}

// Long names fill a segment's text before its ids: 200-byte names, 40,000
// to the first segment's 8 MiB, grow the table on its text.
TEST(StringTable, LongNamesGrowItOnTheirText) {
  StringTable strings;
  constexpr uint32_t kNames = 100'000;
  for (uint32_t i = 0; i < kNames; ++i) {
    std::string name = "aten::convolution input shapes " + std::to_string(i);
    name.resize(200, '.');
    ASSERT_NE(strings.intern(name), kNoId) << "name " << i;
    if (i % 1000 == 999) strings.grow();
  }
  EXPECT_EQ(strings.segments(), 3u);
}

// Threads interning while the table grows and is collected, as the writer
// thread does both, the threads faster than it: every id they get names the
// text they asked for, none is refused, and collect gives every id once,
// whichever thread added each segment.
TEST(StringTable, GrowingWhileThreadsInternKeepsEveryNameRight) {
  StringTable strings;
  constexpr int kThreads = 3, kNames = 60'000;
  std::atomic<bool> done{false};
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  std::vector<std::pair<uint32_t, std::string_view>> out;
  StringTable::Cursor cursor;
  std::thread grower([&] {
    while (!done.load()) {
      strings.grow();
      strings.collect(cursor, out);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread its own names and the others' (half of each thread's are shared).
      for (int i = 0; i < kNames; ++i) ids[t][i] = strings.intern("n" + std::to_string(i % 2 ? i : i + t * kNames));
    });
  }
  for (auto& t : threads) t.join();
  done = true;
  grower.join();
  EXPECT_GE(strings.segments(), 2u);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kNames; ++i) {
      ASSERT_NE(ids[t][i], kNoId) << t << " " << i;
      ASSERT_EQ(strings.text(ids[t][i]), "n" + std::to_string(i % 2 ? i : i + t * kNames)) << t << " " << i;
    }
  }
  strings.collect(cursor, out);
  std::set<uint32_t> collected;
  for (const auto& [id, text] : out) {
    EXPECT_TRUE(collected.insert(id).second) << id;
    EXPECT_EQ(strings.text(id), text) << id;
  }
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kNames; i += 101) EXPECT_TRUE(collected.count(ids[t][i])) << t << " " << i;
  }
}

TEST(TrackTable, OneIdPerTypeObjectAndDevice) {
  TrackTable tracks;
  const uint32_t a = tracks.find_or_add(TrackType::kCudaStream, 7, 0, 1);
  EXPECT_EQ(tracks.find_or_add(TrackType::kCudaStream, 7, 0, 99), a);
  EXPECT_NE(tracks.find_or_add(TrackType::kCudaStream, 7, 1, 1), a);
  EXPECT_NE(tracks.find_or_add(TrackType::kNcclComm, 7, 0, 1), a);
  std::vector<Track> out;
  EXPECT_EQ(tracks.collect(0, out), 3u);
  EXPECT_EQ(out[a].name_id, 1u) << "the first name stays";
}

// The capture-source table names what --capture and RANKSCOPE_CAPTURE accept.
TEST(CaptureSources, ListsParseByTheTable) {
  EXPECT_EQ(parse_capture_list(kDefaultCapture), kCaptureMpi | kCaptureNvtx | kCapturePython);
  EXPECT_EQ(parse_capture_list("nccl,cuda,mpi"), kCaptureNccl | kCaptureCuda | kCaptureMpi);
  std::string_view unknown;
  EXPECT_EQ(parse_capture_list("mpi,gpu,hip", &unknown), kCaptureMpi);
  EXPECT_EQ(unknown, "gpu") << "the first unknown name";
  unknown = {};
  EXPECT_EQ(parse_capture_list("mpi,,nvtx", &unknown), kCaptureMpi | kCaptureNvtx);
  EXPECT_EQ(unknown, "(empty)");
  EXPECT_EQ(capture_source_label(kCaptureCuda), "CUDA");
}

}  // namespace
}  // namespace rankscope::agent
