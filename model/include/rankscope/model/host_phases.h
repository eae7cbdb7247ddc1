// The phases of a training step, known by the names of host ranges: what
// the Python hook records (docs/pytorch.md), what torch.profiler
// records (its record_function names), and what users name their own NVTX
// ranges or annotations. The report's step breakdown books time by them
// (docs/report-reference.md, "Step breakdown").
#pragma once

#include <cstdint>
#include <string_view>

namespace rankscope {

enum class HostPhase : uint8_t { kNone, kDataLoading, kForward, kBackward, kOptimizer };
inline constexpr int kHostPhaseCount = 5;

// The phase a range of this name marks; kNone for any other name.
//  - data loading: "enumerate(DataLoader)#..." (DataLoader's __next__);
//  - forward: "forward", and DDP's "DistributedDataParallel.forward";
//  - backward: "backward", and the autograd engine's
//    "autograd::engine::evaluate_function: ..." (one per node, in traces);
//  - optimizer: "Optimizer.step#..." and "Optimizer.zero_grad#..." (torch.optim's),
//    "optimizer", "optimizer step".
// Users' own names match case-insensitively, with '#', ' ', '_' and '.'
// around them ignored and '_' or '.' read as a space: "## forward ##",
// "Forward", "optimizer_step" and "optimizer.step" are phases too.
HostPhase host_phase(std::string_view range_name);

std::string_view host_phase_name(HostPhase phase);  // "data loading", "forward", ...

}  // namespace rankscope
