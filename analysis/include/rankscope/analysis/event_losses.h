// Events the capture lost (docs/report.md, "Events the capture lost").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// Events a rank's capture saw that its timeline lacks, by the counter that
// counted them (counter::kEventLossCounters): its figures undercount.
struct EventLoss {
  int32_t rank = -1;
  std::vector<std::pair<std::string, uint64_t>> counted;  // counter, events; in kEventLossCounters' order, none 0
  uint64_t events() const;  // their sum
};
std::vector<EventLoss> event_losses(const Timeline& timeline);  // the ranks that lost events, by rank
// "1210 events captured are not in the timeline (rank 0: 1200 events_dropped,
// 10 cupti_records_dropped; ...)"; "" for no loss.
std::string event_loss_summary(const std::vector<EventLoss>& losses);

}  // namespace rankscope::analysis
