// A wake-up that one thread waits for and any thread rings, a signal
// handler too: a futex word, not a file descriptor, which a program that
// closes the descriptors it did not open (as daemons do) would close, or
// reuse for a file of its own that the waiter would then read from.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

namespace rankscope::agent {

class Doorbell {
 public:
  // Async-signal-safe: an atomic add and one system call.
  void ring() {
    rings_.fetch_add(1, std::memory_order_release);
    ::syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }

  // Waits until rung since the last wait returned, or `timeout_ms` passed
  // (negative: no limit). True when rung. One waiter only.
  bool wait(int timeout_ms) {
    uint32_t now = rings_.load(std::memory_order_acquire);
    if (now == answered_) {
      const timespec limit{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1'000'000};
      ::syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, now, timeout_ms < 0 ? nullptr : &limit, nullptr, 0);
      now = rings_.load(std::memory_order_acquire);
    }
    const bool rung = now != answered_;
    answered_ = now;
    return rung;
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  uint32_t* word() { return reinterpret_cast<uint32_t*>(&rings_); }

  std::atomic<uint32_t> rings_{0};
  uint32_t answered_ = 0;  // the waiter's
};

}  // namespace rankscope::agent
