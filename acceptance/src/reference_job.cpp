#include "rankscope/acceptance/reference_job.h"

#include <cmath>
#include <vector>

#include "rankscope/acceptance/measure.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/stragglers.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/error.h"
#include "rankscope/model/statistics.h"

namespace rankscope::acceptance {
namespace {

// One step as DDP runs it: forward layer by layer; backward from the last
// layer, each bucket's allreduce posted as soon as its layers' gradients are
// ready, polled as backward goes on (MPI progresses nonblocking operations
// in its calls); then every bucket waited for, the gradients averaged and
// the optimizer's update. Recorded as the MPI shim and NVTX would, unless
// `step` is negative (the warm-up step).
void train_step(MPI_Comm comm, int step, const ReferenceJobSize& size, GemmWorkers& workers,
                std::vector<std::vector<float>>& buckets, RunTimeline& timeline) {
  const bool recorded = step >= 0;
  const int64_t step_began = timeline.now();
  {
    const int64_t began = timeline.now();
    for (int layer = 0; layer < size.layers; ++layer) workers.run();
    if (recorded) timeline.range("forward", began, timeline.now());
  }
  std::vector<MPI_Request> requests;
  std::vector<int64_t> posted;
  const int64_t backward_began = timeline.now();
  for (int layer = size.layers - 1; layer >= 0; --layer) {
    workers.run();  // the gradient of the layer's input
    workers.run();  // ... and of its weights
    if (layer % size.layers_per_bucket == 0) {
      std::vector<float>& bucket = buckets[static_cast<size_t>(layer / size.layers_per_bucket)];
      posted.push_back(timeline.now());
      requests.emplace_back();
      MPI_Iallreduce(MPI_IN_PLACE, bucket.data(), static_cast<int>(bucket.size()), MPI_FLOAT, MPI_SUM, comm,
                     &requests.back());
    }
    for (MPI_Request& request : requests) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
  }
  // Idle: on nodes that share cores, a rank spinning here would take the core a slower rank computes on.
  const int64_t wait_began = timeline.now();
  for (MPI_Request& request : requests) clocksync::wait_idle(request);
  const int64_t waited = timeline.now();
  if (recorded) {
    for (size_t b = 0; b < posted.size(); ++b) {
      const size_t bucket = buckets.size() - 1 - b;
      timeline.collective("MPI_Iallreduce", CommOp::kAllReduce, buckets[bucket].size() * sizeof(float),
                          DataType::kFloat32, posted[b], waited, true);
    }
    timeline.call("MPI_Waitall", wait_began, waited);
    timeline.range("backward", backward_began, waited);
  }
  {
    const int64_t began = timeline.now();
    int ranks = 1;
    MPI_Comm_size(comm, &ranks);
    for (std::vector<float>& bucket : buckets)
      for (float& gradient : bucket) gradient /= static_cast<float>(ranks);
    if (recorded) timeline.range("optimizer", began, timeline.now());
  }
  if (recorded) timeline.range("ProfilerStep#" + std::to_string(step), step_began, timeline.now());
}

}  // namespace

ReferenceJobSize reference_job_size(std::string_view level) {
  if (level == "quick") return {};
  if (level == "full") return {.gemm_n = 512, .layers = 12, .layers_per_bucket = 3, .steps = 30};
  throw Error("level '" + std::string(level) + "' is neither quick nor full");
}

void run_reference_job(MPI_Comm comm, const ReferenceJobSize& size, int threads, RunTimeline& timeline,
                       const std::function<void(const std::string&)>& progress) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0)
    progress("reference job: " + std::to_string(size.steps) + " steps of " + std::to_string(size.layers) + " layers (GEMM " +
             std::to_string(size.gemm_n) + "^3), gradients all-reduced in buckets");
  GemmWorkers workers(size.gemm_n, threads);
  const size_t layer_gradients = static_cast<size_t>(size.gemm_n) * static_cast<size_t>(size.gemm_n);
  std::vector<std::vector<float>> buckets(
      static_cast<size_t>((size.layers + size.layers_per_bucket - 1) / size.layers_per_bucket),
      std::vector<float>(layer_gradients * static_cast<size_t>(size.layers_per_bucket), 1.0f));
  const RunTimeline::Range stage(timeline, "accept: reference job");
  for (int step = -1; step < size.steps; ++step) train_step(comm, step, size, workers, buckets, timeline);
  clocksync::idle_barrier(comm);
}

void analyse_reference_job(const std::string& path, Measurements& measurements) {
  const Timeline timeline(path);
  const analysis::JobProfile profile = analysis::build_profile(timeline);
  const analysis::StragglerReport stragglers = analysis::find_stragglers(profile);
  ReferenceJob& job = measurements.reference_job;
  job.steps = static_cast<int>(profile.step_numbers.size());
  // A step's time, as the straggler analysis takes it: the mean over the ranks of their step's duration.
  std::vector<int64_t> step_times;
  for (size_t s = 0; s < profile.step_numbers.size(); ++s) {
    std::vector<int64_t> durations;
    for (const analysis::RankProfile& rank : profile.ranks)
      if (s < rank.steps.size() && rank.steps[s].times.begin_ns != analysis::kUnknown &&
          rank.steps[s].times.end_ns != analysis::kUnknown)
        durations.push_back(rank.steps[s].times.duration());
    if (!durations.empty()) step_times.push_back(mean_ns(durations));
  }
  job.median_step_ns = median_ns(step_times);
  const double mean = static_cast<double>(mean_ns(step_times));
  double squares = 0;
  for (int64_t t : step_times) squares += (static_cast<double>(t) - mean) * (static_cast<double>(t) - mean);
  job.step_cv = step_times.size() > 1 && mean > 0 ? std::sqrt(squares / static_cast<double>(step_times.size() - 1)) / mean : 0;
  job.unmeasured = stragglers.unmeasured;
  for (const analysis::Straggler& found : stragglers.stragglers)
    job.stragglers.push_back({found.rank, found.cause, found.score, found.evidence});

  for (const analysis::RankProfile& rank : profile.ranks) {
    if (rank.rank < 0 || static_cast<size_t>(rank.rank) >= measurements.nodes.size()) continue;
    ReferenceJobNode& node = measurements.nodes[static_cast<size_t>(rank.rank)].reference_job;
    std::vector<int64_t> own;
    for (const analysis::RankStep& step : rank.steps)
      if (step.times.begin_ns != analysis::kUnknown && step.times.end_ns != analysis::kUnknown)
        own.push_back(step.times.duration() - step.exposed_wait_ns);
    node.measured = !own.empty();
    node.own_step_ns = median_ns(own);
  }
  for (const analysis::RankScores& scores : stragglers.ranks) {
    if (scores.rank < 0 || static_cast<size_t>(scores.rank) >= measurements.nodes.size()) continue;
    ReferenceJobNode& node = measurements.nodes[static_cast<size_t>(scores.rank)].reference_job;
    node.blame_ns = scores.blame_ns;
    node.last_arriver_rate = scores.last_arriver_rate;
  }
}

}  // namespace rankscope::acceptance
