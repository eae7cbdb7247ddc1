// The GPUs of this node as `accept` finds and measures them. CUDA's runtime
// (linked statically) finds them and fails softly where no driver is;
// cuBLAS, NVML and NCCL are loaded at run time, so that rankscope starts on
// nodes that lack them, and finds the ones a PyTorch install carries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rankscope::acceptance {

struct GpuDevice {
  int index = 0;  // the CUDA device ordinal
  std::string model, uuid;
  int64_t memory_bytes = 0;
};

struct NodeGpus {
  std::vector<GpuDevice> devices;
  std::string driver_version;  // NVML's, as nvidia-smi prints it; empty without NVML
  std::string cuda_version;    // the CUDA version the driver supports ("13.0")
  std::string nccl_version;    // libnccl.so.2's ("2.28.3"); empty when it is not found
  std::string unavailable;     // why no GPU is measured; empty when devices were found
};
NodeGpus find_gpus();

// One figure of `device` each (throw Error with the failing call): a GEMM of
// n × n bf16 matrices through cuBLAS, accumulating in fp32 on the tensor
// cores, as training's layers run; the STREAM triad a = b + 3c over `bytes`
// of device memory (three float arrays) through cuBLAS's geam.
double gpu_gemm_tflops(int device, int n);
double gpu_triad_gbps(int device, size_t bytes);

}  // namespace rankscope::acceptance
