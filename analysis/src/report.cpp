// `rankscope report`: every analysis of one timeline, each run once. The
// renderers are in render/.
#include "rankscope/analysis/report.h"

#include <optional>
#include <vector>

namespace rankscope::analysis {

Report make_report(const Timeline& timeline, const ReportOptions& options, const WorkShare& share) {
  Report report;
  report.profile = build_profile(timeline, share);
  report.breakdown = step_breakdown(report.profile);
  report.overlap = overlap_by_rank(report.profile);
  if (options.hta_compat) {
    const std::vector<std::optional<HtaFigures>> hta = hta_figures(timeline, report.profile);
    for (size_t r = 0; r < report.overlap.size(); ++r) report.overlap[r].hta = hta[r];
  }
  report.stragglers = find_stragglers(report.profile);
  // The stragglers' what-if is the critical path's replay where it exists,
  // before the bottleneck finder costs them by it.
  // The buckets' predictions, too, are the replay's where it regroups them.
  report.buckets = analyze_buckets(report.profile, report.overlap);
  report.critical_path =
      critical_path(timeline, report.profile, slow_compute_ranks(report.stragglers), &report.buckets);
  take_replayed_what_if(report.stragglers, report.critical_path);
  take_replayed_predictions(report.buckets, report.critical_path.bucket_replays,
                            report.critical_path.bucket_replays_unmeasured, report.critical_path.bucket_replays_left_out);
  report.ends = rank_ends(timeline);
  report.bottlenecks =
      find_bottlenecks(report.profile, report.breakdown, report.stragglers, report.buckets, report.ends);
  report.capture_cost = capture_cost(timeline);
  report.hangs = find_hangs(timeline);
  report.deadlocks = find_deadlocks(timeline);
  report.damage = timeline.damage();
  report.losses = event_losses(timeline);
  return report;
}

}  // namespace rankscope::analysis
