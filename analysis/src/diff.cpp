// Two runs compared (docs/diff.md): each figure of the report with its
// per-step samples, matched by name and rank, tested with Mann–Whitney's U
// against the runs' own step-to-step variation, Holm-corrected over every
// figure tested, and ordered by the step time each change explains.
#include "rankscope/analysis/diff.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "rankscope/model/error.h"
#include "rankscope/model/format.h"
#include "rankscope/model/html.h"
#include "rankscope/model/json.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"

namespace rankscope::analysis {
namespace {

// The figures of one value a run; those ending in ':' are families, the
// name of their bucket, kernel or class after it.
constexpr std::string_view kBucketTransfer = "bucket.transfer_ns:", kBucketBusBandwidth = "bucket.busbw_gbps:",
                           kBucketBytes = "bucket.bytes:", kCollectiveTransfer = "collective.transfer_ns:",
                           kKernelTotal = "kernel.total_ns:", kKernelCount = "kernel.count:",
                           kKernelMean = "kernel.mean_ns:", kBottleneckCost = "bottleneck.cost_ns:",
                           kPeakRss = "process.peak_rss_bytes", kGpuMemoryPeak = "gpu.memory_peak_bytes",
                           kCaptureCost = "capture_cost_pct", kStragglers = "stragglers";
constexpr std::string_view kSingleValueFigures[] = {kBucketTransfer, kBucketBusBandwidth, kBucketBytes,
                                                    kCollectiveTransfer, kKernelTotal, kKernelCount,
                                                    kKernelMean, kBottleneckCost, kPeakRss,
                                                    kGpuMemoryPeak, kCaptureCost, kStragglers};

// The job's configuration, exact in every run (a bucket's size): a
// difference is real, and neither better nor worse.
bool is_configuration(std::string_view metric) { return metric.starts_with(kBucketBytes); }

// A figure measured per step, read off a rank's step.
struct StepMetric {
  const char* name;
  const char* unit;
  bool higher_is_better;
  std::function<double(const RankStep&)> read;
};

std::vector<StepMetric> step_metrics(bool gpu) {
  std::vector<StepMetric> metrics = {
      {"step_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.times.duration()); }},
      {"compute_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.compute_ns); }},
      {"comm_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.comm_ns); }},
      {"overlap_ns", "ns", true, [](const RankStep& s) { return static_cast<double>(s.overlap_ns); }},
      {"exposed_wait_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.exposed_wait_ns); }},
      {"exposed_transfer_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.exposed_transfer_ns); }},
      {"idle_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.idle_ns); }},
      {"data_loading_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.data_loading_ns); }},
      {"forward_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.forward_ns); }},
      {"backward_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.backward_ns); }},
      {"optimizer_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.optimizer_ns); }},
  };
  if (!gpu) return metrics;
  static const std::vector<std::string> gpu_names = [] {
    std::vector<std::string> names;
    for (int c = 0; c < kWorkCategoryCount; ++c) {
      names.push_back(std::string("gpu.") + work_category_key(static_cast<WorkCategory>(c)) + "_ns");
    }
    for (int c = 0; c < kIdleCauseCount; ++c) {
      names.push_back(std::string("gpu.idle.") + idle_cause_key(static_cast<IdleCause>(c)) + "_ns");
    }
    return names;
  }();
  for (int c = 0; c < kWorkCategoryCount; ++c) {
    metrics.push_back({gpu_names[static_cast<size_t>(c)].c_str(), "ns", false,
                       [c](const RankStep& s) { return static_cast<double>(s.device.work_ns[c]); }});
  }
  for (int c = 0; c < kIdleCauseCount; ++c) {
    metrics.push_back({gpu_names[static_cast<size_t>(kWorkCategoryCount + c)].c_str(), "ns", false,
                       [c](const RankStep& s) { return static_cast<double>(s.device.idle_ns[c]); }});
  }
  metrics.push_back({"gpu.syncs", "count", false, [](const RankStep& s) { return static_cast<double>(s.device.syncs); }});
  metrics.push_back({"gpu.sync_ns", "ns", false, [](const RankStep& s) { return static_cast<double>(s.device.sync_ns); }});
  metrics.push_back({"gpu.launches", "count", false, [](const RankStep& s) { return static_cast<double>(s.device.launches); }});
  return metrics;
}

bool measured(const RankStep& s) { return s.times.begin_ns != kUnknown && s.times.end_ns != kUnknown; }

Figure single(std::string metric, int32_t rank, const char* unit, bool higher_is_better, double value) {
  Figure f;
  f.metric = std::move(metric);
  f.rank = rank;
  f.unit = unit;
  f.higher_is_better = higher_is_better;
  f.value = value;
  return f;
}

// Collectives by source, operation and size class (a power of two of bytes): the median transfer of each.
void add_collective_figures(const JobProfile& job, RunFigures& out) {
  std::map<std::string, std::vector<double>> transfers;
  for (const CollectiveInstance& c : job.collectives) {
    const int64_t transfer = c.transfer_ns();
    if (transfer == kUnknown || c.ranks.size() < 2) continue;
    const int size_class = c.bytes == 0 ? 0 : static_cast<int>(std::ceil(std::log2(static_cast<double>(c.bytes))));
    const char* source = c.source == CollectiveSource::kMpi ? "MPI" : c.source == CollectiveSource::kNccl ? "NCCL" : "c10d";
    transfers[std::string(kCollectiveTransfer) + printf_string("%s %s <=2^%d B", source, std::string(comm_op_name(c.op)).c_str(),
                            size_class)]
        .push_back(static_cast<double>(transfer));
  }
  for (auto& [metric, values] : transfers) out.figures.push_back(single(metric, -1, "ns", false, median(values, 0.0)));
}

}  // namespace

std::vector<std::string> figure_families() {
  std::vector<std::string> names;
  for (const StepMetric& metric : step_metrics(true)) names.emplace_back(metric.name);
  for (std::string_view name : kSingleValueFigures) names.emplace_back(name);
  return names;
}

RunFigures run_figures(const Report& report) {
  const JobProfile& job = report.profile;
  RunFigures out;
  out.path = job.path;
  out.world_size = job.world_size;
  if (!report.damage.empty()) out.damage = report.damage.summary();
  out.gpu = std::any_of(job.ranks.begin(), job.ranks.end(), [](const RankProfile& r) { return r.device.gpu; });
  const std::vector<StepMetric> metrics = step_metrics(out.gpu);
  // The first step warms up (DDP rebuilds its buckets after it, allocators and NCCL connect in it).
  const size_t first = job.step_numbers.size() > 1 ? 1 : 0;
  out.steps = static_cast<int64_t>(job.step_numbers.size() - first);
  for (const StepMetric& metric : metrics) {
    Figure whole;
    whole.metric = metric.name;
    whole.unit = metric.unit;
    whole.higher_is_better = metric.higher_is_better;
    for (size_t s = first; s < job.step_numbers.size(); ++s) {
      double sum = 0;
      int ran = 0;
      for (const RankProfile& rank : job.ranks) {
        if (s < rank.steps.size() && measured(rank.steps[s])) {
          sum += metric.read(rank.steps[s]);
          ++ran;
        }
      }
      if (ran > 0) whole.samples.push_back(sum / ran);
    }
    whole.value = median(whole.samples, 0.0);
    if (!whole.samples.empty()) out.figures.push_back(whole);
    for (const RankProfile& rank : job.ranks) {
      Figure per_rank = whole;
      per_rank.rank = rank.rank;
      per_rank.samples.clear();
      for (size_t s = first; s < rank.steps.size(); ++s) {
        if (measured(rank.steps[s])) per_rank.samples.push_back(metric.read(rank.steps[s]));
      }
      per_rank.value = median(per_rank.samples, 0.0);
      if (!per_rank.samples.empty()) out.figures.push_back(std::move(per_rank));
    }
  }
  for (const BucketStats& b : report.buckets.buckets) {
    out.figures.push_back(single(std::string(kBucketTransfer) + std::to_string(b.index), -1, "ns", false,
                                 static_cast<double>(b.transfer_ns)));
    out.figures.push_back(single(std::string(kBucketBusBandwidth) + std::to_string(b.index), -1, "GB/s", true, b.bus_bandwidth_gbps));
    out.figures.push_back(single(std::string(kBucketBytes) + std::to_string(b.index), -1, "bytes", false, static_cast<double>(b.bytes)));
  }
  add_collective_figures(job, out);
  // Top kernels by time, then by launches: their count, total and mean over every rank.
  for (const auto* list : {&report.bottlenecks.top_by_time, &report.bottlenecks.top_by_count}) {
    for (const KernelAcrossRanks& k : *list) {
      const std::string name = job.name(k.name_id);
      if (std::any_of(out.figures.begin(), out.figures.end(),
                      [&](const Figure& f) { return f.metric == std::string(kKernelTotal) + name; })) {
        continue;
      }
      out.figures.push_back(single(std::string(kKernelTotal) + name, -1, "ns", false, static_cast<double>(k.total_ns)));
      out.figures.push_back(single(std::string(kKernelCount) + name, -1, "count", false, static_cast<double>(k.count)));
      out.figures.push_back(single(std::string(kKernelMean) + name, -1, "ns", false,
                                   k.count ? static_cast<double>(k.total_ns) / static_cast<double>(k.count) : 0));
    }
  }
  for (const Bottleneck& b : report.bottlenecks.found) {
    out.figures.push_back(single(std::string(kBottleneckCost) + b.klass, -1, "ns", false, static_cast<double>(b.cost_ns_per_step)));
  }
  for (const RankEnd& end : report.ends) {
    if (end.usage) {
      out.figures.push_back(single(std::string(kPeakRss), end.rank, "bytes", false,
                                   static_cast<double>(end.usage->peak_rss_bytes)));
    }
  }
  for (const RankProfile& rank : job.ranks) {
    if (rank.device.device_memory_seen) {
      out.figures.push_back(single(std::string(kGpuMemoryPeak), rank.rank, "bytes", false,
                                   static_cast<double>(rank.device.memory.peak_bytes)));
    }
  }
  for (const CaptureCost& cost : report.capture_cost) {
    out.figures.push_back(single(std::string(kCaptureCost), cost.rank, "%", false, cost.share_pct()));
  }
  out.figures.push_back(single(std::string(kStragglers), -1, "count", false, static_cast<double>(report.stragglers.stragglers.size())));
  return out;
}

// ------------------------------------------------------------ baseline ---

// Text, one figure a line, as accept's baselines are: "figure RANK UNIT
// HIGHER VALUE N S1 .. SN METRIC", the metric last since kernel names hold spaces.
std::string baseline_text(const RunFigures& figures) {
  std::ostringstream out;
  out.precision(17);
  out << "rankscope-baseline " << kBaselineFormatVersion << "\n";
  out << "path " << figures.path << "\n";
  out << "world_size " << figures.world_size << "\ngpu " << (figures.gpu ? 1 : 0) << "\nsteps " << figures.steps << "\n";
  for (const Figure& f : figures.figures) {
    out << "figure " << f.rank << ' ' << f.unit << ' ' << (f.higher_is_better ? 1 : 0) << ' ' << f.value << ' '
        << f.samples.size();
    for (const double s : f.samples) out << ' ' << s;
    out << ' ' << f.metric << "\n";
  }
  return out.str();
}

RunFigures read_baseline_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the baseline " + path + ": " + errno_text(errno));
  RunFigures figures;
  std::string line;
  int number = 0;
  const auto bad = [&](const std::string& what) {
    throw Error(path + ":" + std::to_string(number) + ": " + what + " (a baseline written by `rankscope report "
                "--save-baseline`; docs/diff.md)");
  };
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (number == 1) {
      int version = 0;
      if (key != "rankscope-baseline" || !(fields >> version)) bad("not a rankscope baseline");
      if (version > kBaselineFormatVersion) {
        bad("baseline format " + std::to_string(version) + " is newer than this rankscope reads (" +
            std::to_string(kBaselineFormatVersion) + ")");
      }
      header = true;
      continue;
    }
    if (key.empty()) continue;
    if (key == "path") {
      std::getline(fields >> std::ws, figures.path);
    } else if (key == "world_size") {
      if (!(fields >> figures.world_size) || figures.world_size <= 0) bad("world_size is not a positive number");
    } else if (key == "gpu") {
      int gpu = 0;
      if (!(fields >> gpu)) bad("gpu is not 0 or 1");
      figures.gpu = gpu != 0;
    } else if (key == "steps") {
      if (!(fields >> figures.steps)) bad("steps is not a number");
    } else if (key == "figure") {
      Figure f;
      int higher = 0;
      size_t count = 0;
      if (!(fields >> f.rank >> f.unit >> higher >> f.value >> count) || count > 10'000'000) bad("a figure line is damaged");
      f.higher_is_better = higher != 0;
      f.samples.resize(count);
      for (double& s : f.samples) {
        if (!(fields >> s) || !std::isfinite(s)) bad("a figure has fewer samples than it says, or one not finite");
      }
      std::getline(fields >> std::ws, f.metric);
      if (f.metric.empty()) bad("a figure has no metric name");
      figures.figures.push_back(std::move(f));
    } else {
      bad("\"" + key.substr(0, 40) + "\" is no baseline line");
    }
  }
  if (!header) bad("the file is empty");
  return figures;
}

// ---------------------------------------------------------- statistics ---

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size(), m = b.size();
  if (n == 0 || m == 0) return 1;
  // Ranks of the pooled samples, ties given their mean rank.
  std::vector<std::pair<double, int>> pooled;
  for (const double v : a) pooled.emplace_back(v, 0);
  for (const double v : b) pooled.emplace_back(v, 1);
  std::sort(pooled.begin(), pooled.end());
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    const double t = static_cast<double>(j - i);
    if (t > 1) ties = true;
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k) {
      if (pooled[k].second == 0) rank_sum_a += mean_rank;
    }
    i = j;
  }
  const double u = rank_sum_a - static_cast<double>(n * (n + 1)) / 2;
  const double mean_u = static_cast<double>(n * m) / 2;
  if (!ties && n <= 12 && m <= 12) {
    // Exact: the number of arrangements with each U, by the recurrence on the largest value.
    std::vector<std::vector<std::vector<double>>> count(
        n + 1, std::vector<std::vector<double>>(m + 1, std::vector<double>(n * m + 1, 0)));
    for (size_t i = 0; i <= n; ++i) {
      for (size_t j = 0; j <= m; ++j) {
        if (i == 0 || j == 0) {
          count[i][j][0] = 1;
          continue;
        }
        for (size_t k = 0; k <= i * j; ++k) {
          count[i][j][k] = (k >= j ? count[i - 1][j][k - j] : 0) + count[i][j - 1][k];
        }
      }
    }
    double total = 0, tail = 0;
    const double extreme = std::min(u, static_cast<double>(n * m) - u);
    for (size_t k = 0; k <= n * m; ++k) {
      total += count[n][m][k];
      if (static_cast<double>(k) <= extreme + 1e-9) tail += count[n][m][k];
    }
    return std::min(1.0, 2 * tail / total);
  }
  const double nm = static_cast<double>(n * m), big_n = static_cast<double>(n + m);
  const double variance = nm / 12 * ((big_n + 1) - tie_term / (big_n * (big_n - 1)));
  if (variance <= 0) return 1;
  const double z = (std::fabs(u - mean_u) - 0.5) / std::sqrt(variance);
  return std::min(1.0, std::erfc(std::max(0.0, z) / std::sqrt(2.0)));
}

// ---------------------------------------------------------------- diff ---

namespace {

// The order a reader follows: the job's step time, the headline; then a
// rank whose figure got worse unlike the other ranks' (a slowed rank's
// compute, where the others only waited longer for it), by how far it
// departs from their median change; then the job's other figures and then
// the ranks', each by the step time it explains, the sums (compute,
// communication) after the figures within them.
// Significant changes before the others.
// Communication in flight behind compute costs the step nothing: what
// comm_ns and overlap_ns explain of the step is the change of their
// difference, the exposed communication. Healthy runs of one job differ in
// how long their nonblocking collectives stay in flight (by 2x in 2 of 20
// pairs of bench/diff_bench.sh) with the step unchanged.
void step_time_of_communication(std::vector<Change>& changes) {
  std::map<int32_t, std::pair<Change*, Change*>> by_scope;  // comm_ns, overlap_ns
  for (Change& c : changes) {
    if (c.metric == "comm_ns") by_scope[c.rank].first = &c;
    if (c.metric == "overlap_ns") by_scope[c.rank].second = &c;
  }
  for (auto& [rank, pair] : by_scope) {
    auto [comm, overlap] = pair;
    if (!comm || !overlap) continue;
    const double exposed_change = (comm->now - overlap->now) - (comm->base - overlap->base);
    if (!std::isfinite(exposed_change)) continue;
    comm->step_ns_explained = overlap->step_ns_explained = std::fabs(exposed_change);
  }
}

void order_changes(std::vector<Change>& changes) {
  std::map<std::string, std::vector<double>> rank_deltas;  // sorted, per metric
  for (const Change& c : changes) {
    if (c.rank >= 0 && std::isfinite(c.base) && std::isfinite(c.now)) rank_deltas[c.metric].push_back(c.now - c.base);
  }
  for (auto& [metric, deltas] : rank_deltas) std::sort(deltas.begin(), deltas.end());
  const auto tier_and_size = [&](const Change& c) -> std::pair<int, double> {
    if (c.metric == "step_ns" && c.rank < 0) return {0, c.step_ns_explained};
    // A rank's step time is the job's, set by the slowest rank: not a figure of its own.
    if (c.rank >= 0 && c.regression && c.unit == "ns" && c.metric != "step_ns") {
      // Against the median change of the other ranks' same figure: with two
      // ranks, the other rank's own.
      const double delta = c.now - c.base;
      const double own = std::fabs(delta - median_without(rank_deltas.at(c.metric), delta, 0.0));
      // Its waits are the effect of another rank's doing: after the cause.
      const bool waiting = c.metric == "comm_ns" || c.metric == "exposed_wait_ns";
      if (own >= 0.5 * std::fabs(delta) && own > 0) return {waiting ? 2 : 1, own};
    }
    // Sums that hold other figures (compute holds the phases on a CPU job)
    // come after the figure that names the cause, unless they explain a
    // quarter more.
    const bool sum = c.metric == "compute_ns" || c.metric == "comm_ns";
    return {c.rank < 0 ? 3 : 4, sum ? 0.8 * c.step_ns_explained : c.step_ns_explained};
  };
  // Each change's place computed once, not in every comparison.
  struct Keyed {
    bool significant;
    std::pair<int, double> tier_and_size;
    double relative;
    Change change;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(changes.size());
  for (Change& c : changes) {
    const double relative = std::isfinite(c.ratio) ? std::fabs(c.ratio - 1) : 0;
    keyed.push_back({c.significant, tier_and_size(c), relative, std::move(c)});
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (a.significant != b.significant) return a.significant;
    if (a.tier_and_size.first != b.tier_and_size.first) return a.tier_and_size.first < b.tier_and_size.first;
    if (a.tier_and_size.second != b.tier_and_size.second) return a.tier_and_size.second > b.tier_and_size.second;
    return a.relative > b.relative;
  });
  for (size_t i = 0; i < keyed.size(); ++i) changes[i] = std::move(keyed[i].change);
}

}  // namespace

bool DiffReport::regression() const {
  return std::any_of(changes.begin(), changes.end(), [](const Change& c) { return c.regression; });
}

bool DiffReport::rule_broken() const {
  return std::any_of(verdicts.begin(), verdicts.end(),
                     [](const RuleVerdict& v) { return v.outcome == RuleVerdict::Outcome::broken; });
}

namespace {
void correct_and_judge(std::vector<std::pair<double, size_t>>& tested, DiffReport& diff,
                       const std::map<std::pair<std::string, int32_t>, const Figure*>& base_by_key, double job_step,
                       const DiffOptions& options);

// The smallest two-sided p of Mann–Whitney's test between n and m values: 2 / C(n + m, n).
double smallest_p(size_t n, size_t m) {
  double arrangements = 1;
  for (size_t i = 1; i <= n; ++i) arrangements = arrangements * static_cast<double>(m + i) / static_cast<double>(i);
  return std::min(1.0, 2 / arrangements);
}
}  // namespace

DiffReport diff_runs(const RunFigures& base, const RunFigures& now, const DiffOptions& options) {
  DiffReport diff;
  diff.base_path = base.path;
  diff.new_path = now.path;
  for (const RunFigures* run : {&base, &now}) {
    if (!run->damage.empty()) {
      diff.notes.push_back(run->path + " is damaged: " + run->damage + "; its figures leave those rows out");
    }
  }
  const bool same_ranks = base.world_size == now.world_size;
  if (!same_ranks) {
    diff.notes.push_back(printf_string("the runs have %d and %d ranks: only the job's figures are compared, not "
                                       "each rank's",
                                       base.world_size, now.world_size));
  }
  if (base.gpu != now.gpu) {
    diff.notes.push_back(std::string("only the ") + (base.gpu ? "base" : "new") +
                         " run has GPU work: the GPU figures are in one run only");
  }
  std::map<std::pair<std::string, int32_t>, const Figure*> base_by_key;
  for (const Figure& f : base.figures) {
    if (f.rank < 0 || same_ranks) base_by_key[{f.metric, f.rank}] = &f;
  }
  // The job's step time, the floor under which a change of ns is too small to matter.
  double job_step = 0;
  if (const auto it = base_by_key.find({"step_ns", -1}); it != base_by_key.end()) job_step = it->second->value;
  std::vector<std::pair<double, size_t>> tested;  // raw p, index into changes
  std::map<std::pair<std::string, int32_t>, bool> seen;
  for (const Figure& f : now.figures) {
    if (f.rank >= 0 && !same_ranks) continue;
    Change c;
    c.metric = f.metric;
    c.rank = f.rank;
    c.unit = f.unit;
    c.now = f.value;
    seen[{f.metric, f.rank}] = true;
    const auto it = base_by_key.find({f.metric, f.rank});
    if (it == base_by_key.end()) {
      c.base = std::numeric_limits<double>::quiet_NaN();
      c.ratio = std::numeric_limits<double>::quiet_NaN();
      c.untested = "only in the new run";
      diff.changes.push_back(c);
      continue;
    }
    const Figure& b = *it->second;
    c.base = b.value;
    c.ratio = b.value != 0 ? f.value / b.value : std::numeric_limits<double>::quiet_NaN();
    if (f.unit == "ns") c.step_ns_explained = std::fabs(f.value - b.value);
    if (b.samples.empty() || f.samples.empty()) {
      c.single_value = true;
      if (is_configuration(f.metric)) {
        // It names a bucket change where the communication's figures
        // cannot tell it from noise.
        c.untested = "exact: no noise to test against";
        c.significant = f.value != b.value;
      } else {
        c.untested = "one value a run, no step-to-step samples to test against";
      }
    } else if (b.samples.size() < options.min_samples || f.samples.size() < options.min_samples) {
      c.untested = printf_string("%zu and %zu steps: %zu a run are needed for a test at %.2g", b.samples.size(),
                                 f.samples.size(), options.min_samples, options.alpha);
    } else {
      c.steps_compared = std::min(b.samples.size(), f.samples.size());
      tested.emplace_back(mann_whitney_p(b.samples, f.samples), diff.changes.size());
    }
    diff.changes.push_back(c);
  }
  for (const Figure& f : base.figures) {
    if ((f.rank >= 0 && !same_ranks) || seen.count({f.metric, f.rank})) continue;
    Change c;
    c.metric = f.metric;
    c.rank = f.rank;
    c.unit = f.unit;
    c.base = f.value;
    c.now = c.ratio = std::numeric_limits<double>::quiet_NaN();
    c.untested = "only in the base run";
    diff.changes.push_back(c);
  }
  step_time_of_communication(diff.changes);
  // Holm's step-down correction, in two families: the job's figures (the
  // question asked) and the ranks' (which rank it was), so that a job of
  // many ranks does not drown the job's own changes.
  std::vector<std::pair<double, size_t>> families[2];
  for (const auto& entry : tested) families[diff.changes[entry.second].rank < 0 ? 0 : 1].push_back(entry);
  for (auto& family : families) {
    correct_and_judge(family, diff, base_by_key, job_step, options);
  }
  diff.tested = static_cast<int64_t>(tested.size());
  // The fewest steps on a side decide how small a p can be at all.
  size_t fewest = SIZE_MAX;
  for (const auto& [p, index] : tested) {
    const Change& c = diff.changes[index];
    fewest = std::min(fewest, c.steps_compared);
  }
  if (!families[0].empty() && fewest != SIZE_MAX &&
      smallest_p(fewest, fewest) * static_cast<double>(families[0].size()) >= options.alpha) {
    diff.notes.push_back(printf_string(
        "with %zu steps a run, no change of the job's %zu figures can be significant (the smallest p a test of "
        "so few steps gives, times the figures, is above %.2g): profile more steps",
        fewest, families[0].size(), options.alpha));
  }
  order_changes(diff.changes);
  return diff;
}

namespace {

void correct_and_judge(std::vector<std::pair<double, size_t>>& tested, DiffReport& diff,
                       const std::map<std::pair<std::string, int32_t>, const Figure*>& base_by_key, double job_step,
                       const DiffOptions& options) {
  std::sort(tested.begin(), tested.end());
  const size_t k = tested.size();
  double running = 0;
  for (size_t i = 0; i < k; ++i) {
    running = std::max(running, std::min(1.0, static_cast<double>(k - i) * tested[i].first));
    Change& c = diff.changes[tested[i].second];
    c.p_value = running;
    // From nothing to something (a data loader where there was none) is as large as a change gets.
    const bool large = std::isfinite(c.ratio) ? std::fabs(c.ratio - 1) >= options.min_relative : c.now != c.base;
    const bool matters = c.unit != "ns" || job_step <= 0 || c.step_ns_explained >= options.min_step_share * job_step;
    c.significant = running < options.alpha && large && matters;
    const auto it = base_by_key.find({c.metric, c.rank});
    const bool higher_is_better = it != base_by_key.end() && it->second->higher_is_better;
    c.regression = c.significant && (higher_is_better ? c.now < c.base : c.now > c.base);
  }
}

}  // namespace

// ------------------------------------------------------------- writers ---


std::string figure_text(double value, const std::string& unit) {
  if (!std::isfinite(value)) return "-";
  if (unit == "ns") return format_duration(value);
  if (unit == "bytes") return format_bytes(value);
  if (unit == "GB/s") return printf_string("%.2f GB/s", value);
  if (unit == "%") return printf_string("%.2f %%", value);
  return printf_string("%.6g", value);
}

namespace {

std::string scope_text(const Change& c) { return c.rank < 0 ? "job" : "rank " + std::to_string(c.rank); }

std::string change_line(const Change& c) {
  std::string line = printf_string("  %s (%s): %s -> %s", c.metric.c_str(), scope_text(c).c_str(),
                                   figure_text(c.base, c.unit).c_str(), figure_text(c.now, c.unit).c_str());
  if (std::isfinite(c.ratio)) line += printf_string(" (x%.3f", c.ratio);
  else line += " (";
  if (std::isfinite(c.base) && std::isfinite(c.now)) {
    line += std::string(std::isfinite(c.ratio) ? ", " : "") + (c.now >= c.base ? "+" : "-") +
            figure_text(std::fabs(c.now - c.base), c.unit);
  }
  line += ")";
  if (c.p_value >= 0) line += printf_string(", p = %.2g", c.p_value);
  if (c.regression) line += "  REGRESSION";
  else if (c.significant) line += is_configuration(c.metric) ? "  changed" : "  improvement";
  return line + "\n";
}

}  // namespace

namespace {

const char* outcome_name(RuleVerdict::Outcome outcome) {
  return outcome == RuleVerdict::Outcome::broken ? "broken" : outcome == RuleVerdict::Outcome::kept ? "kept" : "not judged";
}

size_t verdicts_of(const DiffReport& diff, RuleVerdict::Outcome outcome) {
  return static_cast<size_t>(std::count_if(diff.verdicts.begin(), diff.verdicts.end(),
                                           [&](const RuleVerdict& v) { return v.outcome == outcome; }));
}

std::string verdict_subject(const RuleVerdict& v) {
  return v.metric + " (" + (v.rank < 0 ? "job" : "rank " + std::to_string(v.rank)) + ")";
}

std::string rules_summary(const DiffReport& diff) {
  return printf_string("rules (%s): %lld figures kept them, %zu broken, %zu not judged", diff.rules_source.c_str(),
                       static_cast<long long>(diff.rules_kept), verdicts_of(diff, RuleVerdict::Outcome::broken),
                       verdicts_of(diff, RuleVerdict::Outcome::not_judged));
}

std::string rules_text(const DiffReport& diff) {
  std::string out = "\n" + rules_summary(diff) + "\n";
  for (const RuleVerdict& v : diff.verdicts) {
    out += std::string("  ") + (v.outcome == RuleVerdict::Outcome::broken ? "BROKEN " : "not judged ") + v.rule +
           ": " + verdict_subject(v) + ": " + v.why + "\n";
  }
  return out;
}

}  // namespace

std::string diff_text(const DiffReport& diff) {
  std::string out = "base " + diff.base_path + "\nnew  " + diff.new_path + "\n";
  for (const std::string& note : diff.notes) out += "note: " + note + "\n";
  const auto significant = static_cast<size_t>(
      std::count_if(diff.changes.begin(), diff.changes.end(), [](const Change& c) { return c.significant; }));
  out += printf_string("\n%lld figures tested against their step-to-step variation (Mann-Whitney U, Holm-corrected; "
                       "a change of 5 %% and, in ns, 2 %% of the step at least): %zu significant\n",
                       static_cast<long long>(diff.tested), significant);
  if (significant == 0) out += "  no significant change\n";
  for (size_t i = 0; i < diff.changes.size() && i < significant && i < 20; ++i) out += change_line(diff.changes[i]);
  if (significant > 20) out += printf_string("  ... %zu more (JSON lists them all)\n", significant - 20);
  out += "\nlargest changes not found significant:\n";
  size_t shown = 0;
  for (size_t i = significant; i < diff.changes.size() && shown < 8; ++i) {
    const Change& c = diff.changes[i];
    if (!std::isfinite(c.base) || !std::isfinite(c.now)) continue;
    out += change_line(c);
    out += "    " + (c.untested.empty() ? std::string("not significant") : c.untested) + "\n";
    ++shown;
  }
  size_t added = 0, removed = 0;
  for (const Change& c : diff.changes) {
    added += c.untested == "only in the new run";
    removed += c.untested == "only in the base run";
  }
  if (added + removed > 0) out += printf_string("\n%zu figures only in the new run, %zu only in the base run (JSON lists them)\n", added, removed);
  out += diff.regression() ? "\nverdict: REGRESSION\n" : "\nverdict: no significant regression\n";
  if (!diff.rules_source.empty()) out += rules_text(diff);
  return out;
}

std::string diff_json(const DiffReport& diff) {
  JsonWriter json;
  json.begin_object().key("base").value(diff.base_path).key("new").value(diff.new_path);
  json.key("notes").begin_array();
  for (const std::string& note : diff.notes) json.value(note);
  json.end_array().key("tested").value(diff.tested).key("regression").value(diff.regression());
  json.key("changes").begin_array();
  const auto number = [&](const char* key, double value) {
    json.key(key);
    std::isfinite(value) ? json.value(value) : json.null();
  };
  for (const Change& c : diff.changes) {
    json.begin_object().key("metric").value(c.metric).key("scope").value(c.rank < 0 ? "job" : "rank");
    json.key("rank");
    c.rank < 0 ? json.null() : json.value(c.rank);
    json.key("unit").value(c.unit);
    number("base", c.base);
    number("new", c.now);
    number("ratio", c.ratio);
    json.key("p_value");
    c.p_value >= 0 ? json.value(c.p_value) : json.null();
    if (!c.untested.empty()) json.key("p_value_reason").value(c.untested);
    json.key("significant").value(c.significant).key("regression").value(c.regression);
    json.key("step_ns_explained").value(c.step_ns_explained).end_object();
  }
  json.end_array().key("rules");
  if (diff.rules_source.empty()) {
    json.null();
  } else {
    json.begin_object().key("source").value(diff.rules_source).key("kept").value(diff.rules_kept);
    json.key("broken").value(diff.rule_broken()).key("verdicts").begin_array();
    for (const RuleVerdict& v : diff.verdicts) {
      json.begin_object().key("rule").value(v.rule).key("metric").value(v.metric);
      json.key("scope").value(v.rank < 0 ? "job" : "rank").key("rank");
      v.rank < 0 ? json.null() : json.value(v.rank);
      json.key("outcome").value(outcome_name(v.outcome)).key("why").value(v.why).end_object();
    }
    json.end_array().end_object();
  }
  json.end_object();
  return json.str();
}

namespace {

constexpr const char* kDiffStyle = R"(
.worse{fill:#e45756}.better{fill:#54a24b}.neutral{fill:#9a9a9a}.zero{stroke:#222;stroke-width:1}
td.worse{color:#b00020;font-weight:600}td.better{color:#2a7a2a;font-weight:600}
)";

// The significant changes as bars: each its change in %, to the right when
// the figure grew, red when worse; the axis clamps at ±200 %.
void write_change_bars(const std::vector<const Change*>& changes, std::string& out) {
  const double left = 330, width = 500, pitch = 18, top = 10, half = width / 2;
  html::write_svg_open(out, "change-bars", left + width + 20, top + pitch * static_cast<double>(changes.size()) + 24,
                       "the significant changes, in % of the base");
  const double zero = left + half;
  html::write_line(out, zero, top, zero, top + pitch * static_cast<double>(changes.size()), "zero");
  double y = top;
  for (const Change* c : changes) {
    const double pct = std::isfinite(c->ratio) ? 100 * (c->ratio - 1) : (c->now > c->base ? 200 : -200);
    const double length = std::min(std::fabs(pct), 200.0) / 200 * half;
    const std::string label = c->metric + " (" + scope_text(*c) + ")";
    html::write_text(out, left - 6, y + 12, html::escape(label.substr(0, 60)), "text-anchor=\"end\"");
    html::write_rect(out, pct >= 0 ? zero : zero - length, y + 2, std::max(length, 1.0), pitch - 4,
                     c->regression ? "worse" : is_configuration(c->metric) ? "neutral" : "better",
                     html::escape(label) + ": " + html::escape(figure_text(c->base, c->unit)) + " to " +
                         html::escape(figure_text(c->now, c->unit)) + printf_string(" (%+.1f %%)", pct));
    y += pitch;
  }
  html::write_text(out, zero, y + 14, "0", "text-anchor=\"middle\"");
  html::write_text(out, left, y + 14, "-200 %");
  html::write_text(out, left + width, y + 14, "+200 %", "text-anchor=\"end\"");
  html::write_svg_close(out);
}

void write_change_row(const Change& c, std::string& out) {
  const char* status = c.regression ? "worse" : c.significant && !is_configuration(c.metric) ? "better" : "";
  out += "<tr><td>" + html::escape(c.metric) + "</td><td>" + html::escape(scope_text(c)) + "</td><td class=\"num\">" +
         html::escape(figure_text(c.base, c.unit)) + "</td><td class=\"num\">" + html::escape(figure_text(c.now, c.unit)) +
         "</td><td class=\"num\">" + (std::isfinite(c.ratio) ? printf_string("%.3f", c.ratio) : std::string("-")) +
         "</td><td class=\"num\">" + (c.p_value >= 0 ? printf_string("%.2g", c.p_value) : std::string("-")) + "</td>" +
         "<td class=\"" + status + "\">" +
         html::escape(c.regression       ? "regression"
                      : c.significant    ? (is_configuration(c.metric) ? "changed" : "improvement")
                      : c.untested.empty() ? "not significant"
                                           : c.untested) +
         "</td></tr>\n";
}

}  // namespace

std::string diff_html(const DiffReport& diff) {
  std::string out = html::page_start("rankscope diff: " + html::escape(diff.new_path) + " against " +
                                         html::escape(diff.base_path), kDiffStyle);
  std::vector<const Change*> significant;
  for (const Change& c : diff.changes) {
    if (c.significant) significant.push_back(&c);
  }
  out += "<h1>rankscope diff</h1>\n<table id=\"summary\">\n<tr><th>base</th><td><code>" + html::escape(diff.base_path) +
         "</code></td></tr>\n<tr><th>new</th><td><code>" + html::escape(diff.new_path) + "</code></td></tr>\n" +
         printf_string("<tr><th>figures tested</th><td>%lld</td></tr>\n<tr><th>significant changes</th><td>%zu</td></tr>\n",
                       static_cast<long long>(diff.tested), significant.size()) +
         "<tr><th>verdict</th><td>" + (diff.regression() ? "<strong>regression</strong>" : "no significant regression") +
         "</td></tr>\n</table>\n";
  for (const std::string& note : diff.notes) out += "<p class=\"alert\">" + html::escape(note) + "</p>\n";
  if (!diff.rules_source.empty()) {
    out += "<section id=\"rules-section\">\n<h2>Rules</h2>\n<p>" + html::escape(rules_summary(diff)) + "</p>\n";
    if (!diff.verdicts.empty()) {
      out += "<table id=\"rules-table\">\n<thead><tr><th>rule</th><th>figure</th><th>outcome</th><th>why</th></tr></thead>\n<tbody>\n";
      for (const RuleVerdict& v : diff.verdicts) {
        const bool broken = v.outcome == RuleVerdict::Outcome::broken;
        out += "<tr><td>" + html::escape(v.rule) + "</td><td>" + html::escape(verdict_subject(v)) + "</td><td" +
               (broken ? " class=\"worse\"" : "") + ">" + outcome_name(v.outcome) + "</td><td>" + html::escape(v.why) +
               "</td></tr>\n";
      }
      out += "</tbody></table>\n";
    }
    out += "</section>\n";
  }
  out += "<section id=\"significant-section\">\n<h2>Significant changes</h2>\n";
  if (significant.empty()) {
    html::write_note(out, "No significant change: no figure moved beyond the runs' own step-to-step variation by at "
                          "least 5 % (and 2 % of the step for times).", "no-change");
  } else {
    write_change_bars(std::vector<const Change*>(significant.begin(),
                                                 significant.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(significant.size(), 40))),
                      out);
  }
  out += "<p class=\"caption\">Mann-Whitney U over the runs' per-step samples, Holm-corrected over the job's and "
         "the ranks' figures; significant with a change of 5 % and, for times, 2 % of the step at least "
         "(docs/diff.md). Ordered: the step, a rank worse unlike the others, the job's figures, the ranks'.</p>\n";
  out += std::string("</section>\n<section id=\"changes-section\">\n<h2>Every figure</h2>\n<details") +
         (diff.changes.size() <= 60 ? " open" : "") +
         "><summary>base, new, ratio and test of each</summary>\n<div class=\"table-wrap\"><table id=\"changes-table\">\n"
         "<thead><tr><th>figure</th><th>scope</th><th class=\"num\">base</th><th class=\"num\">new</th>"
         "<th class=\"num\">ratio</th><th class=\"num\">p</th><th>status</th></tr></thead>\n<tbody>\n";
  for (const Change& c : diff.changes) write_change_row(c, out);
  out += "</tbody></table></div>\n</details>\n</section>\n";
  out += html::page_end();
  return out;
}

}  // namespace rankscope::analysis
