// What the node's compute and memory checks run on: workers each held on a
// CPU (PinnedWorkers), so that what one touched first stays in its own
// socket's memory, and kept from run to run; a triad big enough to measure
// memory, not cache.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
std::vector<int> held_on(PinnedWorkers& workers) {
  std::vector<int> cpu(workers.size(), -2);
  workers.run([&](size_t t) {
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

TEST(PinnedWorkers, EveryWorkerIsHeldOnACpuOfItsOwn) {
  const std::vector<int> cpus = usable_cpus_by_core().cpus;  // every CPU allowed, in the order workers take them
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, allowed_cpus());
  PinnedWorkers workers(static_cast<int>(cpus.size()));
  EXPECT_EQ(held_on(workers), cpus);
}

TEST(PinnedWorkers, MoreWorkersThanCpusGoRoundTheCpusAgain) {
  const std::vector<int> cpus = usable_cpus_by_core().cpus;
  PinnedWorkers workers(static_cast<int>(2 * cpus.size() + 1));
  const std::vector<int> held = held_on(workers);
  for (size_t t = 0; t < held.size(); ++t) EXPECT_EQ(held[t], cpus[t % cpus.size()]) << "worker " << t;
}

// The same threads run after run: a run starts no thread, and what a worker touched stays its own.
TEST(PinnedWorkers, RunAfterRunOnTheSameThreads) {
  PinnedWorkers workers(3);
  std::vector<pthread_t> first(3), again(3);
  std::vector<int> ran(3, 0);
  workers.run([&](size_t t) { first[t] = pthread_self(), ++ran[t]; });
  for (int run = 0; run < 100; ++run) workers.run([&](size_t t) { again[t] = pthread_self(), ++ran[t]; });
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_TRUE(pthread_equal(first[t], again[t])) << "worker " << t;
    EXPECT_EQ(ran[t], 101) << "worker " << t;
  }
}

TEST(PinnedWorkers, TheCallersOwnCpusAreLeftAsTheyWere) {
  const std::vector<int> before = allowed_cpus();
  PinnedWorkers workers(3);
  held_on(workers);
  EXPECT_EQ(allowed_cpus(), before);
}

// A CPU folder as sysfs lists it: each CPU's caches, as (level, type, size, shared_cpu_list).
class CpuFolder {
 public:
  CpuFolder() : root_(std::filesystem::temp_directory_path() / ("rankscope-cpus-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "cpufreq");
    std::ofstream(root_ / "online") << "0-3\n";
  }
  ~CpuFolder() { std::filesystem::remove_all(root_); }
  void cache(int cpu, int index, int level, const std::string& type, const std::string& size, const std::string& shared) {
    const std::filesystem::path folder = root_ / ("cpu" + std::to_string(cpu)) / "cache" / ("index" + std::to_string(index));
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "level") << level << "\n";
    std::ofstream(folder / "type") << type << "\n";
    std::ofstream(folder / "size") << size << "\n";
    std::ofstream(folder / "shared_cpu_list") << shared << "\n";
  }
  std::string path() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

// A folder of CPUs' topology: each CPU's core, as core_cpus_list names it.
class TopologyFolder : public CpuFolder {
 public:
  void core(int cpu, const std::string& core_cpus) {
    const std::filesystem::path folder = std::filesystem::path(path()) / ("cpu" + std::to_string(cpu)) / "topology";
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "core_cpus_list") << core_cpus << "\n";
  }
};

TEST(CpusByCore, OneWorkerPerCoreFirstThenTheirSecondThreads) {
  TopologyFolder topology;  // 4 cores of 2 threads: CPU n and n + 4 share a core, as Linux numbers them
  for (int cpu = 0; cpu < 8; ++cpu) topology.core(cpu, std::to_string(cpu % 4) + "," + std::to_string(cpu % 4 + 4));
  const CpusByCore all = cpus_by_core({0, 1, 2, 3, 4, 5, 6, 7}, topology.path());
  EXPECT_EQ(all.cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(all.cores, 4);
  // Siblings numbered next to each other; a core of which the job may use one thread only.
  TopologyFolder paired;
  for (int cpu = 0; cpu < 8; ++cpu) paired.core(cpu, std::to_string(cpu / 2 * 2) + "-" + std::to_string(cpu / 2 * 2 + 1));
  const CpusByCore some = cpus_by_core({0, 1, 2, 3, 5}, paired.path());
  EXPECT_EQ(some.cpus, (std::vector<int>{0, 2, 5, 1, 3}));
  EXPECT_EQ(some.cores, 3);
}

TEST(CpusByCore, CpusWithoutTopologyAreCoresOfTheirOwn) {
  CpuFolder empty;
  const CpusByCore cpus = cpus_by_core({0, 3, 7}, empty.path());
  EXPECT_EQ(cpus.cpus, (std::vector<int>{0, 3, 7}));
  EXPECT_EQ(cpus.cores, 3);
}

TEST(LastLevelCache, EachCacheOfTheHighestLevelCountsOnce) {
  CpuFolder cpus;
  for (int cpu = 0; cpu < 4; ++cpu) {  // two dies of two cores, 32 MiB of L3 each
    cpus.cache(cpu, 0, 1, "Data", "32K", std::to_string(cpu));
    cpus.cache(cpu, 1, 1, "Instruction", "32K", std::to_string(cpu));
    cpus.cache(cpu, 2, 2, "Unified", "1024K", std::to_string(cpu));
    cpus.cache(cpu, 3, 3, "Unified", "32768K", cpu < 2 ? "0-1" : "2-3");
  }
  EXPECT_EQ(last_level_cache_bytes(cpus.path()), size_t{64} << 20);
}

TEST(LastLevelCache, WithoutAnL3TheL2sCount) {
  CpuFolder cpus;
  for (int cpu = 0; cpu < 4; ++cpu) {
    cpus.cache(cpu, 0, 1, "Data", "48K", std::to_string(cpu));
    cpus.cache(cpu, 1, 2, "Unified", "2M", cpu % 2 == 0 ? std::to_string(cpu) + "-" + std::to_string(cpu + 1)
                                                       : std::to_string(cpu - 1) + "-" + std::to_string(cpu));
  }
  EXPECT_EQ(last_level_cache_bytes(cpus.path()), size_t{4} << 20);
}

TEST(LastLevelCache, NoneListedIsNone) {
  CpuFolder cpus;
  EXPECT_EQ(last_level_cache_bytes(cpus.path()), 0u);
  EXPECT_EQ(last_level_cache_bytes("/no/such/folder"), 0u);
}

TEST(TriadBytes, EachArrayFourTimesTheLargestCacheWithinAQuarterOfMemory) {
  constexpr size_t MiB = size_t{1} << 20, GiB = size_t{1} << 30;
  EXPECT_EQ(triad_bytes_for(96 * MiB, 4 * MiB, 64 * GiB), 96 * MiB);           // a small cache: the level's size
  EXPECT_EQ(triad_bytes_for(96 * MiB, 32 * MiB, 64 * GiB), 384 * MiB);         // 3 arrays of 4 × 32 MiB
  EXPECT_EQ(triad_bytes_for(768 * MiB, 768 * MiB, 1536 * GiB), 9 * GiB);       // two EPYC sockets of 384 MiB
  EXPECT_EQ(triad_bytes_for(96 * MiB, 768 * MiB, 16 * GiB), 4 * GiB);          // but a quarter of memory at most
  EXPECT_EQ(triad_bytes_for(96 * MiB, 768 * MiB, 128 * MiB), 96 * MiB);        // and never less than the level's
}

}  // namespace
}  // namespace rankscope::acceptance
