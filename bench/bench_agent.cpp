// The rank agent's hot path, measured with the real capture library loaded
// and capturing: rankscope_agent_record from 1, 2 and 4 threads, the clock
// and string-table calls every capture source makes, and an NVTX push/pop
// range through the NVTX3 header API with the agent injected.
//
// The capture library starts only in the process `rankscope run` names, so
// run this through bench/agent_bench.sh (which sets RANKSCOPE_SHARD_DIR,
// RANKSCOPE_AGENT_PID=$$, RANKSCOPE_CAPTURE and NVTX_INJECTION64_PATH), or:
//   export RANKSCOPE_SHARD_DIR=/tmp/x RANKSCOPE_CAPTURE=mpi,nvtx
//   export NVTX_INJECTION64_PATH=$PWD/build/rank_agent/librankscope_capture.so
//   sh -c 'RANKSCOPE_AGENT_PID=$$ exec build/bench/bench_agent'
// Run without that environment, only the NVTX benchmarks run: the same calls
// with no profiler injected, the baseline.
//
// Benchmarks marked paced:1 keep the agent's backlog under half its pool
// (agent_bench_support.h) so nothing is dropped: that is the steady-state
// cost. paced:0 records flat out: the pool fills, most events take the drop
// path, and shard_MB/s is then the most the flusher writes.
#include <benchmark/benchmark.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <cstdio>
#include <cstring>
#include <string>

#include "agent_bench_support.h"
#include "rankscope/rank_agent/agent.h"

#ifndef RANKSCOPE_HAVE_NVTX
#define RANKSCOPE_HAVE_NVTX 0
#endif
#if RANKSCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace {

using agent_bench::kBatch;
using rankscope::Event;

agent_bench::Pacer g_pacer;
agent_bench::Tally g_tally;

bool agent_capturing() { return rankscope_agent_shard_path()[0] != '\0'; }

uint32_t intern(const char* text) { return rankscope_agent_intern(text, std::strlen(text)); }

Event prebuilt_event(uint32_t name_id) {
  Event e{};
  e.begin_ns = e.end_ns = rankscope_agent_now();
  e.kind = rankscope::EventKind::kInstant;
  e.name_id = name_id;
  e.track = rankscope::agent::kThreadTrack;
  e.peer = rankscope::kNoPeer;
  return e;
}

// ------------------------------------------------------------- record ---

void BM_Record(benchmark::State& state) {
  const bool paced = state.range(0) != 0;
  if (!agent_capturing()) {
    state.SkipWithError("the agent is not capturing in this process: run bench/agent_bench.sh");
    return;
  }
  const std::string label = std::string("record ") + (paced ? "paced" : "flat out");
  const uint32_t name_id = intern(label.c_str());
  if (state.thread_index() == 0) g_pacer.begin_run(paced);
  Event e = prebuilt_event(name_id);
  uint64_t in_batch = 0;
  for (auto _ : state) {
    ++e.begin_ns;
    ++e.end_ns;
    rankscope_agent_record(&e);
    if (++in_batch == kBatch) {
      in_batch = 0;
      g_pacer.recorded(state, kBatch);
    }
  }
  g_tally.add(name_id, label, state.iterations());
  if (state.thread_index() == 0) g_pacer.end_run(state);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// ------------------------------------------- what the sources call ---

void BM_AgentNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(rankscope_agent_now());
}

void BM_ClockGettime(benchmark::State& state) {
  const auto clock = static_cast<clockid_t>(state.range(0));
  timespec ts;
  for (auto _ : state) {
    clock_gettime(clock, &ts);
    benchmark::DoNotOptimize(ts);
  }
  state.SetLabel(clock == CLOCK_MONOTONIC_RAW ? "CLOCK_MONOTONIC_RAW" : "CLOCK_MONOTONIC");
}

#if defined(__x86_64__)
// The TSC read that clock_gettime's vDSO does underneath, for comparison.
void BM_Rdtsc(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(__rdtsc());
}
#endif

// Interning a name already in the table: what an NVTX push with an ASCII
// message pays on every call.
void BM_AgentIntern(benchmark::State& state) {
  if (!agent_capturing()) {
    state.SkipWithError("the agent is not capturing in this process: run bench/agent_bench.sh");
    return;
  }
  const std::string text = state.range(0) <= 4 ? "name" : "DistributedDataParallel.forward";
  const char* data = text.c_str();
  const uint64_t length = text.size();
  for (auto _ : state) benchmark::DoNotOptimize(rankscope_agent_intern(data, length));
  state.SetLabel(std::to_string(length) + " bytes");
}

// What a blocking MPI collective adds for a hang's dump: showing its event
// as the thread's call in progress, and clearing it when the call returns.
void BM_CallInProgress(benchmark::State& state) {
  rankscope::agent::CallInProgress* call = rankscope_agent_call_in_progress();
  if (!call) {
    state.SkipWithError("the agent is not capturing in this process: run bench/agent_bench.sh");
    return;
  }
  Event e = prebuilt_event(intern("collective"));
  for (auto _ : state) {
    ++e.seq;
    call->enter(e);
    benchmark::ClobberMemory();
    call->leave();
  }
}

// --------------------------------------------------------------- NVTX ---

#if RANKSCOPE_HAVE_NVTX

// One range per iteration, through the header's inline API: the agent's
// handlers when it is injected, NVTX's no-op otherwise.
void BM_NvtxPushPop(benchmark::State& state) {
  const bool long_name = state.range(0) != 0;
  const char* name = long_name ? "DistributedDataParallel.forward" : "name";
  const bool capturing = agent_capturing();
  if (state.thread_index() == 0) g_pacer.begin_run(true);
  uint64_t in_batch = 0;
  for (auto _ : state) {
    nvtxRangePushA(name);
    nvtxRangePop();
    if (++in_batch == kBatch) {
      in_batch = 0;
      g_pacer.recorded(state, kBatch);
    }
  }
  if (capturing) g_tally.add(intern(name), std::string("NVTX push/pop \"") + name + "\"", state.iterations());
  if (state.thread_index() == 0) g_pacer.end_run(state);
  state.SetLabel(capturing ? "agent injected" : "no injection");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

// The same with a registered string in a domain (nvtxDomainRangePushEx), as
// a training loop that registers its names up front does: no name lookup.
void BM_NvtxDomainPushPopRegistered(benchmark::State& state) {
  const char* name = "DistributedDataParallel.forward registered";
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("bench_agent");
  static nvtxStringHandle_t registered = nvtxDomainRegisterStringA(domain, name);
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = registered;
  const bool capturing = agent_capturing();
  if (state.thread_index() == 0) g_pacer.begin_run(true);
  uint64_t in_batch = 0;
  for (auto _ : state) {
    nvtxDomainRangePushEx(domain, &attributes);
    nvtxDomainRangePop(domain);
    if (++in_batch == kBatch) {
      in_batch = 0;
      g_pacer.recorded(state, kBatch);
    }
  }
  if (capturing) g_tally.add(intern(name), "NVTX domain push/pop, registered string", state.iterations());
  if (state.thread_index() == 0) g_pacer.end_run(state);
  state.SetLabel(capturing ? "agent injected" : "no injection");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

#endif

// Touches every block of the pool the paced runs will use, so that no run
// pays the first-touch page faults of the agent's mapping.
void warm_up() {
  const uint32_t name_id = intern("warm-up");
  const uint64_t events = 2 * (agent_bench::env_u64("RANKSCOPE_BUFFER_MB", 64) << 20) / agent_bench::kEventBytes;
  g_pacer.begin_run(true);
  Event e = prebuilt_event(name_id);
  for (uint64_t done = 0; done < events; done += kBatch) {
    for (uint64_t i = 0; i < kBatch; ++i) {
      ++e.begin_ns;
      ++e.end_ns;
      rankscope_agent_record(&e);
    }
    g_pacer.recorded(kBatch);
  }
  g_tally.add(name_id, "warm-up", events);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const bool capturing = agent_capturing();
  g_pacer.init(rankscope_agent_shard_path());
  std::printf("agent: %s; shard %s; RANKSCOPE_BUFFER_MB=%s RANKSCOPE_FLUSH_MS=%s; NVTX %s\n",
              capturing ? "capturing" : "not capturing (baseline run)", capturing ? rankscope_agent_shard_path() : "-",
              std::getenv("RANKSCOPE_BUFFER_MB") ? std::getenv("RANKSCOPE_BUFFER_MB") : "(64)",
              std::getenv("RANKSCOPE_FLUSH_MS") ? std::getenv("RANKSCOPE_FLUSH_MS") : "(200)",
              !RANKSCOPE_HAVE_NVTX                   ? "not built"
              : std::getenv("NVTX_INJECTION64_PATH") ? "injection set"
                                                     : "no injection");
  std::fflush(stdout);
  if (capturing) warm_up();

  // Paced: 4 Mi events per run whatever the thread count (iterations are per thread).
  constexpr int64_t kPacedEvents = 4 << 20;
  for (int threads : {1, 2, 4}) {
    benchmark::RegisterBenchmark("BM_Record", BM_Record)
        ->ArgName("paced")->Arg(1)->Threads(threads)->Iterations(kPacedEvents / threads);
  }
  // Flat out: long enough for the flusher to wake several times.
  for (int threads : {1, 2, 4}) {
    benchmark::RegisterBenchmark("BM_Record", BM_Record)->ArgName("paced")->Arg(0)->Threads(threads)->MinTime(1.0);
  }
  benchmark::RegisterBenchmark("BM_AgentNow", BM_AgentNow);
#if defined(__x86_64__)
  benchmark::RegisterBenchmark("BM_Rdtsc", BM_Rdtsc);
#endif
  benchmark::RegisterBenchmark("BM_ClockGettime", BM_ClockGettime)
      ->Arg(CLOCK_MONOTONIC_RAW)->Arg(CLOCK_MONOTONIC);
  benchmark::RegisterBenchmark("BM_AgentIntern", BM_AgentIntern)->Arg(4)->Arg(31);
  benchmark::RegisterBenchmark("BM_CallInProgress", BM_CallInProgress);
#if RANKSCOPE_HAVE_NVTX
  benchmark::RegisterBenchmark("BM_NvtxPushPop", BM_NvtxPushPop)
      ->ArgName("long_name")->Arg(0)->Arg(1)->Iterations(kPacedEvents);
  benchmark::RegisterBenchmark("BM_NvtxDomainPushPopRegistered", BM_NvtxDomainPushPopRegistered)
      ->Iterations(kPacedEvents);
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  if (capturing) {
    const std::string shard = rankscope_agent_shard_path();
    if (!rankscope_agent_finish()) std::printf("the agent did not finish its shard cleanly\n");
    g_tally.report(shard);
    if (g_pacer.stalls()) {
      std::printf("pacing gave up waiting %llu times (events were dropped in a paced run)\n",
                  static_cast<unsigned long long>(g_pacer.stalls()));
    }
  }
  return 0;
}
