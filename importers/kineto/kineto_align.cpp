#include "kineto_align.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "rankscope/model/statistics.h"

namespace rankscope::kineto {
namespace {

// Pairs of ends looked at per kernel when matching by time.
constexpr size_t kMaxCandidatesPerRecord = 64;
// Differences looked at, at most, for the coarse offset that centres them.
constexpr size_t kMaxCoarsePairs = 1u << 20;

struct Pair {
  uint32_t mine;    // record of the rank being aligned
  uint32_t theirs;  // record of the anchor
};

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), size_t{0}); }
  size_t find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void join(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::vector<size_t> parent_;
};

// Pairs sharing a Seq or Comms Id (within one process group, for one operation).
std::vector<Pair> pairs_by_id(const RankCollectives& mine, const RankCollectives& theirs) {
  std::map<std::tuple<uint64_t, uint64_t, MatchKey>, uint32_t> index;
  for (uint32_t j = 0; j < theirs.records.size(); ++j) {
    const CollectiveRecord& r = theirs.records[j];
    if (r.key != MatchKey::kTime) index.emplace(std::make_tuple(r.group, r.id, r.key), j);
  }
  std::vector<Pair> pairs;
  for (uint32_t i = 0; i < mine.records.size(); ++i) {
    const CollectiveRecord& r = mine.records[i];
    if (r.key == MatchKey::kTime) continue;
    const auto found = index.find(std::make_tuple(r.group, r.id, r.key));
    if (found != index.end() && theirs.records[found->second].op == r.op) pairs.push_back({i, found->second});
  }
  return pairs;
}

using KernelsByKind = std::map<std::pair<uint64_t, CommOp>, std::vector<uint32_t>>;  // by end time

struct Run {
  size_t count = 0;
  int64_t middle = 0;  // its median
};

// The run of sorted values no wider than `width` that holds the most; among
// equals, the one starting nearest `target`.
Run densest_run(const std::vector<int64_t>& sorted, int64_t width, int64_t target) {
  size_t best_from = 0, best_count = 0;
  const auto distance = [&](size_t f) { return sorted[f] > target ? sorted[f] - target : target - sorted[f]; };
  for (size_t from = 0, to = 0; from < sorted.size(); ++from) {
    while (to < sorted.size() && sorted[to] - sorted[from] <= width) ++to;
    if (to - from > best_count || (to - from == best_count && distance(from) < distance(best_from))) {
      best_count = to - from;
      best_from = from;
    }
  }
  return best_count > 0 ? Run{best_count, sorted[best_from + best_count / 2]} : Run{};
}

// The offset at which the most ends coincide, over every pairing of a sample
// of my kernels with all of theirs: it finds clocks any distance apart.
int64_t coarse_offset(const RankCollectives& mine, const RankCollectives& theirs, const KernelsByKind& their_kinds,
                      int64_t window) {
  size_t pairs = 0;
  for (const CollectiveRecord& r : mine.records) {
    const auto found = their_kinds.find({r.group, r.op});
    if (found != their_kinds.end()) pairs += found->second.size();
  }
  const size_t stride = std::max<size_t>(1, pairs / kMaxCoarsePairs);
  std::vector<int64_t> differences;
  for (size_t i = 0; i < mine.records.size(); i += stride) {
    const CollectiveRecord& r = mine.records[i];
    const auto found = their_kinds.find({r.group, r.op});
    if (found == their_kinds.end()) continue;
    for (uint32_t j : found->second) differences.push_back(r.end_ns - theirs.records[j].end_ns);
  }
  std::sort(differences.begin(), differences.end());
  return densest_run(differences, window, 0).middle;
}

// Pairs found among each kernel's nearest neighbours at the offset `coarse`:
// the densest window of end differences, then each kernel with the nearest.
std::vector<Pair> pairs_around(const RankCollectives& mine, const RankCollectives& theirs,
                               const KernelsByKind& their_kinds, int64_t window, int64_t coarse) {
  struct Candidate {
    int64_t difference;
    uint32_t mine, theirs;
  };
  std::vector<Candidate> candidates;
  for (uint32_t i = 0; i < mine.records.size(); ++i) {
    const CollectiveRecord& r = mine.records[i];
    const auto found = their_kinds.find({r.group, r.op});
    if (found == their_kinds.end()) continue;
    const auto& list = found->second;
    // The candidates nearest in time at the coarse offset, on either side.
    const auto middle = std::lower_bound(list.begin(), list.end(), r.end_ns - coarse, [&](uint32_t j, int64_t t) {
      return theirs.records[j].end_ns < t;
    });
    const size_t at = static_cast<size_t>(middle - list.begin());
    const size_t half = kMaxCandidatesPerRecord / 2;
    const size_t from = at > half ? at - half : 0, to = std::min(list.size(), at + half);
    for (size_t k = from; k < to; ++k) candidates.push_back({r.end_ns - theirs.records[list[k]].end_ns, i, list[k]});
  }
  if (candidates.size() < kMinPairs) return {};
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.difference < b.difference; });
  std::vector<int64_t> differences;
  for (const Candidate& c : candidates) differences.push_back(c.difference);
  const Run densest = densest_run(differences, window, coarse);
  if (densest.count < kMinPairs) return {};
  const int64_t offset = densest.middle;

  std::vector<Candidate> close;
  for (const Candidate& c : candidates) {
    if (c.difference - offset <= window && offset - c.difference <= window) close.push_back(c);
  }
  std::sort(close.begin(), close.end(), [&](const Candidate& a, const Candidate& b) {
    const int64_t da = a.difference > offset ? a.difference - offset : offset - a.difference;
    const int64_t db = b.difference > offset ? b.difference - offset : offset - b.difference;
    return std::tie(da, a.mine, a.theirs) < std::tie(db, b.mine, b.theirs);
  });
  std::vector<bool> mine_used(mine.records.size()), theirs_used(theirs.records.size());
  std::vector<Pair> pairs;
  for (const Candidate& c : close) {
    if (mine_used[c.mine] || theirs_used[c.theirs]) continue;
    mine_used[c.mine] = theirs_used[c.theirs] = true;
    pairs.push_back({c.mine, c.theirs});
  }
  if (pairs.size() < kMinPairs) return {};
  return pairs;
}

// Pairs found by time: the offset at which the most ends of kernels of the
// same group and operation coincide, then each kernel with the nearest one.
// Nearby offsets are tried first; the full search only when they match few.
std::vector<Pair> pairs_by_time(const RankCollectives& mine, const RankCollectives& theirs) {
  KernelsByKind their_kinds;
  for (uint32_t j = 0; j < theirs.records.size(); ++j) {
    their_kinds[{theirs.records[j].group, theirs.records[j].op}].push_back(j);
  }
  for (auto& [kind, list] : their_kinds) {
    std::sort(list.begin(), list.end(),
              [&](uint32_t a, uint32_t b) { return theirs.records[a].end_ns < theirs.records[b].end_ns; });
  }
  // The window within which two ends count as together: a quarter of the
  // anchor's typical gap between kernels, between 20 µs and 2 ms.
  std::vector<int64_t> gaps;
  for (const auto& [kind, list] : their_kinds) {
    for (size_t k = 1; k < list.size(); ++k) {
      gaps.push_back(theirs.records[list[k]].end_ns - theirs.records[list[k - 1]].end_ns);
    }
  }
  const int64_t window = std::clamp<int64_t>(gaps.empty() ? 2'000'000 : median_ns(gaps) / 4, 20'000, 2'000'000);

  std::vector<Pair> pairs = pairs_around(mine, theirs, their_kinds, window, 0);
  if (2 * pairs.size() < std::min(mine.records.size(), theirs.records.size())) {
    const int64_t coarse = coarse_offset(mine, theirs, their_kinds, window);
    if (coarse != 0) {
      std::vector<Pair> far = pairs_around(mine, theirs, their_kinds, window, coarse);
      if (far.size() > pairs.size()) pairs = std::move(far);
    }
  }
  return pairs;
}

struct PairOffset {
  int64_t offset_ns;
  int64_t bound_ns;
  bool consistent;
  int64_t scatter_ns;  // the farthest any pair's end difference lies from the offset
  int64_t low_ns, high_ns;  // the offsets causality allows: empty when low > high
};

int64_t distance(int64_t a, int64_t b) { return a > b ? a - b : b - a; }

PairOffset offset_from(const RankCollectives& mine, const RankCollectives& theirs, const std::vector<Pair>& pairs) {
  int64_t low = INT64_MIN, high = INT64_MAX;
  std::vector<int64_t> end_differences;
  for (const Pair& p : pairs) {
    const CollectiveRecord& a = mine.records[p.mine];
    const CollectiveRecord& b = theirs.records[p.theirs];
    low = std::max(low, a.begin_ns - b.end_ns);
    high = std::min(high, a.end_ns - b.begin_ns);
    end_differences.push_back(a.end_ns - b.end_ns);
  }
  const int64_t estimate = median_ns(end_differences);
  const bool consistent = low <= high;
  // Causality contradicting itself (the clocks drifted, or a pair is wrong)
  // leaves the median, with the spread as its bound.
  const int64_t offset = consistent ? std::clamp(estimate, low, high) : estimate;
  int64_t scatter = 0;
  for (const int64_t difference : end_differences) scatter = std::max(scatter, distance(difference, offset));
  const int64_t bound = std::max(distance(offset, low), distance(offset, high));
  return {offset, consistent ? bound : std::max(bound, scatter), consistent, scatter, low, high};
}

// Pairs of my records with an aligned rank's: by Seq or Comms Id, else by time.
std::vector<Pair> pairs_between(const RankCollectives& mine, const RankCollectives& theirs) {
  std::vector<Pair> pairs = pairs_by_id(mine, theirs);
  if (pairs.empty()) pairs = pairs_by_time(mine, theirs);
  return pairs;
}

bool generic_host_name(std::string_view host) {
  return host == "localhost" || host.starts_with("localhost.") || host == "(none)";
}

// Why `pairs` rule out that `mine` and `theirs` were stamped by one clock;
// empty when causality allows it.
std::string one_clock_ruled_out(const RankCollectives& mine, const RankCollectives& theirs,
                                const std::vector<Pair>& pairs) {
  if (pairs.empty()) return {};
  const PairOffset found = offset_from(mine, theirs, pairs);
  if (found.low_ns <= 0 && 0 <= found.high_ns) return {};
  const int64_t apart = found.consistent ? std::min(distance(found.low_ns, 0), distance(found.high_ns, 0))
                                         : distance(found.low_ns, found.high_ns);
  return "its trace names the host \"" + mine.host + "\" as rank " + std::to_string(theirs.rank) +
         "'s does, but causality in their " + std::to_string(pairs.size()) + " matched collectives " +
         (found.consistent ? "puts their clocks at least " + std::to_string(apart) + " ns apart"
                           : "fits no single offset (its bounds cross by " + std::to_string(apart) + " ns)") +
         ": not one clock, so its collectives, not its host, align it";
}

// Why `found`, from `pairs` matches, defends no bound; empty when it does.
std::string doubt_about(const PairOffset& found, size_t pairs, int64_t total_offset_ns) {
  if (pairs < kMinPairs) {
    return "only " + std::to_string(pairs) + " collective" + (pairs == 1 ? "" : "s") + " matched; a bound needs " +
           std::to_string(kMinPairs);
  }
  if (found.scatter_ns > found.bound_ns) {
    return "the ends of its " + std::to_string(pairs) + " matched collectives lie up to " +
           std::to_string(found.scatter_ns) + " ns from the offset, beyond the " + std::to_string(found.bound_ns) +
           " ns bound causality leaves: they did not finish together, so they are not one collective";
  }
  if (distance(total_offset_ns, 0) > kMaxClockApartNs) {
    return "its matches put its clock " + std::to_string(total_offset_ns / 1'000'000'000) +
           " s from the reference's, more than one job's clocks can be apart (" +
           std::to_string(kMaxClockApartNs / 1'000'000'000) + " s)";
  }
  return {};
}

}  // namespace

Alignment align_ranks(const std::vector<RankCollectives>& ranks) {
  Alignment out;
  const size_t n = ranks.size();
  out.ranks.resize(n);
  out.instance.resize(n);
  out.unmatched.assign(n, 0);
  if (n == 0) return out;
  for (size_t k = 0; k < n; ++k) out.ranks[k].rank = ranks[k].rank;

  // The reference: the lowest rank that has kernels to match, else the lowest rank.
  size_t reference = n;
  for (size_t k = 0; k < n; ++k) {
    if (!ranks[k].records.empty() && (reference == n || ranks[k].rank < ranks[reference].rank)) reference = k;
  }
  if (reference == n) {
    reference = 0;
    for (size_t k = 1; k < n; ++k) {
      if (ranks[k].rank < ranks[reference].rank) reference = k;
    }
  }
  out.reference = ranks[reference].rank;
  out.ranks[reference].aligned = true;
  out.ranks[reference].anchor = ranks[reference].rank;

  std::vector<size_t> first(n + 1, 0);
  for (size_t k = 0; k < n; ++k) first[k + 1] = first[k] + ranks[k].records.size();
  UnionFind same(first[n]);

  // Each rank against the aligned ones, the reference first, until no more can
  // be: by the clock of its host where an aligned rank shares it, else by
  // its collectives.
  std::vector<size_t> aligned_order = {reference};
  const auto align_by_host = [&](size_t k) {
    // A name every machine may give itself (containers, a default) is no host's.
    if (ranks[k].host.empty() || generic_host_name(ranks[k].host)) return false;
    for (size_t anchor : aligned_order) {
      if (ranks[anchor].host != ranks[k].host) continue;
      const std::vector<Pair> pairs = pairs_between(ranks[k], ranks[anchor]);
      RankAlignment& a = out.ranks[k];
      a.host_doubt = one_clock_ruled_out(ranks[k], ranks[anchor], pairs);
      if (!a.host_doubt.empty()) return false;
      a.doubt.clear();
      a.aligned = a.same_host = true;
      a.anchor = ranks[anchor].rank;
      a.matched = pairs.size();
      a.offset_ns = out.ranks[anchor].offset_ns;
      a.bound_ns = out.ranks[anchor].bound_ns;
      for (const Pair& p : pairs) same.join(first[k] + p.mine, first[anchor] + p.theirs);
      aligned_order.push_back(k);
      return true;
    }
    return false;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t k = 0; k < n; ++k) {
      if (out.ranks[k].aligned) continue;
      if (out.ranks[k].host_doubt.empty() && align_by_host(k)) {
        progress = true;
        continue;
      }
      if (ranks[k].records.empty()) continue;
      for (size_t anchor : aligned_order) {
        const std::vector<Pair> pairs = pairs_between(ranks[k], ranks[anchor]);
        if (pairs.empty()) continue;
        const PairOffset found = offset_from(ranks[k], ranks[anchor], pairs);
        RankAlignment& a = out.ranks[k];
        const std::string doubt = doubt_about(found, pairs.size(), found.offset_ns + out.ranks[anchor].offset_ns);
        if (!doubt.empty()) {
          a.doubt = "against rank " + std::to_string(ranks[anchor].rank) + ": " + doubt;
          continue;
        }
        a.doubt.clear();
        a.aligned = true;
        a.anchor = ranks[anchor].rank;
        a.matched = pairs.size();
        a.offset_ns = found.offset_ns + out.ranks[anchor].offset_ns;
        a.bound_ns = found.bound_ns + out.ranks[anchor].bound_ns;
        a.consistent = found.consistent;
        for (const Pair& p : pairs) same.join(first[k] + p.mine, first[anchor] + p.theirs);
        aligned_order.push_back(k);
        progress = true;
        break;
      }
    }
  }
  // Records with the same Seq or Comms Id are the same collective, aligned or not.
  std::map<std::tuple<uint64_t, uint64_t, MatchKey, CommOp>, size_t> by_id;
  for (size_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < ranks[k].records.size(); ++i) {
      const CollectiveRecord& r = ranks[k].records[i];
      if (r.key == MatchKey::kTime) continue;
      const auto [it, inserted] = by_id.emplace(std::make_tuple(r.group, r.id, r.key, r.op), first[k] + i);
      if (!inserted) same.join(it->second, first[k] + i);
    }
  }
  std::vector<size_t> members(first[n], 0);
  for (size_t x = 0; x < first[n]; ++x) ++members[same.find(x)];
  for (size_t k = 0; k < n; ++k) {
    auto& instance = out.instance[k];
    instance.resize(ranks[k].records.size());
    for (size_t i = 0; i < instance.size(); ++i) {
      const size_t root = same.find(first[k] + i);
      if (members[root] < 2) {
        ++out.unmatched[k];
        instance[i] = (uint64_t{1} << 63) | (static_cast<uint64_t>(static_cast<uint32_t>(ranks[k].rank)) << 32) | i;
        continue;
      }
      // The component's first record names it: by its Seq or Comms Id when it has one.
      size_t owner = 0;
      while (first[owner + 1] <= root) ++owner;
      const CollectiveRecord& named = ranks[owner].records[root - first[owner]];
      instance[i] = named.key != MatchKey::kTime ? named.id : (uint64_t{1} << 62) | root;
    }
  }
  return out;
}

}  // namespace rankscope::kineto
