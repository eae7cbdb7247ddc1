// analyze_buckets on hand-built job profiles whose numbers are known: DDP's
// gradient buckets and their statistics, the α–β fit, the bucket-size
// predictor, and FSDP's units.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analysis/buckets.h"
#include "rankscope/analysis/overlap.h"
#include "rankscope/analysis/profile.h"

namespace {

using namespace rankscope;
using namespace rankscope::analysis;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kUs = 1'000;
constexpr uint64_t kComm = 0xC0FFEE;

// A job of `world` ranks whose steps all begin every `period_ns` and last `step_ns`.
JobProfile job_of(int world, int steps, int64_t period_ns, int64_t step_ns) {
  JobProfile job;
  job.world_size = world;
  for (int s = 0; s < steps; ++s) job.step_numbers.push_back(static_cast<uint64_t>(s));
  for (int r = 0; r < world; ++r) {
    RankProfile rank;
    rank.rank = r;
    for (int s = 0; s < steps; ++s) {
      RankStep step;
      step.times = {s * period_ns, s * period_ns + step_ns};
      rank.steps.push_back(step);
    }
    job.ranks.push_back(rank);
  }
  return job;
}

Participation participation(int32_t rank, int64_t arrival_ns, int64_t end_ns, int64_t exposed_wait_ns = 0,
                            int64_t exposed_transfer_ns = 0) {
  Participation p;
  p.rank = rank;
  p.enqueue_ns = p.arrival_ns = p.start_ns = arrival_ns;
  p.end_ns = end_ns;
  p.exposed_wait_ns = exposed_wait_ns;
  p.exposed_transfer_ns = exposed_transfer_ns;
  return p;
}

// Every rank arrives at `arrival_ns` and ends at `end_ns`.
CollectiveInstance collective(CommOp op, uint64_t seq, int32_t step, uint64_t bytes, int world, int64_t arrival_ns,
                              int64_t end_ns, bool nonblocking = true) {
  CollectiveInstance c;
  c.comm_hash = kComm;
  c.op = op;
  c.seq = seq;
  c.step = step;
  c.bytes = bytes;
  c.nonblocking = nonblocking;
  for (int r = 0; r < world; ++r) c.ranks.push_back(participation(r, arrival_ns, end_ns));
  return c;
}

// ----------------------------------------------------------- detection ---

TEST(Buckets, FindsGradientAllreducesAndTheirStatistics) {
  // 4 ranks, 4 steps of 50 ms. Steps 1-3 reduce buckets of 1, 8 and 4 MiB;
  // step 0, DDP's first iteration, reduces everything in one bucket and must
  // not be mixed in. A blocking allreduce (the loss) in each step and a
  // nonblocking one outside the steps are not gradient buckets.
  const int world = 4;
  JobProfile job = job_of(world, 4, 100 * kMs, 50 * kMs);
  const std::vector<uint64_t> layout{1 * kMiB, 8 * kMiB, 4 * kMiB};
  job.collectives.push_back(collective(CommOp::kAllReduce, 0, 0, 13 * kMiB, world, 30 * kMs, 40 * kMs));
  uint64_t seq = 1;
  for (int32_t step = 1; step <= 3; ++step) {
    const int64_t begin = step * 100 * kMs;
    // Pushed last bucket first: the order of the profile's list must not matter, only seq.
    for (size_t b = layout.size(); b-- > 0;) {
      // Bucket b: posted at begin + 20 + 5b ms by the last rank (rank 3), the
      // others 1 ms earlier; ends 2 + b ms + the step's index in µs later.
      const int64_t last_post = begin + (20 + 5 * static_cast<int64_t>(b)) * kMs;
      const int64_t end = last_post + (2 + static_cast<int64_t>(b)) * kMs + step * kUs;
      CollectiveInstance c = collective(CommOp::kAllReduce, seq + b, step, layout[b], world, 0, 0);
      c.algorithm = Algorithm::kRing;
      for (Participation& p : c.ranks) {
        p.arrival_ns = p.start_ns = p.rank == 3 ? last_post : last_post - kMs;
        p.end_ns = end;
        // In flight 3 + b ms on ranks 0-2 (2 + b on rank 3); 0.5 ms of it exposed, rank 3 1 ms.
        p.exposed_transfer_ns = p.rank == 3 ? kMs : kMs / 2;
      }
      job.collectives.push_back(c);
    }
    seq += layout.size();
    job.collectives.push_back(collective(CommOp::kAllReduce, 100 + static_cast<uint64_t>(step), step, 4, world,
                                         begin + 45 * kMs, begin + 46 * kMs, false));
  }
  job.collectives.push_back(collective(CommOp::kAllReduce, 50, -1, 64 * kMiB, world, 500 * kMs, 510 * kMs));

  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_TRUE(report.ddp);
  EXPECT_FALSE(report.fsdp);
  ASSERT_EQ(report.buckets.size(), 3u);
  for (size_t b = 0; b < 3; ++b) {
    const BucketStats& bucket = report.buckets[b];
    EXPECT_EQ(bucket.index, static_cast<int32_t>(b));
    EXPECT_EQ(bucket.bytes, layout[b]);
    // X = min over ranks of end − start: rank 3's (2 + b) ms + step µs; median over steps 1, 2, 3 is step 2's.
    const int64_t transfer = (2 + static_cast<int64_t>(b)) * kMs + 2 * kUs;
    EXPECT_EQ(bucket.transfer_ns, transfer);
    EXPECT_DOUBLE_EQ(bucket.bus_bandwidth_gbps,
                     static_cast<double>(layout[b]) / static_cast<double>(transfer) * 2 * 3 / 4);
    EXPECT_EQ(bucket.algorithm, Algorithm::kRing);
    // Exposed: 0.5 ms on three ranks, 1 ms on one: the median is 0.5 ms.
    EXPECT_EQ(bucket.exposed_ns, kMs / 2);
    // Hidden share on ranks 0-2: 1 − 0.5 ms / (3 + b ms + the step's µs); lower on rank 3. Of the 12
    // values the middle two are steps 1's and 2's on ranks 0-2: their mean is, to 1e-9, step 1.5's.
    const double in_flight = static_cast<double>((3 + static_cast<int64_t>(b)) * kMs) + 1.5 * kUs;
    EXPECT_NEAR(bucket.overlap_pct, 100.0 * (1 - 0.5 * kMs / in_flight), 1e-6);
  }
  // Tail: the last bucket's end − its last post = 4 ms + step µs; the median over steps.
  EXPECT_EQ(report.exposed_tail_ns, 4 * kMs + 2 * kUs);
}

TEST(Buckets, BusBandwidthIsAlgorithmBandwidthTimesTwoNMinusOneOverN) {
  // 1e9 bytes in 1 s: algbw 1 GB/s (GB = 1e9 B). NCCL allreduces count as
  // gradient buckets whether or not they are flagged nonblocking.
  for (const int world : {2, 4, 8}) {
    JobProfile job = job_of(world, 1, 10'000 * kMs, 5'000 * kMs);
    CollectiveInstance c = collective(CommOp::kAllReduce, 0, 0, 1'000'000'000, world, 100 * kMs, 1'100 * kMs, false);
    c.source = CollectiveSource::kNccl;
    job.collectives.push_back(c);
    const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
    ASSERT_EQ(report.buckets.size(), 1u) << world << " ranks";
    EXPECT_DOUBLE_EQ(report.buckets[0].bus_bandwidth_gbps, 2.0 * (world - 1) / world) << world << " ranks";
  }
}

TEST(Buckets, BlockingAllreducesAreNotBuckets) {
  JobProfile job = job_of(4, 2, 100 * kMs, 50 * kMs);
  job.collectives.push_back(collective(CommOp::kAllReduce, 0, 0, 8 * kMiB, 4, 10 * kMs, 12 * kMs, false));
  job.collectives.push_back(collective(CommOp::kAllReduce, 1, 1, 8 * kMiB, 4, 110 * kMs, 112 * kMs, false));
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  EXPECT_FALSE(report.ddp);
  EXPECT_FALSE(report.fsdp);
  EXPECT_TRUE(report.buckets.empty());
  EXPECT_TRUE(report.predictions.empty());
  EXPECT_TRUE(report.recommendation.empty());
  // No backward's tail to measure: not a tail of 0.
  EXPECT_NE(report.tail_unmeasured.find("no gradient allreduce"), std::string::npos) << report.tail_unmeasured;
}

// ------------------------------------------------------------ α–β fit ---

// Blocking collectives outside the steps, each with the given size and transfer time.
JobProfile job_with_transfers(int world, const std::vector<std::pair<CommOp, uint64_t>>& sizes,
                              const std::vector<double>& transfer_ns) {
  JobProfile job = job_of(world, 1, 10'000 * kMs, kMs);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t arrival = 1'000 * kMs + static_cast<int64_t>(i) * 100 * kMs;
    job.collectives.push_back(collective(sizes[i].first, i, -1, sizes[i].second, world, arrival,
                                         arrival + std::llround(transfer_ns[i]), false));
  }
  return job;
}

TEST(Buckets, FitRecoversAlphaAndBetaFromExactPoints) {
  // Allreduces on 4 ranks: X = 30 µs + bus bytes × 0.05 ns (20 GB/s bus bandwidth).
  const double alpha_ns = 30'000, ns_per_bus_byte = 0.05, factor = 2.0 * 3 / 4;
  std::vector<std::pair<CommOp, uint64_t>> sizes;
  std::vector<double> transfers;
  for (uint64_t mib : {1, 2, 4, 8, 16, 32, 64}) {
    sizes.push_back({CommOp::kAllReduce, mib * kMiB});
    transfers.push_back(alpha_ns + static_cast<double>(mib * kMiB) * factor * ns_per_bus_byte);
  }
  JobProfile job = job_with_transfers(4, sizes, transfers);
  // A collective whose transfer time is unknown is not a sample.
  job.collectives.push_back(collective(CommOp::kAllReduce, 99, -1, 128 * kMiB, 4, 9'000 * kMs, kUnknown, false));
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  EXPECT_FALSE(report.ddp);
  EXPECT_EQ(report.fit.samples, 7);
  EXPECT_NEAR(report.fit.alpha_ns, alpha_ns, 1.0);
  EXPECT_NEAR(report.fit.ns_per_byte, ns_per_bus_byte, 1e-7);
  EXPECT_NEAR(report.fit.r_squared, 1.0, 1e-9);
}

TEST(Buckets, FitOfNoisyPointsHasRSquaredBelowOne) {
  std::vector<std::pair<CommOp, uint64_t>> sizes;
  std::vector<double> transfers;
  const double noise[] = {+0.2, -0.15, +0.1, -0.2, +0.15, -0.1, +0.05, -0.05};
  for (int i = 0; i < 8; ++i) {
    const uint64_t bytes = (uint64_t{1} << i) * kMiB;
    sizes.push_back({CommOp::kAllReduce, bytes});
    transfers.push_back((50'000 + static_cast<double>(bytes) * 0.1) * (1 + noise[i]));
  }
  const JobProfile job = job_with_transfers(4, sizes, transfers);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  EXPECT_EQ(report.fit.samples, 8);
  EXPECT_LT(report.fit.r_squared, 0.999);
  EXPECT_GT(report.fit.r_squared, 0.5);
  EXPECT_GT(report.fit.ns_per_byte, 0);
  EXPECT_GE(report.fit.alpha_ns, 0);
}

TEST(Buckets, FitUsesBusBytesWhenTheRingModelFitsBetter) {
  // Allreduces and all-gathers on 8 ranks taking exactly α + bus bytes × c:
  // on plain bytes the two operations lie on different lines.
  const int world = 8;
  const double alpha_ns = 10'000, ns_per_bus_byte = 0.04;
  std::vector<std::pair<CommOp, uint64_t>> sizes;
  std::vector<double> ring, plain;
  for (const CommOp op : {CommOp::kAllReduce, CommOp::kAllGather}) {
    const double factor = op == CommOp::kAllReduce ? 2.0 * 7 / 8 : 7.0 / 8;
    for (uint64_t mib : {1, 4, 16, 64}) {
      sizes.push_back({op, mib * kMiB});
      ring.push_back(alpha_ns + static_cast<double>(mib * kMiB) * factor * ns_per_bus_byte);
      plain.push_back(alpha_ns + static_cast<double>(mib * kMiB) * ns_per_bus_byte);
    }
  }
  JobProfile ring_job = job_with_transfers(world, sizes, ring);
  const BucketReport ring_report = analyze_buckets(ring_job, overlap_by_rank(ring_job));
  EXPECT_NEAR(ring_report.fit.ns_per_byte, ns_per_bus_byte, 1e-7);
  EXPECT_NEAR(ring_report.fit.alpha_ns, alpha_ns, 1.0);
  EXPECT_NEAR(ring_report.fit.r_squared, 1.0, 1e-9);

  // The same sizes taking α + bytes × c whatever the operation: plain bytes fit.
  JobProfile plain_job = job_with_transfers(world, sizes, plain);
  const BucketReport plain_report = analyze_buckets(plain_job, overlap_by_rank(plain_job));
  EXPECT_NEAR(plain_report.fit.ns_per_byte, ns_per_bus_byte, 1e-7);
  EXPECT_NEAR(plain_report.fit.r_squared, 1.0, 1e-9);
}

// ------------------------------------------------------------ predictor ---

// A DDP job that behaves exactly as the predictor's model: backward produces
// gradients at a constant pace, each bucket is posted when its last byte is
// ready (the last rank, rank world−1, posts it; the others 10 µs apart
// earlier), and one channel reduces the buckets in turn, each in α + bus
// bytes × c.
struct DdpShape {
  int world = 4;
  std::vector<uint64_t> buckets;
  double ns_per_gradient_byte = 0;
  double alpha_ns = 0;
  double ns_per_bus_byte = 0;
  int steps = 5;
};

// Buckets of 1 MiB and then 3 × 32 MiB, backward at 0.4 ns a byte, the
// allreduces at `alpha_ns` plus 0.1 ns a bus byte.
DdpShape four_buckets(double alpha_ns = 20'000) {
  return {.buckets = {kMiB, 32 * kMiB, 32 * kMiB, 32 * kMiB},
          .ns_per_gradient_byte = 0.4,
          .alpha_ns = alpha_ns,
          .ns_per_bus_byte = 0.1};
}

constexpr int64_t kForwardNs = 20 * kMs, kOptimizerNs = 5 * kMs, kStepPeriodNs = 1'000 * kMs;

JobProfile ddp_job(const DdpShape& shape) {
  JobProfile job = job_of(shape.world, shape.steps, kStepPeriodNs, 0);
  const double factor = 2.0 * (shape.world - 1) / shape.world;
  uint64_t seq = 0;
  for (int32_t step = 0; step < shape.steps; ++step) {
    const int64_t begin = step * kStepPeriodNs, backward_begin = begin + kForwardNs;
    uint64_t ready_bytes = 0;
    int64_t channel_free = 0;
    for (uint64_t bytes : shape.buckets) {
      ready_bytes += bytes;
      const int64_t ready =
          backward_begin + std::llround(static_cast<double>(ready_bytes) * shape.ns_per_gradient_byte);
      const int64_t end = std::max(ready, channel_free) +
                          std::llround(shape.alpha_ns + static_cast<double>(bytes) * factor * shape.ns_per_bus_byte);
      channel_free = end;
      CollectiveInstance c = collective(CommOp::kAllReduce, seq++, step, bytes, shape.world, ready, end);
      for (Participation& p : c.ranks) p.arrival_ns = p.start_ns = ready - (shape.world - 1 - p.rank) * 10 * kUs;
      job.collectives.push_back(c);
    }
    for (RankProfile& rank : job.ranks) {
      rank.steps[static_cast<size_t>(step)].times = {begin, channel_free + kOptimizerNs};
    }
  }
  return job;
}

const BucketPrediction& prediction_for(const BucketReport& report, uint64_t bucket_bytes) {
  const auto it = std::find_if(report.predictions.begin(), report.predictions.end(),
                               [&](const BucketPrediction& p) { return p.bucket_bytes == bucket_bytes; });
  EXPECT_NE(it, report.predictions.end()) << bucket_bytes << " bytes not predicted";
  return *it;
}

TEST(Buckets, PredictorReproducesTheMeasuredStepForTheCurrentBuckets) {
  DdpShape shape = four_buckets();
  const JobProfile job = ddp_job(shape);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_TRUE(report.ddp);
  const int64_t last_transfer = std::llround(20'000 + 32.0 * kMiB * 1.5 * 0.1);
  EXPECT_EQ(report.exposed_tail_ns, last_transfer);
  EXPECT_NEAR(report.fit.alpha_ns, 20'000, 1);
  EXPECT_NEAR(report.fit.ns_per_byte, 0.1, 1e-6);
  // The current buckets are labelled by the largest.
  const int64_t measured_step = job.ranks[0].steps[0].times.duration();
  EXPECT_NEAR(static_cast<double>(prediction_for(report, 32 * kMiB).step_ns), static_cast<double>(measured_step), 2);
  // Sizes double from 1 MiB up to the first that holds every gradient after the first bucket (128 MiB).
  std::vector<uint64_t> sizes;
  for (const BucketPrediction& p : report.predictions) sizes.push_back(p.bucket_bytes);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{kMiB, 2 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB, 32 * kMiB, 64 * kMiB,
                                          128 * kMiB}));
}

// Gradient allreduces whose ends were not captured (a rank's shard cut
// short): the tail is unknown, not 0, and nothing is predicted from it.
TEST(Buckets, TailWithoutTheAllreducesEndsIsUnknownAndPredictsNothing) {
  DdpShape shape = four_buckets();
  JobProfile job = ddp_job(shape);
  EXPECT_TRUE(analyze_buckets(job, overlap_by_rank(job)).tail_unmeasured.empty());
  for (CollectiveInstance& c : job.collectives) {
    for (Participation& p : c.ranks) p.end_ns = kUnknown;
  }
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_TRUE(report.ddp);
  EXPECT_FALSE(report.tail_unmeasured.empty());
  EXPECT_TRUE(report.predictions.empty());
  EXPECT_EQ(report.recommendation.rfind("No prediction: the exposed tail", 0), 0u) << report.recommendation;
}

TEST(Buckets, PredictorPrefersSmallBucketsWhenLatencyIsSmallAndTheTailDominates) {
  // 20 µs latency; 32 MiB take 5 ms to reduce, and backward makes them in
  // 13 ms, so they never queue: the tail is the last bucket's transfer, and
  // the smallest buckets make it shortest.
  DdpShape shape = four_buckets();
  const JobProfile job = ddp_job(shape);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  EXPECT_EQ(report.recommended_bucket_bytes, kMiB);
  const int64_t current = prediction_for(report, 32 * kMiB).step_ns;
  const int64_t smallest = prediction_for(report, kMiB).step_ns;
  // The tail falls from 20 µs + 32 MiB × 1.5 × 0.1 ns = 5.053 ms to 20 µs + 1 MiB × 0.15 ns = 0.177 ms.
  EXPECT_NEAR(static_cast<double>(current - smallest), 4.876e6, 1e3);
  EXPECT_NE(report.recommendation.find("Buckets of 1 MiB instead of the current 32 MiB"), std::string::npos)
      << report.recommendation;
}

TEST(Buckets, PredictorPrefersLargeBucketsWhenLatencyIsLarge) {
  // 5 ms latency: 97 buckets of 1 MiB would keep the channel busy for half a
  // second after a 39 ms backward; a few large buckets hide their transfers.
  DdpShape shape = four_buckets(5 * kMs);
  const JobProfile job = ddp_job(shape);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  // 16 MiB buckets queue (7.5 ms each, made every 6.7 ms) and 64 MiB leave
  // a longer last transfer: the current 32 MiB are best of the candidates.
  EXPECT_EQ(report.recommended_bucket_bytes, 32 * kMiB);
  EXPECT_EQ(report.recommendation.rfind("Keep the current 32 MiB buckets", 0), 0u) << report.recommendation;
  EXPECT_GT(prediction_for(report, kMiB).step_ns, prediction_for(report, 32 * kMiB).step_ns + 300 * kMs);
  EXPECT_GT(prediction_for(report, 128 * kMiB).step_ns, prediction_for(report, 32 * kMiB).step_ns);
}

TEST(Buckets, NoRecommendationWhenTheModelMissesTheMeasuredTail) {
  // Every bucket ends with the last, as MPI's non-blocking allreduces do when
  // they progress only in the final wait: the early buckets look slow, the
  // fit's latency comes out far too large, and the model, run on the current
  // buckets, misses the measured tail by more than 10 % of the step.
  DdpShape shape = four_buckets();
  JobProfile job = ddp_job(shape);
  for (size_t i = 0; i < job.collectives.size(); i += 4) {
    const int64_t last_end = job.collectives[i + 3].ranks[0].end_ns;
    for (size_t b = i; b < i + 4; ++b) {
      for (Participation& p : job.collectives[b].ranks) p.end_ns = last_end;
    }
  }
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_FALSE(report.predictions.empty());
  EXPECT_EQ(report.recommended_bucket_bytes, 0u);
  EXPECT_EQ(report.recommendation.rfind("No recommendation: the model puts the current buckets' exposed tail", 0), 0u)
      << report.recommendation;
  EXPECT_NE(report.recommendation.find("MPI's non-blocking collectives"), std::string::npos) << report.recommendation;
}

TEST(Buckets, NoPredictionFromOneBucketPerStep) {
  DdpShape shape;
  shape.buckets = {96 * kMiB};
  shape.ns_per_gradient_byte = 0.4;
  shape.alpha_ns = 20'000;
  shape.ns_per_bus_byte = 0.1;
  const JobProfile job = ddp_job(shape);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_TRUE(report.ddp);
  EXPECT_EQ(report.buckets.size(), 1u);
  EXPECT_TRUE(report.predictions.empty());
  EXPECT_EQ(report.recommended_bucket_bytes, 0u);
  EXPECT_EQ(report.recommendation.rfind("No prediction", 0), 0u) << report.recommendation;
}

// ----------------------------------------------------------------- FSDP ---

// FSDP on 4 ranks with units of 4, 8 and 12 MiB: per step the all-gathers of
// units 0, 1, 2 (forward), then 2, 1, 0 (backward), and the reduce-scatters
// of units 2, 1, 0. Each all-gather is in flight 2 ms; unit 0's forward one is
// exposed 1 ms, every other exposed `exposed_ns`; unit u's reduce-scatter is
// exposed (u + 1) × 0.1 ms.
JobProfile fsdp_job(int64_t exposed_ns) {
  const int world = 4, steps = 3;
  const uint64_t unit_bytes[] = {4 * kMiB, 8 * kMiB, 12 * kMiB};
  JobProfile job = job_of(world, steps, 100 * kMs, 80 * kMs);
  for (int32_t step = 0; step < steps; ++step) {
    int64_t now = step * 100 * kMs + kMs;
    const int units[] = {0, 1, 2, 2, 1, 0};
    for (int position = 0; position < 6; ++position) {
      const int unit = units[position];
      CollectiveInstance c = collective(CommOp::kAllGather, static_cast<uint64_t>(step * 6 + position), step,
                                        unit_bytes[unit], world, now, now + 2 * kMs);
      for (Participation& p : c.ranks) p.exposed_transfer_ns = position == 0 ? kMs : exposed_ns;
      job.collectives.push_back(c);
      now += 5 * kMs;
    }
    for (int position = 0; position < 3; ++position) {
      const int unit = 2 - position;
      CollectiveInstance c = collective(CommOp::kReduceScatter, static_cast<uint64_t>(step * 3 + position), step,
                                        unit_bytes[unit], world, now, now + 2 * kMs);
      for (Participation& p : c.ranks) p.exposed_transfer_ns = (unit + 1) * kMs / 10;
      job.collectives.push_back(c);
      now += 5 * kMs;
    }
  }
  return job;
}

TEST(Buckets, FindsFsdpUnitsAndTheirExposedTime) {
  const JobProfile job = fsdp_job(kMs / 10);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  EXPECT_FALSE(report.ddp);
  ASSERT_TRUE(report.fsdp);
  ASSERT_EQ(report.units.size(), 3u);
  const int64_t allgather_exposed[] = {kMs + kMs / 10, 2 * kMs / 10, 2 * kMs / 10};
  for (size_t u = 0; u < 3; ++u) {
    const BucketReport::Unit& unit = report.units[u];
    EXPECT_EQ(unit.index, static_cast<int32_t>(u));
    EXPECT_EQ(unit.allgather_bytes, (4 + 4 * u) * kMiB);
    EXPECT_EQ(unit.reduce_scatter_bytes, (4 + 4 * u) * kMiB);
    EXPECT_EQ(unit.allgather_exposed_ns, allgather_exposed[u]);
    EXPECT_EQ(unit.reduce_scatter_exposed_ns, static_cast<int64_t>(u + 1) * kMs / 10);
  }
  // 0.1 of the 2 ms hidden-able all-gathers' 2 ms exposed: 95 % hidden.
  EXPECT_NE(report.prefetch_note.find("overlap the previous unit's compute (prefetch works)"), std::string::npos)
      << report.prefetch_note;
  EXPECT_NE(report.prefetch_note.find("95 %"), std::string::npos) << report.prefetch_note;
}

TEST(Buckets, FsdpWithoutPrefetchIsNamed) {
  const JobProfile job = fsdp_job(2 * kMs);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_TRUE(report.fsdp);
  EXPECT_NE(report.prefetch_note.find("do not overlap"), std::string::npos) << report.prefetch_note;
  // Per step: 1 ms for unit 0's forward all-gather and 2 ms for each of the five others.
  EXPECT_NE(report.prefetch_note.find("11 ms per step exposed"), std::string::npos) << report.prefetch_note;
}

TEST(Buckets, FsdpPrefetchThatCannotKeepUpIsNamed) {
  // Started ahead, but compute hides only 0.5 of each 2 ms all-gather.
  const JobProfile job = fsdp_job(3 * kMs / 2);
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  EXPECT_NE(report.prefetch_note.find("started ahead but outlast the previous unit's compute"), std::string::npos)
      << report.prefetch_note;
  EXPECT_NE(report.prefetch_note.find("25 %"), std::string::npos) << report.prefetch_note;
}

TEST(Buckets, FsdpRootUnitMayGatherOnlyOnce) {
  // The root unit (0), kept gathered after forward, skips its backward all-gather.
  JobProfile job = fsdp_job(kMs / 10);
  std::erase_if(job.collectives,
                [](const CollectiveInstance& c) { return c.op == CommOp::kAllGather && c.seq % 6 == 5; });
  const BucketReport report = analyze_buckets(job, overlap_by_rank(job));
  ASSERT_EQ(report.units.size(), 3u);
  EXPECT_EQ(report.units[0].allgather_exposed_ns, kMs);
  EXPECT_EQ(report.units[2].allgather_exposed_ns, 2 * kMs / 10);
}

}  // namespace
