// The node's compute and memory checks run their workers through
// on_each_cpu: each held on a CPU, so that what it touched first stays in
// its own socket's memory.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <mutex>
#include <set>
#include <vector>

#include "rankscope/acceptance/measure.h"

namespace rankscope::acceptance {
namespace {

std::vector<int> allowed_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  EXPECT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  return cpus;
}

// Each worker's own affinity: the one CPU it is held on, or -1 where it may run on several.
std::vector<int> held_on(int threads) {
  std::vector<int> cpu(static_cast<size_t>(threads), -2);
  on_each_cpu(threads, [&](size_t t) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine);
    cpu[t] = -1;
    if (CPU_COUNT(&mine) == 1)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &mine)) cpu[t] = c;
  });
  return cpu;
}

TEST(OnEachCpu, EveryWorkerIsHeldOnACpuOfItsOwn) {
  const std::vector<int> cpus = allowed_cpus();
  EXPECT_EQ(held_on(static_cast<int>(cpus.size())), cpus);
}

TEST(OnEachCpu, MoreWorkersThanCpusGoRoundTheCpusAgain) {
  const std::vector<int> cpus = allowed_cpus();
  const std::vector<int> held = held_on(static_cast<int>(2 * cpus.size() + 1));
  for (size_t t = 0; t < held.size(); ++t) EXPECT_EQ(held[t], cpus[t % cpus.size()]) << "worker " << t;
}

TEST(OnEachCpu, TheCallersOwnCpusAreLeftAsTheyWere) {
  const std::vector<int> before = allowed_cpus();
  held_on(3);
  EXPECT_EQ(allowed_cpus(), before);
}

}  // namespace
}  // namespace rankscope::acceptance
