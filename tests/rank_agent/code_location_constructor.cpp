// A module whose constructor looks up where its code lies from another
// thread, as the agent's closer does for a crash in a library's constructor:
// dlopen holds the loader's lock meanwhile. The answer waits 5 s at most.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "code_location.h"

namespace {

char g_found[512] = "never looked up";

__attribute__((constructor)) void look_up_from_another_thread() {
  struct Answer {
    std::string where;
    std::atomic<bool> ready{false};
  };
  // Left to the thread where it never answers: it may still be waiting when dlopen returns.
  auto* answer = new Answer;
  std::thread([answer] {
    answer->where = rankscope::agent::code_location(reinterpret_cast<uintptr_t>(&look_up_from_another_thread));
    answer->ready.store(true);
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!answer->ready.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::string found = answer->ready.load() ? answer->where : "waited 5 s for the loader's lock";
  std::strncpy(g_found, found.c_str(), sizeof(g_found) - 1);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const char* code_location_found_in_constructor() { return g_found; }
