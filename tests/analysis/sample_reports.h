// Reports built by hand for the HTML report's tests: the page is tested apart
// from the analyses that fill a Report from a timeline.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "rankscope/analysis/bottlenecks.h"
#include "rankscope/analysis/breakdown.h"
#include "rankscope/analysis/buckets.h"
#include "rankscope/analysis/capture_cost.h"
#include "rankscope/analysis/overlap.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/report.h"
#include "rankscope/analysis/stragglers.h"
#include "rankscope/model/host_phases.h"

namespace rankscope::test {

// `ranks` ranks over `steps` steps of 10 ms, four ranks per host. Rank
// `slow_rank` computes 3 ms longer every step, so the others wait for it;
// rank 1 never communicates; the last rank died before the last step. With
// DDP-like buckets (a small first one, then 25 MiB ones) and predictions that
// favour 25 MiB.
inline analysis::Report sample_report(int ranks, int steps, int slow_rank = 2) {
  using namespace analysis;
  Report report;
  JobProfile& job = report.profile;
  job.path = "/scratch/jobs/ddp_run/job.h5";
  job.world_size = ranks;
  job.gpu = true;
  job.clock_corrected = true;
  job.clock_reference = 0;
  for (int s = 0; s < steps; ++s) job.step_numbers.push_back(static_cast<uint64_t>(s + 3));
  for (int r = 0; r < ranks; ++r) {
    RankProfile rank;
    rank.rank = r;
    rank.node_id = r / 4;
    rank.host = "gpu-node-" + std::to_string(r / 4);
    const bool dies = r == ranks - 1 && ranks > 1;
    rank.status = dies ? RankStatus::kDead : RankStatus::kComplete;
    for (int s = 0; s < steps; ++s) {
      RankStep step;
      if (dies && s == steps - 1) {
        rank.steps.push_back(step);  // unknown times: the rank lacks the step
        continue;
      }
      step.times = {int64_t{1'000'000'000} + s * int64_t{10'000'000}, int64_t{1'010'000'000} + s * int64_t{10'000'000}};
      step.compute_ns = r == slow_rank ? 8'500'000 : 5'500'000;
      step.comm_ns = r == 1 ? 0 : 3'000'000;
      step.overlap_ns = r == 1 ? 0 : 1'000'000 + 20'000 * (r % 50);
      // Waits vary by step and rank so that the heatmap has texture.
      step.exposed_wait_ns = r == slow_rank || r == 1 ? 0 : 300'000 * ((r * 7 + s * 3) % 9) + 200'000;
      step.exposed_transfer_ns = r == 1 ? 0 : 400'000;
      step.idle_ns = 100'000;
      step.data_loading_ns = 1'200'000 + 100'000 * (r % 3);
      step.forward_ns = r == slow_rank ? 4'000'000 : 1'500'000;
      step.backward_ns = 3'000'000;
      if (r != 1) {
        // On the GPU: kernels, a copy, a sync stall and a host-bound gap every step.
        StepDeviceWork& d = step.device;
        const int64_t parts[kWorkCategoryCount] = {5'500'000, 300'000, 50'000, 400'000,
                                                   500'000, 1'200'000, 1'500'000, 0};
        int64_t booked = 0;
        for (int c = 0; c < kWorkCategoryCount; ++c) booked += d.work_ns[c] = parts[c];
        d.work_ns[static_cast<size_t>(WorkCategory::kOther)] = 10'000'000 - booked;
        d.idle_ns[static_cast<size_t>(IdleCause::kHostBound)] = 1'000'000;
        d.idle_ns[static_cast<size_t>(IdleCause::kSyncStall)] = 600'000;
        d.launches = 400;
        d.tiny_kernels = 120;
        d.syncs = 1;
        d.sync_ns = 700'000;
        d.copy_bytes[static_cast<size_t>(CopyDirection::kHostToDevice)] = 64u << 20;
        d.copy_ns[static_cast<size_t>(CopyDirection::kHostToDevice)] = 300'000;
      }
      rank.steps.push_back(step);
    }
    // Data loading, forward and backward marked; no optimizer range.
    rank.phases_seen = (1u << static_cast<unsigned>(HostPhase::kDataLoading)) |
                       (1u << static_cast<unsigned>(HostPhase::kForward)) |
                       (1u << static_cast<unsigned>(HostPhase::kBackward));
    rank.communicated = r != 1;
    if (r != 1) {
      rank.device.gpu = true;
      // Kernels named 0 and 1 in the job's strings; the slow rank's GEMMs take longer.
      KernelTotals gemm{0, uint64_t(steps) * 100, int64_t{steps} * (r == slow_rank ? 4'500'000 : 3'000'000),
                        20'000, 80'000, {}};
      gemm.histogram[3] = static_cast<uint32_t>(gemm.count);
      KernelTotals elementwise{1, uint64_t(steps) * 300, int64_t{steps} * 1'500'000, 2'000, 9'000, {}};
      elementwise.histogram[1] = static_cast<uint32_t>(elementwise.count);
      rank.device.kernels = {gemm, elementwise};
      rank.device.largest_gaps.push_back(
          {1'000'000'000 + 200'000, 1'000'000'000 + 900'000, 0, steps > 0 ? 0 : -1, IdleCause::kHostBound});
    }
    job.ranks.push_back(rank);

    RankClock clock;
    clock.synced = true;
    clock.bound_ns = 1'500 + 37 * r;
    job.clocks.push_back(clock);

    RankOverlap overlap;
    overlap.rank = r;
    overlap.compute_ns = int64_t{steps} * (r == slow_rank ? 8'500'000 : 5'500'000);
    overlap.comm_ns = r == 1 ? 0 : int64_t{steps} * 3'000'000;
    overlap.overlap_ns = r == 1 ? 0 : int64_t{steps} * (1'000'000 + 20'000 * (r % 50));
    overlap.comm_comp_overlap_pct = overlap.comm_ns == 0 ? NAN
                                                         : 100.0 * static_cast<double>(overlap.overlap_ns) /
                                                               static_cast<double>(overlap.comm_ns);
    overlap.exposed_wait_ns = int64_t{steps} * 1'000'000;
    overlap.exposed_transfer_ns = int64_t{steps} * 400'000;
    overlap.idle_ns = int64_t{steps} * 100'000;
    overlap.idle_pct = 1.0;
    report.overlap.push_back(overlap);
  }

  if (slow_rank < ranks) {
    Straggler straggler;
    straggler.rank = slow_rank;
    straggler.score = 0.87;
    straggler.cause = "slow compute";
    straggler.evidence = "rank " + std::to_string(slow_rank) +
                         " arrived last to 92 % of collectives (chance 25 %); its compute per step is 1.55× the "
                         "fastest peer's; the others waited 3.1 ms per step for it";
    straggler.last_arriver_rate = 0.92;
    straggler.baseline_rate = 1.0 / ranks;
    straggler.blame_ns = int64_t{steps} * 3'100'000;
    straggler.blame_fraction = 0.31;
    straggler.compute_score_relative = 1.55;
    straggler.compute_score_individual = 1.02;
    straggler.actual_step_ns = 10'000'000;
    straggler.what_if_step_ns = 7'100'000;
    report.stragglers.stragglers.push_back(straggler);
  }

  BucketReport& buckets = report.buckets;
  buckets.ddp = true;
  for (int b = 0; b < 6; ++b) {
    BucketStats bucket;
    bucket.index = b;
    bucket.bytes = b == 0 ? 1u << 20 : 25u << 20;
    bucket.transfer_ns = b == 0 ? 180'000 : 2'400'000 + 50'000 * b;
    bucket.bus_bandwidth_gbps = b == 0 ? 9.3 : 20.5 - 0.4 * b;
    bucket.algorithm = Algorithm::kRing;
    bucket.overlap_pct = b == 5 ? 12.0 : 85.0 - 5 * b;
    bucket.exposed_ns = b == 5 ? 2'100'000 : 150'000 * b;
    buckets.buckets.push_back(bucket);
  }
  buckets.exposed_tail_ns = 2'100'000;
  buckets.fit = {25'000, 0.045, 0.993, 60};
  for (const uint64_t mib : {1, 2, 5, 10, 25, 50, 100}) {
    const double size = static_cast<double>(mib);
    // Small buckets pay the latency often; big ones leave a long exposed tail.
    buckets.predictions.push_back({mib << 20, static_cast<int64_t>(9'000'000 + 1'800'000 / size + 26'000 * size)});
  }
  buckets.recommended_bucket_bytes = 25u << 20;
  buckets.recommendation = "Keep bucket_cap_mb at 25: the predicted step time is within 1 % of the best size.";
  for (int r = 0; r < ranks; ++r) {
    analysis::CaptureCost cost;
    cost.rank = r;
    cost.capture_ns = 2'000'000'000;
    cost.start_ns = 500'000;
    cost.mpi_init_ns = 6'000'000;
    cost.mpi_finalize_ns = 100'000;
    cost.finish_ns = 150'000;
    cost.flusher_cpu_ns = 3'000'000;
    cost.host_events = 40'000;
    cost.events_ns = 2'250'000;
    // Rank 1's poll cost could not be calibrated, rank 2's was: both forms rendered.
    if (r == 1 || r == 2) cost.polls_counted = 1'500'000;
    if (r == 1) cost.polls_unmeasured = "the calibration could not tell a poll from MPI's own call";
    if (r == 2) cost.polls_ns = 15'000'000;
    cost.buffer_bytes = 3u << 20;
    report.capture_cost.push_back(cost);
  }
  report.breakdown = step_breakdown(job);
  job.strings = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"ampere_sgemm_128x64_tn <\"escaped\">", "vectorized_elementwise_kernel"});
  report.bottlenecks = find_bottlenecks(job, report.breakdown, report.stragglers, report.buckets, report.ends);
  return report;
}

// One rank, steps but no communication: no collectives, waits or buckets.
inline analysis::Report single_rank_report(int steps) {
  analysis::Report report = sample_report(1, steps, /*slow_rank=*/1);
  for (analysis::RankStep& step : report.profile.ranks[0].steps) {
    step.comm_ns = step.overlap_ns = step.exposed_wait_ns = step.exposed_transfer_ns = 0;
  }
  report.overlap[0].comm_ns = report.overlap[0].overlap_ns = 0;
  report.overlap[0].comm_comp_overlap_pct = NAN;
  report.profile.ranks[0].communicated = false;
  report.breakdown = analysis::step_breakdown(report.profile);
  report.buckets = {};
  return report;
}

}  // namespace rankscope::test
