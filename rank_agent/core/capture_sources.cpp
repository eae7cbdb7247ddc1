#include "capture_source.h"

namespace rankscope::agent {

CaptureSource& python_capture_source();
#if RANKSCOPE_HAVE_NVTX
CaptureSource& nvtx_capture_source();
#endif
#if RANKSCOPE_HAVE_CUDA
CaptureSource& cupti_capture_source();
CaptureSource& nccl_capture_source();
#endif

std::span<CaptureSource* const> built_capture_sources() {
  static CaptureSource* const sources[] = {
      &python_capture_source(),
#if RANKSCOPE_HAVE_NVTX
      &nvtx_capture_source(),
#endif
#if RANKSCOPE_HAVE_CUDA
      &cupti_capture_source(),
      &nccl_capture_source(),
#endif
      nullptr,
  };
  return {sources, sizeof(sources) / sizeof(sources[0]) - 1};
}

}  // namespace rankscope::agent
