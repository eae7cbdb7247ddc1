// gpu_train: data-parallel training on real GPUs, the way a DDP job does it,
// with everything it launches written down, so that what a profiler captured
// can be checked against what ran (docs/examples.md).
//
// Each step: the batch is copied in, a stack of fully connected layers runs
// forward and backward through cuBLAS with ReLU kernels of our own, gradients
// are bucketed as DDP buckets them and each bucket is all-reduced as soon as
// its last layer's gradient is ready, on a stream of its own (NCCL), or staged
// through host memory and MPI_Allreduce (--comm mpi: several ranks may share
// one GPU); then SGD updates the weights and the loss is copied back.
//
// The truth file lists, per step, every kernel by name, every copy and memset
// with its bytes, and every collective. They are counted by an instrument
// independent of any profiler: one step's compute is captured into a CUDA
// graph (never launched) and the graph's kernel, copy and memset nodes are
// read back, which also counts what cuBLAS launches inside. An unnumbered
// warm-up step runs first, so that one-time work (NCCL's connections, the
// libraries' first uploads) falls outside the numbered steps.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <mpi.h>
#include <nccl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ddp_buckets.h"
#include "gpu_train_kernels.h"
#include "rankscope/model/json.h"
#include "rankscope/model/text.h"
#define DDP_SIM_HAVE_NVTX 1
#include "nvtx_annotations.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "gpu_train: %s\n", what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void check(cudaError_t result, const char* call) {
  if (result != cudaSuccess) fail(std::string(call) + ": " + cudaGetErrorString(result));
}
void check(cublasStatus_t result, const char* call) {
  if (result != CUBLAS_STATUS_SUCCESS) fail(std::string(call) + ": " + cublasGetStatusString(result));
}
void check(ncclResult_t result, const char* call) {
  if (result != ncclSuccess) fail(std::string(call) + ": " + ncclGetErrorString(result));
}
#define CHECK(call) check((call), #call)

// ---------------------------------------------------------------- options ---

struct Options {
  int steps = 20;
  int layers = 8;
  int dim = 2048;
  int batch = 8192;
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  std::string comm = "nccl";
  std::string truth_path;  // "%r" becomes the rank
  // cudaProfilerStart before the first of these steps, cudaProfilerStop
  // once the last has finished; empty: never called.
  std::vector<int> profile_steps;
  // A straggler that never comes: this rank sleeps this long before this step.
  std::vector<int> stall;  // rank, step, seconds
  // Bottlenecks injected into every numbered step, for the report's verdict
  // (docs/report-reference.md, "What is slow in a step"); outside the graph count.
  double data_loading_us = 0;  // the step first waits for its batch, the GPU idle
  bool sync_every_step = false;  // a blocking copy of the loss after forward, as .item() does, then host work
  int tiny_kernels = 0;        // kernels on 32 floats, each shorter than its launch
  double pageable_mb = 0;      // a copy in from pageable host memory
  double leak_mb = 0;          // device memory allocated and never freed
};

Options parse(int argc, char** argv) {
  Options options;
  CLI::App app("gpu_train: data-parallel training on GPUs with a truth file of what it launched");
  app.add_option("--steps", options.steps, "training steps, each a ProfilerStep#N NVTX range")->check(CLI::Range(1, 100000));
  app.add_option("--layers", options.layers, "fully connected layers")->check(CLI::Range(1, 256));
  app.add_option("--dim", options.dim, "features per layer (weights are dim x dim floats)")->check(CLI::Range(32, 16384));
  app.add_option("--batch", options.batch, "rows per batch")->check(CLI::Range(32, 1 << 20));
  app.add_option("--bucket-mb", options.bucket_mb, "DDP bucket cap in MiB")->check(CLI::PositiveNumber);
  app.add_option("--first-bucket-mb", options.first_bucket_mb, "DDP's first bucket cap in MiB")->check(CLI::PositiveNumber);
  app.add_option("--comm", options.comm, "gradient all-reduce: nccl (one GPU per rank) or mpi (host-staged; ranks may share a GPU)")
      ->check(CLI::IsMember({"nccl", "mpi"}));
  app.add_option("--truth", options.truth_path, "write what each rank launched to this JSON file (%r: the rank)");
  app.add_option("--profile-steps", options.profile_steps,
                 "FIRST LAST: cudaProfilerStart before step FIRST, cudaProfilerStop once step LAST has finished")
      ->expected(2);
  app.add_option("--stall", options.stall, "RANK STEP SECONDS: rank RANK sleeps SECONDS before step STEP (a hang)")
      ->expected(3);
  app.add_option("--data-loading-us", options.data_loading_us,
                 "inject: each step first waits this long for its batch, in a \"data loading\" range")
      ->check(CLI::Range(0.0, 3.6e9));
  app.add_flag("--sync-every-step", options.sync_every_step,
               "inject: a blocking copy of the loss after forward (as .item() does), then 200 us of host work");
  app.add_option("--tiny-kernels", options.tiny_kernels, "inject: this many kernels on 32 floats a step")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--pageable-mb", options.pageable_mb, "inject: a copy of this many MiB in from pageable memory a step")
      ->check(CLI::Range(0.0, 65536.0));
  app.add_option("--leak-mb", options.leak_mb, "inject: this many MiB of device memory allocated a step, never freed")
      ->check(CLI::Range(0.0, 65536.0));
  try {
    app.parse(argc, argv);
    if (!options.profile_steps.empty() &&
        (options.profile_steps[0] < 0 || options.profile_steps[0] > options.profile_steps[1] ||
         options.profile_steps[1] >= options.steps)) {
      throw CLI::ValidationError("--profile-steps", "needs 0 <= FIRST <= LAST < --steps");
    }
  } catch (const CLI::ParseError& error) {
    const int status = app.exit(error);
    MPI_Finalize();
    std::exit(status);
  }
  return options;
}

// ------------------------------------------------------ independent count ---

// Driver entry points through the runtime, so the program links no libcuda.
struct DriverGraphApi {
  decltype(&cuGraphKernelNodeGetParams) kernel_node_params = nullptr;
  decltype(&cuFuncGetName) function_name = nullptr;
  decltype(&cuKernelGetName) kernel_name = nullptr;

  void load() {
    const auto entry = [](const char* symbol, auto& function) {
      cudaDriverEntryPointQueryResult found{};
      CHECK(cudaGetDriverEntryPointByVersion(symbol, reinterpret_cast<void**>(&function), 12030, cudaEnableDefault,
                                             &found));
      if (found != cudaDriverEntryPointSuccess) fail(std::string("the driver lacks ") + symbol);
    };
    entry("cuGraphKernelNodeGetParams", kernel_node_params);
    entry("cuFuncGetName", function_name);
    entry("cuKernelGetName", kernel_name);
  }
};

std::string demangled(const char* name) {
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && text ? text : name;
  std::free(text);
  return result;
}

struct Copy {
  std::string kind;  // as CUPTI names it: HtoD, DtoH, DtoD
  size_t bytes;
};

// What a captured graph holds: kernels by demangled name, copies, memsets.
struct GraphWork {
  std::map<std::string, int> kernels;
  std::vector<Copy> copies;
  std::vector<size_t> memsets;  // bytes
};

// "H" or "D": where a copy's end lies, as CUPTI's copy kinds name it.
const char* memory_side(const void* pointer) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return "H";  // pageable host memory CUDA never saw
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged ? "D" : "H";
}

GraphWork work_in(cudaGraph_t graph, const DriverGraphApi& driver) {
  size_t count = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  GraphWork work;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeMemset) {
      cudaMemsetParams params{};
      CHECK(cudaGraphMemsetNodeGetParams(node, &params));
      work.memsets.push_back(size_t{params.elementSize} * params.width * params.height);
    } else if (type == cudaGraphNodeTypeMemcpy) {
      cudaMemcpy3DParms params{};
      CHECK(cudaGraphMemcpyNodeGetParams(node, &params));
      work.copies.push_back({std::string(memory_side(params.srcPtr.ptr)) + "to" + memory_side(params.dstPtr.ptr),
                             params.extent.width * params.extent.height * params.extent.depth});
    } else if (type == cudaGraphNodeTypeKernel) {
      CUDA_KERNEL_NODE_PARAMS params{};
      if (driver.kernel_node_params(reinterpret_cast<CUgraphNode>(node), &params) != CUDA_SUCCESS) {
        fail("cuGraphKernelNodeGetParams failed");
      }
      const char* name = nullptr;
      CUresult named = CUDA_ERROR_INVALID_VALUE;
      if (params.func != nullptr) named = driver.function_name(&name, params.func);
      if (named != CUDA_SUCCESS && params.kern != nullptr) named = driver.kernel_name(&name, params.kern);
      if (named != CUDA_SUCCESS || name == nullptr) fail("a captured kernel has no name");
      ++work.kernels[demangled(name)];
    }
  }
  return work;
}

// ------------------------------------------------------------------ model ---

class Trainer {
 public:
  Trainer(const Options& options, int rank, int world_size)
      : options_(options), rank_(rank), world_size_(world_size) {
    const size_t dim = options.dim;
    const size_t batch = options.batch;
    weight_floats_ = dim * dim;
    activation_floats_ = batch * dim;
    CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    CHECK(cublasCreate(&cublas_));
    CHECK(cublasSetStream(cublas_, compute_));
    // A workspace of our own: cuBLAS then picks the same kernels in a graph
    // capture and outside it.
    CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
    CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));

    const std::vector<size_t> layer_bytes(options.layers, weight_floats_ * sizeof(float));
    const auto mib = [](double value) { return static_cast<size_t>(value * 1024.0 * 1024.0); };
    buckets_ = ddp_sim::assign_ddp_buckets(layer_bytes, mib(options.first_bucket_mb), mib(options.bucket_mb));
    // Buckets lie in backward's order, each one contiguous range; inside a
    // bucket its layers lie in weight order, so one update covers the bucket.
    gradient_offset_.resize(options.layers);
    size_t offset = 0;
    for (const ddp_sim::Bucket& bucket : buckets_) {
      bucket_offset_.push_back(offset);
      bucket_lowest_layer_.push_back(bucket.layers.back());
      for (int layer : bucket.layers) gradient_offset_[layer] = offset + weight_floats_ * (layer - bucket.layers.back());
      offset += bucket.bytes / sizeof(float);
    }
    layer_closes_bucket_.assign(options.layers, -1);
    for (const ddp_sim::Bucket& bucket : buckets_) layer_closes_bucket_[bucket.layers.back()] = bucket.index;

    CHECK(cudaMalloc(&weights_, weight_floats_ * options.layers * sizeof(float)));
    CHECK(cudaMalloc(&gradients_, weight_floats_ * options.layers * sizeof(float)));
    activations_.resize(options.layers + 1);
    pre_activations_.resize(options.layers);
    for (float*& x : activations_) CHECK(cudaMalloc(&x, activation_floats_ * sizeof(float)));
    for (float*& z : pre_activations_) CHECK(cudaMalloc(&z, activation_floats_ * sizeof(float)));
    CHECK(cudaMalloc(&upstream_, activation_floats_ * sizeof(float)));
    CHECK(cudaMalloc(&downstream_, activation_floats_ * sizeof(float)));
    CHECK(cudaMalloc(&loss_, sizeof(float)));
    CHECK(cudaMallocHost(&host_batch_, activation_floats_ * sizeof(float)));
    CHECK(cudaMallocHost(&host_loss_, sizeof(float)));
    if (options.tiny_kernels > 0) CHECK(cudaMalloc(&tiny_, kTinyFloats * sizeof(float)));
    if (options.pageable_mb > 0) {
      pageable_.assign(static_cast<size_t>(options.pageable_mb * 1024 * 1024 / sizeof(float)), 1.0f);
      CHECK(cudaMalloc(&pageable_target_, pageable_.size() * sizeof(float)));
    }
    if (options.comm == "mpi") CHECK(cudaMallocHost(&host_gradients_, weight_floats_ * options.layers * sizeof(float)));
    for (size_t i = 0; i < activation_floats_; ++i) host_batch_[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f;

    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    CHECK(gpu_train::fill_uniform(weights_, weight_floats_ * options.layers, -scale, scale, 42, compute_));
    CHECK(cudaStreamSynchronize(compute_));

    bucket_ready_.resize(buckets_.size());
    bucket_begin_.resize(buckets_.size());
    bucket_end_.resize(buckets_.size());
    for (cudaEvent_t& e : bucket_ready_) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (cudaEvent_t& e : bucket_begin_) CHECK(cudaEventCreate(&e));
    for (cudaEvent_t& e : bucket_end_) CHECK(cudaEventCreate(&e));
    CHECK(cudaEventCreateWithFlags(&gradients_reduced_, cudaEventDisableTiming));

    if (options.comm == "nccl") {
      ncclUniqueId id{};
      if (rank == 0) CHECK(ncclGetUniqueId(&id));
      MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
      CHECK(ncclCommInitRank(&nccl_, world_size, id, rank));
      bucket_ms_.assign(buckets_.size(), {});  // CUDA-event timings of each ncclAllReduce
    }
  }

  // One step's work on the compute stream, as a graph capture sees it: the
  // copies, memsets and kernels, without the collectives.
  void compute_step(bool capturing) {
    forward();
    backward(capturing);
    if (!capturing && options_.comm == "nccl") CHECK(cudaStreamWaitEvent(compute_, gradients_reduced_, 0));
    update();
  }

  void step(int number) {
    ddp_sim::nvtx::StepRange range(steps_domain_, number);
    const auto begin = std::chrono::steady_clock::now();
    inject_before_step();
    compute_step(false);
    inject_after_step();
    CHECK(cudaStreamSynchronize(compute_));
    if (options_.comm == "nccl") {
      for (size_t b = 0; b < buckets_.size(); ++b) {
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, bucket_begin_[b], bucket_end_[b]));
        bucket_ms_[b].push_back(ms);
      }
    }
    step_ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count());
  }

  // The injected bottlenecks a step begins with: a batch not ready, a copy from pageable memory.
  void inject_before_step() {
    if (options_.data_loading_us > 0) {
      ddp_sim::nvtx::ScopedRange loading("data loading");
      std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(options_.data_loading_us));
    }
    if (!pageable_.empty()) {
      CHECK(cudaMemcpyAsync(pageable_target_, pageable_.data(), pageable_.size() * sizeof(float),
                            cudaMemcpyHostToDevice, compute_));
    }
  }

  // ... and ends with: the loss read as .item() reads it, tiny kernels, a growing allocation.
  void inject_after_step() {
    if (options_.sync_every_step) {
      float loss = 0;
      CHECK(cudaMemcpy(&loss, loss_, sizeof(float), cudaMemcpyDeviceToHost));
      // What the loop does with it (a log line, a check) while the GPU has nothing queued.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (int k = 0; k < options_.tiny_kernels; ++k) {
      CHECK(gpu_train::relu_forward(tiny_, tiny_, kTinyFloats, compute_));
    }
    if (options_.leak_mb > 0) {
      void* kept = nullptr;
      CHECK(cudaMalloc(&kept, static_cast<size_t>(options_.leak_mb * 1024 * 1024)));
      leaked_.push_back(kept);
    }
  }

  // One step before the numbered ones, as a training loop's first: NCCL
  // connects and the libraries make their one-time uploads here, so that
  // every numbered step launches the same work.
  void warm_up() {
    ddp_sim::nvtx::ScopedRange range("warmup");
    compute_step(false);
    CHECK(cudaStreamSynchronize(compute_));
  }

  // What one step launches, counted by a graph capture of it (which holds
  // the libraries' copies and memsets too), and the staging copies of --comm
  // mpi, which lie between MPI calls outside the graph.
  GraphWork work_per_step() {
    DriverGraphApi driver;
    driver.load();
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
    compute_step(true);
    CHECK(cudaStreamEndCapture(compute_, &graph));
    GraphWork work = work_in(graph, driver);
    CHECK(cudaGraphDestroy(graph));
    for (const Copy& copy : staging_copies_per_step()) work.copies.push_back(copy);
    return work;
  }

  // The kernels this program launches itself, counted by hand: a check on the graph's count.
  std::map<std::string, int> own_kernels_per_step() const {
    return {{"gpu_train::kernel::relu_forward(float const*, float*, unsigned long)", options_.layers},
            {"gpu_train::kernel::relu_backward(float const*, float const*, float*, unsigned long)", options_.layers},
            {"gpu_train::kernel::mse_loss_grad(float const*, float*, float*, unsigned long)", 1},
            {"gpu_train::kernel::sgd_update(float*, float const*, unsigned long, float)", static_cast<int>(buckets_.size())}};
  }

  // The copies and memsets this program makes itself: a check on the graph's count.
  std::vector<Copy> own_copies_per_step() const {
    std::vector<Copy> copies = {{"HtoD", activation_floats_ * sizeof(float)}, {"DtoH", sizeof(float)}};
    for (const Copy& copy : staging_copies_per_step()) copies.push_back(copy);
    return copies;
  }
  std::vector<size_t> own_memsets_per_step() const { return {sizeof(float)}; }

  std::vector<Copy> staging_copies_per_step() const {
    std::vector<Copy> copies;
    if (options_.comm == "mpi") {
      for (const ddp_sim::Bucket& bucket : buckets_) {
        copies.push_back({"DtoH", bucket.bytes});
        copies.push_back({"HtoD", bucket.bytes});
      }
    }
    return copies;
  }

  void write_truth(const std::string& path, const GraphWork& work, const std::string& nccl_version) const {
    cudaDeviceProp properties{};
    int device = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaGetDeviceProperties(&properties, device));
    int driver = 0, runtime = 0;
    CHECK(cudaDriverGetVersion(&driver));
    CHECK(cudaRuntimeGetVersion(&runtime));
    const std::string uuid = rankscope::gpu_uuid_text("GPU-", properties.uuid.bytes);
    const auto counts = [](rankscope::JsonWriter& json, const std::map<std::string, int>& by_name) {
      json.begin_object();
      for (const auto& [name, count] : by_name) json.key(name).value(count);
      json.end_object();
    };
    const auto bytes = [](size_t value) { return static_cast<uint64_t>(value); };

    rankscope::JsonWriter json;
    json.begin_object().key("program").value("gpu_train").key("comm").value(options_.comm);
    json.key("rank").value(rank_).key("world_size").value(world_size_).key("steps").value(options_.steps);
    json.key("layers").value(options_.layers).key("dim").value(options_.dim).key("batch").value(options_.batch);
    if (!options_.profile_steps.empty()) {
      json.key("profiled_steps").begin_array().value(options_.profile_steps[0]).value(options_.profile_steps[1]).end_array();
    }
    json.key("device").begin_object().key("name").value(properties.name).key("uuid").value(uuid);
    json.key("driver_version").value(driver).key("runtime_version").value(runtime);
    json.key("nccl_version").value(nccl_version).end_object();
    const auto copies = [&](rankscope::JsonWriter& json, const std::vector<Copy>& list) {
      json.begin_array();
      for (const Copy& copy : list) {
        json.begin_object().key("kind").value(copy.kind).key("bytes").value(bytes(copy.bytes)).end_object();
      }
      json.end_array();
    };
    const auto memsets = [&](rankscope::JsonWriter& json, const std::vector<size_t>& list) {
      json.begin_array();
      for (size_t size : list) json.begin_object().key("bytes").value(bytes(size)).end_object();
      json.end_array();
    };
    json.key("warmup_steps").value(1);
    json.key("injected").begin_object().key("data_loading_us").value(options_.data_loading_us);
    json.key("sync_every_step").value(options_.sync_every_step).key("tiny_kernels").value(options_.tiny_kernels);
    json.key("pageable_bytes").value(bytes(pageable_.size() * sizeof(float)));
    json.key("leak_bytes").value(bytes(static_cast<size_t>(options_.leak_mb * 1024 * 1024))).end_object();
    json.key("per_step").begin_object();
    json.key("kernels");
    counts(json, work.kernels);
    json.key("own_kernels");
    counts(json, own_kernels_per_step());
    json.key("memcpy");
    copies(json, work.copies);
    json.key("own_memcpy");
    copies(json, own_copies_per_step());
    json.key("memset");
    memsets(json, work.memsets);
    json.key("own_memset");
    memsets(json, own_memsets_per_step());
    json.key("collectives").begin_array();
    for (const ddp_sim::Bucket& bucket : buckets_) {
      json.begin_object().key("api").value(options_.comm == "nccl" ? "ncclAllReduce" : "MPI_Allreduce");
      json.key("bytes").value(bytes(bucket.bytes)).key("datatype").value("float32").key("op").value("sum").end_object();
    }
    json.end_array().end_object();
    json.key("buckets_bytes").begin_array();
    for (const ddp_sim::Bucket& bucket : buckets_) json.value(bytes(bucket.bytes));
    json.end_array().key("step_ms").begin_array();
    for (double ms : step_ms_) json.value(ms);
    json.end_array().key("allreduce_ms").begin_array();
    for (const std::vector<float>& times : bucket_ms_) {
      json.begin_array();
      for (float ms : times) json.value(double{ms});
      json.end_array();
    }
    json.end_array().end_object();

    std::ofstream out(path);
    out << json.str() << '\n';
    if (!out.flush()) fail("cannot write " + path);
  }

  const std::vector<double>& step_ms() const { return step_ms_; }
  const std::vector<std::vector<float>>& bucket_ms() const { return bucket_ms_; }
  const std::vector<ddp_sim::Bucket>& buckets() const { return buckets_; }
  ncclComm_t nccl() const { return nccl_; }

 private:
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

  // Row-major X (batch x dim) times W (dim x dim), in cuBLAS's column-major terms.
  void gemm(cublasOperation_t a_op, cublasOperation_t b_op, int m, int n, int k, const float* a, int lda, const float* b,
            int ldb, float* c, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    CHECK(cublasSgemm(cublas_, a_op, b_op, m, n, k, &one, a, lda, b, ldb, &zero, c, ldc));
  }

  float* weight(int layer) const { return weights_ + weight_floats_ * layer; }
  float* gradient(int layer) const { return gradients_ + gradient_offset_[layer]; }

  void forward() {
    const int d = options_.dim, batch = options_.batch;
    ddp_sim::nvtx::ScopedRange range("forward");
    CHECK(cudaMemcpyAsync(activations_[0], host_batch_, activation_floats_ * sizeof(float), cudaMemcpyHostToDevice,
                          compute_));
    for (int l = 0; l < options_.layers; ++l) {
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, d, batch, d, weight(l), d, activations_[l], d, pre_activations_[l], d);
      CHECK(gpu_train::relu_forward(pre_activations_[l], activations_[l + 1], activation_floats_, compute_));
    }
  }

  void backward(bool capturing) {
    const int d = options_.dim, batch = options_.batch;
    ddp_sim::nvtx::ScopedRange range("backward");
    CHECK(cudaMemsetAsync(loss_, 0, sizeof(float), compute_));
    CHECK(gpu_train::mse_loss_grad(activations_.back(), upstream_, loss_, activation_floats_, compute_));
    for (int l = options_.layers - 1; l >= 0; --l) {
      CHECK(gpu_train::relu_backward(upstream_, pre_activations_[l], downstream_, activation_floats_, compute_));
      // dW = X^T dZ, and dX = dZ W^T for the layer below.
      gemm(CUBLAS_OP_N, CUBLAS_OP_T, d, d, batch, downstream_, d, activations_[l], d, gradient(l), d);
      if (l > 0) {
        gemm(CUBLAS_OP_T, CUBLAS_OP_N, d, batch, d, weight(l), d, downstream_, d, upstream_, d);
      }
      if (layer_closes_bucket_[l] >= 0 && !capturing) all_reduce_bucket(layer_closes_bucket_[l]);
    }
    if (!capturing && options_.comm == "nccl") CHECK(cudaEventRecord(gradients_reduced_, comm_stream_));
  }

  void all_reduce_bucket(int index) {
    const ddp_sim::Bucket& bucket = buckets_[index];
    float* data = gradients_ + bucket_offset_[index];
    const size_t count = bucket.bytes / sizeof(float);
    if (options_.comm == "nccl") {
      CHECK(cudaEventRecord(bucket_ready_[index], compute_));
      CHECK(cudaStreamWaitEvent(comm_stream_, bucket_ready_[index], 0));
      CHECK(cudaEventRecord(bucket_begin_[index], comm_stream_));
      CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, nccl_, comm_stream_));
      CHECK(cudaEventRecord(bucket_end_[index], comm_stream_));
      return;
    }
    // Staged through the host: the copy out waits for the bucket's gradients on the compute stream.
    float* host = host_gradients_ + bucket_offset_[index];
    CHECK(cudaMemcpyAsync(host, data, bucket.bytes, cudaMemcpyDeviceToHost, compute_));
    CHECK(cudaStreamSynchronize(compute_));
    MPI_Allreduce(MPI_IN_PLACE, host, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(cudaMemcpyAsync(data, host, bucket.bytes, cudaMemcpyHostToDevice, compute_));
  }

  void update() {
    ddp_sim::nvtx::ScopedRange range("optimizer");
    const float step_size = 0.01f / static_cast<float>(world_size_);  // the gradients are summed over ranks
    for (size_t b = 0; b < buckets_.size(); ++b) {
      CHECK(gpu_train::sgd_update(weight(bucket_lowest_layer_[b]), gradients_ + bucket_offset_[b],
                                  buckets_[b].bytes / sizeof(float), step_size, compute_));
    }
    CHECK(cudaMemcpyAsync(host_loss_, loss_, sizeof(float), cudaMemcpyDeviceToHost, compute_));
  }

  const Options options_;
  const int rank_;
  const int world_size_;
  size_t weight_floats_ = 0;
  size_t activation_floats_ = 0;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  ncclComm_t nccl_ = nullptr;
  std::vector<ddp_sim::Bucket> buckets_;
  std::vector<size_t> bucket_offset_;
  std::vector<int> bucket_lowest_layer_;
  std::vector<size_t> gradient_offset_;
  std::vector<int> layer_closes_bucket_;
  float* weights_ = nullptr;
  float* gradients_ = nullptr;
  std::vector<float*> activations_;
  std::vector<float*> pre_activations_;
  float* upstream_ = nullptr;
  float* downstream_ = nullptr;
  float* loss_ = nullptr;
  float* host_batch_ = nullptr;
  static constexpr size_t kTinyFloats = 32;
  float* tiny_ = nullptr;             // --tiny-kernels' 32 floats
  std::vector<float> pageable_;       // --pageable-mb's source: ordinary host memory
  float* pageable_target_ = nullptr;
  std::vector<void*> leaked_;         // --leak-mb's allocations, never freed
  float* host_loss_ = nullptr;
  float* host_gradients_ = nullptr;
  std::vector<cudaEvent_t> bucket_ready_, bucket_begin_, bucket_end_;
  cudaEvent_t gradients_reduced_ = nullptr;
  ddp_sim::nvtx::StepDomain steps_domain_{options_.steps};
  std::vector<double> step_ms_;
  std::vector<std::vector<float>> bucket_ms_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const Options options = parse(argc, argv);

  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int local_rank = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  int devices = 0;
  if (const cudaError_t result = cudaGetDeviceCount(&devices); result != cudaSuccess || devices == 0) {
    fail(std::string("no CUDA device: ") + (result != cudaSuccess ? cudaGetErrorString(result) : "none found"));
  }
  CHECK(cudaSetDevice(local_rank % devices));

  int nccl_code = 0;
  CHECK(ncclGetVersion(&nccl_code));
  const std::string nccl_version = std::to_string(nccl_code / 10000) + "." + std::to_string(nccl_code / 100 % 100) + "." +
                                   std::to_string(nccl_code % 100);

  Trainer trainer(options, rank, world_size);
  const GraphWork work = trainer.work_per_step();
  trainer.warm_up();
  for (int step = 0; step < options.steps; ++step) {
    if (!options.stall.empty() && options.stall[0] == rank && options.stall[1] == step) {
      std::this_thread::sleep_for(std::chrono::seconds(options.stall[2]));
    }
    const bool profiled = !options.profile_steps.empty();
    if (profiled && step == options.profile_steps[0]) CHECK(cudaProfilerStart());
    trainer.step(step);
    if (profiled && step == options.profile_steps[1]) CHECK(cudaProfilerStop());
  }
  if (trainer.nccl() != nullptr) CHECK(ncclCommDestroy(trainer.nccl()));

  if (!options.truth_path.empty()) {
    std::string path = options.truth_path;
    if (const size_t at = path.find("%r"); at != std::string::npos) path.replace(at, 2, std::to_string(rank));
    trainer.write_truth(path, work, nccl_version);
  }
  if (rank == 0) {
    std::vector<double> times(trainer.step_ms().begin() + std::min<size_t>(2, trainer.step_ms().size() - 1),
                              trainer.step_ms().end());
    std::sort(times.begin(), times.end());
    std::printf("gpu_train: %d ranks, %s, %d steps, median step %.3f ms (steps 2 on), %zu buckets\n", world_size,
                options.comm.c_str(), options.steps, times[times.size() / 2], trainer.buckets().size());
    for (size_t b = 0; b < trainer.bucket_ms().size(); ++b) {
      std::vector<float> ms = trainer.bucket_ms()[b];
      std::sort(ms.begin(), ms.end());
      const double seconds = ms[ms.size() / 2] / 1e3;
      const double bytes = static_cast<double>(trainer.buckets()[b].bytes);
      const double busbw = bytes / seconds * 2.0 * (world_size - 1) / world_size / 1e9;
      std::printf("  bucket %zu: %.0f bytes, median %.3f ms, busbw %.2f GB/s\n", b, bytes, ms[ms.size() / 2], busbw);
    }
  }
  MPI_Finalize();
  return 0;
}
