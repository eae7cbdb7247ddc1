#include "datasync_calls.h"

#include <dlfcn.h>

#include <atomic>

namespace {
std::atomic<int> calls{0};
}  // namespace

extern "C" int fdatasync(int fd) {
  ++calls;
  static const auto sync = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fdatasync"));
  return sync(fd);
}

namespace rankscope::testing {

int datasync_calls() { return calls.load(); }

}  // namespace rankscope::testing
