# Decides which capture sources beyond MPI are built. NVTX needs its headers
# alone (header-only; the CUDA toolkit's, or those of PyPI's nvidia-nvtx wheel
# given as RANKSCOPE_NVTX3_INCLUDE_DIR), so a build without CUDA captures NVTX
# ranges and runs their tests. CUDA capture (CUPTI activity records, the NCCL
# profiler plugin) needs the CUDA toolkit with CUPTI and NCCL. For each, AUTO
# builds it when found; ON fails with a remedy when something is missing; OFF
# never looks.
string(TOUPPER "${RANKSCOPE_WITH_CUDA}" _rankscope_cuda_request)
if(NOT _rankscope_cuda_request MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "RANKSCOPE_WITH_CUDA must be AUTO, ON or OFF (got '${RANKSCOPE_WITH_CUDA}').")
endif()

string(TOUPPER "${RANKSCOPE_WITH_NVTX}" _rankscope_nvtx_request)
if(NOT _rankscope_nvtx_request MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "RANKSCOPE_WITH_NVTX must be AUTO, ON or OFF (got '${RANKSCOPE_WITH_NVTX}').")
endif()

set(RANKSCOPE_HAVE_CUDA OFF)
set(RANKSCOPE_HAVE_NVTX OFF)
set(RANKSCOPE_NVTX_SUMMARY "off (RANKSCOPE_WITH_NVTX=OFF)")
if(NOT _rankscope_nvtx_request STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(RANKSCOPE_NVTX3_INCLUDE_DIR nvtx3/nvToolsExt.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATHS /usr/local/cuda/include /usr/include)
  if(RANKSCOPE_NVTX3_INCLUDE_DIR)
    set(RANKSCOPE_HAVE_NVTX ON)
    set(RANKSCOPE_NVTX_SUMMARY "on (${RANKSCOPE_NVTX3_INCLUDE_DIR})")
  elseif(_rankscope_nvtx_request STREQUAL "ON")
    message(FATAL_ERROR "RANKSCOPE_WITH_NVTX=ON but nvtx3/nvToolsExt.h was not found. Install the CUDA toolkit, or "
                        "`pip download nvidia-nvtx` and pass its include folder as -DRANKSCOPE_NVTX3_INCLUDE_DIR=..., "
                        "or configure with -DRANKSCOPE_WITH_NVTX=OFF.")
  else()
    set(RANKSCOPE_NVTX_SUMMARY "off (AUTO: nvtx3/nvToolsExt.h not found)")
  endif()
endif()

set(RANKSCOPE_CUDA_SUMMARY "off (RANKSCOPE_WITH_CUDA=OFF)")
if(NOT _rankscope_cuda_request STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  set(_rankscope_cuda_missing "")
  if(NOT CUDAToolkit_FOUND)
    list(APPEND _rankscope_cuda_missing "CUDA toolkit")
  else()
    if(NOT TARGET CUDA::cupti)
      list(APPEND _rankscope_cuda_missing "CUPTI")
    endif()
    find_path(RANKSCOPE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include /usr/include)
    find_library(RANKSCOPE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/lib /usr/lib/x86_64-linux-gnu)
    if(NOT RANKSCOPE_NCCL_INCLUDE_DIR OR NOT RANKSCOPE_NCCL_LIBRARY)
      list(APPEND _rankscope_cuda_missing "NCCL")
    endif()
  endif()

  if(_rankscope_cuda_missing)
    string(JOIN ", " _rankscope_missing_text ${_rankscope_cuda_missing})
    if(_rankscope_cuda_request STREQUAL "ON")
      message(FATAL_ERROR "RANKSCOPE_WITH_CUDA=ON but ${_rankscope_missing_text} not found. "
                          "Install the CUDA toolkit with CUPTI and NCCL, point CUDAToolkit_ROOT at it, "
                          "or configure with -DRANKSCOPE_WITH_CUDA=OFF.")
    endif()
    set(RANKSCOPE_CUDA_SUMMARY "off (AUTO: ${_rankscope_missing_text} not found)")
  else()
    set(RANKSCOPE_HAVE_CUDA ON)
    set(RANKSCOPE_CUDA_SUMMARY "on (CUDA ${CUDAToolkit_VERSION}, CUPTI, NCCL ${RANKSCOPE_NCCL_LIBRARY})")
  endif()
endif()
