// Holistic Trace Analysis' figures for one rank, by its definitions
// (docs/report-reference.md, "--hta-compat"): GPU events classified by kernel name,
// HTA's window and its whole-µs rounding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analysis/profile.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// HTA's idle time breakdown of one stream: each gap before a GPU operation
// (the previous operation's end to its start) is host wait where its
// launching call began after that end, else kernel wait below 30 µs, else other.
struct HtaStreamIdle {
  int64_t stream = 0;
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
};
// HTA's GPU kernel breakdown: the time of each kernel type alone and of each
// overlap of types ("COMPUTATION overlapping COMMUNICATION"), from the types'
// merged intervals.
struct HtaKernelType {
  std::string kernel_type;
  int64_t sum_ns = 0;
};
// HTA's CUDA kernel launch statistics (its cutoffs: 50 µs on the launch
// call, 100 µs on the launch delay).
struct HtaLaunchStats {
  uint64_t events = 0;                 // GPU operations joined to their launch call
  uint64_t short_kernels = 0;          // launch call ≤ 50 µs and the GPU's time shorter than the call's
  uint64_t runtime_outliers = 0;       // launch call > 50 µs
  uint64_t launch_delay_outliers = 0;  // GPU start − launch call end > 100 µs
};
struct HtaFigures {
  double comm_comp_overlap_pct = 0;  // NaN without communication kernels
  int64_t kernel_time_ns = 0;        // first GPU event's start to last one's end; 0: no GPU event, no breakdown
  double idle_pct = 0, compute_pct = 0, non_compute_pct = 0;
  std::vector<HtaStreamIdle> idle_breakdown;    // by stream
  std::vector<HtaKernelType> kernel_breakdown;  // in HTA's order of types
  HtaLaunchStats launch_stats;
};

// A trace timestamp of `ns` nanoseconds as HTA reads it: the µs the trace
// writes, parsed to the nearest float64 (correctly rounded, as Python does).
double hta_microseconds(int64_t ns);

// HTA's overlap and temporal breakdown per rank, streamed from the timeline
// in one read of each rank; HTA's window is the profile's (build_profile of
// the same timeline). Nothing for missing ranks.
std::vector<std::optional<HtaFigures>> hta_figures(const Timeline& timeline, const JobProfile& job);

}  // namespace rankscope::analysis
