// find_stragglers on hand-built job profiles. Two small simulators build them:
// a DDP-like job (gradient buckets allreduced over all ranks while backward
// goes on) and a job of blocking allreduces over pairs of nodes. Both add
// noise as an oversubscribed test machine does: every compute span stretched
// by up to 10 %, and now and then a rank losing its core for about a
// millisecond.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/stragglers.h"
#include "rankscope/model/format.h"

namespace rankscope::analysis {
namespace {

constexpr int64_t kMs = 1'000'000;

struct Noise {
  double jitter = 0.1;             // a compute span lasts × (1 + u), u uniform in [0, jitter]
  double stall_probability = 0.02; // per compute span: the rank loses its core ...
  double stall_mean_ns = 1.0 * kMs;  // ... for an exponentially distributed time of this mean
};

class NoisyClock {
 public:
  NoisyClock(uint64_t seed, Noise noise) : engine_(seed), noise_(noise) {}
  int64_t compute(double nominal_ns) {
    double ns = nominal_ns * (1 + std::uniform_real_distribution<double>(0, noise_.jitter)(engine_));
    if (std::bernoulli_distribution(noise_.stall_probability)(engine_))
      ns += std::exponential_distribution<double>(1 / noise_.stall_mean_ns)(engine_);
    return static_cast<int64_t>(ns);
  }
  int64_t transfer(double nominal_ns) {
    return static_cast<int64_t>(nominal_ns * (1 + std::uniform_real_distribution<double>(0, 0.05)(engine_)));
  }
  int pick(int count) { return std::uniform_int_distribution<int>(0, count - 1)(engine_); }

 private:
  std::mt19937_64 engine_;
  Noise noise_;
};

JobProfile empty_job(int ranks, int steps, int ranks_per_node) {
  JobProfile job;
  job.world_size = ranks;
  job.clock_corrected = true;
  for (int s = 0; s < steps; ++s) job.step_numbers.push_back(static_cast<uint64_t>(s));
  for (int r = 0; r < ranks; ++r) {
    RankProfile rank;
    rank.rank = r;
    rank.node_id = r / ranks_per_node;
    rank.host = "node" + std::to_string(rank.node_id);
    rank.steps.resize(static_cast<size_t>(steps));
    job.ranks.push_back(rank);
  }
  return job;
}

// ---------------------------------------------------------------- DDP job ---

constexpr int kBuckets = 4;
constexpr double kForwardNs = 6.0 * kMs, kBackwardPerBucketNs = 3.0 * kMs, kOptimizerNs = 1.0 * kMs;
constexpr double kBucketTransferNs = 1.0 * kMs;
constexpr uint64_t kWorld = 0x1;

struct DdpJob {
  int ranks = 4;
  int steps = 20;
  uint64_t seed = 1;
  Noise noise = {};
  int32_t slow_rank = -1;
  double slowdown = 1;                  // on slow_rank's compute
  double rotating_slowdown = 1;         // on the compute of one random rank per step
  int64_t rotating_host_delay_ns = 0;   // one random rank per step idles this long before its backward
  int32_t host_delayed_rank = -1;       // idles host_delay_ns before its backward in every step
  int64_t host_delay_ns = 0;
  std::vector<int32_t> late_completion_ranks = {};  // see each collective complete this much later than the others
  int64_t late_completion_ns = 0;
  bool gpu = false;
};

bool completes_late(const DdpJob& spec, int rank) {
  return std::find(spec.late_completion_ranks.begin(), spec.late_completion_ranks.end(), rank) !=
         spec.late_completion_ranks.end();
}

// Per step and rank: forward, then backward in kBuckets chunks, each chunk
// ending with the post of its bucket's allreduce (the rank's arrival); the
// allreduces run one after another once every rank has arrived, and complete
// on a rank at its next test (after a chunk) or in its final wait; then the
// optimizer. A CPU job: compute is everything outside MPI calls.
JobProfile make_ddp_job(const DdpJob& spec) {
  JobProfile job = empty_job(spec.ranks, spec.steps, 2);
  job.gpu = spec.gpu;
  NoisyClock clock(spec.seed, spec.noise);
  const size_t ranks = static_cast<size_t>(spec.ranks);
  std::vector<int64_t> now(ranks, 0);
  for (int s = 0; s < spec.steps; ++s) {
    const int rotating = (spec.rotating_slowdown != 1 || spec.rotating_host_delay_ns > 0) ? clock.pick(spec.ranks) : -1;
    std::vector<std::vector<int64_t>> arrival(ranks, std::vector<int64_t>(kBuckets));
    std::vector<int64_t> compute(ranks), idle(ranks, 0), begin = now;
    for (size_t r = 0; r < ranks; ++r) {
      const int rank = static_cast<int>(r);
      const double factor = (rank == spec.slow_rank ? spec.slowdown : 1) * (rank == rotating ? spec.rotating_slowdown : 1);
      if (rank == rotating) idle[r] += spec.rotating_host_delay_ns;
      if (rank == spec.host_delayed_rank) idle[r] += spec.host_delay_ns;
      compute[r] = clock.compute(kForwardNs * factor);
      int64_t t = begin[r] + compute[r] + idle[r];
      for (int k = 0; k < kBuckets; ++k) {
        const int64_t chunk = clock.compute(kBackwardPerBucketNs * factor);
        compute[r] += chunk;
        t += chunk;
        arrival[r][static_cast<size_t>(k)] = t;
      }
    }
    std::vector<int64_t> last_arrival(kBuckets), completion(kBuckets);
    for (size_t k = 0; k < kBuckets; ++k) {
      last_arrival[k] = 0;
      for (size_t r = 0; r < ranks; ++r) last_arrival[k] = std::max(last_arrival[k], arrival[r][k]);
      const int64_t previous = k > 0 ? completion[k - 1] : 0;
      completion[k] = std::max(last_arrival[k], previous) + clock.transfer(kBucketTransferNs);
    }
    for (size_t r = 0; r < ranks; ++r) {
      const int rank = static_cast<int>(r);
      const int64_t late = completes_late(spec, rank) ? spec.late_completion_ns : 0;
      const int64_t wait_begin = arrival[r][kBuckets - 1];
      const int64_t wait_end = std::max(wait_begin, completion[kBuckets - 1] + late);
      RankStep& step = job.ranks[r].steps[static_cast<size_t>(s)];
      step.exposed_wait_ns = std::clamp<int64_t>(last_arrival[kBuckets - 1] - wait_begin, 0, wait_end - wait_begin);
      step.exposed_transfer_ns = wait_end - wait_begin - step.exposed_wait_ns;
      const double factor = (rank == spec.slow_rank ? spec.slowdown : 1) * (rank == rotating ? spec.rotating_slowdown : 1);
      const int64_t optimizer = clock.compute(kOptimizerNs * factor);
      step.compute_ns = compute[r] + optimizer;
      step.idle_ns = idle[r];
      step.comm_ns = wait_end - arrival[r][0];
      step.overlap_ns = step.comm_ns - (wait_end - wait_begin);
      step.times = {begin[r], wait_end + optimizer};
      now[r] = step.times.end_ns;
    }
    for (size_t k = 0; k < kBuckets; ++k) {
      CollectiveInstance instance;
      instance.comm_hash = kWorld;
      instance.op = CommOp::kAllReduce;
      instance.seq = static_cast<uint64_t>(s) * kBuckets + k;
      instance.nonblocking = true;
      instance.bytes = 28u << 20;
      instance.datatype = DataType::kFloat32;
      instance.step = s;
      for (size_t r = 0; r < ranks; ++r) {
        const int64_t late = completes_late(spec, static_cast<int>(r)) ? spec.late_completion_ns : 0;
        const int64_t wait_begin = arrival[r][kBuckets - 1];
        // Completed at the first test after the allreduce ended: after a later chunk, or in the final wait.
        int64_t end = std::max(wait_begin, completion[kBuckets - 1] + late);
        for (size_t j = k + 1; j < kBuckets; ++j)
          if (arrival[r][j] >= completion[k] + late) {
            end = arrival[r][j];
            break;
          }
        Participation part;
        part.rank = static_cast<int32_t>(r);
        part.enqueue_ns = part.arrival_ns = part.start_ns = arrival[r][k];
        part.end_ns = end;
        part.wait_ns = last_arrival[k] - arrival[r][k];
        part.exposed_wait_ns = std::max<int64_t>(0, last_arrival[k] - std::max(arrival[r][k], wait_begin));
        part.exposed_transfer_ns = std::max<int64_t>(0, end - std::max(last_arrival[k], wait_begin));
        instance.ranks.push_back(part);
      }
      job.collectives.push_back(instance);
    }
  }
  return job;
}

// ------------------------------------------------------- node-pair job ---

struct PairJob {
  int nodes = 4;
  int ranks_per_node = 2;
  int steps = 20;
  uint64_t seed = 1;
  Noise noise = {};
  int32_t slow_network_node = -1;  // its inter-node transfers take network_slowdown × as long
  double network_slowdown = 1.5;
  int32_t slow_rank = -1;          // computes slowdown × as long
  double slowdown = 1;
};

// Per step: compute, then blocking allreduces in one global order: over all
// ranks, over every pair of nodes (one group per local rank, like per-rail
// groups), and within each node. Every collective ends together on its ranks.
JobProfile make_pair_job(const PairJob& spec) {
  const int ranks = spec.nodes * spec.ranks_per_node;
  JobProfile job = empty_job(ranks, spec.steps, spec.ranks_per_node);
  NoisyClock clock(spec.seed, spec.noise);
  struct Group {
    std::vector<int> members;
    uint64_t bytes;
    double transfer_ns;
  };
  std::vector<Group> groups;
  auto slowed = [&](std::vector<int> members, double transfer_ns) {
    bool slow = false;
    std::set<int> nodes;
    for (int r : members) nodes.insert(r / spec.ranks_per_node);
    if (nodes.size() > 1 && nodes.count(spec.slow_network_node)) slow = true;
    return slow ? transfer_ns * spec.network_slowdown : transfer_ns;
  };
  std::vector<int> everyone(static_cast<size_t>(ranks));
  std::iota(everyone.begin(), everyone.end(), 0);
  groups.push_back({everyone, 8u << 20, slowed(everyone, 2.0 * kMs)});
  for (int local = 0; local < spec.ranks_per_node; ++local)
    for (int i = 0; i < spec.nodes; ++i)
      for (int j = i + 1; j < spec.nodes; ++j) {
        std::vector<int> pair = {i * spec.ranks_per_node + local, j * spec.ranks_per_node + local};
        groups.push_back({pair, 4u << 20, slowed(pair, 0.5 * kMs)});
      }
  for (int i = 0; i < spec.nodes; ++i) {
    std::vector<int> node(static_cast<size_t>(spec.ranks_per_node));
    std::iota(node.begin(), node.end(), i * spec.ranks_per_node);
    groups.push_back({node, 4u << 20, 0.2 * kMs});
  }

  std::vector<int64_t> now(static_cast<size_t>(ranks), 0);
  for (int s = 0; s < spec.steps; ++s) {
    const std::vector<int64_t> begin = now;
    for (int r = 0; r < ranks; ++r) {
      RankStep& step = job.ranks[static_cast<size_t>(r)].steps[static_cast<size_t>(s)];
      step.compute_ns = clock.compute(10.0 * kMs * (r == spec.slow_rank ? spec.slowdown : 1));
      now[static_cast<size_t>(r)] += step.compute_ns;
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      const Group& group = groups[g];
      int64_t last = 0;
      for (int r : group.members) last = std::max(last, now[static_cast<size_t>(r)]);
      const int64_t transfer = clock.transfer(group.transfer_ns);
      CollectiveInstance instance;
      instance.comm_hash = 0x100 + g;
      instance.op = CommOp::kAllReduce;
      instance.seq = static_cast<uint64_t>(s);
      instance.bytes = group.bytes;
      instance.step = s;
      for (int r : group.members) {
        Participation part;
        part.rank = r;
        part.enqueue_ns = part.arrival_ns = part.start_ns = now[static_cast<size_t>(r)];
        part.end_ns = last + transfer;
        part.wait_ns = part.exposed_wait_ns = last - part.arrival_ns;
        part.exposed_transfer_ns = transfer;
        instance.ranks.push_back(part);
        RankStep& step = job.ranks[static_cast<size_t>(r)].steps[static_cast<size_t>(s)];
        step.comm_ns += part.end_ns - part.arrival_ns;
        step.exposed_wait_ns += part.wait_ns;
        step.exposed_transfer_ns += transfer;
        now[static_cast<size_t>(r)] = part.end_ns;
      }
      job.collectives.push_back(instance);
    }
    for (int r = 0; r < ranks; ++r)
      job.ranks[static_cast<size_t>(r)].steps[static_cast<size_t>(s)].times = {begin[static_cast<size_t>(r)],
                                                                                now[static_cast<size_t>(r)]};
  }
  return job;
}

// ---------------------------------------------------------------- checks ---

std::string describe(const StragglerReport& report) {
  std::string text;
  for (const Straggler& s : report.stragglers)
    text += "  rank " + std::to_string(s.rank) + " " + s.cause + " score " + std::to_string(s.score) + ": " +
            s.evidence + "\n";
  return text.empty() ? "  (no stragglers)\n" : text;
}

std::string printed(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), pattern, value);
  return text;
}

int64_t mean_step_ns(const JobProfile& job) {
  int64_t total = 0;
  for (size_t s = 0; s < job.step_numbers.size(); ++s) {
    int64_t sum = 0;
    for (const RankProfile& rank : job.ranks) sum += rank.steps[s].times.duration();
    total += sum / static_cast<int64_t>(job.ranks.size());
  }
  return total / static_cast<int64_t>(job.step_numbers.size());
}

TEST(Stragglers, SlowComputeRankComesFirst) {
  // 30 steps: with this noise a rank 5 % slower among 16 is found in about 97 % of 20-step runs.
  for (int ranks : {4, 8, 16})
    for (double slowdown : {1.05, 1.10, 1.30})
      for (uint64_t seed = 1; seed <= 5; ++seed) {
        DdpJob spec{.ranks = ranks, .steps = 30, .seed = seed};
        spec.slow_rank = static_cast<int32_t>((seed * 7) % static_cast<uint64_t>(ranks));
        spec.slowdown = slowdown;
        const StragglerReport report = find_stragglers(make_ddp_job(spec));
        SCOPED_TRACE("ranks " + std::to_string(ranks) + ", slowdown " + std::to_string(slowdown) + ", seed " +
                     std::to_string(seed) + ", slow rank " + std::to_string(spec.slow_rank) + "\n" + describe(report));
        ASSERT_EQ(report.stragglers.size(), 1u);
        const Straggler& top = report.stragglers.front();
        EXPECT_EQ(top.rank, spec.slow_rank);
        EXPECT_EQ(top.cause, "slow compute");
        EXPECT_GT(top.score, 0);
        EXPECT_LE(top.score, 1);
        EXPECT_GT(top.last_arriver_rate, 2 * top.baseline_rate);
        EXPECT_NEAR(top.baseline_rate, 1.0 / ranks, 1e-12);
        EXPECT_GE(top.blame_fraction, 0.01);
        EXPECT_LT(top.compute_score_relative, 1.0);
      }
}

TEST(Stragglers, BucketsInFlightTogetherCountOneDelayOnce) {
  // A rank twice as slow is behind at each of its step's four buckets by a growing lead: summed, the
  // lags would exceed the time the step lasts; their union cannot.
  DdpJob spec{.ranks = 2, .steps = 20, .slow_rank = 1, .slowdown = 2.0};
  const JobProfile job = make_ddp_job(spec);
  int64_t summed_lags = 0;
  for (const CollectiveInstance& instance : job.collectives) {
    const int64_t begin0 = job.ranks[0].steps[static_cast<size_t>(instance.step)].times.begin_ns;
    const int64_t begin1 = job.ranks[1].steps[static_cast<size_t>(instance.step)].times.begin_ns;
    summed_lags += std::max<int64_t>(
        (instance.ranks[1].arrival_ns - begin1) - (instance.ranks[0].arrival_ns - begin0), 0);
  }
  const StragglerReport report = find_stragglers(job);
  ASSERT_EQ(report.stragglers.size(), 1u) << describe(report);
  const Straggler& top = report.stragglers.front();
  EXPECT_EQ(top.rank, 1);
  EXPECT_LE(top.blame_fraction, 1.0);
  EXPECT_GT(summed_lags, top.actual_step_ns * spec.steps) << "the job does not show what the union is for";
  EXPECT_LT(top.blame_ns, summed_lags / 2);
  EXPECT_LT(top.what_if_step_ns, top.actual_step_ns);
}

TEST(Stragglers, HealthyNoisyJobsHaveNone) {
  for (int ranks : {2, 4, 8, 16})
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      const StragglerReport report = find_stragglers(make_ddp_job({.ranks = ranks, .seed = seed}));
      EXPECT_TRUE(report.stragglers.empty()) << "ranks " << ranks << ", seed " << seed << "\n" << describe(report);
      EXPECT_EQ(report.ranks.size(), static_cast<size_t>(ranks));
    }
}

TEST(Stragglers, OneRankWithDataHasNothingToCompare) {
  // A slow rank among four, but only it has data: no comparison can be made.
  DdpJob spec{.ranks = 4, .steps = 30, .seed = 3};
  spec.slow_rank = 2;
  spec.slowdown = 1.3;
  JobProfile job = make_ddp_job(spec);
  for (RankProfile& rank : job.ranks) {
    if (rank.rank != 2) rank.status = RankStatus::kMissing;
  }
  const StragglerReport report = find_stragglers(job);
  EXPECT_TRUE(report.stragglers.empty());
  EXPECT_EQ(report.unmeasured, "only rank 2 has data: there is no other rank to compare it with");
  EXPECT_TRUE(find_stragglers(make_ddp_job(spec)).unmeasured.empty()) << "four ranks with data are compared";
}

TEST(Stragglers, HealthyNoisyJobsWithLongerStallsHaveNone) {
  // Rarer but longer losses of the core: one rank late by several ms in a step, never the same for long.
  for (int ranks : {4, 16})
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      DdpJob spec{.ranks = ranks, .seed = seed};
      spec.noise = {.jitter = 0.1, .stall_probability = 0.005, .stall_mean_ns = 5.0 * kMs};
      const StragglerReport report = find_stragglers(make_ddp_job(spec));
      EXPECT_TRUE(report.stragglers.empty()) << "ranks " << ranks << ", seed " << seed << "\n" << describe(report);
    }
}

TEST(Stragglers, RanksTheCollectiveReleasesLastAreNotStragglers) {
  // A collective's algorithm hands its result to some ranks last (here every fourth, 3 ms late), in
  // every step: they start their next step later and arrive later, by no doing of their own. They
  // are not named, and do not hide a rank 5 % slower, which arrives later into its step.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    DdpJob spec{.ranks = 16, .seed = seed, .late_completion_ranks = {3, 7, 11, 15}, .late_completion_ns = 3 * kMs};
    StragglerReport report = find_stragglers(make_ddp_job(spec));
    EXPECT_TRUE(report.stragglers.empty()) << "seed " << seed << "\n" << describe(report);
    spec.steps = 30;
    spec.slow_rank = 9;
    spec.slowdown = 1.05;
    report = find_stragglers(make_ddp_job(spec));
    ASSERT_FALSE(report.stragglers.empty()) << "seed " << seed;
    EXPECT_EQ(report.stragglers[0].rank, 9) << "seed " << seed << "\n" << describe(report);
    EXPECT_EQ(report.stragglers[0].cause, "slow compute");
  }
}

TEST(Stragglers, LateRankWithNothingOfItsOwnIsNotNamed) {
  // Each step: 20 ms of compute on every rank, a nonblocking allreduce whose wait releases ranks 2
  // and 3 1.5 and 2 ms after the others (its algorithm serves them last), then a second allreduce
  // each rank posts as its wait returns. Rank 3 is last by 0.5 ms at every second allreduce, with
  // normal compute and no idle time: a CPU job's rank can only be late by its compute, so it is
  // not named.
  JobProfile job = empty_job(4, 20, 1);
  for (int s = 0; s < 20; ++s) {
    const int64_t begin = s * 30 * kMs;
    std::vector<int64_t> ready(4);
    for (int r = 0; r < 4; ++r) ready[static_cast<size_t>(r)] = begin + 20 * kMs + (3 - r) * 1000;
    for (int c = 0; c < 2; ++c) {
      const int64_t last = *std::max_element(ready.begin(), ready.end());
      CollectiveInstance instance;
      instance.comm_hash = kWorld;
      instance.op = CommOp::kAllReduce;
      instance.seq = static_cast<uint64_t>(2 * s + c);
      instance.nonblocking = c == 0;
      instance.step = s;
      for (int r = 0; r < 4; ++r) {
        Participation part;
        part.rank = r;
        part.arrival_ns = part.start_ns = ready[static_cast<size_t>(r)];
        const int64_t released_late[] = {0, 0, 1'500'000, 2'000'000};
        part.end_ns = last + kMs + (c == 0 ? released_late[r] : 0);
        part.wait_ns = part.exposed_wait_ns = last - part.arrival_ns;
        part.exposed_transfer_ns = part.end_ns - last;
        instance.ranks.push_back(part);
        RankStep& step = job.ranks[static_cast<size_t>(r)].steps[static_cast<size_t>(s)];
        step.compute_ns = 20 * kMs + (3 - r) * 1000;
        step.exposed_wait_ns += part.wait_ns;
        step.exposed_transfer_ns += part.exposed_transfer_ns;
        step.comm_ns += part.end_ns - part.arrival_ns;
        step.times = {begin, part.end_ns};
        ready[static_cast<size_t>(r)] = part.end_ns + 10'000;
      }
      job.collectives.push_back(instance);
    }
  }
  const StragglerReport report = find_stragglers(job);
  EXPECT_DOUBLE_EQ(report.ranks[3].last_arriver_rate, 0.5);
  EXPECT_EQ(report.ranks[3].blame_ns, 20 * 500'000);
  EXPECT_TRUE(report.stragglers.empty()) << describe(report);
}

TEST(Stragglers, HealthyPairJobsHaveNone) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const StragglerReport report = find_stragglers(make_pair_job({.seed = seed}));
    EXPECT_TRUE(report.stragglers.empty()) << "seed " << seed << "\n" << describe(report);
  }
}

TEST(Stragglers, RotatingSlowComputeIsWorkloadImbalance) {
  for (int ranks : {4, 8, 16})
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const StragglerReport report =
          find_stragglers(make_ddp_job({.ranks = ranks, .seed = seed, .rotating_slowdown = 1.3}));
      SCOPED_TRACE("ranks " + std::to_string(ranks) + ", seed " + std::to_string(seed) + "\n" + describe(report));
      ASSERT_EQ(report.stragglers.size(), 1u);
      EXPECT_EQ(report.stragglers[0].rank, -1);
      EXPECT_EQ(report.stragglers[0].cause, "workload imbalance");
      int64_t most_blame = 0;
      for (const RankScores& rank : report.ranks) most_blame = std::max(most_blame, rank.blame_ns);
      EXPECT_LT(most_blame, report.stragglers[0].blame_ns / 2);
      EXPECT_LT(report.stragglers[0].what_if_step_ns, report.stragglers[0].actual_step_ns);
    }
}

TEST(Stragglers, RotatingHostDelaysAreRotating) {
  for (int ranks : {4, 8, 16})
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const StragglerReport report = find_stragglers(
          make_ddp_job({.ranks = ranks, .seed = seed, .rotating_host_delay_ns = 6 * kMs, .gpu = true}));
      SCOPED_TRACE("ranks " + std::to_string(ranks) + ", seed " + std::to_string(seed) + "\n" + describe(report));
      ASSERT_EQ(report.stragglers.size(), 1u);
      EXPECT_EQ(report.stragglers[0].rank, -1);
      EXPECT_EQ(report.stragglers[0].cause, "rotating");
    }
}

TEST(Stragglers, SlowNodeNetworkFlagsItsRanks) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const StragglerReport report = find_stragglers(make_pair_job({.seed = seed, .slow_network_node = 3}));
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + describe(report));
    std::set<int32_t> flagged;
    for (const Straggler& s : report.stragglers) {
      EXPECT_EQ(s.cause, "slow link or node network");
      EXPECT_NE(s.evidence.find("without node 3"), std::string::npos);
      EXPECT_LT(s.what_if_step_ns, s.actual_step_ns);
      flagged.insert(s.rank);
    }
    EXPECT_EQ(flagged, (std::set<int32_t>{6, 7}));
  }
}

TEST(Stragglers, UnalignedClocksJudgeOnlyTransferTimes) {
  // Arrival order on clocks that were never aligned measures their offsets: no late rank is named;
  // X(c), a duration on each rank's own clock, still finds the slow node.
  JobProfile slow_compute = make_ddp_job({.ranks = 8, .seed = 1, .slow_rank = 3, .slowdown = 1.3});
  slow_compute.clock_corrected = false;
  EXPECT_TRUE(find_stragglers(slow_compute).stragglers.empty());
  JobProfile slow_node = make_pair_job({.seed = 1, .slow_network_node = 3});
  slow_node.clock_corrected = false;
  const StragglerReport report = find_stragglers(slow_node);
  ASSERT_EQ(report.stragglers.size(), 2u) << describe(report);
  for (const Straggler& s : report.stragglers) {
    EXPECT_EQ(s.cause, "slow link or node network");
    EXPECT_NE(s.evidence.find("clocks were not aligned"), std::string::npos);
  }
}

TEST(Stragglers, LateCompletionIsASlowLink) {
  // Rank 1 sees every collective complete 1 ms after the others, as behind a slow NIC in a job whose
  // collectives all span every node: not late into its steps, but its exposed transfer is the
  // highest of all ranks' in every step.
  for (int ranks : {4, 8})
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const StragglerReport report = find_stragglers(make_ddp_job(
          {.ranks = ranks, .seed = seed, .late_completion_ranks = {1}, .late_completion_ns = 1 * kMs}));
      SCOPED_TRACE("ranks " + std::to_string(ranks) + ", seed " + std::to_string(seed) + "\n" + describe(report));
      ASSERT_EQ(report.stragglers.size(), 1u);
      EXPECT_EQ(report.stragglers[0].rank, 1);
      EXPECT_EQ(report.stragglers[0].cause, "slow link or node network");
      EXPECT_NE(report.stragglers[0].evidence.find("exposed transfer"), std::string::npos);
    }
}

TEST(Stragglers, ANodeWhoseRanksAllCompleteLateHasASlowNetwork) {
  // One DDP group spans every node, two ranks per node: node 1's ranks (2 and 3) see every
  // collective complete 2 ms after the others, as behind a slow NIC. Neither stands above the other
  // (each is the other's highest peer), but the node stands above every other node in every step.
  for (int ranks : {6, 8})
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const StragglerReport report = find_stragglers(make_ddp_job(
          {.ranks = ranks, .seed = seed, .late_completion_ranks = {2, 3}, .late_completion_ns = 2 * kMs}));
      SCOPED_TRACE("ranks " + std::to_string(ranks) + ", seed " + std::to_string(seed) + "\n" + describe(report));
      std::set<int32_t> flagged;
      for (const Straggler& s : report.stragglers) {
        EXPECT_EQ(s.cause, "slow link or node network");
        EXPECT_NE(s.evidence.find("every rank of node 1"), std::string::npos);
        EXPECT_LT(s.what_if_step_ns, s.actual_step_ns);
        flagged.insert(s.rank);
      }
      EXPECT_EQ(flagged, (std::set<int32_t>{2, 3}));
    }
}

TEST(Stragglers, ANodeSlightlyLateIsNotReported) {
  // The same node 0.2 ms late: under the 1.2 × rule against the other nodes.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const StragglerReport report = find_stragglers(
        make_ddp_job({.ranks = 8, .seed = seed, .late_completion_ranks = {2, 3}, .late_completion_ns = 200'000}));
    EXPECT_TRUE(report.stragglers.empty()) << "seed " << seed << "\n" << describe(report);
  }
}

TEST(Stragglers, LateRankWithNormalComputeIsASlowHost) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const StragglerReport report = find_stragglers(make_ddp_job(
        {.ranks = 8, .seed = seed, .host_delayed_rank = 5, .host_delay_ns = 2 * kMs, .gpu = true}));
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + describe(report));
    ASSERT_EQ(report.stragglers.size(), 1u);
    EXPECT_EQ(report.stragglers[0].rank, 5);
    EXPECT_EQ(report.stragglers[0].cause, "slow host");
  }
}

TEST(Stragglers, WhatIfComesCloseToTheHealthyStepTime) {
  for (int ranks : {4, 8, 16})
    for (double slowdown : {1.1, 1.3, 2.0}) {
      DdpJob spec{.ranks = ranks, .seed = 11, .slow_rank = 2, .slowdown = slowdown};
      const StragglerReport report = find_stragglers(make_ddp_job(spec));
      spec.slowdown = 1;  // the same noise, drawn in the same order
      const double healthy = static_cast<double>(mean_step_ns(make_ddp_job(spec)));
      SCOPED_TRACE("ranks " + std::to_string(ranks) + ", slowdown " + std::to_string(slowdown) + "\n" +
                   describe(report));
      ASSERT_FALSE(report.stragglers.empty());
      const Straggler& top = report.stragglers.front();
      const double actual = static_cast<double>(top.actual_step_ns);
      const double what_if = static_cast<double>(top.what_if_step_ns);
      EXPECT_NEAR(actual, static_cast<double>(mean_step_ns(make_ddp_job({.ranks = ranks, .seed = 11, .slow_rank = 2,
                                                                          .slowdown = slowdown}))), 1);
      // The what-if closes at least three quarters of the gap, and lands within 3 % of the healthy job.
      EXPECT_LT(std::fabs(what_if - healthy), 0.25 * (actual - healthy));
      EXPECT_NEAR(what_if, healthy, 0.03 * healthy);
    }
}

TEST(Stragglers, ScoresOrderTheList) {
  // A rank computing 30 % slower and a node with a slow network in one job: all three ranks found,
  // each for its own cause, most likely first.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const StragglerReport report =
        find_stragglers(make_pair_job({.seed = seed, .slow_network_node = 3, .slow_rank = 0, .slowdown = 1.3}));
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + describe(report));
    ASSERT_EQ(report.stragglers.size(), 3u);
    for (size_t i = 1; i < report.stragglers.size(); ++i)
      EXPECT_GE(report.stragglers[i - 1].score, report.stragglers[i].score);
    std::map<int32_t, std::string> causes;
    for (const Straggler& s : report.stragglers) causes[s.rank] = s.cause;
    EXPECT_EQ(causes, (std::map<int32_t, std::string>{{0, "slow compute"},
                                                      {6, "slow link or node network"},
                                                      {7, "slow link or node network"}}));
  }
}

// Three ranks (0 and 1 on node 0, 2 on node 1), two steps, figures small enough to count by hand.
JobProfile counted_job() {
  JobProfile job = empty_job(3, 2, 2);
  const int64_t compute[3][2] = {{100, 300}, {200, 200}, {400, 400}};
  for (size_t r = 0; r < 3; ++r)
    for (size_t s = 0; s < 2; ++s) {
      RankStep& step = job.ranks[r].steps[s];
      step.times = {static_cast<int64_t>(s) * 1000, static_cast<int64_t>(s + 1) * 1000};
      step.compute_ns = compute[r][s];
    }
  auto add = [&](int32_t step, std::vector<std::pair<int32_t, int64_t>> arrivals) {
    CollectiveInstance instance;
    instance.op = CommOp::kAllReduce;
    instance.step = step;
    int64_t last = kUnknown;
    for (const auto& [rank, arrival] : arrivals) last = std::max(last, arrival);
    for (const auto& [rank, arrival] : arrivals) {
      Participation part;
      part.rank = rank;
      part.arrival_ns = part.start_ns = arrival;
      part.end_ns = arrival == kUnknown ? kUnknown : last + 10;
      part.wait_ns = arrival == kUnknown ? 0 : last - arrival;
      instance.ranks.push_back(part);
    }
    job.collectives.push_back(instance);
  };
  add(0, {{0, 10}, {1, 30}, {2, 25}});        // rank 1 last by 5
  add(0, {{0, 50}, {2, 70}});                 // rank 2 last by 20
  add(1, {{0, 1100}, {1, 1100}, {2, 1090}});  // ranks 0 and 1 tie: nobody last
  add(1, {{1, 1200}, {2, kUnknown}});         // one known arrival: not a comparison (rank 1 leaves it at 1210)
  add(1, {{0, 1150}, {1, 1211}});             // rank 1 last by 61, but 60 of them spent in the one before
  add(-1, {{0, -100}, {1, -5000}, {2, -5000}});  // outside the steps: ignored
  return job;
}

TEST(Stragglers, RankScoresFollowTheirDefinitions) {
  const StragglerReport report = find_stragglers(counted_job());
  ASSERT_EQ(report.ranks.size(), 3u);
  const RankScores& r0 = report.ranks[0];
  const RankScores& r1 = report.ranks[1];
  const RankScores& r2 = report.ranks[2];
  EXPECT_EQ(r0.rank, 0);
  EXPECT_DOUBLE_EQ(r0.last_arriver_rate, 0);
  EXPECT_DOUBLE_EQ(r0.baseline_rate, (1.0 / 3 + 1.0 / 2 + 1.0 / 3 + 1.0 / 2) / 4);
  EXPECT_EQ(r0.blame_ns, 0);
  EXPECT_EQ(r0.mean_wait_ns, (20 + 20 + 0 + 61) / 4);
  EXPECT_EQ(r0.median_compute_ns, 200);
  EXPECT_DOUBLE_EQ(r0.compute_score_relative, 1.0);
  EXPECT_DOUBLE_EQ(r0.compute_score_individual, 0.5);

  EXPECT_DOUBLE_EQ(r1.last_arriver_rate, 2.0 / 3);
  EXPECT_DOUBLE_EQ(r1.baseline_rate, (1.0 / 3 + 1.0 / 3 + 1.0 / 2) / 3);
  EXPECT_EQ(r1.blame_ns, 5 + 1);
  EXPECT_EQ(r1.mean_wait_ns, 0);
  EXPECT_DOUBLE_EQ(r1.compute_score_relative, 1.0);
  EXPECT_DOUBLE_EQ(r1.compute_score_individual, 1.0);

  EXPECT_DOUBLE_EQ(r2.last_arriver_rate, 1.0 / 3);
  EXPECT_DOUBLE_EQ(r2.baseline_rate, (1.0 / 3 + 1.0 / 2 + 1.0 / 3) / 3);
  EXPECT_EQ(r2.blame_ns, 20);
  EXPECT_EQ(r2.mean_wait_ns, (5 + 0 + 10) / 3);
  EXPECT_EQ(r2.median_compute_ns, 400);
  EXPECT_DOUBLE_EQ(r2.compute_score_relative, 0.5);
  EXPECT_TRUE(report.stragglers.empty()) << describe(report);
}

// P(X ≥ k) for X ~ Binomial(n, p), summed term by term.
double binomial_tail(int n, int k, double p) {
  double tail = 0;
  for (int i = k; i <= n; ++i)
    tail += std::exp(std::lgamma(n + 1) - std::lgamma(i + 1) - std::lgamma(n - i + 1) + i * std::log(p) +
                     (n - i) * std::log1p(-p));
  return tail;
}

// Four ranks, 20 steps of 30 ms; each step computes, then runs `collectives` blocking allreduces,
// each on its own communicator (0x10, 0x11, ...) or all on 0x10. Rank 2 computes 4 ms more in the
// first `late` steps and arrives last at the first allreduce, and at each later one too when
// `late_at_each` (computing 4 ms more before it); otherwise rank (s mod 2) is last by a hair.
struct LateSteps {
  int late = 0;
  int collectives = 1;
  bool one_communicator = false;
  bool late_at_each = false;
};

JobProfile late_in_steps_job(const LateSteps& spec) {
  JobProfile job = empty_job(4, 20, 1);
  for (int s = 0; s < 20; ++s) {
    const int64_t begin = s * 30 * kMs;
    const bool rank2_late = s < spec.late;
    std::vector<int64_t> ready(4);
    for (int r = 0; r < 4; ++r) ready[static_cast<size_t>(r)] = begin + 20 * kMs + r * 1000;
    ready[2] = begin + (rank2_late ? 24 * kMs : 20 * kMs - 1000);
    if (!rank2_late) ready[static_cast<size_t>(s % 2)] = begin + 20 * kMs + 10'000;
    for (int r = 0; r < 4; ++r) {
      RankStep& step = job.ranks[static_cast<size_t>(r)].steps[static_cast<size_t>(s)];
      step.compute_ns = ready[static_cast<size_t>(r)] - begin;
      step.times.begin_ns = begin;
    }
    for (int c = 0; c < spec.collectives; ++c) {
      const int64_t last = *std::max_element(ready.begin(), ready.end());
      CollectiveInstance instance;
      instance.comm_hash = 0x10 + (spec.one_communicator ? 0 : static_cast<uint64_t>(c));
      instance.op = CommOp::kAllReduce;
      instance.seq = static_cast<uint64_t>(spec.one_communicator ? s * spec.collectives + c : s);
      instance.step = s;
      for (int r = 0; r < 4; ++r) {
        Participation part;
        part.rank = r;
        part.arrival_ns = part.start_ns = ready[static_cast<size_t>(r)];
        part.end_ns = last + kMs;
        part.wait_ns = part.exposed_wait_ns = last - part.arrival_ns;
        part.exposed_transfer_ns = kMs;
        instance.ranks.push_back(part);
        RankStep& step = job.ranks[static_cast<size_t>(r)].steps[static_cast<size_t>(s)];
        step.exposed_wait_ns += part.wait_ns;
        step.exposed_transfer_ns += kMs;
        step.comm_ns += part.wait_ns + kMs;
        step.times.end_ns = part.end_ns;
        ready[static_cast<size_t>(r)] = part.end_ns + (r == s % 2 ? 10'000 : r * 1000);
      }
      if (rank2_late && spec.late_at_each && c + 1 < spec.collectives) {
        ready[2] += 4 * kMs;
        job.ranks[2].steps[static_cast<size_t>(s)].compute_ns += 4 * kMs;
      }
      job.collectives.push_back(instance);
    }
  }
  return job;
}

TEST(Stragglers, EvidenceStatesTheFigures) {
  for (int late : {9, 12, 15, 20}) {
    const StragglerReport report = find_stragglers(late_in_steps_job({.late = late}));
    SCOPED_TRACE("late in " + std::to_string(late) + " steps\n" + describe(report));
    const double p_value = binomial_tail(20, late, 0.25);
    if (p_value >= 1e-3 / 4) {  // not significant at the job's false-alarm rate: nothing to report
      EXPECT_TRUE(report.stragglers.empty());
      continue;
    }
    ASSERT_EQ(report.stragglers.size(), 1u);
    const Straggler& top = report.stragglers[0];
    EXPECT_EQ(top.rank, 2);
    EXPECT_EQ(top.cause, "slow compute");
    EXPECT_DOUBLE_EQ(top.last_arriver_rate, late / 20.0);
    EXPECT_EQ(top.blame_ns, late * (4 * kMs - 3000));
    const std::string& evidence = top.evidence;
    for (const std::string& figure : std::vector<std::string>{
             std::to_string(late) + " of its 20 collectives", format_percent(100.0 * late / 20) + " against",
             format_percent(25.0) + " expected", "p = " + printed("%.2g", p_value), format_percent(100 * top.blame_fraction),
             printed("%.3f", top.compute_score_relative), "Rank 2 (node 2, node2)"})
      EXPECT_NE(evidence.find(figure), std::string::npos) << "missing \"" << figure << "\" in: " << evidence;
  }
}

TEST(Stragglers, TestsPerKindOfCollectiveAreCorrectedForTheirNumber) {
  // Rank 2 is late only at the first of two allreduces per step: the test over that communicator's
  // allreduces decides, its p multiplied by 3 (all collectives, and each of the two kinds).
  for (int late : {13, 15}) {
    const StragglerReport report = find_stragglers(late_in_steps_job({.late = late, .collectives = 2}));
    SCOPED_TRACE("late in " + std::to_string(late) + " steps\n" + describe(report));
    const double corrected = 3 * binomial_tail(20, late, 0.25);
    if (corrected >= 1e-3 / 4) {  // 13 of 20: p = 1.8e-4 alone, 5.5e-4 corrected
      EXPECT_TRUE(report.stragglers.empty());
      continue;
    }
    ASSERT_EQ(report.stragglers.size(), 1u);
    EXPECT_EQ(report.stragglers[0].rank, 2);
    for (const std::string& figure :
         {std::string("at ") + std::to_string(late) + " of its 20 AllReduce number 1 of a step on its 4-rank communicator 0x10",
          "p = " + printed("%.2g", corrected) + " after correction for its 3 tests"})
      EXPECT_NE(report.stragglers[0].evidence.find(figure), std::string::npos)
          << "missing \"" << figure << "\" in: " << report.stragglers[0].evidence;
  }
}

TEST(Stragglers, PositionsInTheStepAreKindsOfCollective) {
  // Two allreduces per step on one communicator, rank 2 late only at the first (like DDP's first
  // bucket): over both it is last half of the time, at the first 15 times in 20.
  const StragglerReport report =
      find_stragglers(late_in_steps_job({.late = 15, .collectives = 2, .one_communicator = true}));
  ASSERT_EQ(report.stragglers.size(), 1u) << describe(report);
  EXPECT_EQ(report.stragglers[0].rank, 2);
  EXPECT_NE(report.stragglers[0].evidence.find("at 15 of its 20 AllReduce number 1 of a step"), std::string::npos)
      << report.stragglers[0].evidence;
}

TEST(Stragglers, AStepsCollectivesCountAsOneTrial) {
  // Rank 2 late at both allreduces of 15 steps: 15 trials of 20, not 30 of 40; p corrected for 3
  // tests (all collectives, and each of the two positions).
  const StragglerReport report = find_stragglers(
      late_in_steps_job({.late = 15, .collectives = 2, .one_communicator = true, .late_at_each = true}));
  ASSERT_EQ(report.stragglers.size(), 1u) << describe(report);
  EXPECT_NE(report.stragglers[0].evidence.find("p = " + printed("%.2g", 3 * binomial_tail(20, 15, 0.25))),
            std::string::npos)
      << report.stragglers[0].evidence;
}

TEST(Stragglers, SmallCostsAreNotReported) {
  // Without noise a rank 0.1 % slower is last every time, significantly, but costs the job less than
  // 1 % of its time; 5 % slower, it is reported.
  for (double slowdown : {1.001, 1.05}) {
    DdpJob spec{.ranks = 8, .seed = 1, .slow_rank = 3, .slowdown = slowdown};
    spec.noise = {.jitter = 0, .stall_probability = 0};
    const StragglerReport report = find_stragglers(make_ddp_job(spec));
    SCOPED_TRACE("slowdown " + std::to_string(slowdown) + "\n" + describe(report));
    EXPECT_DOUBLE_EQ(report.ranks[3].last_arriver_rate, 1.0);
    EXPECT_EQ(report.stragglers.size(), slowdown < 1.01 ? 0u : 1u);
  }
}

TEST(Stragglers, SlightlySlowerLinksAreNotReported) {
  // 15 % slower transfers with node 3, significantly but under Greyhound's 1.2 × rule.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const StragglerReport report =
        find_stragglers(make_pair_job({.seed = seed, .slow_network_node = 3, .network_slowdown = 1.15}));
    EXPECT_TRUE(report.stragglers.empty()) << "seed " << seed << "\n" << describe(report);
  }
}

// A straggler of slow compute takes the critical path's replay as its
// what-if: the mean step less the mean the replay took off a walked step;
// one of another cause, or without a replay, keeps its own.
TEST(Stragglers, TheCriticalPathsReplayIsTheWhatIfOfSlowCompute) {
  StragglerReport report;
  Straggler slow;
  slow.rank = 1;
  slow.cause = kSlowComputeCause;
  slow.actual_step_ns = 2'000'000;
  slow.what_if_step_ns = 1'900'000;
  slow.evidence = "Rank 1 computed more. Had it been as fast as the median rank, the mean step would take 1.9 ms "
                  "instead of 2 ms.";
  Straggler link = slow;
  link.rank = 2;
  link.cause = "slow link or node network";
  Straggler unreplayed = slow;
  unreplayed.rank = 3;
  report.stragglers = {slow, link, unreplayed};
  EXPECT_EQ(slow_compute_ranks(report), (std::vector<int32_t>{1, 3}));
  CriticalPath path;
  path.rank_replays = {{1, 16, 2'100'000, 1'500'000}, {2, 16, 2'100'000, 1'000'000}};
  take_replayed_what_if(report, path);
  EXPECT_EQ(report.stragglers[0].what_if_step_ns, 1'400'000);
  EXPECT_EQ(report.stragglers[0].evidence,
            "Rank 1 computed more. Replayed with its compute at the other ranks' median on 16 walked steps (the "
            "critical path's graph), a step took 600 µs less on average: the mean step would take 1.4 ms instead "
            "of 2 ms.");
  EXPECT_EQ(report.stragglers[1].what_if_step_ns, 1'900'000);
  EXPECT_EQ(report.stragglers[2].what_if_step_ns, 1'900'000);
  EXPECT_EQ(report.stragglers[2].evidence, slow.evidence);
}

}  // namespace
}  // namespace rankscope::analysis
