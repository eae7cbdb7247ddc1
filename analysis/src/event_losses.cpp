// Events the capture counted as lost, from each rank's counters: the report
// says so above its figures, which leave those events out.
#include <numeric>

#include "rankscope/analysis/event_losses.h"
#include "rankscope/model/counters.h"

namespace rankscope::analysis {

uint64_t EventLoss::events() const {
  return std::accumulate(counted.begin(), counted.end(), uint64_t{0},
                         [](uint64_t sum, const auto& entry) { return sum + entry.second; });
}

std::vector<EventLoss> event_losses(const Timeline& timeline) {
  std::vector<EventLoss> losses;
  for (const RankInfo& info : timeline.ranks()) {
    EventLoss loss;
    loss.rank = info.rank;
    for (const std::string_view name : counter::kEventLossCounters) {
      if (const uint64_t n = info.counters.get(name); n > 0) loss.counted.emplace_back(std::string(name), n);
    }
    if (!loss.counted.empty()) losses.push_back(std::move(loss));
  }
  return losses;
}

std::string event_loss_summary(const std::vector<EventLoss>& losses) {
  if (losses.empty()) return "";
  constexpr size_t kRanksNamed = 4;
  uint64_t total = 0;
  std::string ranks;
  for (size_t i = 0; i < losses.size(); ++i) {
    total += losses[i].events();
    if (i >= kRanksNamed) continue;
    ranks += (i > 0 ? "; rank " : "rank ") + std::to_string(losses[i].rank) + ":";
    for (size_t c = 0; c < losses[i].counted.size(); ++c) {
      ranks += (c > 0 ? ", " : " ") + std::to_string(losses[i].counted[c].second) + " " + losses[i].counted[c].first;
    }
  }
  if (losses.size() > kRanksNamed) ranks += "; " + std::to_string(losses.size() - kRanksNamed) + " more ranks";
  return std::to_string(total) + " events captured are not in the timeline (" + ranks + ")";
}

}  // namespace rankscope::analysis
