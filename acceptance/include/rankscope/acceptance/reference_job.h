// The last stage of `rankscope accept`: a short training job on every node,
// shaped as PyTorch's DistributedDataParallel trains (forward and backward
// through the BLAS GEMM of the compute check, gradient buckets all-reduced
// as backward goes, a ProfilerStep#N range per step), recorded into the
// run's timeline; then the product's own job profile and straggler analysis
// judge it there, as they would a user's job (docs/accept-reference.md).
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <string_view>

#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/run_timeline.h"

namespace rankscope::acceptance {

struct ReferenceJobSize {
  int gemm_n = 256;           // a layer's weights and activations: n × n doubles per thread
  int layers = 6;
  int layers_per_bucket = 2;  // a gradient bucket: the float32 gradients of this many layers
  int steps = 12;             // recorded, after one warm-up step that is not
};
// "quick" or "full", as level_named.
ReferenceJobSize reference_job_size(std::string_view level);

// Collective over `comm` (one rank per node): the job on `threads` threads
// per node. `progress` is called on rank 0 with a line to show.
void run_reference_job(MPI_Comm comm, const ReferenceJobSize& size, int threads, RunTimeline& timeline,
                       const std::function<void(const std::string&)>& progress);

// On the run's merged timeline (node n is rank n): the job's figures into
// `measurements.reference_job`, and each node's. Throws Error naming the file.
void analyse_reference_job(const std::string& timeline, Measurements& measurements);

}  // namespace rankscope::acceptance
