// The MPI shim's cost per captured call: cheap MPI calls, each of which the
// shim records, run as an MPI singleton, once plain and once under
//   rankscope run --mode inprocess -o OUT.h5 -- build/bench/bench_agent_mpi
// which preloads librankscope_mpi.so and librankscope_capture.so and names
// this process as the one that captures. The difference between the two runs
// is the capture cost. bench/agent_bench.sh runs both.
//
// This binary is not linked against the agent: it finds the agent's C ABI
// with dlsym when the preload put it there. Captured runs are paced (see
// agent_bench_support.h) so that nothing is dropped, and end with the count
// of events the shard holds per call, before MPI_Finalize merges it.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "agent_bench_support.h"

namespace {

using agent_bench::kBatch;

// The agent's C ABI (rank_agent/include/rankscope/agent.h), when preloaded.
struct AgentAbi {
  const char* (*shard_path)() = nullptr;
  uint32_t (*intern)(const char*, uint64_t) = nullptr;
  bool (*finish)() = nullptr;

  void resolve() {
    shard_path = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "rankscope_agent_shard_path"));
    intern = reinterpret_cast<uint32_t (*)(const char*, uint64_t)>(dlsym(RTLD_DEFAULT, "rankscope_agent_intern"));
    finish = reinterpret_cast<bool (*)()>(dlsym(RTLD_DEFAULT, "rankscope_agent_finish"));
  }
  bool capturing() const { return shard_path && intern && finish && shard_path()[0] != '\0'; }
  uint32_t id(const char* name) const { return intern(name, std::strlen(name)); }
};

AgentAbi g_agent;
agent_bench::Pacer g_pacer;
agent_bench::Tally g_tally;

// Runs `call` once per iteration; each call records `events` events when
// captured, named `names` (the shim names an event after its MPI call).
template <typename Call>
void run_calls(benchmark::State& state, Call&& call, std::initializer_list<std::pair<const char*, uint64_t>> names) {
  uint64_t per_call = 0;
  for (const auto& [name, count] : names) per_call += count;
  g_pacer.begin_run(true);
  uint64_t in_batch = 0;
  for (auto _ : state) {
    call();
    if (++in_batch == kBatch) {
      in_batch = 0;
      g_pacer.recorded(state, kBatch * per_call);
    }
  }
  if (g_agent.capturing()) {
    for (const auto& [name, count] : names) g_tally.add(g_agent.id(name), name, state.iterations() * count);
  }
  g_pacer.end_run(state);
  state.SetLabel(g_agent.capturing() ? "shim preloaded, capturing" : "no preload");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

void BM_MpiBarrierSelf(benchmark::State& state) {
  run_calls(state, [] { MPI_Barrier(MPI_COMM_SELF); }, {{"MPI_Barrier", 1}});
}

// MPI_COMM_WORLD of a singleton: the shim knows it without an attribute lookup.
void BM_MpiBarrierWorld(benchmark::State& state) {
  run_calls(state, [] { MPI_Barrier(MPI_COMM_WORLD); }, {{"MPI_Barrier", 1}});
}

void BM_MpiAllreduceSelf(benchmark::State& state) {
  int in = 1, out = 0;
  run_calls(state, [&] { MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF); }, {{"MPI_Allreduce", 1}});
  benchmark::DoNotOptimize(out);
}

// A nonblocking collective and its Wait: three events (the post, the Wait,
// and the collective from post to completion on the communicator's track).
void BM_MpiIallreduceWaitSelf(benchmark::State& state) {
  int in = 1, out = 0;
  run_calls(
      state,
      [&] {
        MPI_Request request;
        MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      },
      {{"MPI_Iallreduce", 2}, {"MPI_Wait", 1}});
  benchmark::DoNotOptimize(out);
}

// A message to itself: the send completes eagerly, and the receive finds it.
// Two events; both show as the thread's call in progress while inside.
void BM_MpiSendRecvSelf(benchmark::State& state) {
  int out = 1, in = 0;
  run_calls(
      state,
      [&] {
        MPI_Send(&out, 1, MPI_INT, 0, 7, MPI_COMM_SELF);
        MPI_Recv(&in, 1, MPI_INT, 0, 7, MPI_COMM_SELF, MPI_STATUS_IGNORE);
      },
      {{"MPI_Send", 1}, {"MPI_Recv", 1}});
  benchmark::DoNotOptimize(in);
}

// A halo exchange's call, with itself: two events (its send and its
// receive); shown as its receive while inside.
void BM_MpiSendrecvSelf(benchmark::State& state) {
  int out = 1, in = 0;
  run_calls(
      state,
      [&] { MPI_Sendrecv(&out, 1, MPI_INT, 0, 7, &in, 1, MPI_INT, 0, 7, MPI_COMM_SELF, MPI_STATUS_IGNORE); },
      {{"MPI_Sendrecv", 2}});
  benchmark::DoNotOptimize(in);
}

// Polling a request that does not complete, as ddp_sim does after every
// backward layer: the shim records nothing, but still wraps the call.
void BM_MpiTestallPending(benchmark::State& state) {
  int buffer = 0;
  MPI_Request requests[1];
  MPI_Irecv(&buffer, 1, MPI_INT, 0, 12345, MPI_COMM_SELF, &requests[0]);
  run_calls(
      state,
      [&] {
        int flag = 0;
        MPI_Testall(1, requests, &flag, MPI_STATUSES_IGNORE);
        benchmark::DoNotOptimize(flag);
      },
      {});
  MPI_Cancel(&requests[0]);
  MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  benchmark::Initialize(&argc, argv);
  g_agent.resolve();
  const bool capturing = g_agent.capturing();
  g_pacer.init(capturing ? g_agent.shard_path() : "");
  std::printf("MPI shim and agent: %s\n", capturing ? (std::string("capturing into ") + g_agent.shard_path()).c_str()
                                                    : "not loaded (baseline run)");
  std::fflush(stdout);

  benchmark::RegisterBenchmark("BM_MpiBarrierSelf", BM_MpiBarrierSelf);
  benchmark::RegisterBenchmark("BM_MpiBarrierWorld", BM_MpiBarrierWorld);
  benchmark::RegisterBenchmark("BM_MpiAllreduceSelf", BM_MpiAllreduceSelf);
  benchmark::RegisterBenchmark("BM_MpiIallreduceWaitSelf", BM_MpiIallreduceWaitSelf);
  benchmark::RegisterBenchmark("BM_MpiSendRecvSelf", BM_MpiSendRecvSelf);
  benchmark::RegisterBenchmark("BM_MpiSendrecvSelf", BM_MpiSendrecvSelf);
  benchmark::RegisterBenchmark("BM_MpiTestallPending", BM_MpiTestallPending);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  if (capturing) {
    const std::string shard = g_agent.shard_path();
    if (!g_agent.finish()) std::printf("the agent did not finish its shard cleanly\n");
    g_tally.report(shard);
    if (g_pacer.stalls()) {
      std::printf("pacing gave up waiting %llu times (events were dropped in a paced run)\n",
                  static_cast<unsigned long long>(g_pacer.stalls()));
    }
  }
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
