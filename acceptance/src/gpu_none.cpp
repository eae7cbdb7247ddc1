// The GPU checks of a rankscope built without the CUDA toolkit: no GPU is ever measured.
#include "gpu.h"
#include "rankscope/model/error.h"

namespace rankscope::acceptance {

NodeGpus find_gpus() {
  NodeGpus none;
  none.unavailable = "no GPU checks: this rankscope was built without CUDA";
  return none;
}

double gpu_gemm_tflops(int, int) { throw Error("this rankscope was built without CUDA"); }
double gpu_triad_gbps(int, size_t) { throw Error("this rankscope was built without CUDA"); }
HeldGemm gpu_gemm_held(int, const std::string&, int, std::chrono::steady_clock::time_point) {
  throw Error("this rankscope was built without CUDA");
}
std::string nccl_problem() { return "this rankscope was built without CUDA"; }
std::unique_ptr<CollectiveTransport> open_nccl_collectives(MPI_Comm, const NodeGpus&, const Level&) {
  throw Error("this rankscope was built without CUDA");
}

}  // namespace rankscope::acceptance
