// The GPU checks, with CUDA: the runtime linked statically, cuBLAS, NVML and
// NCCL loaded when first needed.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "gpu.h"
#include "rankscope/acceptance/node_ranks.h"
#include "rankscope/model/error.h"
#include "rankscope/model/format.h"
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

// `function` set to `library`'s entry point `name`; throws Error naming what is missing.
template <typename Function>
void bind(void* library, const std::string& library_name, Function& function, const char* name) {
  function = symbol<Function>(library, name);
  if (!function) throw Error(library_name + " lacks " + name + ", which the GPU checks call");
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
    bind(library, name, found.create, "cublasCreate_v2");
    bind(library, name, found.destroy, "cublasDestroy_v2");
    bind(library, name, found.set_stream, "cublasSetStream_v2");
    bind(library, name, found.geam, "cublasSgeam");
    bind(library, name, found.status_string, "cublasGetStatusString");
    bind(library, name, found.gemm, "cublasGemmEx");
    return found;
  }();
  return loaded;
}

// What the driver itself says, through NVML (its return codes are an int,
// 0 for success): its version, and how many GPUs it sees, whether or not
// CUDA can use them. Empty and 0 without NVML.
struct DriverView {
  std::string version;
  unsigned gpus = 0;
};
DriverView nvml_driver_view() {
  void* library = open_library("libnvidia-ml.so.1");
  const auto init = symbol<int (*)()>(library, "nvmlInit_v2");
  const auto version = symbol<int (*)(char*, unsigned)>(library, "nvmlSystemGetDriverVersion");
  const auto count = symbol<int (*)(unsigned*)>(library, "nvmlDeviceGetCount_v2");
  const auto shutdown = symbol<int (*)()>(library, "nvmlShutdown");
  DriverView view;
  if (!init || !version || !count || !shutdown || init() != 0) return view;
  char text[96] = {};
  if (version(text, sizeof(text)) == 0) view.version = text;
  if (count(&view.gpus) != 0) view.gpus = 0;
  shutdown();
  return view;
}

// NCCL's entry points the collectives use. All-to-all is grouped sends and
// receives, as nccl-tests runs it, which every NCCL since 2.7 has.
struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;

  void check(ncclResult_t result, const char* call) const {
    if (result != ncclSuccess) throw Error(std::string(call) + ": " + error_string(result));
  }
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    const std::string name = "libnccl.so.2";
    void* library = open_library(name);
    if (!library) throw Error("NCCL collectives need " + name + " (NCCL's or PyTorch's): " + ::dlerror());
    Nccl found;
    bind(library, name, found.get_unique_id, "ncclGetUniqueId");
    bind(library, name, found.init_rank, "ncclCommInitRank");
    bind(library, name, found.destroy, "ncclCommDestroy");
    bind(library, name, found.abort, "ncclCommAbort");
    bind(library, name, found.group_start, "ncclGroupStart");
    bind(library, name, found.group_end, "ncclGroupEnd");
    bind(library, name, found.all_reduce, "ncclAllReduce");
    bind(library, name, found.all_gather, "ncclAllGather");
    bind(library, name, found.reduce_scatter, "ncclReduceScatter");
    bind(library, name, found.send, "ncclSend");
    bind(library, name, found.recv, "ncclRecv");
    bind(library, name, found.error_string, "ncclGetErrorString");
    bind(library, name, found.async_error, "ncclCommGetAsyncError");
    return found;
  }();
  return loaded;
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
  // `count` bf16 values spread over (-1, 1): tensor cores on constant data
  // draw less power, and may hold higher clocks, than on training's.
  void* bf16_noise(size_t count) {
    // One set of values for every GPU of the node, which may be set up at once.
    static std::mutex noise_mutex;
    static std::vector<uint16_t> noise;
    const std::lock_guard lock(noise_mutex);
    if (noise.size() < count) {
      noise.resize(count);
      uint64_t state = 0x9e3779b97f4a7c15;
      for (uint16_t& value : noise) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        const float x = static_cast<float>(static_cast<int32_t>(state >> 32)) / 2147483648.0f;
        uint32_t bits = 0;
        std::memcpy(&bits, &x, sizeof(bits));
        value = static_cast<uint16_t>(bits >> 16);  // bf16 is a float's upper half
      }
    }
    void* memory = buffer(count * sizeof(uint16_t), 0);
    check(cudaMemcpyAsync(memory, noise.data(), count * sizeof(uint16_t), cudaMemcpyHostToDevice, stream_), "cudaMemcpy");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return memory;
  }
  cublasHandle_t handle() const { return handle_; }

  // Seconds per call of `once`: one call to warm up, then as many as fill about 50 ms, timed on the GPU.
  template <typename Once>
  double seconds_per_call(const Once& once) {
    once();
    return seconds_per_call(once, 0.05);
  }
  // Seconds per call of `once`, over as many calls back to back as fill
  // about `seconds`; `while_queued` runs once they are queued, while the GPU
  // works through them.
  template <typename Once, typename WhileQueued>
  double seconds_per_call(const Once& once, double seconds, const WhileQueued& while_queued) {
    const double one = time(once, 1, [] {});
    const int calls = std::clamp(static_cast<int>(std::ceil(seconds / std::max(one, 1e-7))), 3, 100000);
    return time(once, calls, while_queued) / calls;
  }
  template <typename Once>
  double seconds_per_call(const Once& once, double seconds) {
    return seconds_per_call(once, seconds, [] {});
  }

 private:
  template <typename Once, typename WhileQueued>
  double time(const Once& once, int calls, const WhileQueued& while_queued) {
    check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
    for (int c = 0; c < calls; ++c) once();
    check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    while_queued();
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

// The node's part of one NCCL communicator: a rank, a stream and two
// buffers (send, receive) of the sweep's largest size per local GPU.
class NcclCollectives final : public CollectiveTransport {
 public:
  NcclCollectives(MPI_Comm group, const NodeGpus& mine, const Level& level) : group_(group), level_(level) {
    int group_rank = 0;
    MPI_Comm_rank(group, &group_rank);
    const int local = static_cast<int>(mine.devices.size());
    int first = 0;
    MPI_Exscan(&local, &first, 1, MPI_INT, MPI_SUM, group);
    if (group_rank == 0) first = 0;  // MPI_Exscan leaves rank 0's undefined
    MPI_Allreduce(&local, &ranks_, 1, MPI_INT, MPI_SUM, group);
    // What can fail on one node alone comes first, and the group agrees on
    // it before any rank enters NCCL's initialisation, which waits on all.
    ncclUniqueId id{};
    std::string problem = attempt([&] {
      const Nccl& api = nccl();
      if (group_rank == 0) api.check(api.get_unique_id(&id), "ncclGetUniqueId");
      size_t largest = 0;
      for (std::string_view collective : kCollectives)
        largest = std::max(largest, collective_sizes(collective, ranks_, level_).back());
      for (const GpuDevice& device : mine.devices) {
        Gpu& gpu = gpus_.list.emplace_back();
        gpu.device = device.index;
        check(cudaSetDevice(device.index), "cudaSetDevice");
        check(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking), "cudaStreamCreate");
        for (void** buffer : {&gpu.send, &gpu.receive}) {
          check(cudaMalloc(buffer, largest), "cudaMalloc");
          check(cudaMemsetAsync(*buffer, 0, largest, gpu.stream), "cudaMemset");
        }
        check(cudaStreamSynchronize(gpu.stream), "cudaStreamSynchronize");
      }
    });
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
    agree(problem);
    problem = attempt([&] {
      const Nccl& api = nccl();
      api.check(api.group_start(), "ncclGroupStart");
      for (size_t g = 0; g < gpus_.list.size(); ++g) {
        check(cudaSetDevice(gpus_.list[g].device), "cudaSetDevice");
        const ncclResult_t started = api.init_rank(&gpus_.list[g].comm, ranks_, id, first + static_cast<int>(g));
        if (started != ncclSuccess) {
          api.group_end();
          api.check(started, "ncclCommInitRank");
        }
      }
      api.check(api.group_end(), "ncclCommInitRank");
    });
    // A rank whose part failed lets go of what it began, so that peers
    // waiting on it in NCCL's initialisation see the failure too.
    if (!problem.empty()) abort_communicators();
    agree(problem);
    gpus_.failed = false;
  }
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  int ranks() const override { return ranks_; }

  std::vector<CollectivePoint> sweep(std::string_view collective) override {
    gpus_.failed = true;  // until the sweep is over
    const size_t iterations = static_cast<size_t>(level_.collective_iterations);
    std::vector<double> mine(iterations), slowest(iterations);
    std::vector<CollectivePoint> points;
    for (size_t bytes : collective_sizes(collective, ranks_, level_)) {
      bool stalled = false;
      const std::string problem = attempt([&] {
        for (int i = 0; i < level_.collective_warmup + level_.collective_iterations; ++i) {
          const auto start = std::chrono::steady_clock::now();
          launch(collective, bytes);
          stalled = !wait_for_streams();
          if (stalled) throw Error("nccl " + std::string(collective) + " of " + format_bytes(static_cast<double>(bytes)) +
                                   ": no progress in " + std::to_string(kStallSeconds) + " s");
          if (i >= level_.collective_warmup) {
            mine[static_cast<size_t>(i - level_.collective_warmup)] =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
          }
        }
      });
      // A rank that failed lets go first, so that peers waiting on it see it fail rather than wait it out.
      if (!problem.empty() && !stalled) abort_communicators();
      agree(problem, stalled);
      MPI_Reduce(mine.data(), slowest.data(), level_.collective_iterations, MPI_DOUBLE, MPI_MAX, 0, group_);
      points.push_back({bytes, slowest});
    }
    gpus_.failed = false;
    return points;
  }

 private:
  struct Gpu {
    int device = 0;
    cudaStream_t stream = nullptr;
    ncclComm_t comm = nullptr;
    void* send = nullptr;
    void* receive = nullptr;
  };

  // What `step` threw, or empty.
  template <typename Step>
  static std::string attempt(const Step& step) {
    try {
      step();
      return "";
    } catch (const std::exception& failure) {
      return failure.what();
    }
  }
  // Every rank of the group throws TransportUnavailable when any has a
  // `problem`, with its own reason; but where some rank failed outright,
  // those that only waited on it in vain (`stalled`) are not to blame.
  void agree(const std::string& problem, bool stalled = false) const {
    const int mine = problem.empty() ? 0 : stalled ? 1 : 2;
    int worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, group_);
    if (worst == 0) return;
    throw TransportUnavailable(mine == worst ? problem : "");
  }

  // NCCL's collectives have no timeout of their own: a peer gone leaves the
  // others' kernels spinning. Polled as nccl-tests does.
  static constexpr int kStallSeconds = 60;

  // Waits for every local GPU's stream; false when one of them made no progress for
  // kStallSeconds. Throws Error where NCCL reports a failure of its own.
  bool wait_for_streams() const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kStallSeconds);
    for (const Gpu& gpu : gpus_.list) {
      for (;;) {
        const cudaError_t state = cudaStreamQuery(gpu.stream);
        if (state == cudaSuccess) break;
        if (state != cudaErrorNotReady) check(state, "cudaStreamQuery");
        ncclResult_t asynchronous = ncclSuccess;
        nccl().check(nccl().async_error(gpu.comm, &asynchronous), "ncclCommGetAsyncError");
        nccl().check(asynchronous, "nccl (reported by the communicator)");
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
      }
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kStallSeconds);
    }
    return true;
  }

  void abort_communicators() {
    for (Gpu& gpu : gpus_.list) {
      if (gpu.comm) nccl().abort(gpu.comm);
      gpu.comm = nullptr;
    }
  }

  // One iteration of `collective` on S = `bytes` of floats on every local GPU, as one NCCL group.
  void launch(std::string_view collective, size_t bytes) {
    const Nccl& api = nccl();
    const size_t floats = bytes / sizeof(float), share = floats / static_cast<size_t>(ranks_);
    api.check(api.group_start(), "ncclGroupStart");
    for (Gpu& gpu : gpus_.list) {
      ncclResult_t result = ncclSuccess;
      if (collective == "allreduce") {
        result = api.all_reduce(gpu.send, gpu.receive, floats, ncclFloat, ncclSum, gpu.comm, gpu.stream);
      } else if (collective == "allgather") {
        result = api.all_gather(gpu.send, gpu.receive, share, ncclFloat, gpu.comm, gpu.stream);
      } else if (collective == "reduce_scatter") {
        result = api.reduce_scatter(gpu.send, gpu.receive, share, ncclFloat, ncclSum, gpu.comm, gpu.stream);
      } else if (collective == "alltoall") {
        for (int peer = 0; peer < ranks_ && result == ncclSuccess; ++peer) {
          const size_t at = static_cast<size_t>(peer) * share * sizeof(float);
          result = api.send(static_cast<char*>(gpu.send) + at, share, ncclFloat, peer, gpu.comm, gpu.stream);
          if (result == ncclSuccess)
            result = api.recv(static_cast<char*>(gpu.receive) + at, share, ncclFloat, peer, gpu.comm, gpu.stream);
        }
      } else {
        api.group_end();
        throw Error("no collective named '" + std::string(collective) + "'");
      }
      if (result != ncclSuccess) {
        api.group_end();
        api.check(result, ("nccl " + std::string(collective)).c_str());
      }
    }
    api.check(api.group_end(), ("nccl " + std::string(collective)).c_str());
  }

  // Released however the constructor or a sweep ends; a communicator a
  // failure left behind is aborted, since an orderly destroy may wait on it.
  struct LocalGpus {
    std::vector<Gpu> list;
    bool failed = true;
    LocalGpus() = default;
    LocalGpus(const LocalGpus&) = delete;
    LocalGpus& operator=(const LocalGpus&) = delete;
    ~LocalGpus() {
      for (Gpu& gpu : list) {
        if (gpu.comm) (failed ? nccl().abort : nccl().destroy)(gpu.comm);
        if (gpu.stream) cudaStreamSynchronize(gpu.stream);
        cudaFree(gpu.send);
        cudaFree(gpu.receive);
        if (gpu.stream) cudaStreamDestroy(gpu.stream);
      }
    }
  };

  MPI_Comm group_;
  Level level_;
  int ranks_ = 0;
  LocalGpus gpus_;
};

}  // namespace

std::string nccl_problem() {
  try {
    nccl();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::unique_ptr<CollectiveTransport> open_nccl_collectives(MPI_Comm group, const NodeGpus& mine, const Level& level) {
  return std::make_unique<NcclCollectives>(group, mine, level);
}

NodeGpus find_gpus() {
  NodeGpus gpus;
  gpus.nccl_version = nccl_library_version();
  if (void* driver = open_library("libcuda.so.1"); driver == nullptr) {
    gpus.unavailable = "no GPU: no NVIDIA driver on this host (libcuda.so.1 not found)";
    return gpus;
  }
  const DriverView driver_view = nvml_driver_view();
  gpus.driver_version = driver_view.version;
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    gpus.cuda_version = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  }
  int count = 0;
  if (const cudaError_t result = cudaGetDeviceCount(&count); result != cudaSuccess) {
    // GPUs hidden on purpose (CUDA_VISIBLE_DEVICES) are no device to CUDA, and no fault.
    if (driver_view.gpus > 0 && result != cudaErrorNoDevice) {
      gpus.unusable = static_cast<int>(driver_view.gpus);
      gpus.unavailable = "the driver (" + (gpus.driver_version.empty() ? "version unknown" : gpus.driver_version) +
                         ", CUDA " + (gpus.cuda_version.empty() ? "unknown" : gpus.cuda_version) + ") sees " +
                         std::to_string(driver_view.gpus) + " GPUs that CUDA " +
                         std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
                         " cannot use: " + cudaGetErrorString(result);
    } else {
      gpus.unavailable = std::string("no GPU: ") + cudaGetErrorString(result);
    }
    return gpus;
  }
  if (count == 0) {
    gpus.unavailable = "no GPU: the driver sees no device";
    return gpus;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp properties{};
    if (const cudaError_t result = cudaGetDeviceProperties(&properties, d); result != cudaSuccess) {
      gpus.unavailable = "GPU " + std::to_string(d) + ": " + cudaGetErrorString(result);
      gpus.devices.clear();
      gpus.unusable = count;
      return gpus;
    }
    gpus.devices.push_back({d, properties.name, gpu_uuid_text("GPU-", properties.uuid.bytes), static_cast<int64_t>(properties.totalGlobalMem)});
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (const int expected = gpus_cuda_should_find(static_cast<int>(driver_view.gpus), visible);
      driver_view.gpus > 0 && count < expected) {
    gpus.unusable = expected - count;
    gpus.unavailable = "CUDA shows " + std::to_string(count) + " of the " + std::to_string(expected) + " GPUs " +
                       (visible ? "CUDA_VISIBLE_DEVICES=" + std::string(visible) + " names" : "the driver sees") +
                       ": MIG mode (CUDA shows one instance), or CUDA was started before accept could widen "
                       "CUDA_VISIBLE_DEVICES to every GPU of the node's ranks (run one rank per node)";
  }
  return gpus;
}

namespace {

// A bf16 GEMM of n × n matrices on `work`'s device, ready to be called.
class DeviceGemm {
 public:
  DeviceGemm(DeviceWork& work, int n) : work_(work), n_(n) {
    const size_t elements = static_cast<size_t>(n) * static_cast<size_t>(n);
    // Sums of n products of values under 1 in size stay far from bf16's overflow.
    a_ = work.bf16_noise(elements);
    b_ = work.bf16_noise(elements);
    c_ = work.buffer(elements * sizeof(uint16_t), 0);
  }
  void operator()() const {
    const float one = 1, zero = 0;
    cublas().check(cublas().gemm(work_.handle(), CUBLAS_OP_N, CUBLAS_OP_N, n_, n_, n_, &one, a_, CUDA_R_16BF, n_, b_,
                                 CUDA_R_16BF, n_, &zero, c_, CUDA_R_16BF, n_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
  }
  double tflops(double seconds_per_call) const {
    return 2.0 * n_ * static_cast<double>(n_) * n_ / seconds_per_call / 1e12;
  }

 private:
  DeviceWork& work_;
  int n_;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
};

// NVML's reasons the clocks of one GPU (by its UUID) are held back, read as
// often as asked while NVML stays initialised.
class ClockReasons {
 public:
  static constexpr uint64_t kUnknown = uint64_t{1} << 63;

  explicit ClockReasons(const std::string& uuid) {
    void* library = open_library("libnvidia-ml.so.1");
    const auto init = symbol<int (*)()>(library, "nvmlInit_v2");
    const auto by_uuid = symbol<int (*)(const char*, void**)>(library, "nvmlDeviceGetHandleByUUID");
    reasons_ = symbol<int (*)(void*, unsigned long long*)>(library, "nvmlDeviceGetCurrentClocksThrottleReasons");
    shutdown_ = symbol<int (*)()>(library, "nvmlShutdown");
    initialised_ = init && by_uuid && reasons_ && shutdown_ && init() == 0;
    if (initialised_ && by_uuid(uuid.c_str(), &device_) != 0) device_ = nullptr;
  }
  ~ClockReasons() {
    if (initialised_) shutdown_();
  }
  ClockReasons(const ClockReasons&) = delete;
  ClockReasons& operator=(const ClockReasons&) = delete;

  // nvml.h's clocks-event reason bits now, or kUnknown.
  uint64_t now() const {
    unsigned long long bits = 0;
    return device_ && reasons_(device_, &bits) == 0 ? bits : kUnknown;
  }
  // The faults among `bits`: idle, application clocks, sync boost and display clocks are none.
  static std::string text(uint64_t bits) {
    if (bits & kUnknown) return "unknown";
    constexpr std::pair<uint64_t, const char*> kFaults[] = {{0x4, "SW power cap"},
                                                            {0x8, "HW slowdown"},
                                                            {0x20, "SW thermal slowdown"},
                                                            {0x40, "HW thermal slowdown"},
                                                            {0x80, "HW power brake slowdown"}};
    std::string held_back;
    for (const auto& [bit, name] : kFaults)
      if (bits & bit) held_back += (held_back.empty() ? "" : ", ") + std::string(name);
    return held_back;
  }

 private:
  int (*reasons_)(void*, unsigned long long*) = nullptr;
  int (*shutdown_)() = nullptr;
  bool initialised_ = false;
  void* device_ = nullptr;
};

}  // namespace

double gpu_gemm_tflops(int device, int n) {
  DeviceWork work(device);
  const DeviceGemm gemm(work, n);
  return gemm.tflops(work.seconds_per_call(gemm));
}

HeldGemm gpu_gemm_held(int device, const std::string& uuid, int n, std::chrono::steady_clock::time_point until) {
  DeviceWork work(device);
  const DeviceGemm gemm(work, n);
  ClockReasons reasons(uuid);
  std::vector<double> slices;
  std::vector<uint64_t> bits;  // what NVML said during each slice
  do {
    uint64_t during = 0;
    slices.push_back(gemm.tflops(work.seconds_per_call(gemm, 1.0, [&] { during = reasons.now(); })));
    bits.push_back(during);
  } while (std::chrono::steady_clock::now() < until);
  uint64_t held_back = 0;
  for (size_t s = bits.size() / 2; s < bits.size(); ++s) held_back |= bits[s];
  return {slices, ClockReasons::text(held_back)};
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
