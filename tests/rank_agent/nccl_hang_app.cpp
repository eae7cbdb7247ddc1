// A program that trains like a PyTorch job on NCCL, for sidecar mode, where
// no GPU and no NCCL exist: it makes NCCL's calls to the profiler plugin
// (fake_nccl.h), each kernel's channels stopped once its peers came, as a
// real kernel waits for them. The ranks meet through files in a shared
// folder. Modes:
// - allreduce: an all-reduce per iteration; one rank may sleep before one
//   iteration, and the others' kernels then spin in that all-reduce;
// - pipeline: stages in a line, each receiving from the rank before it and
//   sending to the one after; a rank that sleeps before an iteration leaves
//   its neighbours' send and receive kernels waiting;
// - ring: a send to the next rank and a receive from the one before, in one
//   group (one kernel: its channels start together, and it ends once both
//   peers came); from DEADLOCK_ITERATION on, each rank receives before it
//   sends (two groups), so every receive waits for a send that never begins;
// - stall: the ring's groups, one rank's kernel at one iteration stalling
//   for SLEEP_S once begun (a link that stopped): every send and receive of
//   that iteration runs, and none ends;
// - relay: the pipeline's stages, one rank's receive kernel at one iteration
//   stalling for SLEEP_S once begun, and its send to the next stage enqueued
//   at once behind it on its stream (NCCL returns at the enqueue), its kernel
//   beginning only once the receive ended: the next stage's receive waits for
//   a send that was called but has not begun.
// Usage: nccl_hang_app allreduce|pipeline|stall|relay FOLDER ITERATIONS [LATE_RANK LATE_ITERATION SLEEP_S]
//        nccl_hang_app ring FOLDER ITERATIONS [DEADLOCK_ITERATION]
// (RANK and WORLD_SIZE from the environment, as torch.distributed reads them).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "fake_nccl.h"

namespace abi = rankscope::nccl_profiler;
using fake_nccl::gpu_now;

namespace {

int env_int(const char* name) {
  const char* text = std::getenv(name);
  return text ? std::atoi(text) : -1;
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void touch(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

void wait_for(const std::string& path) {
  while (!exists(path)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Every rank's file for this iteration, as the kernels' peers.
void wait_for_peers(const std::string& folder, int iteration, int rank, int world) {
  const std::string prefix = folder + "/" + std::to_string(iteration) + ".";
  touch(prefix + std::to_string(rank));
  for (int peer = 0; peer < world; ++peer) wait_for(prefix + std::to_string(peer));
}

class Rank {
  using Task = fake_nccl::Communicator::Task;

 public:
  Rank(abi::ProfilerV5& profiler, std::string folder, int rank, int world)
      : nccl_(profiler, rank, world), folder_(std::move(folder)), rank_(rank), world_(world) {}

  void allreduce(int iteration) {
    abi::EventDescrV5 coll = nccl_.allreduce(uint64_t(iteration));
    const Task task = nccl_.launch(coll, 2, gpu_now());
    wait_for_peers(folder_, iteration, rank_, world_);
    nccl_.finish(task);
  }

  // A send or receive's kernel posts its half, then waits for the other's.
  struct Message {
    Task task;
    std::string other_half;
  };
  Message post(bool send, int peer, int iteration) {
    Message message = launch_half(send, peer, iteration, gpu_now());
    touch(half(send, rank_, peer, iteration));
    return message;
  }
  void finish(const Message& message) {
    wait_for(message.other_half);
    nccl_.finish(message.task);
  }
  // A group's send to `next` and receive from `previous`, one kernel,
  // which may stall for `stall_s` once begun, before it posts its halves.
  void exchange(int next, int previous, int iteration, int stall_s) {
    const uint64_t began = gpu_now();
    const Message send = launch_half(true, next, iteration, began);
    const Message receive = launch_half(false, previous, iteration, began);
    std::this_thread::sleep_for(std::chrono::seconds(stall_s));
    touch(half(true, rank_, next, iteration));
    touch(half(false, rank_, previous, iteration));
    wait_for(send.other_half);
    wait_for(receive.other_half);
    nccl_.finish(send.task);
    nccl_.finish(receive.task);
  }
  // A receive from `previous` whose kernel stalls for `stall_s` once begun,
  // and the send to `next` queued behind it on the stream.
  void relay_stalled(int previous, int next, int iteration, int stall_s) {
    const Message receive = launch_half(false, previous, iteration, gpu_now());
    abi::EventDescrV5 send = nccl_.send_or_receive(true, next);
    void* send_enqueued = nccl_.enqueue(send);
    std::this_thread::sleep_for(std::chrono::seconds(stall_s));
    touch(half(false, rank_, previous, iteration));
    finish(receive);
    const Message sent{nccl_.start(send_enqueued, 1, gpu_now()), half(false, next, rank_, iteration)};
    touch(half(true, rank_, next, iteration));
    finish(sent);
  }

 private:
  std::string half(bool send, int from, int to, int iteration) const {
    return folder_ + "/" + std::to_string(iteration) + (send ? ".send." : ".recv.") + std::to_string(from) + "." +
           std::to_string(to);
  }
  Message launch_half(bool send, int peer, int iteration, uint64_t began) {
    abi::EventDescrV5 p2p = nccl_.send_or_receive(send, peer);
    return Message{nccl_.launch(p2p, 1, began), half(!send, peer, rank_, iteration)};
  }

  fake_nccl::Communicator nccl_;
  const std::string folder_;
  const int rank_, world_;
};

int usage() {
  std::fprintf(stderr,
               "usage: nccl_hang_app allreduce|pipeline|stall|relay FOLDER ITERATIONS [LATE_RANK LATE_ITERATION SLEEP_S]\n"
               "       nccl_hang_app ring FOLDER ITERATIONS [DEADLOCK_ITERATION]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  const std::string mode = argv[1];
  const bool ring = mode == "ring";
  const bool arguments_fit = ring ? argc == 4 || argc == 5 : argc == 4 || argc == 7;
  if ((mode != "allreduce" && mode != "pipeline" && mode != "stall" && mode != "relay" && !ring) || !arguments_fit) return usage();
  const std::string folder = argv[2];
  const int iterations = std::atoi(argv[3]);
  const int late_rank = argc == 7 ? std::atoi(argv[4]) : -1;
  const int late_iteration = argc == 7 ? std::atoi(argv[5]) : -1;
  const int sleep_s = argc == 7 ? std::atoi(argv[6]) : 0;
  const int deadlock_iteration = ring && argc == 5 ? std::atoi(argv[4]) : iterations;
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  if (rank < 0 || world < 1) {
    std::fprintf(stderr, "nccl_hang_app: needs RANK and WORLD_SIZE\n");
    return 2;
  }
  abi::ProfilerV5* profiler = fake_nccl::load_plugin("nccl_hang_app");
  if (!profiler) return 2;
  {
    Rank me(*profiler, folder, rank, world);
    // The ranks start apart (a loaded machine, sidecars each starting a
    // program): they meet first, outside any collective.
    wait_for_peers(folder, -1, rank, world);
    const int next = (rank + 1) % world, previous = (rank + world - 1) % world;
    for (int i = 0; i < iterations; ++i) {
      const bool late = rank == late_rank && i == late_iteration;
      if (mode == "stall") {
        me.exchange(next, previous, i, late ? sleep_s : 0);
        continue;
      }
      if (mode == "relay" && late && rank > 0 && rank < world - 1) {
        me.relay_stalled(previous, next, i, sleep_s);
        continue;
      }
      if (late) std::this_thread::sleep_for(std::chrono::seconds(sleep_s));
      if (mode == "allreduce") {
        me.allreduce(i);
      } else if (mode == "pipeline" || mode == "relay") {
        if (rank > 0) me.finish(me.post(false, previous, i));
        if (rank < world - 1) me.finish(me.post(true, next, i));
      } else if (i < deadlock_iteration) {
        me.exchange(next, previous, i, 0);
      } else {
        me.finish(me.post(false, previous, i));
        me.finish(me.post(true, next, i));
      }
    }
  }
  std::printf("nccl_hang_app: rank %d: %d iterations of %s\n", rank, iterations, mode.c_str());
  return 0;
}
