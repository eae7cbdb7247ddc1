// A program that trains like a PyTorch job on NCCL, for sidecar mode, where
// no GPU and no NCCL exist: it loads the profiler plugin NCCL_PROFILER_PLUGIN
// names as NCCL does and makes NCCL's calls to it for an all-reduce per
// iteration (the task enqueued, then its two kernel channels start, and stop
// once every rank has entered, as a real kernel waits for its peers). The
// ranks meet through files in a shared folder; the GPU clock is
// CLOCK_REALTIME, as %globaltimer is. One rank may sleep before one
// iteration: the others' kernels then spin in that all-reduce.
// Usage: nccl_hang_app FOLDER ITERATIONS [LATE_RANK LATE_ITERATION SLEEP_S]
// (RANK and WORLD_SIZE from the environment, as torch.distributed reads them).
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "nccl_profiler_abi.h"

namespace abi = rankscope::nccl_profiler;

namespace {

uint64_t gpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

int env_int(const char* name) {
  const char* text = std::getenv(name);
  return text ? std::atoi(text) : -1;
}

// Every rank's file for this iteration, as the kernels' peers.
void wait_for_peers(const std::string& folder, int iteration, int rank, int world) {
  const std::string prefix = folder + "/" + std::to_string(iteration) + ".";
  if (FILE* f = std::fopen((prefix + std::to_string(rank)).c_str(), "w")) std::fclose(f);
  for (int peer = 0; peer < world; ++peer) {
    while (access((prefix + std::to_string(peer)).c_str(), F_OK) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 6) {
    std::fprintf(stderr, "usage: nccl_hang_app FOLDER ITERATIONS [LATE_RANK LATE_ITERATION SLEEP_S]\n");
    return 2;
  }
  const std::string folder = argv[1];
  const int iterations = std::atoi(argv[2]);
  const int late_rank = argc == 6 ? std::atoi(argv[3]) : -1;
  const int late_iteration = argc == 6 ? std::atoi(argv[4]) : -1;
  const int sleep_s = argc == 6 ? std::atoi(argv[5]) : 0;
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  const char* path = std::getenv("NCCL_PROFILER_PLUGIN");
  if (rank < 0 || world < 1 || !path) {
    std::fprintf(stderr, "nccl_hang_app: needs RANK, WORLD_SIZE and NCCL_PROFILER_PLUGIN\n");
    return 2;
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto* profiler = library ? static_cast<abi::ProfilerV5*>(dlsym(library, "ncclProfiler_v5")) : nullptr;
  if (!profiler) {
    std::fprintf(stderr, "nccl_hang_app: no ncclProfiler_v5 in %s\n", path);
    return 2;
  }
  void* context = nullptr;
  int mask = 0;
  profiler->init(&context, 0x5eed'0000'0000'0001, &mask, "world", 1, world, rank, nullptr);
  // The ranks start apart (a loaded machine, sidecars each starting a
  // program): they meet first, outside any collective.
  wait_for_peers(folder, -1, rank, world);
  for (int i = 0; i < iterations; ++i) {
    if (rank == late_rank && i == late_iteration) std::this_thread::sleep_for(std::chrono::seconds(sleep_s));
    abi::EventDescrV5 coll{};
    coll.type = abi::kProfileColl;
    coll.rank = rank;
    coll.coll.seqNumber = uint64_t(i);
    coll.coll.func = "AllReduce";
    coll.coll.count = 1 << 20;
    coll.coll.datatype = "ncclFloat32";
    coll.coll.nChannels = 2;
    coll.coll.algo = "RING";
    coll.coll.proto = "SIMPLE";
    void* task = nullptr;
    profiler->startEvent(context, &task, &coll);
    profiler->stopEvent(task);  // enqueued
    void* channels[2] = {};
    for (uint8_t c = 0; c < 2; ++c) {
      abi::EventDescrV5 channel{};
      channel.type = abi::kProfileKernelCh;
      channel.parentObj = task;
      channel.kernelCh.channelId = c;
      channel.kernelCh.pTimer = gpu_now();
      profiler->startEvent(nullptr, &channels[c], &channel);
    }
    wait_for_peers(folder, i, rank, world);
    for (void* channel : channels) {
      abi::StateArgsV5 args{};
      args.kernelCh.pTimer = gpu_now();
      profiler->recordEventState(channel, abi::kStateKernelChStop, &args);
      profiler->stopEvent(channel);
    }
  }
  profiler->finalize(context);
  std::printf("nccl_hang_app: rank %d: %d all-reduces\n", rank, iterations);
  return 0;
}
