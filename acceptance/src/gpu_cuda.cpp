// The GPU checks, with CUDA: the runtime linked statically, cuBLAS, NVML and
// NCCL loaded when first needed.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpu.h"
#include "rankscope/model/error.h"
#include "rankscope/model/text.h"

namespace rankscope::acceptance {
namespace {

void check(cudaError_t result, const char* call) {
  if (result != cudaSuccess) throw Error(std::string(call) + ": " + cudaGetErrorString(result));
}

void* open_library(const std::string& name) { return ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL); }

template <typename Function>
Function symbol(void* library, const char* name) {
  return library ? reinterpret_cast<Function>(::dlsym(library, name)) : nullptr;
}

// cuBLAS's entry points the checks use; cublasGemmEx is overloaded in C++, so its type is spelt out.
struct Cublas {
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSgeam) geam = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  GemmEx gemm = nullptr;

  void check(cublasStatus_t status, const char* call) const {
    if (status != CUBLAS_STATUS_SUCCESS) throw Error(std::string(call) + ": " + status_string(status));
  }
};

const Cublas& cublas() {
  static const Cublas loaded = [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* library = open_library(name);
    if (!library) throw Error("the GPU checks need cuBLAS (" + name + ", the CUDA toolkit's or PyTorch's): " + ::dlerror());
    Cublas found;
    found.create = symbol<decltype(found.create)>(library, "cublasCreate_v2");
    found.destroy = symbol<decltype(found.destroy)>(library, "cublasDestroy_v2");
    found.set_stream = symbol<decltype(found.set_stream)>(library, "cublasSetStream_v2");
    found.geam = symbol<decltype(found.geam)>(library, "cublasSgeam");
    found.status_string = symbol<decltype(found.status_string)>(library, "cublasGetStatusString");
    found.gemm = symbol<Cublas::GemmEx>(library, "cublasGemmEx");
    if (!found.create || !found.destroy || !found.set_stream || !found.geam || !found.status_string || !found.gemm) {
      throw Error(name + " lacks an entry point the GPU checks call");
    }
    return found;
  }();
  return loaded;
}

// NVML's driver version (its return codes are an int, 0 for success).
std::string nvml_driver_version() {
  void* library = open_library("libnvidia-ml.so.1");
  const auto init = symbol<int (*)()>(library, "nvmlInit_v2");
  const auto version = symbol<int (*)(char*, unsigned)>(library, "nvmlSystemGetDriverVersion");
  const auto shutdown = symbol<int (*)()>(library, "nvmlShutdown");
  if (!init || !version || !shutdown || init() != 0) return "";
  char text[96] = {};
  const bool read = version(text, sizeof(text)) == 0;
  shutdown();
  return read ? text : "";
}

std::string nccl_library_version() {
  const auto version = symbol<decltype(&ncclGetVersion)>(open_library("libnccl.so.2"), "ncclGetVersion");
  int code = 0;
  if (!version || version(&code) != ncclSuccess) return "";
  // NCCL 2.9 on: major × 10000 + minor × 100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

// A device's stream, cuBLAS handle and buffers for one measurement, freed however it ends.
class DeviceWork {
 public:
  explicit DeviceWork(int device) {
    cublas();  // loaded first: nothing to release when it cannot be
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&begin_), "cudaEventCreate");
    check(cudaEventCreate(&end_), "cudaEventCreate");
    cublas().check(cublas().create(&handle_), "cublasCreate");
    cublas().check(cublas().set_stream(handle_, stream_), "cublasSetStream");
  }
  ~DeviceWork() {
    if (stream_) cudaStreamSynchronize(stream_);
    for (void* buffer : buffers_) cudaFree(buffer);
    if (handle_) cublas().destroy(handle_);
    if (begin_) cudaEventDestroy(begin_);
    if (end_) cudaEventDestroy(end_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  DeviceWork(const DeviceWork&) = delete;
  DeviceWork& operator=(const DeviceWork&) = delete;

  void* buffer(size_t bytes, int byte_value) {
    void* memory = nullptr;
    check(cudaMalloc(&memory, bytes), "cudaMalloc");
    buffers_.push_back(memory);
    check(cudaMemsetAsync(memory, byte_value, bytes, stream_), "cudaMemset");
    return memory;
  }
  cublasHandle_t handle() const { return handle_; }

  // Seconds per call of `once`: one call to warm up, then as many as fill about 50 ms, timed on the GPU.
  template <typename Once>
  double seconds_per_call(const Once& once) {
    once();
    int calls = 1;
    double seconds = time(once, calls);
    calls = std::clamp(static_cast<int>(std::ceil(0.05 / std::max(seconds, 1e-7))), 3, 2000);
    return time(once, calls) / calls;
  }

 private:
  template <typename Once>
  double time(const Once& once, int calls) {
    check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
    for (int c = 0; c < calls; ++c) once();
    check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(end_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");
    return ms / 1e3;
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  std::vector<void*> buffers_;
};

}  // namespace

NodeGpus find_gpus() {
  NodeGpus gpus;
  gpus.nccl_version = nccl_library_version();
  if (void* driver = open_library("libcuda.so.1"); driver == nullptr) {
    gpus.unavailable = "no GPU: no NVIDIA driver on this host (libcuda.so.1 not found)";
    return gpus;
  }
  int count = 0;
  if (const cudaError_t result = cudaGetDeviceCount(&count); result != cudaSuccess) {
    gpus.unavailable = std::string("no GPU: ") + cudaGetErrorString(result);
    return gpus;
  }
  if (count == 0) {
    gpus.unavailable = "no GPU: the driver sees no device";
    return gpus;
  }
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) {
    gpus.cuda_version = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  }
  gpus.driver_version = nvml_driver_version();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp properties{};
    if (const cudaError_t result = cudaGetDeviceProperties(&properties, d); result != cudaSuccess) {
      gpus.unavailable = "GPU " + std::to_string(d) + ": " + cudaGetErrorString(result);
      gpus.devices.clear();
      return gpus;
    }
    gpus.devices.push_back({d, properties.name, gpu_uuid_text("GPU-", properties.uuid.bytes), static_cast<int64_t>(properties.totalGlobalMem)});
  }
  return gpus;
}

double gpu_gemm_tflops(int device, int n) {
  DeviceWork work(device);
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(n) * 2;
  // 0x3c3c is about 0.0115 in bf16: sums of n products stay far from overflow.
  void* a = work.buffer(bytes, 0x3c);
  void* b = work.buffer(bytes, 0x3c);
  void* c = work.buffer(bytes, 0);
  const float one = 1, zero = 0;
  const double seconds = work.seconds_per_call([&] {
    cublas().check(cublas().gemm(work.handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF,
                                 n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
  });
  return 2.0 * n * static_cast<double>(n) * n / seconds / 1e12;
}

double gpu_triad_gbps(int device, size_t bytes) {
  DeviceWork work(device);
  constexpr int kRows = 4096;
  const int columns = static_cast<int>(std::max<size_t>(1, bytes / 3 / sizeof(float) / kRows));
  const size_t array_bytes = sizeof(float) * kRows * static_cast<size_t>(columns);
  auto* a = static_cast<float*>(work.buffer(array_bytes, 0));
  auto* b = static_cast<float*>(work.buffer(array_bytes, 0x3c));
  auto* c = static_cast<float*>(work.buffer(array_bytes, 0x3c));
  const float one = 1, three = 3;
  const double seconds = work.seconds_per_call([&] {
    cublas().check(cublas().geam(work.handle(), CUBLAS_OP_N, CUBLAS_OP_N, kRows, columns, &one, b, kRows, &three, c, kRows,
                                 a, kRows),
                   "cublasSgeam");
  });
  return 3.0 * static_cast<double>(array_bytes) / seconds / 1e9;
}

}  // namespace rankscope::acceptance
