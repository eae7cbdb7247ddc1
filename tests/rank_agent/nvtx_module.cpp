// A second module (shared object) that uses NVTX on its own, as libnccl or
// libtorch do next to the application: NVTX initialises once per module.
#include <nvtx3/nvToolsExt.h>

extern "C" void nvtx_module_ranges(int count) {
  for (int i = 0; i < count; ++i) {
    nvtxRangePushA("module range");
    nvtxRangePop();
  }
}
