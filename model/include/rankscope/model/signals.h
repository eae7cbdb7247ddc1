// The signals that mean a process crashed, for the agent that catches them
// and for what reads how a rank ended.
#pragma once

#include <signal.h>

namespace rankscope {

// A fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL), or SIGABRT, which abort() raises
// for an assert, std::terminate and watchdogs.
inline constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

constexpr bool is_crash_signal(int signal_number) {
  for (const int crash : kCrashSignals) {
    if (crash == signal_number) return true;
  }
  return false;
}

}  // namespace rankscope
