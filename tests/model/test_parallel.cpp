// for_each_index: every index once, on several threads, errors passed on.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rankscope/model/parallel.h"

namespace rankscope {
namespace {

TEST(ParallelTest, EveryIndexIsVisitedOnceOnSeveralThreads) {
  std::vector<std::atomic<int>> visits(1000);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  for_each_index(visits.size(), 4, [&](size_t i) {
    ++visits[i];
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  for (const auto& v : visits) EXPECT_EQ(v, 1);
  EXPECT_LE(threads.size(), 4u);
}

TEST(ParallelTest, OneThreadIsTheCallingOne) {
  std::set<std::thread::id> threads;
  for_each_index(100, 1, [&](size_t) { threads.insert(std::this_thread::get_id()); });
  EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ParallelTest, NothingToDoStartsNoThread) {
  bool called = false;
  for_each_index(0, 8, [&](size_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ParallelTest, EveryIndexIsVisitedEvenAfterOneThrowsAndTheLowestErrorIsRethrown) {
  std::atomic<int> visited{0};
  try {
    for_each_index(100, 3, [&](size_t i) {
      ++visited;
      if (i == 70 || i == 30) throw std::runtime_error("index " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 30");
  }
  EXPECT_EQ(visited, 100);
}

TEST(ParallelTest, UsableCpusIsAtLeastOne) { EXPECT_GE(usable_cpus(), 1u); }

}  // namespace
}  // namespace rankscope
