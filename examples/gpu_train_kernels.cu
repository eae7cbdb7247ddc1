// gpu_train's own kernels (gpu_train.cpp): grid-stride loops, so one launch
// shape fits every size; each launcher returns the launch's error.
#include "gpu_train_kernels.h"

// Named, not anonymous: their names are what a profiler and the truth file show.
namespace gpu_train::kernel {

__device__ float uniform_from(uint64_t index, uint64_t seed) {
  uint64_t x = index * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // [0, 1)
}

__global__ void fill_uniform(float* out, size_t n, float low, float high, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    out[i] = low + (high - low) * uniform_from(i, seed);
  }
}

__global__ void relu_forward(const float* z, float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    x[i] = z[i] > 0.0f ? z[i] : 0.0f;
  }
}

__global__ void relu_backward(const float* dx, const float* z, float* dz, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    dz[i] = z[i] > 0.0f ? dx[i] : 0.0f;
  }
}

// Mean squared error against a target of zero: the gradient, and the loss summed into *loss.
__global__ void mse_loss_grad(const float* y, float* dy, float* loss, size_t n) {
  float partial = 0.0f;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    dy[i] = 2.0f * y[i] / static_cast<float>(n);
    partial += y[i] * y[i];
  }
  for (int offset = 16; offset > 0; offset /= 2) partial += __shfl_down_sync(0xFFFFFFFFu, partial, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(loss, partial / static_cast<float>(n));
}

// SGD on the averaged gradients of one bucket.
__global__ void sgd_update(float* weights, const float* gradients, size_t n, float step_size) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    weights[i] -= step_size * gradients[i];
  }
}

}  // namespace gpu_train::kernel

namespace gpu_train {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 1024;  // enough blocks to fill any current GPU

}  // namespace

cudaError_t fill_uniform(float* out, size_t n, float low, float high, uint64_t seed, cudaStream_t stream) {
  kernel::fill_uniform<<<kBlocks, kThreads, 0, stream>>>(out, n, low, high, seed);
  return cudaGetLastError();
}

cudaError_t relu_forward(const float* z, float* x, size_t n, cudaStream_t stream) {
  kernel::relu_forward<<<kBlocks, kThreads, 0, stream>>>(z, x, n);
  return cudaGetLastError();
}

cudaError_t relu_backward(const float* dx, const float* z, float* dz, size_t n, cudaStream_t stream) {
  kernel::relu_backward<<<kBlocks, kThreads, 0, stream>>>(dx, z, dz, n);
  return cudaGetLastError();
}

cudaError_t mse_loss_grad(const float* y, float* dy, float* loss, size_t n, cudaStream_t stream) {
  kernel::mse_loss_grad<<<kBlocks, kThreads, 0, stream>>>(y, dy, loss, n);
  return cudaGetLastError();
}

cudaError_t sgd_update(float* weights, const float* gradients, size_t n, float step_size, cudaStream_t stream) {
  kernel::sgd_update<<<kBlocks, kThreads, 0, stream>>>(weights, gradients, n, step_size);
  return cudaGetLastError();
}

}  // namespace gpu_train
