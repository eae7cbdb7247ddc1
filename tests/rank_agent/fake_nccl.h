// NCCL's calls to its profiler plugin, for test programs where no GPU and no
// NCCL exist: the plugin NCCL_PROFILER_PLUGIN names, loaded as NCCL loads it,
// one communicator, and each task enqueued, its kernel's channels started
// and stopped. The GPU clock is CLOCK_REALTIME, as %globaltimer is.
#pragma once

#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "nccl_profiler_abi.h"

namespace fake_nccl {

namespace abi = rankscope::nccl_profiler;

inline uint64_t gpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

// The plugin NCCL_PROFILER_PLUGIN names, or nullptr with a line saying why.
inline abi::ProfilerV5* load_plugin(const char* program) {
  const char* path = std::getenv("NCCL_PROFILER_PLUGIN");
  if (!path) {
    std::fprintf(stderr, "%s: needs NCCL_PROFILER_PLUGIN\n", program);
    return nullptr;
  }
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto* profiler = library ? static_cast<abi::ProfilerV5*>(dlsym(library, "ncclProfiler_v5")) : nullptr;
  if (!profiler) std::fprintf(stderr, "%s: no ncclProfiler_v5 in %s\n", program, path);
  return profiler;
}

class Communicator {
 public:
  struct Task {
    void* channels[2] = {};
    int count = 0;
  };

  Communicator(abi::ProfilerV5& profiler, int rank, int nranks) : profiler_(profiler), rank_(rank) {
    int mask = 0;
    profiler_.init(&context_, 0x5eed'0000'0000'0001, &mask, "world", 1, nranks, rank, nullptr);
  }
  ~Communicator() { profiler_.finalize(context_); }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  abi::EventDescrV5 allreduce(uint64_t seq) const {
    abi::EventDescrV5 coll{};
    coll.type = abi::kProfileColl;
    coll.rank = rank_;
    coll.coll.seqNumber = seq;
    coll.coll.func = "AllReduce";
    coll.coll.count = 1 << 20;
    coll.coll.datatype = "ncclFloat32";
    coll.coll.nChannels = 2;
    coll.coll.algo = "RING";
    coll.coll.proto = "SIMPLE";
    return coll;
  }
  abi::EventDescrV5 send_or_receive(bool send, int peer) const {
    abi::EventDescrV5 p2p{};
    p2p.type = abi::kProfileP2p;
    p2p.rank = rank_;
    p2p.p2p.func = send ? "Send" : "Recv";
    p2p.p2p.datatype = "ncclFloat32";
    p2p.p2p.count = 1 << 18;
    p2p.p2p.peer = peer;
    p2p.p2p.nChannels = 1;
    return p2p;
  }

  // The call returns once the task is enqueued: its handle.
  void* enqueue(abi::EventDescrV5& descr) {
    void* handle = nullptr;
    profiler_.startEvent(context_, &handle, &descr);
    profiler_.stopEvent(handle);
    return handle;
  }
  // Its channels' start read as `began`: a kernel's channels that start together read one stamp.
  Task start(void* enqueued, int channels, uint64_t began) {
    Task task;
    task.count = channels;
    for (int c = 0; c < channels; ++c) {
      abi::EventDescrV5 channel{};
      channel.type = abi::kProfileKernelCh;
      channel.parentObj = enqueued;
      channel.kernelCh.channelId = uint8_t(c);
      channel.kernelCh.pTimer = began;
      profiler_.startEvent(nullptr, &task.channels[c], &channel);
    }
    return task;
  }
  Task launch(abi::EventDescrV5& descr, int channels, uint64_t began) { return start(enqueue(descr), channels, began); }
  void finish(const Task& task) {
    for (int c = 0; c < task.count; ++c) {
      abi::StateArgsV5 args{};
      args.kernelCh.pTimer = gpu_now();
      profiler_.recordEventState(task.channels[c], abi::kStateKernelChStop, &args);
      profiler_.stopEvent(task.channels[c]);
    }
  }

 private:
  abi::ProfilerV5& profiler_;
  const int rank_;
  void* context_ = nullptr;
};

}  // namespace fake_nccl
