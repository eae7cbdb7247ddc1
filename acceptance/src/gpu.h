// The GPUs of this node as `accept` finds and measures them. CUDA's runtime
// (linked statically) finds them and fails softly where no driver is;
// cuBLAS, NVML and NCCL are loaded at run time, so that rankscope starts on
// nodes that lack them, and finds the ones a PyTorch install carries.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collective_transport.h"
#include "rankscope/acceptance/measure.h"

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
  // GPUs the driver sees (NVML) that CUDA cannot use (a driver older than
  // the CUDA runtime rankscope carries, a GPU fallen off the bus) or does
  // not show (MIG mode): the node has them and fails, rather than reading as
  // a node without them.
  int unusable = 0;
  int count() const { return static_cast<int>(devices.size()) + unusable; }
};
NodeGpus find_gpus();

// One figure of `device` each (throw Error with the failing call): a GEMM of
// n × n bf16 matrices through cuBLAS, accumulating in fp32 on the tensor
// cores, as training's layers run; the STREAM triad a = b + 3c over `bytes`
// of device memory (three float arrays) through cuBLAS's geam.
double gpu_gemm_tflops(int device, int n);
double gpu_triad_gbps(int device, size_t bytes);
// The same GEMM back to back until `until` (the node's GPUs share one end,
// so that their last slices run all loaded): TFLOP/s of each slice of about
// a second, and NVML's reasons the clocks were held back while the last half
// of the slices ran (power cap, thermal or hardware slowdown, power brake),
// comma-separated; empty when none, "unknown" when NVML could not say.
struct HeldGemm {
  std::vector<double> tflops;
  std::string clocks_held_back;
};
HeldGemm gpu_gemm_held(int device, const std::string& uuid, int n, std::chrono::steady_clock::time_point until);

// Why this node cannot take part in NCCL's collectives (libnccl.so.2 not
// found, or lacking an entry point); empty when it can.
std::string nccl_problem();

// Collective over `group`: one NCCL communicator over every GPU of the
// group's nodes, each node's GPUs its ranks in node order, driven by the
// node's one process as `nccl-tests -g` does. An iteration is timed on the
// host, from its launch to every local GPU's stream done. Throws
// TransportUnavailable where a node could not set up its part (every rank
// agrees before NCCL waits on any), and Error naming the failing call where
// a collective fails.
std::unique_ptr<CollectiveTransport> open_nccl_collectives(MPI_Comm group, const NodeGpus& mine, const Level& level);

}  // namespace rankscope::acceptance
