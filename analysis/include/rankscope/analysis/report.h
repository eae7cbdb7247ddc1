// What `rankscope report` shows of a job: every analysis of one timeline
// (docs/report.md), rendered as text, JSON or HTML, and the JSON parts that
// `rankscope info` shares with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analysis/bottlenecks.h"
#include "rankscope/analysis/breakdown.h"
#include "rankscope/analysis/buckets.h"
#include "rankscope/analysis/capture_cost.h"
#include "rankscope/analysis/critical_path.h"
#include "rankscope/analysis/event_losses.h"
#include "rankscope/analysis/hangs.h"
#include "rankscope/analysis/overlap.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/analysis/stragglers.h"
#include "rankscope/analysis/work_share.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope {
class JsonWriter;
}

namespace rankscope::analysis {

struct Report {
  JobProfile profile;
  std::vector<RankBreakdown> breakdown;
  std::vector<RankOverlap> overlap;
  StragglerReport stragglers;
  BucketReport buckets;
  std::vector<CaptureCost> capture_cost;
  std::vector<Hang> hangs;
  std::vector<Deadlock> deadlocks;
  std::vector<RankEnd> ends;
  TimelineDamage damage;  // rows the analyses left out, found while reading
  std::vector<EventLoss> losses;
  BottleneckReport bottlenecks;
  CriticalPath critical_path;
};
struct ReportOptions {
  bool hta_compat = false;  // overlap and the temporal breakdown by HTA's definitions (docs/report-reference.md)
};
Report make_report(const Timeline& timeline, const ReportOptions& options = {}, const WorkShare& share = {});

std::string report_text(const Report& report);   // fits one screen
std::string report_json(const Report& report);   // docs/report.md
std::string report_html(const Report& report);   // one self-contained page

// The damage object of `report --format json` and `info --json` (docs/format.md).
void write_damage_json(JsonWriter& json, const TimelineDamage& damage);

// The JSON of clocks, the same in report and info: inside an open object,
// `corrected` and `reference_rank`; and one rank's `rank`, `status`,
// `synced`, `offset_ns`, `drift_ppm`, `bound_ns` (null with a reason where
// nothing was measured).
void write_clock_reference_json(JsonWriter& json, bool corrected, std::optional<int32_t> reference);
void write_clock_json(JsonWriter& json, int32_t rank, RankStatus status, const RankClock& clock);

}  // namespace rankscope::analysis
