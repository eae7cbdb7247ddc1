// gpu_train's kernels, launched on a stream; each returns the launch's error.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gpu_train {

cudaError_t fill_uniform(float* out, size_t n, float low, float high, uint64_t seed, cudaStream_t stream);
cudaError_t relu_forward(const float* z, float* x, size_t n, cudaStream_t stream);
cudaError_t relu_backward(const float* dx, const float* z, float* dz, size_t n, cudaStream_t stream);
// Mean squared error against zero: dy, and the loss added to *loss.
cudaError_t mse_loss_grad(const float* y, float* dy, float* loss, size_t n, cudaStream_t stream);
cudaError_t sgd_update(float* weights, const float* gradients, size_t n, float step_size, cudaStream_t stream);

}  // namespace gpu_train
