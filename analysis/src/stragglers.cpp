// find_stragglers: which rank holds the job back, how sure that is, what it
// costs and why. A pure function of the job's profile. Definitions,
// thresholds and their limits: docs/report-stragglers.md, "Stragglers".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "rankscope/analysis/stragglers.h"
#include "rankscope/model/format.h"
#include "rankscope/model/parallel.h"
#include "rankscope/model/statistics.h"

namespace rankscope::analysis {
namespace {

// ------------------------------------------------------------ thresholds ---

// False-alarm rate of each test over the whole job: each rank is tested at
// kFamilyAlpha / ranks (Bonferroni), so a healthy job is flagged by chance at
// most once in a thousand runs per test, however many ranks it has.
constexpr double kFamilyAlpha = 1e-3;
// A finding must cost at least this share of the job's step time: noise on
// shared cores makes real but negligible delays significant in long runs.
constexpr double kCostFloor = 0.01;
// Choosing between causes for a rank already flagged needs less: the flag
// itself is the rare event, and with 5 steps 5 of 5 must still be able to decide.
constexpr double kCauseAlpha = 0.05;
// Greyhound's rule: a collective is slow at 1.2 × the median of its peers.
constexpr double kTransferInflation = 1.2;
// A reference median of fewer instances moves with one outlier.
constexpr size_t kMinReferenceInstances = 3;
// A rank's compute (or idle time) explains its lateness when its excess over
// the median rank (median per step) is at least this share of the longest
// wait it caused per step (mean over steps).
constexpr double kExcessExplains = 0.5;
// Rotating stragglers: in at least half of the steps, the step's latest rank
// cost it this share of its time. Oversubscribed healthy jobs lose a few per
// cent; a job losing a tenth of its time is worth a finding.
constexpr double kRotatingCostShare = 0.10;
// ... and no rank caused this share of the waiting or more.
constexpr double kRotatingTopBlameShare = 0.5;
// Rotating delays are workload imbalance when the spread of compute per step
// accounts for at least this share of the waiting.
constexpr double kImbalanceExplained = 0.5;
// The score's confidence part reaches 1 at p = 10^-kConfidentLog10P ...
constexpr double kConfidentLog10P = 10;
// ... and its cost part is 1/2 at this share of the step time.
constexpr double kHalfScoreCost = 0.05;

// ------------------------------------------------------------ statistics ---

// Lentz's continued fraction for the incomplete beta function (betacf in
// Numerical Recipes); converges fast for x < (a + 1) / (a + b + 2).
double incomplete_beta_fraction(double a, double b, double x) {
  constexpr int kMaxTerms = 500;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  auto not_tiny = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  double c = 1;
  double d = 1 / not_tiny(1 - (a + b) * x / (a + 1));
  double fraction = d;
  for (int m = 1; m <= kMaxTerms; ++m) {
    const double even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 / not_tiny(1 + even * d);
    c = not_tiny(1 + even / c);
    fraction *= d * c;
    const double odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 / not_tiny(1 + odd * d);
    c = not_tiny(1 + odd / c);
    fraction *= d * c;
    if (std::fabs(d * c - 1) < kEpsilon) break;
  }
  return fraction;
}

// I_x(a, b), the regularized incomplete beta function.
double regularized_incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(log_front) * incomplete_beta_fraction(a, b, x) / a;
  return 1 - std::exp(log_front) * incomplete_beta_fraction(b, a, 1 - x) / b;
}

// P(X ≥ successes) for X ~ Binomial(trials, p), as I_p(k, n − k + 1): exact
// for whole counts, continuous between them (steps count with the share of
// their collectives that succeeded, see StepTally).
double binomial_upper_tail(double trials, double successes, double p) {
  if (successes <= 0) return 1;
  successes = std::min(successes, trials);
  return regularized_incomplete_beta(successes, trials - successes + 1, p);
}

// Trials counted by step. A rank behind at a step's first collective is
// behind at its next ones too, so one step's collectives are not independent
// trials: each step is one trial, counting the share of its collectives that
// succeeded. This keeps a healthy rank that fell behind in a few steps from
// looking significant, at the cost of needing several steps to decide.
struct StepTally {
  struct Count {
    int trials = 0, successes = 0;
  };
  std::map<size_t, Count> by_step;  // only the steps with trials: a kind of collective may be in few

  void add(size_t step, bool success) {
    Count& count = by_step[step];
    ++count.trials;
    count.successes += success ? 1 : 0;
  }
  int steps_observed() const { return static_cast<int>(by_step.size()); }
  int total_trials() const {
    int total = 0;
    for (const auto& [step, count] : by_step) total += count.trials;
    return total;
  }
  int total_successes() const {
    int total = 0;
    for (const auto& [step, count] : by_step) total += count.successes;
    return total;
  }
  double p_value(double success_probability) const {
    double weighted = 0;
    for (const auto& [step, count] : by_step) weighted += static_cast<double>(count.successes) / count.trials;
    return binomial_upper_tail(steps_observed(), weighted, success_probability);
  }
};

// ------------------------------------------------------------ formatting ---

std::string p_text(double p) { return printf_string("%.2g", p); }
std::string score_text(double score) { return printf_string("%.3f", score); }

// ------------------------------------------------------------- the facts ---

// One collective instance inside a step, with at least two known arrivals.
struct CollectiveFacts {
  const CollectiveInstance* instance = nullptr;
  size_t step = 0;
  int participants = 0;     // ranks with a known arrival and step times
  int32_t last_rank = -1;   // -1 when nobody was late of its own doing (see gather_collectives)
  int64_t lag_ns = 0;       // last − second-last arrival (from step start), less time in an earlier blocking collective
  int64_t last_arrival_ns = kUnknown;  // when the last rank arrived, on the job's clock: the lag ends there
  int64_t transfer_ns = kUnknown;  // X(c) = min over ranks of (end − start)
  int distinct_nodes = 0;
  int position = 0;         // among the step's instances of its operation on its communicator, by sequence number
};

// A step as the whole job saw it.
struct StepFacts {
  bool known = false;
  int64_t time_ns = 0;            // mean over ranks of their step's duration
  int64_t median_compute_ns = 0;  // of the median rank
  int64_t max_compute_ns = 0;
  int64_t min_compute_ns = 0;
  int64_t median_work_ns = 0;     // compute + idle (all but communication) of the median rank
  std::vector<int64_t> computes, idles;  // every rank's, sorted: each set against the others
};

// A rank's time of one sort (compute, idle) per step against the median of the other ranks'.
struct ExcessFacts {
  int steps = 0, above = 0;      // steps it was measured in, and above the others' median in
  double p_value = 1;            // sign test: above in more steps than chance (1/2) has it
  int64_t median_excess_ns = 0;  // median over steps of its time − the others' median
};

// A rank's collectives tested for lateness: all of them, or one kind's.
struct LateTally {
  StepTally by_step;
  int instances = 0, late = 0, largest_group = 0;
  double inverse_n_sum = 0;

  void add(size_t step, bool last, int participants) {
    by_step.add(step, last);
    ++instances;
    late += last ? 1 : 0;
    inverse_n_sum += 1.0 / participants;
    largest_group = std::max(largest_group, participants);
  }
  double rate() const { return instances > 0 ? static_cast<double>(late) / instances : 0; }
  double baseline() const { return instances > 0 ? inverse_n_sum / instances : 0; }
  double p_value() const { return by_step.p_value(baseline()); }
};

// What one test of transfer time found for a rank.
struct TransferFacts {
  bool measured = false;        // there was something to compare with
  std::string what;             // what was compared, for the evidence
  double p_value = 1;           // corrected for the tests made
  int tests = 1;
  double median_inflation = 0;  // its time over the reference, median
  double median_time_ns = 0, median_reference_ns = 0;
  int compared = 0, slower = 0, steps = 0;
  std::vector<int64_t> exposed_excess_by_step;
  int64_t exposed_excess_ns = 0;
};

struct RankFacts {
  const RankProfile* profile = nullptr;
  RankScores scores;
  LateTally all_collectives;
  // A kind of collective: the same place in every step (communicator,
  // operation, position), such as DDP's first bucket or FSDP's third unit's
  // reduce-scatter.
  using Kind = std::tuple<uint64_t, CommOp, int>;
  std::map<Kind, LateTally> by_kind;
  // The lateness test that decided: all its collectives, or one kind's when
  // it takes part in several. A rank late only where its compute ends (the
  // allreduce after it, FSDP's reduce-scatter, DDP's first bucket) and on
  // time where MPI progress or a wait decides the order is diluted in the
  // pooled test.
  std::optional<Kind> deciding_kind;
  double late_p_value = 1;  // corrected for its tests (Bonferroni)
  int late_tests = 1;
  std::vector<int64_t> blame_by_step;
  std::vector<int64_t> largest_lag_by_step;  // the longest others waited for it in one collective
  ExcessFacts compute, idle;
  TransferFacts collective_transfer;         // X(c) of its collectives against those off its node
  TransferFacts exposed_transfer;            // its exposed transfer per step against the other ranks'
  TransferFacts node_transfer;               // its node's exposed transfer per step against the other nodes'

  explicit RankFacts(size_t steps)
      : blame_by_step(steps, 0), largest_lag_by_step(steps, 0) {}
  const LateTally& deciding_tally() const {
    return deciding_kind ? by_kind.at(*deciding_kind) : all_collectives;
  }
};

const RankStep* step_of(const RankProfile& rank, size_t step) {
  if (step >= rank.steps.size()) return nullptr;
  const RankStep& found = rank.steps[step];
  if (found.times.begin_ns == kUnknown || found.times.end_ns == kUnknown) return nullptr;
  return &found;
}

int64_t own_time(const RankStep& step) { return step.times.duration() - step.exposed_wait_ns; }

// Ranks not on a known node count as a node of their own.
int32_t node_of(const RankProfile& rank) { return rank.node_id >= 0 ? rank.node_id : -2 - rank.rank; }

struct JobFacts {
  const JobProfile* job = nullptr;
  size_t step_count = 0;
  std::vector<StepFacts> steps;
  int64_t total_step_ns = 0;
  int known_steps = 0;
  std::vector<int> index_of_rank;  // world rank → index into job.ranks, -1 if absent
  std::vector<CollectiveFacts> collectives;
  std::vector<RankFacts> ranks;
  // What comparing a participation needs, apart from the ranks' facts and
  // profiles (those of 4,096 ranks do not stay in the cache, and every
  // participation was a miss or more): by index, each step's begin
  // (kUnknown where the rank's step times are not known) and the node.
  std::vector<int64_t> step_begins;  // index * step_count + step
  std::vector<int32_t> node_of_index;

  int64_t step_begin(int32_t rank, size_t step) const {
    if (rank < 0 || static_cast<size_t>(rank) >= index_of_rank.size() || index_of_rank[rank] < 0) return kUnknown;
    return step < step_count ? step_begins[static_cast<size_t>(index_of_rank[rank]) * step_count + step] : kUnknown;
  }

  const RankFacts* facts_of(int32_t rank) const {
    if (rank < 0 || static_cast<size_t>(rank) >= index_of_rank.size() || index_of_rank[rank] < 0) return nullptr;
    return &ranks[static_cast<size_t>(index_of_rank[rank])];
  }
  double share_of_step_time(double ns) const { return total_step_ns > 0 ? ns / static_cast<double>(total_step_ns) : 0; }
  int64_t mean_step_ns() const { return known_steps > 0 ? total_step_ns / known_steps : 0; }
};

void gather_steps(JobFacts& facts) {
  const JobProfile& job = *facts.job;
  facts.step_count = job.step_numbers.size();
  for (const RankProfile& rank : job.ranks) facts.step_count = std::max(facts.step_count, rank.steps.size());
  facts.steps.resize(facts.step_count);
  for (size_t s = 0; s < facts.step_count; ++s) {
    std::vector<int64_t> computes, idles, works;
    int64_t duration_sum = 0;
    for (const RankProfile& rank : job.ranks) {
      const RankStep* step = step_of(rank, s);
      if (!step) continue;
      computes.push_back(step->compute_ns);
      idles.push_back(step->idle_ns);
      works.push_back(step->compute_ns + step->idle_ns);
      duration_sum += step->times.duration();
    }
    if (computes.empty()) continue;
    StepFacts& step = facts.steps[s];
    step.known = true;
    step.time_ns = duration_sum / static_cast<int64_t>(computes.size());
    step.median_compute_ns = static_cast<int64_t>(median(computes, 0));
    step.max_compute_ns = *std::max_element(computes.begin(), computes.end());
    step.min_compute_ns = *std::min_element(computes.begin(), computes.end());
    step.median_work_ns = static_cast<int64_t>(median(works, 0));
    std::sort(computes.begin(), computes.end());
    std::sort(idles.begin(), idles.end());
    step.computes = std::move(computes);
    step.idles = std::move(idles);
    facts.total_step_ns += step.time_ns;
    ++facts.known_steps;
  }
}

// When each rank left its blocking collectives, in order of arrival, to tell
// whether a late rank came straight out of one.
class BlockingExits {
 public:
  explicit BlockingExits(const JobFacts& facts) : by_rank_(facts.ranks.size()) {
    for (const CollectiveInstance& instance : facts.job->collectives) {
      if (instance.nonblocking) continue;
      for (const Participation& part : instance.ranks)
        if (part.arrival_ns != kUnknown && part.end_ns != kUnknown && facts.facts_of(part.rank))
          by_rank_[static_cast<size_t>(facts.index_of_rank[part.rank])].emplace_back(part.arrival_ns, part.end_ns);
    }
    for (auto& exits : by_rank_) {
      std::sort(exits.begin(), exits.end());
      for (size_t i = 1; i < exits.size(); ++i) exits[i].second = std::max(exits[i].second, exits[i - 1].second);
    }
  }
  // The latest end of the rank's blocking collectives that it arrived at before `arrival_ns`.
  int64_t last_exit_before(size_t rank_index, int64_t arrival_ns) const {
    const auto& exits = by_rank_[rank_index];
    const auto after = std::lower_bound(exits.begin(), exits.end(), std::pair<int64_t, int64_t>{arrival_ns, INT64_MIN});
    return after == exits.begin() ? kUnknown : std::prev(after)->second;
  }

 private:
  std::vector<std::vector<std::pair<int64_t, int64_t>>> by_rank_;  // (arrival, latest end so far)
};

// Whether a rank's part in an instance of `step` can be compared: its arrival
// and its step times are known.
bool compared(const JobFacts& facts, const Participation& part, size_t step) {
  return part.arrival_ns != kUnknown && facts.step_begin(part.rank, step) != kUnknown;
}

// One instance's facts; none for an instance outside the steps or with
// fewer than two ranks compared.
std::optional<CollectiveFacts> collective_facts(const JobFacts& facts, const BlockingExits& exits,
                                                const CollectiveInstance& instance) {
  if (instance.step < 0 || static_cast<size_t>(instance.step) >= facts.step_count) return std::nullopt;
  CollectiveFacts collective{.instance = &instance, .step = static_cast<size_t>(instance.step)};
  int64_t latest = kUnknown, second_latest = kUnknown, last_step_begin = 0;
  std::vector<int32_t> nodes;
  for (const Participation& part : instance.ranks) {
    if (!compared(facts, part, collective.step)) continue;
    const int64_t step_begin = facts.step_begin(part.rank, collective.step);
    ++collective.participants;
    nodes.push_back(facts.node_of_index[static_cast<size_t>(facts.index_of_rank[part.rank])]);
    const int64_t into_step = part.arrival_ns - step_begin;
    if (into_step > latest) {
      second_latest = latest;
      latest = into_step;
      collective.last_rank = part.rank;
      last_step_begin = step_begin;
    } else if (into_step > second_latest) {
      second_latest = into_step;
    }
    if (part.start_ns != kUnknown && part.end_ns != kUnknown) {
      const int64_t duration = part.end_ns - part.start_ns;
      collective.transfer_ns =
          collective.transfer_ns == kUnknown ? duration : std::min(collective.transfer_ns, duration);
    }
  }
  if (collective.participants < 2) return std::nullopt;
  const int64_t exit = exits.last_exit_before(static_cast<size_t>(facts.index_of_rank[collective.last_rank]),
                                              latest + last_step_begin);
  const int64_t own_since = exit == kUnknown ? second_latest : std::max(second_latest, exit - last_step_begin);
  collective.lag_ns = std::max<int64_t>(latest - own_since, 0);
  collective.last_arrival_ns = latest + last_step_begin;
  if (collective.lag_ns == 0) collective.last_rank = -1;
  std::sort(nodes.begin(), nodes.end());
  collective.distinct_nodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  return collective;
}

// Lateness is measured from each rank's own step start: a rank that left
// the previous step's last collective later (the order in which a
// collective's algorithm releases ranks) starts later and arrives later, by
// no doing of its own in this step. An arrival without its rank's step
// times is left out, as is an instance outside the steps (set-up,
// tear-down), which says nothing about training. The last rank is the cause
// of a wait only for the part it did not spend in an earlier blocking
// collective: a rank that arrives late straight out of another collective
// (a schedule of blocking collectives over different groups) is late
// because of that collective's ranks and transfer, not its own. With a tie
// of the two latest arrivals nobody was last.
void gather_collectives(JobFacts& facts) {
  const BlockingExits exits(facts);
  // Instances apart from each other, in runs of consecutive ones on every
  // CPU, each run's facts kept in instance order.
  const std::vector<CollectiveInstance>& all = facts.job->collectives;
  size_t participations = 0;
  for (const CollectiveInstance& instance : all) participations += instance.ranks.size();
  const size_t runs = std::clamp<size_t>(participations / 65536, 1, std::max<size_t>(1, std::min<size_t>(usable_cpus() * 4, all.size())));
  std::vector<std::vector<CollectiveFacts>> gathered(runs);
  for_each_index(runs, usable_cpus(), [&](size_t run) {
    const size_t begin = all.size() * run / runs, end = all.size() * (run + 1) / runs;
    for (size_t i = begin; i < end; ++i) {
      if (std::optional<CollectiveFacts> collective = collective_facts(facts, exits, all[i])) {
        gathered[run].push_back(*collective);
      }
    }
  });
  for (const std::vector<CollectiveFacts>& run : gathered) {
    facts.collectives.insert(facts.collectives.end(), run.begin(), run.end());
  }
  std::map<std::tuple<size_t, uint64_t, CommOp>, std::vector<std::pair<uint64_t, CollectiveFacts*>>> in_step;
  for (CollectiveFacts& collective : facts.collectives)
    in_step[{collective.step, collective.instance->comm_hash, collective.instance->op}].emplace_back(
        collective.instance->seq, &collective);
  for (auto& [key, instances] : in_step) {
    std::sort(instances.begin(), instances.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < instances.size(); ++i) instances[i].second->position = static_cast<int>(i);
  }
}

// The time others waited for a rank in one step: the union of the lags it
// caused there. Collectives in flight together (DDP's buckets, launched one
// after another while the rank is still behind) each lag by about the same
// delay; summed, one delay would count once per bucket.
int64_t waited_in_step(std::vector<std::pair<int64_t, int64_t>>& lags) {
  std::sort(lags.begin(), lags.end());
  int64_t covered = 0, reach = std::numeric_limits<int64_t>::min();
  for (const auto& [begin, end] : lags) {
    if (end <= reach) continue;
    covered += end - std::max(begin, reach);
    reach = end;
  }
  return covered;
}

void score_arrivals(JobFacts& facts) {
  std::vector<int64_t> wait_sum(facts.ranks.size(), 0);
  // Per rank and step, the lags it caused: [begin, end) on the job's clock.
  std::vector<std::vector<std::vector<std::pair<int64_t, int64_t>>>> lags(
      facts.ranks.size(), std::vector<std::vector<std::pair<int64_t, int64_t>>>(facts.step_count));
  for (const CollectiveFacts& collective : facts.collectives) {
    for (const Participation& part : collective.instance->ranks) {
      if (!compared(facts, part, collective.step)) continue;
      const size_t index = static_cast<size_t>(facts.index_of_rank[part.rank]);
      RankFacts& rank = facts.ranks[index];
      const bool last = collective.last_rank == part.rank;
      rank.all_collectives.add(collective.step, last, collective.participants);
      // A kind recurs once per step: with one step every collective would be
      // a kind of its own, tested once and diluting the correction for nothing.
      if (facts.step_count >= 2) {
        rank.by_kind[{collective.instance->comm_hash, collective.instance->op, collective.position}].add(
            collective.step, last, collective.participants);
      }
      wait_sum[index] += part.wait_ns;
      if (!last) continue;
      lags[index][collective.step].emplace_back(collective.last_arrival_ns - collective.lag_ns,
                                                collective.last_arrival_ns);
      rank.largest_lag_by_step[collective.step] = std::max(rank.largest_lag_by_step[collective.step], collective.lag_ns);
    }
  }
  for (size_t i = 0; i < facts.ranks.size(); ++i) {
    RankFacts& rank = facts.ranks[i];
    for (size_t s = 0; s < facts.step_count; ++s) rank.blame_by_step[s] = waited_in_step(lags[i][s]);
    RankScores& scores = rank.scores;
    scores.blame_ns = std::accumulate(rank.blame_by_step.begin(), rank.blame_by_step.end(), int64_t{0});
    if (rank.all_collectives.instances == 0) continue;
    scores.last_arriver_rate = rank.all_collectives.rate();
    scores.baseline_rate = rank.all_collectives.baseline();
    scores.mean_wait_ns = wait_sum[i] / rank.all_collectives.instances;
    double best = rank.all_collectives.p_value();
    if (rank.by_kind.size() > 1) {
      rank.late_tests += static_cast<int>(rank.by_kind.size());
      for (const auto& [kind, tally] : rank.by_kind) {
        const double p = tally.p_value();
        if (p < best) best = p, rank.deciding_kind = kind;
      }
    }
    rank.late_p_value = std::min(1.0, best * rank.late_tests);
  }
}

// Against the median of the other ranks, not of all: of two ranks, the
// median of both is their midpoint, which would halve a slow rank's excess.
ExcessFacts excess_over_others(const JobFacts& facts, const RankProfile& rank, int64_t RankStep::*time,
                               std::vector<int64_t> StepFacts::*all) {
  ExcessFacts found;
  StepTally above;
  std::vector<int64_t> excesses;
  for (size_t s = 0; s < facts.step_count; ++s) {
    const RankStep* step = step_of(rank, s);
    if (!step) continue;
    const double others = median_without(facts.steps[s].*all, step->*time);
    if (std::isnan(others)) continue;  // no other rank ran the step
    excesses.push_back(step->*time - static_cast<int64_t>(others));
    above.add(s, excesses.back() > 0);
  }
  found.steps = above.steps_observed();
  found.above = above.total_successes();
  found.p_value = above.p_value(0.5);
  found.median_excess_ns = static_cast<int64_t>(median(excesses, 0));
  return found;
}

void score_compute(JobFacts& facts) {
  std::vector<int64_t> medians;
  for (RankFacts& rank : facts.ranks) {
    rank.compute = excess_over_others(facts, *rank.profile, &RankStep::compute_ns, &StepFacts::computes);
    rank.idle = excess_over_others(facts, *rank.profile, &RankStep::idle_ns, &StepFacts::idles);
    std::vector<int64_t> computes;
    for (size_t s = 0; s < facts.step_count; ++s)
      if (const RankStep* step = step_of(*rank.profile, s)) computes.push_back(step->compute_ns);
    if (computes.empty()) continue;
    rank.scores.median_compute_ns = static_cast<int64_t>(median(computes, 0));
    const int64_t best = *std::min_element(computes.begin(), computes.end());
    rank.scores.compute_score_individual =
        rank.scores.median_compute_ns > 0 ? static_cast<double>(best) / rank.scores.median_compute_ns : 1;
    medians.push_back(rank.scores.median_compute_ns);
  }
  if (medians.empty()) return;
  const int64_t fastest = *std::min_element(medians.begin(), medians.end());
  for (RankFacts& rank : facts.ranks) {
    if (rank.compute.steps == 0) continue;
    // A rank that never computed is no slower than its peers.
    rank.scores.compute_score_relative =
        rank.scores.median_compute_ns > 0 ? static_cast<double>(fastest) / rank.scores.median_compute_ns : 1;
  }
}

// X(c) of the collectives a rank took part in, against instances of the same
// operation, size, rank count and node count that no rank of its node took
// part in: a slow link or NIC inflates the first and not the second. Each
// such class of instances is one test; the most significant decides, its p
// corrected for the number of classes.
void test_collective_transfer(JobFacts& facts) {
  using ClassKey = std::tuple<CollectiveSource, CommOp, uint64_t, int, int>;
  struct Member {
    const CollectiveFacts* collective;
    std::vector<int32_t> nodes;  // sorted
  };
  std::map<ClassKey, std::vector<Member>> classes;
  for (const CollectiveFacts& collective : facts.collectives) {
    if (collective.transfer_ns == kUnknown) continue;
    Member member{&collective, {}};
    for (const Participation& part : collective.instance->ranks)
      if (compared(facts, part, collective.step)) {
        member.nodes.push_back(facts.node_of_index[static_cast<size_t>(facts.index_of_rank[part.rank])]);
      }
    std::sort(member.nodes.begin(), member.nodes.end());
    member.nodes.erase(std::unique(member.nodes.begin(), member.nodes.end()), member.nodes.end());
    const CollectiveInstance& instance = *collective.instance;
    classes[{instance.source, instance.op, instance.bytes, collective.participants, collective.distinct_nodes}]
        .push_back(std::move(member));
  }
  for (const auto& [key, members] : classes) {
    // The reference for each node: the median X(c) of the instances without
    // it. A node in all but a few has none (every node, where every rank
    // takes part in every collective), found without looking at each.
    std::map<int32_t, double> reference_without;
    std::unordered_map<int32_t, size_t> instances_with;
    for (const Member& member : members)
      for (int32_t node : member.nodes) ++instances_with[node];
    for (const auto& [node, with] : instances_with) {
      double& reference_ns = reference_without[node];
      if (members.size() - with < kMinReferenceInstances) continue;
      std::vector<int64_t> without;
      for (const Member& member : members)
        if (!std::binary_search(member.nodes.begin(), member.nodes.end(), node))
          without.push_back(member.collective->transfer_ns);
      reference_ns = without.size() >= kMinReferenceInstances ? median(without, 0) : 0;
    }
    // Each rank's parts in the class, where its node has a reference.
    std::vector<double> reference_of_rank(facts.ranks.size(), 0);
    for (size_t index = 0; index < facts.ranks.size(); ++index) {
      const auto it = reference_without.find(node_of(*facts.ranks[index].profile));
      if (it != reference_without.end()) reference_of_rank[index] = it->second;
    }
    std::vector<std::vector<std::pair<const CollectiveFacts*, const Participation*>>> parts_by_rank(facts.ranks.size());
    for (const Member& member : members)
      for (const Participation& part : member.collective->instance->ranks) {
        if (!compared(facts, part, member.collective->step)) continue;
        const size_t index = static_cast<size_t>(facts.index_of_rank[part.rank]);
        if (reference_of_rank[index] > 0) parts_by_rank[index].emplace_back(member.collective, &part);
      }

    const auto& [source, op, bytes, participants, nodes] = key;
    const std::string what = "the " + format_bytes(bytes) + " " + std::string(comm_op_name(op)) + " over " +
                             std::to_string(participants) + " ranks on " + std::to_string(nodes) + " nodes";
    for (size_t index = 0; index < parts_by_rank.size(); ++index) {
      const auto& own = parts_by_rank[index];
      if (own.empty()) continue;
      RankFacts& rank = facts.ranks[index];
      const double reference_ns = reference_of_rank[index];
      TransferFacts found;
      found.measured = true;
      found.what = what;
      found.exposed_excess_by_step.assign(facts.step_count, 0);
      StepTally slower;
      std::vector<double> inflations, times;
      for (const auto& [collective, mine] : own) {
        const double excess = static_cast<double>(collective->transfer_ns) - reference_ns;
        slower.add(collective->step, excess > 0);
        inflations.push_back(static_cast<double>(collective->transfer_ns) / reference_ns);
        times.push_back(static_cast<double>(collective->transfer_ns));
        // Only the part it did not hide behind compute delays the step.
        const int64_t exposed = std::min(static_cast<int64_t>(std::max(excess, 0.0)), mine->exposed_transfer_ns);
        found.exposed_excess_by_step[collective->step] += exposed;
        found.exposed_excess_ns += exposed;
      }
      found.p_value = slower.p_value(0.5);
      found.median_inflation = median(inflations, 0);
      found.median_time_ns = median(times, 0);
      found.median_reference_ns = reference_ns;
      found.compared = slower.total_trials();
      found.slower = slower.total_successes();
      found.steps = slower.steps_observed();
      // Keep the most significant class; count every class tested.
      const int tests = rank.collective_transfer.measured ? rank.collective_transfer.tests + 1 : 1;
      if (!rank.collective_transfer.measured || found.p_value < rank.collective_transfer.p_value)
        rank.collective_transfer = std::move(found);
      rank.collective_transfer.tests = tests;
    }
  }
  for (RankFacts& rank : facts.ranks)
    rank.collective_transfer.p_value = std::min(1.0, rank.collective_transfer.p_value * rank.collective_transfer.tests);
}

// One rank's (or node's) exposed transfer per step against its peers': how
// often it is the highest of all, against chance (one in the number of
// peers), and by how much it exceeds the reference and the runner-up.
class HighestOfAll {
 public:
  explicit HighestOfAll(TransferFacts& found, size_t steps) : found_(found) {
    found_.exposed_excess_by_step.assign(steps, 0);
  }
  void add(size_t step, int64_t mine, int64_t runner_up, double reference, size_t peers) {
    highest_.add(step, mine > runner_up);
    chance_sum_ += 1.0 / static_cast<double>(peers);
    if (reference > 0) inflations_.push_back(static_cast<double>(mine) / reference);
    times_.push_back(static_cast<double>(mine));
    references_.push_back(reference);
    const int64_t excess = std::max<int64_t>(mine - runner_up, 0);
    found_.exposed_excess_by_step[step] = excess;
    found_.exposed_excess_ns += excess;
  }
  // Fills in the rest, the p-value corrected for `tests`; false when nothing was compared.
  bool finish(std::string what, int tests) {
    if (inflations_.empty()) return false;
    found_.measured = true;
    found_.what = std::move(what);
    found_.tests = tests;
    found_.p_value = std::min(1.0, highest_.p_value(chance_sum_ / highest_.steps_observed()) * tests);
    found_.median_inflation = median(inflations_, 0);
    found_.median_time_ns = median(times_, 0);
    found_.median_reference_ns = median(references_, 0);
    found_.compared = highest_.total_trials();
    found_.slower = highest_.total_successes();
    found_.steps = highest_.steps_observed();
    return true;
  }

 private:
  TransferFacts& found_;
  StepTally highest_;
  double chance_sum_ = 0;
  std::vector<double> inflations_, times_, references_;
};

// A rank's exposed transfer per step against the highest of the other ranks'
// in that step: the test that remains when every collective spans the whole
// job, so that no instance without the rank's node exists to compare with.
// Against the median rank it would flag the ranks that a collective's
// algorithm serves last (a tree's leaves, a ring's end), which finish
// later in every step; those come in groups, and none of a group stands
// above the others.
void test_exposed_transfer(JobFacts& facts) {
  // Per step, the two highest exposed transfers: the other ranks' highest is
  // the first, or the second for the rank that holds the first.
  struct TopTwo {
    const RankFacts* holder = nullptr;
    int64_t first = kUnknown, second = kUnknown;
    int ranks = 0;
  };
  std::vector<TopTwo> top(facts.step_count);
  for (const RankFacts& rank : facts.ranks)
    for (size_t s = 0; s < facts.step_count; ++s) {
      const RankStep* step = step_of(*rank.profile, s);
      if (!step) continue;
      TopTwo& t = top[s];
      ++t.ranks;
      if (step->exposed_transfer_ns > t.first) {
        t.second = t.first;
        t.first = step->exposed_transfer_ns;
        t.holder = &rank;
      } else if (step->exposed_transfer_ns > t.second) {
        t.second = step->exposed_transfer_ns;
      }
    }
  for (RankFacts& rank : facts.ranks) {
    HighestOfAll tally(rank.exposed_transfer, facts.step_count);
    for (size_t s = 0; s < facts.step_count; ++s) {
      const RankStep* step = step_of(*rank.profile, s);
      if (!step || top[s].ranks < 2) continue;
      const int64_t runner_up = top[s].holder == &rank ? top[s].second : top[s].first;
      tally.add(s, step->exposed_transfer_ns, runner_up, static_cast<double>(runner_up), static_cast<size_t>(top[s].ranks));
    }
    tally.finish("its exposed transfer per step", 1);
  }
}

// A node's exposed transfer per step, the lowest of its ranks', against the
// other nodes'. A slow NIC or link slows every rank of its node alike; in a
// job whose collectives all span every node (one DDP group), the ring or tree
// carries the slowness on to the node's partners, so that no single rank
// stands 1.2 × above the highest other rank (test_exposed_transfer), yet the
// node stands above every other node in every step. The lowest of a node's
// ranks is high only when all of them are: the ranks a collective's
// algorithm serves last are single ranks, not whole nodes. Nodes of one rank
// are left to the per-rank test. Inflation is against the other nodes'
// median; the node must also be the highest of all in more steps than chance
// gives it (one in the number of nodes), tested once per node (Bonferroni).
void test_node_exposed_transfer(JobFacts& facts) {
  std::map<int32_t, std::vector<size_t>> ranks_of_node;
  for (size_t i = 0; i < facts.ranks.size(); ++i) ranks_of_node[node_of(*facts.ranks[i].profile)].push_back(i);
  int tested_nodes = 0;
  for (const auto& [node, members] : ranks_of_node) tested_nodes += members.size() >= 2 ? 1 : 0;
  if (tested_nodes == 0 || ranks_of_node.size() < 2) return;
  // Per step, each node's lowest exposed transfer, where all its ranks have the step.
  std::vector<std::map<int32_t, int64_t>> lowest(facts.step_count);
  for (size_t s = 0; s < facts.step_count; ++s)
    for (const auto& [node, members] : ranks_of_node) {
      int64_t value = INT64_MAX;
      for (size_t index : members) {
        const RankStep* step = step_of(*facts.ranks[index].profile, s);
        value = step ? std::min(value, step->exposed_transfer_ns) : kUnknown;
        if (!step) break;
      }
      if (value != kUnknown) lowest[s][node] = value;
    }
  for (const auto& [node, members] : ranks_of_node) {
    if (members.size() < 2) continue;
    TransferFacts found;
    HighestOfAll tally(found, facts.step_count);
    for (size_t s = 0; s < facts.step_count; ++s) {
      const auto mine = lowest[s].find(node);
      if (mine == lowest[s].end() || lowest[s].size() < 2) continue;
      int64_t runner_up = INT64_MIN;
      std::vector<int64_t> others;
      for (const auto& [other, value] : lowest[s])
        if (other != node) runner_up = std::max(runner_up, value), others.push_back(value);
      tally.add(s, mine->second, runner_up, median(others, 0), lowest[s].size());
    }
    if (!tally.finish("the exposed transfer per step of every rank of node " + std::to_string(node) + " (its " +
                          std::to_string(members.size()) + " ranks' lowest)",
                      tested_nodes))
      continue;
    for (size_t index : members) facts.ranks[index].node_transfer = found;
  }
}

JobFacts gather(const JobProfile& job) {
  JobFacts facts;
  facts.job = &job;
  gather_steps(facts);
  int32_t largest_rank = std::max(job.world_size - 1, 0);
  for (const RankProfile& rank : job.ranks) largest_rank = std::max(largest_rank, rank.rank);
  facts.index_of_rank.assign(static_cast<size_t>(largest_rank) + 1, -1);
  // facts.ranks follows job.ranks, so that StragglerReport::ranks does too.
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    if (job.ranks[i].rank >= 0) facts.index_of_rank[static_cast<size_t>(job.ranks[i].rank)] = static_cast<int>(i);
    facts.ranks.emplace_back(facts.step_count);
    facts.ranks.back().profile = &job.ranks[i];
    facts.ranks.back().scores.rank = job.ranks[i].rank;
    facts.node_of_index.push_back(node_of(job.ranks[i]));
    for (size_t s = 0; s < facts.step_count; ++s) {
      const RankStep* step = step_of(job.ranks[i], s);
      facts.step_begins.push_back(step ? step->times.begin_ns : kUnknown);
    }
  }
  gather_collectives(facts);
  score_arrivals(facts);
  score_compute(facts);
  test_collective_transfer(facts);
  test_exposed_transfer(facts);
  test_node_exposed_transfer(facts);
  return facts;
}

// --------------------------------------------------------------- what-if ---

// What rank `late` cost step s, had it worked (computed, or idled on the
// host) like the step's median rank: the step loses the waits it caused (its
// blame in the step), but cannot become shorter than the longest own time
// (duration − exposed wait) of the other ranks, nor than the rank's own with
// the median rank's work: a wait others spent idle may have hidden work of
// theirs that still has to run.
int64_t saving_at_median_speed(const JobFacts& facts, const RankFacts& late, size_t s) {
  const RankStep* mine = step_of(*late.profile, s);
  if (!mine || late.blame_by_step[s] <= 0) return 0;
  int64_t floor = own_time(*mine) - mine->compute_ns - mine->idle_ns + facts.steps[s].median_work_ns;
  for (const RankFacts& other : facts.ranks) {
    if (&other == &late) continue;
    if (const RankStep* step = step_of(*other.profile, s)) floor = std::max(floor, own_time(*step));
  }
  const int64_t step_ns = facts.steps[s].time_ns;
  return std::clamp<int64_t>(step_ns - std::max(step_ns - late.blame_by_step[s], floor), 0, step_ns);
}

// Mean step time with saving(s) taken off each step.
template <typename Saving>
int64_t what_if_mean_step(const JobFacts& facts, Saving saving) {
  if (facts.known_steps == 0) return 0;
  int64_t total = 0;
  for (size_t s = 0; s < facts.step_count; ++s)
    if (facts.steps[s].known) total += facts.steps[s].time_ns - saving(s);
  return total / facts.known_steps;
}

// ------------------------------------------------------------- verdicts ---

// The index of the rank the others waited for most in step s, or none.
std::optional<size_t> most_blamed_rank(const JobFacts& facts, size_t s) {
  std::optional<size_t> most;
  for (size_t i = 0; i < facts.ranks.size(); ++i)
    if (facts.ranks[i].blame_by_step[s] > (most ? facts.ranks[*most].blame_by_step[s] : 0)) most = i;
  return most;
}

double score_of(double p_value, double cost_share) {
  const double confidence = std::clamp(-std::log10(std::max(p_value, 1e-300)) / kConfidentLog10P, 0.0, 1.0);
  const double cost = cost_share / (cost_share + kHalfScoreCost);
  return std::sqrt(confidence * cost);
}

std::string rank_name(const RankProfile& rank) {
  std::string name = "Rank " + std::to_string(rank.rank);
  if (rank.node_id >= 0)
    name += " (node " + std::to_string(rank.node_id) + (rank.host.empty() ? "" : ", " + rank.host) + ")";
  else if (!rank.host.empty())
    name += " (" + rank.host + ")";
  return name;
}

std::string hex_text(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::string arrival_sentence(const RankFacts& rank) {
  const LateTally& all = rank.all_collectives;
  std::string text = "arrived last at " + std::to_string(all.late) + " of its " + std::to_string(all.instances) +
                     " collectives (" + format_percent(100 * all.rate()) + " against " + format_percent(100 * all.baseline()) +
                     " expected by chance)";
  if (rank.deciding_kind) {
    const auto& [communicator, op, position] = *rank.deciding_kind;
    const LateTally& group = rank.deciding_tally();
    text += ", and at " + std::to_string(group.late) + " of its " + std::to_string(group.instances) + " " +
            std::string(comm_op_name(op)) + " number " + std::to_string(position + 1) + " of a step on its " +
            std::to_string(group.largest_group) + "-rank communicator " + hex_text(communicator) + " (" +
            format_percent(100 * group.rate()) + " against " + format_percent(100 * group.baseline()) + ")";
  }
  text += "; one-sided binomial test over " + std::to_string(rank.deciding_tally().by_step.steps_observed()) +
          " steps, p = " + p_text(rank.late_p_value);
  if (rank.late_tests > 1) text += " after correction for its " + std::to_string(rank.late_tests) + " tests";
  return text;
}

std::string excess_clause(const ExcessFacts& excess) {
  return std::to_string(excess.above) + " of " + std::to_string(excess.steps) + " steps (p = " +
         p_text(excess.p_value) + "), by " + format_duration(static_cast<double>(excess.median_excess_ns)) +
         " per step (median)";
}

std::string compute_sentence(const JobFacts& facts, const RankFacts& rank) {
  std::vector<int64_t> peer_medians;
  for (const RankFacts& other : facts.ranks)
    if (&other != &rank && other.scores.median_compute_ns > 0) peer_medians.push_back(other.scores.median_compute_ns);
  return "Its compute per step is " + format_duration(static_cast<double>(rank.scores.median_compute_ns)) +
         " (median) against " + format_duration(median(peer_medians, 0)) + " for its peers' median (compute score " +
         score_text(rank.scores.compute_score_relative) + " relative to the fastest rank, " +
         score_text(rank.scores.compute_score_individual) + " against its own best step); it computed more than the " +
         "other ranks' median in " + excess_clause(rank.compute) + ".";
}

std::string what_if_sentence(const Straggler& found) {
  return " Had it been as fast as the median rank, the mean step would take " +
         format_duration(static_cast<double>(found.what_if_step_ns)) + " instead of " +
         format_duration(static_cast<double>(found.actual_step_ns)) + ".";
}

std::string transfer_sentence(const JobFacts& facts, const RankFacts& rank, const TransferFacts& transfer) {
  const std::string node = rank.profile->node_id >= 0 ? "node " + std::to_string(rank.profile->node_id) : "its node";
  const std::string corrected =
      transfer.tests > 1 ? " after correction for " + std::to_string(transfer.tests) + " tests" : "";
  std::string text;
  if (&transfer == &rank.collective_transfer)
    text = transfer.what + " it took part in transferred for " + format_duration(transfer.median_time_ns) +
           " (median X(c)) against " + format_duration(transfer.median_reference_ns) + " for the same without " + node +
           " (×" + printf_string("%.2f", transfer.median_inflation) + "), slower than that in " +
           std::to_string(transfer.slower) + " of " + std::to_string(transfer.compared) + " (one-sided test over " +
           std::to_string(transfer.steps) + " steps, p = " + p_text(transfer.p_value) + corrected + ")";
  else if (&transfer == &rank.node_transfer)
    text = transfer.what + " was " + format_duration(transfer.median_time_ns) + " (median) against " +
           format_duration(transfer.median_reference_ns) + " for the other nodes' median (×" +
           printf_string("%.2f", transfer.median_inflation) + "), above every other node's in " +
           std::to_string(transfer.slower) + " of " + std::to_string(transfer.compared) + " steps (p = " +
           p_text(transfer.p_value) + corrected + "): a slowness of the whole node, which its partners in each " +
           "collective share in part";
  else
    text = transfer.what + " was " + format_duration(transfer.median_time_ns) + " (median) against " +
           format_duration(transfer.median_reference_ns) + " for the highest of the other ranks (×" +
           printf_string("%.2f", transfer.median_inflation) + "), the highest of all in " + std::to_string(transfer.slower) +
           " of " + std::to_string(transfer.compared) + " steps (p = " + p_text(transfer.p_value) + ")";
  return text + ". The extra transfer it did not hide behind compute cost " +
         format_duration(static_cast<double>(transfer.exposed_excess_ns)) + ", " +
         format_percent(100 * facts.share_of_step_time(static_cast<double>(transfer.exposed_excess_ns))) + " of the job's " +
         format_duration(static_cast<double>(facts.total_step_ns)) + " of step time.";
}

Straggler base_entry(const JobFacts& facts, const RankFacts& rank) {
  Straggler found;
  found.rank = rank.profile->rank;
  found.last_arriver_rate = rank.scores.last_arriver_rate;
  found.baseline_rate = rank.scores.baseline_rate;
  found.blame_ns = rank.scores.blame_ns;
  found.blame_fraction = facts.share_of_step_time(static_cast<double>(rank.scores.blame_ns));
  found.compute_score_relative = rank.scores.compute_score_relative;
  found.compute_score_individual = rank.scores.compute_score_individual;
  found.actual_step_ns = facts.mean_step_ns();
  return found;
}

const TransferFacts* slow_transfer_of(const JobFacts& facts, const RankFacts& rank, double alpha) {
  for (const TransferFacts* transfer : {&rank.collective_transfer, &rank.exposed_transfer, &rank.node_transfer})
    if (transfer->measured && transfer->p_value < alpha && transfer->median_inflation >= kTransferInflation &&
        facts.share_of_step_time(static_cast<double>(transfer->exposed_excess_ns)) >= kCostFloor)
      return transfer;
  return nullptr;
}

// Its compute (or idle time) is consistently above the median rank's (a
// sign test over steps) and by enough to explain the waits: its median excess
// per step is at least kExcessExplains of the longest wait it caused in a
// step, on average over the steps. (A median, so that one odd step, such as
// the first, cannot cancel the rest.)
bool explains_lateness(const RankFacts& rank, const ExcessFacts& excess) {
  const double lateness_per_step =
      static_cast<double>(std::accumulate(rank.largest_lag_by_step.begin(), rank.largest_lag_by_step.end(), int64_t{0})) /
      std::max(excess.steps, 1);
  return excess.p_value < kCauseAlpha && static_cast<double>(excess.median_excess_ns) >= kExcessExplains * lateness_per_step;
}

Straggler slow_link_verdict(const JobFacts& facts, const RankFacts& rank, const TransferFacts& transfer,
                            const std::string& lateness) {
  Straggler found = base_entry(facts, rank);
  found.cause = "slow link or node network";
  found.score = score_of(transfer.p_value, facts.share_of_step_time(static_cast<double>(transfer.exposed_excess_ns)));
  found.what_if_step_ns = what_if_mean_step(
      facts, [&](size_t s) { return std::min(transfer.exposed_excess_by_step[s], facts.steps[s].time_ns); });
  found.evidence = rank_name(*rank.profile) + " " + lateness + " " + transfer_sentence(facts, rank, transfer) + " " +
                   compute_sentence(facts, rank) + what_if_sentence(found);
  return found;
}

// A rank others wait for: slow compute when its compute explains it, slow
// host when its idle time does, else a slow link when its transfers are
// slow. With none of these it is late for no reason of its own (a
// collective's algorithm releasing it last, MPI progressing inside its
// calls) and is not named: on CPU jobs, where all time outside MPI is
// compute, that is the only other way to be late.
std::optional<Straggler> late_rank_verdict(const JobFacts& facts, const RankFacts& rank, double alpha) {
  const bool slow_compute = explains_lateness(rank, rank.compute);
  const bool slow_host = !slow_compute && explains_lateness(rank, rank.idle);
  if (!slow_compute && !slow_host) {
    if (const TransferFacts* slow_transfer = slow_transfer_of(facts, rank, alpha))
      return slow_link_verdict(facts, rank, *slow_transfer,
                               arrival_sentence(rank) + ") but its compute does not explain it, while");
    return std::nullopt;
  }
  Straggler found = base_entry(facts, rank);
  found.cause = slow_compute ? kSlowComputeCause : "slow host";
  found.score = score_of(rank.late_p_value, found.blame_fraction);
  found.what_if_step_ns = what_if_mean_step(facts, [&](size_t s) { return saving_at_median_speed(facts, rank, s); });
  found.evidence = rank_name(*rank.profile) + " " + arrival_sentence(rank) + "). Others waited " +
                   format_duration(static_cast<double>(found.blame_ns)) +
                   " for it in all (blame: last minus second-last arrival where it was last, overlapping lags counted once), " +
                   format_percent(100 * found.blame_fraction) + " of the job's " +
                   format_duration(static_cast<double>(facts.total_step_ns)) + " of step time. " +
                   compute_sentence(facts, rank);
  if (slow_host)
    found.evidence += " That does not explain the waits it caused, but its idle time does: it idled (neither "
                      "computing nor communicating) more than the other ranks' median in " +
                      excess_clause(rank.idle) + ", so the delay comes before its compute: host-side work, data "
                      "loading or kernel launches.";
  found.evidence += what_if_sentence(found);
  return found;
}

// No single rank to blame, yet the ranks keep waiting for each other: the
// late rank moves from step to step. Workload imbalance when the spread of
// compute per step explains the waiting, else rotating delays from outside
// the compute. Reported as rank −1: a finding about the job.
std::optional<Straggler> rotating_verdict(const JobFacts& facts) {
  // Per step, what its most blamed rank cost it: the what-if's saving.
  std::vector<double> cost_shares;
  int64_t cost_sum = 0, compute_spread = 0;
  std::vector<double> fastest_over_slowest, median_over_slowest;
  std::vector<int> late_steps(facts.ranks.size(), 0);
  for (size_t s = 0; s < facts.step_count; ++s) {
    const StepFacts& step = facts.steps[s];
    if (!step.known) continue;
    const std::optional<size_t> most_blamed = most_blamed_rank(facts, s);
    const int64_t cost = most_blamed ? saving_at_median_speed(facts, facts.ranks[*most_blamed], s) : 0;
    if (most_blamed) ++late_steps[*most_blamed];
    cost_shares.push_back(step.time_ns > 0 ? static_cast<double>(cost) / static_cast<double>(step.time_ns) : 0);
    cost_sum += cost;
    compute_spread += step.max_compute_ns - step.median_compute_ns;
    if (step.max_compute_ns > 0) {
      fastest_over_slowest.push_back(static_cast<double>(step.min_compute_ns) / step.max_compute_ns);
      median_over_slowest.push_back(static_cast<double>(step.median_compute_ns) / step.max_compute_ns);
    }
  }
  const double median_cost_share = median(cost_shares, 0);
  if (cost_shares.empty() || median_cost_share < kRotatingCostShare) return std::nullopt;
  // No rank may have caused most of the waiting: then the waits are that
  // rank's, even if too few steps make it significant. (§6 asks for a last-
  // arriver rate below 2/n; over a few dozen steps chance alone takes some
  // rank of eight or more past that, so the share of blame decides.)
  const auto most_blamed = std::max_element(facts.ranks.begin(), facts.ranks.end(), [](const RankFacts& a, const RankFacts& b) {
    return a.scores.blame_ns < b.scores.blame_ns;
  });
  int64_t all_blame = 0;
  for (const RankFacts& rank : facts.ranks) all_blame += rank.scores.blame_ns;
  const double top_blame_share =
      all_blame > 0 ? static_cast<double>(most_blamed->scores.blame_ns) / static_cast<double>(all_blame) : 0;
  if (top_blame_share >= kRotatingTopBlameShare) return std::nullopt;

  Straggler found;
  found.actual_step_ns = facts.mean_step_ns();
  found.what_if_step_ns = facts.mean_step_ns() - cost_sum / std::max(facts.known_steps, 1);
  double baseline_sum = 0;
  int with_collectives = 0;
  for (const RankFacts& rank : facts.ranks) {
    found.last_arriver_rate = std::max(found.last_arriver_rate, rank.scores.last_arriver_rate);
    if (rank.all_collectives.instances > 0) baseline_sum += rank.scores.baseline_rate, ++with_collectives;
  }
  found.baseline_rate = with_collectives > 0 ? baseline_sum / with_collectives : 0;
  found.blame_ns = all_blame;
  found.blame_fraction = facts.share_of_step_time(static_cast<double>(all_blame));
  found.compute_score_relative = median(fastest_over_slowest, 0);
  found.compute_score_individual = median(median_over_slowest, 0);
  const double mean_cost_share = facts.share_of_step_time(static_cast<double>(cost_sum));
  const double spread_share = facts.share_of_step_time(static_cast<double>(compute_spread));
  const bool imbalance = spread_share >= kImbalanceExplained * mean_cost_share;
  found.cause = imbalance ? "workload imbalance" : "rotating";
  const double steady = static_cast<double>(std::count_if(cost_shares.begin(), cost_shares.end(),
                                                          [](double c) { return c >= kRotatingCostShare; })) /
                        static_cast<double>(cost_shares.size());
  found.score = std::sqrt(steady * mean_cost_share / (mean_cost_share + kHalfScoreCost));

  const int distinct = static_cast<int>(std::count_if(late_steps.begin(), late_steps.end(), [](int n) { return n > 0; }));
  const int most = *std::max_element(late_steps.begin(), late_steps.end());
  found.evidence =
      "No single rank holds the job back, yet in half of the steps the latest rank cost the step " +
      format_percent(100 * median_cost_share) + " or more of its time (what it would have saved had that rank worked like " +
      "the median rank; median over " + std::to_string(cost_shares.size()) + " steps, " +
      format_percent(100 * mean_cost_share) + " of all step time). The rank the others waited for most changed from step " +
      "to step: " + std::to_string(distinct) + " different ranks, none in more than " + std::to_string(most) +
      " steps; the rank blamed most, rank " + std::to_string(most_blamed->profile->rank) + ", caused " +
      format_percent(100 * top_blame_share) + " of the waiting, and the highest last-arriver rate is " +
      format_percent(100 * found.last_arriver_rate) + " against " + format_percent(100 * found.baseline_rate) +
      " by chance. Each step's slowest rank computed " +
      format_duration(static_cast<double>(compute_spread) / std::max(facts.known_steps, 1)) +
      " more than its median rank on average, " + format_percent(100 * spread_share) + " of the step time: ";
  found.evidence += imbalance ? "the work per step differs between ranks, which explains the waiting (workload imbalance)."
                              : "too little to explain the waiting, so the delays come from outside the compute "
                                "(host-side work, the operating system, data loading) and move between ranks.";
  found.evidence += " Had each step's late rank been as fast as the median rank, the mean step would take " +
                    format_duration(static_cast<double>(found.what_if_step_ns)) + " instead of " +
                    format_duration(static_cast<double>(found.actual_step_ns)) + ".";
  return found;
}

}  // namespace

StragglerReport find_stragglers(const JobProfile& job) {
  const JobFacts facts = gather(job);
  StragglerReport report;
  for (const RankFacts& rank : facts.ranks) report.ranks.push_back(rank.scores);
  // Only ranks with figures can be compared: not a missing one, nor one without an event to measure it by.
  std::vector<int32_t> present;
  for (const RankProfile& rank : job.ranks) {
    if (std::string_view(rank_unmeasured(rank)).empty()) present.push_back(rank.rank);
  }
  if (present.size() < 2) {
    report.unmeasured = present.empty() ? (job.ranks_with_data().empty() ? "no rank has data" : kNoStepTimesReason)
                                        : "only rank " + std::to_string(present.front()) +
                                              " has data: there is no other rank to compare it with";
    return report;
  }
  // Waits and arrivals are measured at collectives: without one on two ranks, nothing is.
  if (report.unmeasured = collectives_unmeasured(job); !report.unmeasured.empty()) return report;

  // Arrival order, waits and exposed transfer compare times across ranks:
  // on clocks that were not aligned they measure the clocks' offsets. X(c)
  // takes each rank's durations on its own clock, and stays usable.
  const bool arrivals_comparable = job.clock_corrected;
  const double alpha = kFamilyAlpha / static_cast<double>(std::max<size_t>(facts.ranks.size(), 1));
  for (const RankFacts& rank : facts.ranks) {
    const double blame_share = facts.share_of_step_time(static_cast<double>(rank.scores.blame_ns));
    if (arrivals_comparable && rank.late_p_value < alpha && blame_share >= kCostFloor) {
      if (std::optional<Straggler> late = late_rank_verdict(facts, rank, alpha)) report.stragglers.push_back(*late);
    } else if (const TransferFacts* slow_transfer = slow_transfer_of(facts, rank, alpha);
               slow_transfer && (arrivals_comparable || slow_transfer == &rank.collective_transfer)) {
      const std::string lateness =
          arrivals_comparable
              ? "was not late (last at " + format_percent(100 * rank.scores.last_arriver_rate) + " of its collectives against " +
                    format_percent(100 * rank.scores.baseline_rate) + " expected, p = " + p_text(rank.late_p_value) + "), but"
              : "cannot be judged by its arrivals (the ranks' clocks were not aligned), but";
      report.stragglers.push_back(slow_link_verdict(facts, rank, *slow_transfer, lateness));
    }
  }
  if (arrivals_comparable && report.stragglers.empty() && !facts.ranks.empty())
    if (std::optional<Straggler> rotating = rotating_verdict(facts)) report.stragglers.push_back(*rotating);
  std::stable_sort(report.stragglers.begin(), report.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score > b.score; });
  return report;
}

std::vector<int32_t> slow_compute_ranks(const StragglerReport& report) {
  std::vector<int32_t> ranks;
  for (const Straggler& found : report.stragglers) {
    if (found.cause == kSlowComputeCause) ranks.push_back(found.rank);
  }
  return ranks;
}

void take_replayed_what_if(StragglerReport& report, const CriticalPath& path) {
  for (Straggler& found : report.stragglers) {
    if (found.cause != kSlowComputeCause) continue;
    const auto replay = std::find_if(path.rank_replays.begin(), path.rank_replays.end(),
                                     [&](const RankReplay& r) { return r.rank == found.rank; });
    if (replay == path.rank_replays.end() || replay->steps == 0) continue;
    const std::string first_order = what_if_sentence(found);
    if (found.evidence.ends_with(first_order)) found.evidence.resize(found.evidence.size() - first_order.size());
    const int64_t saving = std::clamp<int64_t>(replay->replayed_ns - replay->predicted_ns, 0, found.actual_step_ns);
    found.what_if_step_ns = found.actual_step_ns - saving;
    found.evidence += " Replayed with its compute at the other ranks' median on " + std::to_string(replay->steps) +
                      (replay->steps == 1 ? " walked step" : " walked steps") +
                      " (the critical path's graph), a step took " +
                      format_duration(static_cast<double>(saving)) + " less on average: the mean step would take " +
                      format_duration(static_cast<double>(found.what_if_step_ns)) + " instead of " +
                      format_duration(static_cast<double>(found.actual_step_ns)) + ".";
  }
}

}  // namespace rankscope::analysis
