// DDP gradient buckets and FSDP units, read from a job's matched collectives:
// what each bucket or unit costs, an α–β fit of the job's own transfers, and
// the step time the job would have with other bucket sizes. Definitions, the
// model and its limits: docs/report-reference.md, "Buckets (DDP) and units (FSDP)".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "rankscope/analysis/buckets.h"
#include "rankscope/model/format.h"
#include "rankscope/model/statistics.h"

namespace rankscope::analysis {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// DDP's kDefaultFirstBucketBytes (reducer.hpp): a small first bucket lets the
// first allreduce start early in backward.
constexpr uint64_t kFirstBucketCapBytes = kMiB;
// Candidate bucket caps: 1 MiB doubled up to this many times (256 MiB).
constexpr int kCandidateDoublings = 8;
// A predicted saving below this share of the step is within the model's
// error: the recommendation is then to keep the current size.
constexpr double kWorthwhileSaving = 0.01;
// The model is trusted when it reproduces the current buckets' exposed tail
// to within this share of the measured step.
constexpr double kTrustedModelError = 0.1;
// Prefetch works when compute hides at least this share of the all-gathers'
// time in flight. Below the second share they were not started ahead at all:
// a rank that posts an all-gather only when it needs it waits at once.
constexpr double kPrefetchWorksHiddenShare = 0.5;
constexpr double kPrefetchedHiddenShare = 0.05;
// Two fits whose R² differ by less than this are equally good.
constexpr double kRSquaredTolerance = 1e-9;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool known(int64_t time_ns) { return time_ns != kUnknown; }


// nccl-tests' bus bandwidth factor: the share of a collective's bytes that
// crosses each rank's link, so that bus bandwidth compares with the link's.
double bus_factor(CommOp op, size_t ranks) {
  if (ranks < 2) return 0;
  const double n = static_cast<double>(ranks);
  switch (op) {
    case CommOp::kAllReduce:
      return 2 * (n - 1) / n;
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
    case CommOp::kAllToAll:
      return (n - 1) / n;
    default:
      return 1;
  }
}

// The time this rank had the collective in flight: from its post (MPI) or the
// kernel's start (NCCL) to its end.
int64_t in_flight_ns(const Participation& p) {
  return known(p.arrival_ns) && known(p.end_ns) ? std::max<int64_t>(0, p.end_ns - p.arrival_ns) : kUnknown;
}

// Of the time in flight, what no compute hid: the wait for the last rank and
// the transfer after it.
int64_t exposed_ns(const Participation& p) { return p.exposed_wait_ns + p.exposed_transfer_ns; }

// One communicator's collectives of one operation within one step, in the
// order the ranks issued them.
using Sequence = std::vector<const CollectiveInstance*>;

std::vector<uint64_t> sizes_of(const Sequence& sequence) {
  std::vector<uint64_t> sizes;
  for (const CollectiveInstance* c : sequence) sizes.push_back(c->bytes);
  return sizes;
}

// The job's collectives that `wanted` accepts, grouped by (step, communicator,
// operation), each group ordered by sequence number, which counts per
// operation within a communicator.
template <typename Predicate>
std::map<std::tuple<int32_t, uint64_t, CommOp>, Sequence> sequences_by_step(const JobProfile& job, Predicate wanted) {
  std::map<std::tuple<int32_t, uint64_t, CommOp>, Sequence> sequences;
  for (const CollectiveInstance& c : job.collectives) {
    if (c.step >= 0 && !c.ranks.empty() && wanted(c)) sequences[{c.step, c.comm_hash, c.op}].push_back(&c);
  }
  for (auto& [key, sequence] : sequences) {
    std::sort(sequence.begin(), sequence.end(),
              [](const CollectiveInstance* a, const CollectiveInstance* b) { return a->seq < b->seq; });
  }
  return sequences;
}

// Keeps the items whose layout (their collectives' sizes in order) is the most
// common one. DDP's first iteration, which reduces before its buckets are
// rebuilt, or the data-parallel group of another pipeline stage would
// otherwise mix unlike buckets under one index. Ties go to the smaller layout
// so that the choice does not depend on the order of the steps.
template <typename Item, typename Layout>
std::vector<Item> with_most_common_layout(const std::vector<Item>& items, Layout layout_of) {
  std::map<std::vector<uint64_t>, int> counts;
  for (const Item& item : items) ++counts[layout_of(item)];
  const auto most_common = std::max_element(counts.begin(), counts.end(),
                                            [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<Item> kept;
  for (const Item& item : items) {
    if (most_common != counts.end() && layout_of(item) == most_common->first) kept.push_back(item);
  }
  return kept;
}

// The job's time for one step: the median over the ranks that ran it, since
// every rank leaves a step's last collectives at about the same time.
int64_t step_duration_ns(const JobProfile& job, int32_t step) {
  std::vector<int64_t> durations;
  for (const RankProfile& rank : job.ranks) {
    if (static_cast<size_t>(step) >= rank.steps.size()) continue;
    const StepTimes& times = rank.steps[static_cast<size_t>(step)].times;
    if (known(times.begin_ns) && known(times.end_ns)) durations.push_back(times.duration());
  }
  return median_ns(std::move(durations), kUnknown);
}

// ------------------------------------------------------------ α–β fit ---

struct TransferSample {
  double size;  // bytes, or bus bytes
  double transfer_ns;
};

// Least squares of transfer = α + size · ns_per_byte, both kept non-negative:
// a negative latency or a time that falls with size describes no network, so
// the fit is then redone with that term at zero. R² is NaN when the sizes do
// not vary, since latency and bandwidth cannot then be told apart.
AlphaBetaFit least_squares(const std::vector<TransferSample>& samples) {
  AlphaBetaFit fit;
  fit.samples = static_cast<int>(samples.size());
  fit.r_squared = kNaN;
  if (samples.empty()) return fit;
  double mean_size = 0, mean_time = 0;
  for (const TransferSample& s : samples) {
    mean_size += s.size;
    mean_time += s.transfer_ns;
  }
  mean_size /= static_cast<double>(samples.size());
  mean_time /= static_cast<double>(samples.size());
  // Centred sums keep the precision that sizes of 1e9 bytes would cost.
  double size_spread = 0, covariance = 0, time_spread = 0, size_squares = 0, size_times = 0;
  for (const TransferSample& s : samples) {
    size_spread += (s.size - mean_size) * (s.size - mean_size);
    covariance += (s.size - mean_size) * (s.transfer_ns - mean_time);
    time_spread += (s.transfer_ns - mean_time) * (s.transfer_ns - mean_time);
    size_squares += s.size * s.size;
    size_times += s.size * s.transfer_ns;
  }
  if (size_spread <= 0) return fit;
  fit.ns_per_byte = covariance / size_spread;
  fit.alpha_ns = mean_time - fit.ns_per_byte * mean_size;
  if (fit.alpha_ns < 0) {
    fit.alpha_ns = 0;
    fit.ns_per_byte = size_times / size_squares;
  }
  if (fit.ns_per_byte < 0) {
    fit.ns_per_byte = 0;
    fit.alpha_ns = mean_time;
  }
  double residual = 0;
  for (const TransferSample& s : samples) {
    const double error = s.transfer_ns - (fit.alpha_ns + fit.ns_per_byte * s.size);
    residual += error * error;
  }
  fit.r_squared = time_spread > 0 ? 1 - residual / time_spread : (residual > 0 ? 0 : 1);
  return fit;
}

// The fit, and whether its sizes are bus bytes (the ring model).
struct TransferModel {
  AlphaBetaFit fit;
  bool bus_bytes = false;

  bool usable() const { return !std::isnan(fit.r_squared); }
  double transfer_ns(uint64_t bytes, CommOp op, size_t ranks) const {
    const double size = static_cast<double>(bytes) * (bus_bytes ? bus_factor(op, ranks) : 1.0);
    return fit.alpha_ns + fit.ns_per_byte * size;
  }
};

// Fits every matched collective whose transfer time is known, once on its
// bytes and once on its bus bytes (the ring model: an allreduce moves
// 2(n−1)/n of its bytes over each link, an all-gather (n−1)/n, ...), and keeps
// the better fit. On a job of allreduces over one group the two are the same
// fit up to a constant; bus bytes are kept then, as nccl-tests counts them.
TransferModel fit_transfers(const JobProfile& job) {
  std::vector<TransferSample> by_bytes, by_bus_bytes;
  for (const CollectiveInstance& c : job.collectives) {
    const int64_t transfer = c.transfer_ns();
    if (!known(transfer) || transfer < 0) continue;
    const double bytes = static_cast<double>(c.bytes);
    by_bytes.push_back({bytes, static_cast<double>(transfer)});
    by_bus_bytes.push_back({bytes * bus_factor(c.op, c.ranks.size()), static_cast<double>(transfer)});
  }
  const AlphaBetaFit plain = least_squares(by_bytes);
  const AlphaBetaFit ring = least_squares(by_bus_bytes);
  const bool plain_better = !std::isnan(plain.r_squared) &&
                            (std::isnan(ring.r_squared) || plain.r_squared > ring.r_squared + kRSquaredTolerance);
  return plain_better ? TransferModel{plain, false} : TransferModel{ring, true};
}

// ------------------------------------------------------------------ DDP ---

// A communicator's gradient allreduces in one step, bucket 0 first.
std::vector<Sequence> gradient_syncs(const JobProfile& job) {
  std::vector<Sequence> syncs;
  for (auto& [key, sequence] : sequences_by_step(job, is_gradient_allreduce)) syncs.push_back(std::move(sequence));
  return with_most_common_layout(syncs, sizes_of);
}

Algorithm most_common_algorithm(const std::vector<const CollectiveInstance*>& instances) {
  std::map<Algorithm, int> counts;
  for (const CollectiveInstance* c : instances) ++counts[c->algorithm];
  const auto most_common = std::max_element(counts.begin(), counts.end(),
                                            [](const auto& a, const auto& b) { return a.second < b.second; });
  return most_common->first;
}

BucketStats bucket_stats(const std::vector<Sequence>& syncs, size_t index) {
  std::vector<const CollectiveInstance*> instances;
  for (const Sequence& sync : syncs) instances.push_back(sync[index]);
  BucketStats stats;
  stats.index = static_cast<int32_t>(index);
  stats.bytes = instances.front()->bytes;
  std::vector<int64_t> transfers, exposed;
  std::vector<double> hidden_pct;
  for (const CollectiveInstance* c : instances) {
    if (const int64_t transfer = c->transfer_ns(); known(transfer)) transfers.push_back(transfer);
    for (const Participation& p : c->ranks) {
      exposed.push_back(exposed_ns(p));
      const int64_t in_flight = in_flight_ns(p);
      if (known(in_flight) && in_flight > 0) {
        hidden_pct.push_back(100.0 * static_cast<double>(std::max<int64_t>(0, in_flight - exposed_ns(p))) /
                             static_cast<double>(in_flight));
      }
    }
  }
  stats.transfer_ns = median_ns(transfers);
  if (stats.transfer_ns > 0) {
    // Bytes per nanosecond are GB/s with GB = 1e9 bytes, as nccl-tests counts.
    stats.bus_bandwidth_gbps = static_cast<double>(stats.bytes) / static_cast<double>(stats.transfer_ns) *
                               bus_factor(CommOp::kAllReduce, instances.front()->ranks.size());
  }
  stats.algorithm = most_common_algorithm(instances);
  stats.overlap_pct = median(std::move(hidden_pct));
  stats.exposed_ns = median_ns(std::move(exposed));
  return stats;
}

// When the last rank has posted the last bucket, every rank's backward is
// done: a rank posts its last bucket as soon as its backward ends, and
// measuring from the last of them leaves out the time fast ranks wait for a
// slow one, which is a straggler's cost, not the buckets'.
int64_t backward_end_ns(const Sequence& sync) { return sync.back()->last_arrival_ns(); }

// The time from the end of backward until the gradients are reduced: each
// rank's last end of the step's gradient allreduces, the median over ranks
// (a descheduled rank returning late is not the network), minus the end of
// backward.
int64_t exposed_tail_ns(const Sequence& sync) {
  std::map<int32_t, int64_t> last_end_by_rank;
  for (const CollectiveInstance* c : sync) {
    for (const Participation& p : c->ranks) {
      if (!known(p.end_ns)) continue;
      auto [it, added] = last_end_by_rank.try_emplace(p.rank, p.end_ns);
      if (!added) it->second = std::max(it->second, p.end_ns);
    }
  }
  std::vector<int64_t> last_ends;
  for (const auto& [rank, end] : last_end_by_rank) last_ends.push_back(end);
  const int64_t backward_end = backward_end_ns(sync);
  if (last_ends.empty() || !known(backward_end)) return kUnknown;
  return std::max<int64_t>(0, median_ns(std::move(last_ends), kUnknown) - backward_end);
}

// The backward pass as the predictor sees it: gradient bytes become ready at a
// constant pace, each bucket is handed to the network when its last byte is
// ready, and the network reduces one bucket at a time.
struct BackwardModel {
  uint64_t gradient_bytes = 0;         // per step, over all buckets
  double ns_per_gradient_byte = 0;     // backward's pace
  TransferModel transfers;
  size_t ranks = 0;

  // The time from the end of backward until the last bucket is reduced.
  int64_t tail_ns(const std::vector<uint64_t>& bucket_sizes) const {
    uint64_t ready_bytes = 0;
    double network_free_ns = 0;
    for (uint64_t size : bucket_sizes) {
      ready_bytes += size;
      const double ready_ns = static_cast<double>(ready_bytes) * ns_per_gradient_byte;
      network_free_ns =
          std::max(ready_ns, network_free_ns) + transfers.transfer_ns(size, CommOp::kAllReduce, ranks);
    }
    return std::llround(network_free_ns - static_cast<double>(gradient_bytes) * ns_per_gradient_byte);
  }
};

// Bucket caps to predict: 1 MiB doubling, up to the first cap that holds all
// gradients after the first bucket (larger ones form the same buckets).
std::vector<uint64_t> candidate_caps(uint64_t gradient_bytes) {
  std::vector<uint64_t> caps;
  for (int doubling = 0; doubling <= kCandidateDoublings; ++doubling) {
    caps.push_back(kMiB << doubling);
    if (kFirstBucketCapBytes + caps.back() >= gradient_bytes) break;
  }
  return caps;
}

// The median over the syncs' steps of the measured step time.
int64_t measured_step_ns(const JobProfile& job, const std::vector<Sequence>& syncs) {
  std::set<int32_t> steps;
  for (const Sequence& sync : syncs) steps.insert(sync.front()->step);
  std::vector<int64_t> durations;
  for (int32_t step : steps) {
    if (const int64_t duration = step_duration_ns(job, step); known(duration)) durations.push_back(duration);
  }
  return median_ns(std::move(durations), kUnknown);
}

// Backward's pace: the bytes of buckets 1 and later over the time from the
// post of bucket 0 to the post of the last bucket, both taken at the last
// rank's post (the median over steps). Zero when it cannot be measured.
double ns_per_gradient_byte(const std::vector<Sequence>& syncs) {
  const std::vector<uint64_t> layout = sizes_of(syncs.front());
  uint64_t after_first_bytes = 0;
  for (size_t i = 1; i < layout.size(); ++i) after_first_bytes += layout[i];
  std::vector<int64_t> spans;
  for (const Sequence& sync : syncs) {
    const int64_t first_post = sync.front()->last_arrival_ns(), last_post = backward_end_ns(sync);
    if (known(first_post) && known(last_post)) spans.push_back(last_post - first_post);
  }
  const int64_t span_ns = median_ns(std::move(spans));
  if (after_first_bytes == 0 || span_ns <= 0) return 0;
  return static_cast<double>(span_ns) / static_cast<double>(after_first_bytes);
}

// The recommendation from the predictions: the cap of the shortest step,
// unless the model's error on the current buckets says it describes some
// other job (then `untrusted`), or no cap saves more than that error and
// kWorthwhileSaving of the step (then the current cap). `how` ends the
// sentence of a saving: how the best cap saves.
template <typename How>
void recommend(BucketReport& report, uint64_t current_cap, int64_t current_step_ns, int64_t model_error_ns,
               const std::string& untrusted, How how) {
  report.recommended_bucket_bytes = 0;
  if (static_cast<double>(model_error_ns) > kTrustedModelError * static_cast<double>(report.measured_step_ns)) {
    report.recommendation = untrusted;
    return;
  }
  const BucketPrediction& best = *std::min_element(
      report.predictions.begin(), report.predictions.end(),
      [](const BucketPrediction& a, const BucketPrediction& b) { return a.step_ns < b.step_ns; });
  const int64_t saving_ns = current_step_ns - best.step_ns;
  const int64_t smallest_saving_ns =
      std::max<int64_t>(model_error_ns, std::llround(kWorthwhileSaving * static_cast<double>(current_step_ns)));
  char sentence[640];
  if (saving_ns <= smallest_saving_ns) {
    report.recommended_bucket_bytes = current_cap;
    std::snprintf(sentence, sizeof sentence,
                  "Keep the current %s buckets: no size from %s to %s is predicted to save more than %s of the %s "
                  "step, the model's margin of error.",
                  format_bytes(current_cap).c_str(), format_bytes(report.predictions.front().bucket_bytes).c_str(),
                  format_bytes(report.predictions.back().bucket_bytes).c_str(),
                  format_duration(static_cast<double>(smallest_saving_ns)).c_str(),
                  format_duration(static_cast<double>(current_step_ns)).c_str());
  } else {
    report.recommended_bucket_bytes = best.bucket_bytes;
    std::snprintf(sentence, sizeof sentence, "Buckets of %s instead of the current %s should save about %s per step (%.1f %%), %s.",
                  format_bytes(best.bucket_bytes).c_str(), format_bytes(current_cap).c_str(),
                  format_duration(static_cast<double>(saving_ns)).c_str(),
                  100.0 * static_cast<double>(saving_ns) / static_cast<double>(current_step_ns), how(best).c_str());
  }
  report.recommendation = sentence;
}

// Predicts the step for the current buckets and for each candidate cap as the
// measured step with the measured exposed tail replaced by the model's, and
// recommends the cap with the shortest predicted step.
void predict(const JobProfile& job, const std::vector<Sequence>& syncs, const TransferModel& transfers,
             BucketReport& report) {
  const std::vector<uint64_t> current_layout = sizes_of(syncs.front());
  BackwardModel model;
  model.transfers = transfers;
  model.ranks = syncs.front().front()->ranks.size();
  model.ns_per_gradient_byte = ns_per_gradient_byte(syncs);
  for (uint64_t size : current_layout) model.gradient_bytes += size;
  const int64_t step_ns = measured_step_ns(job, syncs);
  if (current_layout.size() < 2) {
    report.recommendation =
        "No prediction: with one gradient allreduce per step the profile does not show how fast backward produces "
        "gradients; profile once with buckets smaller than the model.";
    return;
  }
  if (model.ns_per_gradient_byte <= 0 || !known(step_ns)) {
    report.recommendation =
        "No prediction: the gradient allreduces' posts or the steps' times are unknown, so backward's pace cannot "
        "be measured.";
    return;
  }
  if (!report.tail_unmeasured.empty()) {
    report.recommendation = "No prediction: the exposed tail after backward is not known: " + report.tail_unmeasured + ".";
    return;
  }
  if (!transfers.usable()) {
    report.recommendation =
        "No prediction: the job's collectives have too few sizes with known transfer times to tell latency from "
        "bandwidth.";
    return;
  }

  report.measured_step_ns = step_ns;
  report.predicted_by = "model";
  const int64_t step_without_tail_ns = step_ns - report.exposed_tail_ns;
  const uint64_t current_cap = current_bucket_cap(report);
  const int64_t current_tail_ns = model.tail_ns(current_layout);
  report.predictions.push_back({current_cap, step_without_tail_ns + current_tail_ns});
  for (uint64_t cap : candidate_caps(model.gradient_bytes)) {
    if (cap != current_cap) {
      const int64_t tail_ns = model.tail_ns(buckets_for_cap(model.gradient_bytes, cap));
      report.predictions.push_back({cap, step_without_tail_ns + tail_ns});
    }
  }
  std::sort(report.predictions.begin(), report.predictions.end(),
            [](const BucketPrediction& a, const BucketPrediction& b) { return a.bucket_bytes < b.bucket_bytes; });

  // The model's error on the buckets it was measured with says how far its
  // other predictions can be trusted: too large, and it describes some other
  // job; otherwise no saving smaller than it is promised.
  const int64_t model_error_ns = std::abs(current_tail_ns - report.exposed_tail_ns);
  const bool mpi = syncs.front().front()->source == CollectiveSource::kMpi;
  const std::string untrusted =
      "No recommendation: the model puts the current buckets' exposed tail at " +
      format_duration(static_cast<double>(current_tail_ns)) + " against " +
      format_duration(static_cast<double>(report.exposed_tail_ns)) +
      " measured, so the allreduces did not run as it assumes, one after another at the fitted speed" +
      (mpi ? " (MPI's non-blocking collectives progress only inside MPI calls)." : ".");
  recommend(report, current_cap, step_without_tail_ns + current_tail_ns, model_error_ns, untrusted,
            [&](const BucketPrediction& best) {
              return "the exposed tail after backward going from " +
                     format_duration(static_cast<double>(current_tail_ns)) + " to " +
                     format_duration(static_cast<double>(best.step_ns - step_without_tail_ns));
            });
}

void analyze_ddp(const JobProfile& job, const TransferModel& transfers, BucketReport& report) {
  const std::vector<Sequence> syncs = gradient_syncs(job);
  if (syncs.empty()) {
    report.tail_unmeasured =
        "no gradient allreduce was seen in a step (a nonblocking MPI, c10d or NCCL allreduce): no DDP backward";
    return;
  }
  report.ddp = true;
  for (size_t index = 0; index < syncs.front().size(); ++index) report.buckets.push_back(bucket_stats(syncs, index));
  std::vector<int64_t> tails;
  for (const Sequence& sync : syncs) {
    if (const int64_t tail = exposed_tail_ns(sync); known(tail)) tails.push_back(tail);
  }
  if (tails.empty()) report.tail_unmeasured = "no step's end of backward and of its gradient allreduces are both known";
  report.exposed_tail_ns = median_ns(std::move(tails));
  // Buckets without sizes (an imported trace without record_shapes) predict nothing.
  if (std::none_of(report.buckets.begin(), report.buckets.end(), [](const BucketStats& b) { return b.bytes > 0; })) {
    report.sizes_unmeasured = kSizesUnknownReason;
    report.recommendation = std::string("No prediction: ") + kSizesUnknownReason + ".";
    return;
  }
  predict(job, syncs, transfers, report);
}

// ----------------------------------------------------------------- FSDP ---

// One communicator's all-gathers and reduce-scatters in one step.
struct UnitSync {
  Sequence allgathers, reduce_scatters;
};

// FSDP reduce-scatters each unit's gradients once, in backward; it gathers
// each unit's parameters before its forward and again before its backward
// (the root unit, kept gathered after forward, may skip the second gather).
// So a step with U reduce-scatters has between U and 2U all-gathers.
std::vector<UnitSync> unit_syncs(const JobProfile& job) {
  std::map<std::pair<int32_t, uint64_t>, UnitSync> by_step;
  const auto gathers_or_scatters = [](const CollectiveInstance& c) {
    return c.op == CommOp::kAllGather || c.op == CommOp::kReduceScatter;
  };
  for (auto& [key, sequence] : sequences_by_step(job, gathers_or_scatters)) {
    const auto& [step, comm, op] = key;
    UnitSync& sync = by_step[{step, comm}];
    (op == CommOp::kAllGather ? sync.allgathers : sync.reduce_scatters) = std::move(sequence);
  }
  std::vector<UnitSync> syncs;
  for (auto& [key, sync] : by_step) {
    const size_t units = sync.reduce_scatters.size();
    if (units > 0 && sync.allgathers.size() >= units && sync.allgathers.size() <= 2 * units) {
      syncs.push_back(std::move(sync));
    }
  }
  // The number of all-gathers leads the layout so that the two kinds stay apart.
  return with_most_common_layout(syncs, [](const UnitSync& sync) {
    std::vector<uint64_t> layout{sync.allgathers.size()};
    for (const CollectiveInstance* c : sync.allgathers) layout.push_back(c->bytes);
    for (const CollectiveInstance* c : sync.reduce_scatters) layout.push_back(c->bytes);
    return layout;
  });
}

// Forward gathers units 0, 1, ...; backward gathers and reduce-scatters them
// last first.
size_t unit_of_allgather(size_t position, size_t units) {
  return position < units ? position : units - 1 - (position - units);
}
size_t unit_of_reduce_scatter(size_t position, size_t units) { return units - 1 - position; }

// Per (step, rank), the exposed time of the instances that `wanted` picks; the median.
template <typename Predicate>
int64_t median_exposed_per_step(const std::vector<UnitSync>& syncs, const Sequence UnitSync::*sequence,
                                Predicate wanted) {
  std::vector<int64_t> per_step;
  for (const UnitSync& sync : syncs) {
    std::map<int32_t, int64_t> by_rank;
    const Sequence& instances = sync.*sequence;
    for (size_t position = 0; position < instances.size(); ++position) {
      if (!wanted(position)) continue;
      for (const Participation& p : instances[position]->ranks) by_rank[p.rank] += exposed_ns(p);
    }
    for (const auto& [rank, exposed] : by_rank) per_step.push_back(exposed);
  }
  return median_ns(std::move(per_step));
}

// Whether all-gathers run while the previous unit computes. The first
// forward all-gather has no earlier compute to hide behind, so it is left
// out of the judgement and named apart.
std::string prefetch_note(const std::vector<UnitSync>& syncs, size_t units) {
  if (units == 1) {
    return "One unit: its all-gathers have no previous unit's compute to hide behind; with more units, prefetch "
           "could overlap them.";
  }
  int64_t in_flight_total = 0, exposed_total = 0;
  for (const UnitSync& sync : syncs) {
    for (size_t position = 1; position < sync.allgathers.size(); ++position) {
      for (const Participation& p : sync.allgathers[position]->ranks) {
        if (const int64_t in_flight = in_flight_ns(p); known(in_flight)) {
          in_flight_total += in_flight;
          exposed_total += std::min(in_flight, exposed_ns(p));
        }
      }
    }
  }
  if (in_flight_total <= 0) return "Prefetch cannot be judged: the all-gathers' times in flight are unknown.";
  const double hidden_share = 1 - static_cast<double>(exposed_total) / static_cast<double>(in_flight_total);
  const int64_t exposed_per_step_ns =
      median_exposed_per_step(syncs, &UnitSync::allgathers, [](size_t) { return true; });
  const int64_t first_exposed_ns =
      median_exposed_per_step(syncs, &UnitSync::allgathers, [](size_t position) { return position == 0; });
  char note[512];
  if (hidden_share >= kPrefetchWorksHiddenShare) {
    std::snprintf(note, sizeof note,
                  "All-gathers overlap the previous unit's compute (prefetch works): compute hides %.0f %% of their "
                  "time in flight; %s per step stays exposed, %s of it in unit 0's first all-gather, which nothing "
                  "can hide.",
                  100 * hidden_share, format_duration(static_cast<double>(exposed_per_step_ns)).c_str(),
                  format_duration(static_cast<double>(first_exposed_ns)).c_str());
  } else if (hidden_share >= kPrefetchedHiddenShare) {
    std::snprintf(note, sizeof note,
                  "All-gathers are started ahead but outlast the previous unit's compute: compute hides only %.0f %% "
                  "of their time in flight and they leave %s per step exposed; they are too slow for the compute "
                  "beside them, so the all-gathers themselves must get faster: starting them earlier would not help.",
                  100 * hidden_share, format_duration(static_cast<double>(exposed_per_step_ns)).c_str());
  } else {
    std::snprintf(note, sizeof note,
                  "All-gathers do not overlap the previous unit's compute: compute hides only %.0f %% of their time "
                  "in flight and they leave %s per step exposed; starting each unit's all-gather while the previous "
                  "unit computes (FSDP's backward_prefetch=BACKWARD_PRE, forward_prefetch=True) would hide most of "
                  "it.",
                  100 * hidden_share, format_duration(static_cast<double>(exposed_per_step_ns)).c_str());
  }
  return note;
}

void analyze_fsdp(const JobProfile& job, BucketReport& report) {
  const std::vector<UnitSync> syncs = unit_syncs(job);
  if (syncs.empty()) return;
  report.fsdp = true;
  const size_t units = syncs.front().reduce_scatters.size();
  for (size_t unit = 0; unit < units; ++unit) {
    BucketReport::Unit stats;
    stats.index = static_cast<int32_t>(unit);
    stats.allgather_bytes = syncs.front().allgathers[unit]->bytes;
    stats.reduce_scatter_bytes = syncs.front().reduce_scatters[unit_of_reduce_scatter(unit, units)]->bytes;
    stats.allgather_exposed_ns = median_exposed_per_step(
        syncs, &UnitSync::allgathers, [&](size_t position) { return unit_of_allgather(position, units) == unit; });
    stats.reduce_scatter_exposed_ns =
        median_exposed_per_step(syncs, &UnitSync::reduce_scatters,
                                [&](size_t position) { return unit_of_reduce_scatter(position, units) == unit; });
    report.units.push_back(stats);
  }
  report.prefetch_note = prefetch_note(syncs, units);
}

}  // namespace

// The per-rank overlap is not needed: each bucket's and unit's overlap comes
// from its own participations.
BucketReport analyze_buckets(const JobProfile& job, const std::vector<RankOverlap>& /*overlap*/) {
  BucketReport report;
  if (job.collectives.empty()) {
    report.unmeasured = report.tail_unmeasured = collectives_unmeasured(job);
    return report;
  }
  // The fit describes the job's network whatever its parallelism; the DDP
  // predictor is its main user.
  const TransferModel transfers = fit_transfers(job);
  report.fit = transfers.fit;
  report.fit_on_bus_bytes = transfers.bus_bytes;
  analyze_ddp(job, transfers, report);
  analyze_fsdp(job, report);
  if (!report.units.empty() && std::none_of(report.units.begin(), report.units.end(), [](const BucketReport::Unit& u) {
        return u.allgather_bytes > 0 || u.reduce_scatter_bytes > 0;
      })) {
    report.sizes_unmeasured = kSizesUnknownReason;
  }
  return report;
}

bool is_gradient_allreduce(const CollectiveInstance& c) {
  // Run while backward goes on: nonblocking MPI or c10d calls, or NCCL's,
  // which are always asynchronous to the host.
  return c.op == CommOp::kAllReduce && (c.nonblocking || c.source == CollectiveSource::kNccl);
}

// Gradients are taken as a continuous
// stream (layers are never split in DDP, so real buckets overshoot the cap
// by up to one layer): a first bucket of at most 1 MiB, then full buckets,
// then what is left.
std::vector<uint64_t> buckets_for_cap(uint64_t gradient_bytes, uint64_t cap) {
  std::vector<uint64_t> sizes;
  uint64_t left = gradient_bytes;
  for (uint64_t bucket_cap = std::min(cap, kFirstBucketCapBytes); left > 0; bucket_cap = cap) {
    sizes.push_back(std::min(bucket_cap, left));
    left -= sizes.back();
  }
  return sizes;
}

uint64_t current_bucket_cap(const BucketReport& report) {
  uint64_t cap = 0;
  for (const BucketStats& b : report.buckets) cap = std::max(cap, b.bytes);
  return cap;
}

int64_t fitted_allreduce_ns(const BucketReport& report, uint64_t bytes, size_t ranks) {
  const TransferModel model{report.fit, report.fit_on_bus_bytes};
  return std::llround(model.transfer_ns(bytes, CommOp::kAllReduce, ranks));
}

void take_replayed_predictions(BucketReport& report, const std::vector<BucketReplay>& replays,
                               const std::string& unmeasured, size_t left_out) {
  if (report.predictions.empty()) return;
  report.replay_unmeasured = unmeasured;
  const uint64_t current_cap = current_bucket_cap(report);
  const auto replay_of = [&](uint64_t cap) {
    return std::find_if(replays.begin(), replays.end(), [&](const BucketReplay& r) { return r.bucket_bytes == cap; });
  };
  const auto current = replay_of(current_cap);
  if (current == replays.end() || current->steps == 0 ||
      std::any_of(report.predictions.begin(), report.predictions.end(),
                  [&](const BucketPrediction& p) { return replay_of(p.bucket_bytes) == replays.end(); })) {
    if (report.replay_unmeasured.empty()) report.replay_unmeasured = "no walked step could be replayed";
    return;
  }
  for (BucketPrediction& p : report.predictions) {
    const BucketReplay& replay = *replay_of(p.bucket_bytes);
    p.step_ns = report.measured_step_ns + (replay.predicted_ns - replay.replayed_ns);
  }
  report.predicted_by = "replay";
  report.replayed_steps = current->steps;
  report.replay_unmeasured.clear();
  // The mean is over the steps replayed: one left out may have been unlike them.
  if (left_out > 0) {
    report.replay_left_out = std::to_string(left_out) + " of " + std::to_string(left_out + current->steps) +
                             " walked steps not replayed, the first because " + unmeasured;
  }
  // The regrouping of the current buckets differs from the replay as
  // recorded only by the model: the fit's transfers, one after another.
  const int64_t model_error_ns = std::abs(current->regrouped_ns - current->replayed_ns);
  const std::string steps = std::to_string(current->steps) + (current->steps == 1 ? " walked step" : " walked steps");
  const std::string untrusted =
      "No recommendation: replayed on " + steps + " with the fitted transfers one after another, the current buckets "
      "give a step of " + format_duration(static_cast<double>(current->regrouped_ns)) + " against " +
      format_duration(static_cast<double>(current->replayed_ns)) +
      " replayed as recorded, so the allreduces did not run as the fit assumes.";
  recommend(report, current_cap, report.measured_step_ns, model_error_ns, untrusted,
            [&](const BucketPrediction&) { return "replayed on " + steps + " of the critical path's graph"; });
}

}  // namespace rankscope::analysis
