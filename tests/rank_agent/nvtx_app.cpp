// A program with NVTX ranges and no MPI, as a PyTorch job on NCCL is to
// rankscope: profiled in sidecar mode. It prints the rendezvous environment
// it was given, and ends as told, so exit statuses and signals can be checked.
// With "numbered", each step's range is named ProfilerStep#I (as PyTorch's
// profiler names steps), a name per step, as a long job has without end.
// With "term-at-exit MS", a SIGTERM comes MS ms after main returns, while
// the agent closes its shard at exit (as mpirun's may, ending a job).
// Usage: nvtx_app RANGES PAUSE_US [exit CODE | _exit CODE | signal NUMBER | numbered | term-at-exit MS]
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {
int g_term_after_ms = 0;

// Registered after the agent's own handler, so it runs first, just before the agent closes its shard.
void send_term_soon() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(g_term_after_ms));
    kill(getpid(), SIGTERM);
  }).detach();
}
}  // namespace

int main(int argc, char** argv) {
  const int ranges = argc > 1 ? std::atoi(argv[1]) : 100;
  const auto pause = std::chrono::microseconds(argc > 2 ? std::atoi(argv[2]) : 0);
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    const char* value = std::getenv(name);
    std::printf("%s=%s\n", name, value ? value : "");
  }
  std::fflush(stdout);
  const bool numbered = argc > 3 && std::strcmp(argv[3], "numbered") == 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([ranges, pause, numbered] {
      for (int i = 0; i < ranges; ++i) {
        nvtxRangePushA(numbered ? ("ProfilerStep#" + std::to_string(i)).c_str() : "app step");
        nvtxRangePushA("app work");
        std::this_thread::sleep_for(pause);
        nvtxRangePop();
        nvtxRangePop();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (argc > 4 && std::strcmp(argv[3], "exit") == 0) return std::atoi(argv[4]);
  if (argc > 4 && std::strcmp(argv[3], "_exit") == 0) {
    std::fflush(nullptr);
    _exit(std::atoi(argv[4]));  // as Python's os._exit: no exit handlers
  }
  if (argc > 4 && std::strcmp(argv[3], "signal") == 0) {
    std::fflush(nullptr);
    raise(std::atoi(argv[4]));
  }
  if (argc > 4 && std::strcmp(argv[3], "term-at-exit") == 0) {
    g_term_after_ms = std::atoi(argv[4]);
    std::fflush(nullptr);
    std::atexit(send_term_soon);
  }
  return 0;
}
