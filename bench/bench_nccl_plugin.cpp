// What NCCL pays per profiler callback when the capture library is its
// profiler plugin and the agent captures: a collective's Coll start + stop
// (one enqueue event recorded), and a collective with 8 kernel channels, each
// a KernelCh start + KernelChStop state + stop (plus the collective's GPU
// event, recorded by its last channel), from 1, 2 and 4 threads, each thread
// on its own communicator as NCCL's user and proxy threads are. No GPU: the
// calls carry the descriptors NCCL 2.28 passes, with %globaltimer stamps
// taken from CLOCK_REALTIME as a GPU's would be.
//
// The tables are found as NCCL finds them (dlopen of NCCL_PROFILER_PLUGIN,
// dlsym of ncclProfiler_v5), and the library captures only in the process
// `rankscope run` names, so run it as a rank:
//   export RANKSCOPE_SHARD_DIR=/tmp/nccl-bench RANKSCOPE_CAPTURE=nccl
//   export NCCL_PROFILER_PLUGIN=$PWD/build/rank_agent/librankscope_capture.so
//   sh -c 'RANKSCOPE_AGENT_PID=$$ exec build/bench/bench_nccl_plugin'
// Benchmarks keep the agent's backlog under half its pool (agent_bench_support.h),
// so nothing is dropped: the figures are the steady-state cost. The cost per
// channel is (BM_CollectiveWith8Channels - BM_CollStartStop) / 8.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent_bench_support.h"
#include "nccl_profiler_abi.h"
#include "rankscope/rank_agent/agent.h"

namespace {

namespace abi = rankscope::nccl_profiler;
using agent_bench::kBatch;

constexpr int kMaxThreads = 4;
constexpr int kChannels = 8;

agent_bench::Pacer g_pacer;
agent_bench::Tally g_tally;
abi::ProfilerV5* g_plugin = nullptr;
void* g_communicators[kMaxThreads] = {};

uint64_t gpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

abi::EventDescrV5 all_reduce(uint64_t seq, uint8_t channels) {
  abi::EventDescrV5 d{};
  d.type = abi::kProfileColl;
  d.coll.seqNumber = seq;
  d.coll.func = "AllReduce";
  d.coll.count = 1 << 20;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = channels;
  d.coll.algo = "RING";
  d.coll.proto = "SIMPLE";
  return d;
}

bool ready(benchmark::State& state) {
  if (g_plugin && g_pacer.capturing()) return true;
  state.SkipWithError("the agent is not capturing NCCL in this process: see the comment at the top");
  return false;
}

uint32_t intern(const char* text) { return rankscope_agent_intern(text, std::strlen(text)); }

void BM_CollStartStop(benchmark::State& state) {
  if (!ready(state)) return;
  void* comm = g_communicators[state.thread_index()];
  abi::EventDescrV5 descr = all_reduce(0, 0);
  if (state.thread_index() == 0) g_pacer.begin_run(true);
  uint64_t in_batch = 0;
  for (auto _ : state) {
    void* handle = nullptr;
    g_plugin->startEvent(comm, &handle, &descr);
    g_plugin->stopEvent(handle);
    ++descr.coll.seqNumber;
    if (++in_batch == kBatch) {
      in_batch = 0;
      g_pacer.recorded(state, kBatch);
    }
  }
  g_tally.add(intern("ncclAllReduce"), "ncclAllReduce (enqueue and GPU events)", state.iterations());
  if (state.thread_index() == 0) g_pacer.end_run(state);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// One collective per iteration: its Coll start + stop, then its channels as
// the profiler proxy reports them. Two events recorded.
void BM_CollectiveWith8Channels(benchmark::State& state) {
  if (!ready(state)) return;
  void* comm = g_communicators[state.thread_index()];
  abi::EventDescrV5 descr = all_reduce(0, kChannels);
  abi::EventDescrV5 channel{};
  channel.type = abi::kProfileKernelCh;
  abi::StateArgsV5 stop_time{};
  // GPU stamps a millisecond old, as the proxy finds them: none is later than its callback.
  uint64_t gpu = gpu_now() - 1'000'000;
  if (state.thread_index() == 0) g_pacer.begin_run(true);
  uint64_t in_batch = 0;
  for (auto _ : state) {
    void* task = nullptr;
    g_plugin->startEvent(comm, &task, &descr);
    g_plugin->stopEvent(task);
    channel.parentObj = task;
    for (uint8_t c = 0; c < kChannels; ++c) {
      void* handle = nullptr;
      channel.kernelCh.channelId = c;
      channel.kernelCh.pTimer = gpu + c;
      g_plugin->startEvent(comm, &handle, &channel);
      stop_time.kernelCh.pTimer = gpu + 100 + c;
      g_plugin->recordEventState(handle, abi::kStateKernelChStop, &stop_time);
      g_plugin->stopEvent(handle);
    }
    ++descr.coll.seqNumber;
    ++gpu;
    in_batch += 2;
    if (in_batch >= kBatch) {
      in_batch = 0;
      g_pacer.recorded(state, kBatch);
    }
  }
  g_tally.add(intern("ncclAllReduce"), "ncclAllReduce (enqueue and GPU events)", 2 * state.iterations());
  if (state.thread_index() == 0) g_pacer.end_run(state);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// Touches every block of the pool the runs will use, so that no run pays the
// first-touch page faults of the agent's mapping.
void warm_up() {
  const uint64_t events = 2 * (agent_bench::env_u64("RANKSCOPE_BUFFER_MB", 64) << 20) / agent_bench::kEventBytes;
  abi::EventDescrV5 descr = all_reduce(0, 0);
  g_pacer.begin_run(true);
  for (uint64_t done = 0; done < events; done += kBatch) {
    for (uint64_t i = 0; i < kBatch; ++i) {
      void* handle = nullptr;
      g_plugin->startEvent(g_communicators[0], &handle, &descr);
      g_plugin->stopEvent(handle);
    }
    g_pacer.recorded(kBatch);
  }
  g_tally.add(intern("ncclAllReduce"), "ncclAllReduce (enqueue and GPU events)", events);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* path = std::getenv("NCCL_PROFILER_PLUGIN");
  void* library = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (library) g_plugin = static_cast<abi::ProfilerV5*>(dlsym(library, "ncclProfiler_v5"));
  const bool capturing = g_plugin && rankscope_agent_capturing(rankscope::agent::kCaptureNccl);
  g_pacer.init(capturing ? rankscope_agent_shard_path() : "");
  int mask = 0;
  if (capturing) {
    for (int t = 0; t < kMaxThreads; ++t) {
      const std::string name = "bench " + std::to_string(t);
      g_plugin->init(&g_communicators[t], 0xbe9c0000 + t, &mask, name.c_str(), 1, 2, 0, nullptr);
    }
  }
  std::printf("NCCL plugin: %s; activation mask %d; shard %s\n",
              !g_plugin   ? "not loaded (NCCL_PROFILER_PLUGIN unset or not loadable)"
              : capturing ? "capturing"
                          : "loaded, not capturing",
              mask, capturing ? rankscope_agent_shard_path() : "-");
  std::fflush(stdout);
  if (capturing) warm_up();

  constexpr int64_t kCollectives = 1 << 21;  // per run, whatever the thread count
  for (int threads : {1, 2, 4}) {
    benchmark::RegisterBenchmark("BM_CollStartStop", BM_CollStartStop)
        ->Threads(threads)->Iterations(kCollectives / threads);
  }
  for (int threads : {1, 2, 4}) {
    benchmark::RegisterBenchmark("BM_CollectiveWith8Channels", BM_CollectiveWith8Channels)
        ->Threads(threads)->Iterations(kCollectives / 4 / threads);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  if (capturing) {
    for (void* comm : g_communicators) g_plugin->finalize(comm);
    const std::string shard = rankscope_agent_shard_path();
    if (!rankscope_agent_finish()) std::printf("the agent did not finish its shard cleanly\n");
    g_tally.report(shard);
  }
  return 0;
}
