// `rankscope report`'s text: one screen of the analyses of one timeline.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analysis/report.h"
#include "rankscope/model/format.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"
#include "report_figures.h"
#include "report_sections.h"

namespace rankscope::analysis {
namespace {

// A median duration, or n/a where it was not measured.
std::string median_text(const std::vector<int64_t>& values, const std::string& unmeasured) {
  return unmeasured.empty() ? format_duration(median_ns(values)) : "n/a";
}

// The header's word on clocks: aligned onto which rank's, and how well.
std::string clock_summary(const JobProfile& job) {
  const std::vector<int32_t> present = job.ranks_with_data();
  if (present.size() < 2) return present.empty() ? "no rank has data" : "one rank with data: no clocks to align";
  if (!job.clock_corrected) return "clocks NOT aligned (ranks keep their own clocks)";
  int64_t bound = 0;
  for (int32_t r : present) bound = std::max(bound, job.clocks[static_cast<size_t>(r)].bound_ns);
  return "clocks aligned to " + clock_reference_text(job.clock_reference) + ", largest bound " +
         std::to_string(bound) + " ns";
}

// A rank's total as a mean per step, or n/a where it was not measured.
std::string per_step(int64_t total_ns, size_t steps, const std::string& unmeasured) {
  return unmeasured.empty() ? format_duration(total_ns / static_cast<int64_t>(steps)) : "n/a";
}

std::string hta_line(const HtaFigures& hta) {
  const std::string overlap = std::isnan(hta.comm_comp_overlap_pct)
                                  ? "n/a (no communication kernel by its name rules)"
                                  : printf_string("%.2f %%", hta.comm_comp_overlap_pct);
  if (hta.kernel_time_ns == 0) return "             HTA: overlap " + overlap + "; no GPU event in its window\n";
  int64_t host_wait = 0, kernel_wait = 0, other = 0;
  for (const HtaStreamIdle& idle : hta.idle_breakdown) {
    host_wait += idle.host_wait_ns;
    kernel_wait += idle.kernel_wait_ns;
    other += idle.other_ns;
  }
  const HtaLaunchStats& launches = hta.launch_stats;
  return printf_string("             HTA: overlap %s, idle %.2f %%, compute %.2f %%, non-compute %.2f %% of %s\n",
                       overlap.c_str(), hta.idle_pct, hta.compute_pct, hta.non_compute_pct,
                       format_duration(hta.kernel_time_ns).c_str()) +
         printf_string("             HTA: idle on %zu streams: host wait %s, kernel wait %s, other %s; %llu launches, "
                       "%llu short kernels, %llu runtime and %llu launch-delay outliers\n",
                       hta.idle_breakdown.size(), format_duration(host_wait).c_str(),
                       format_duration(kernel_wait).c_str(), format_duration(other).c_str(),
                       static_cast<unsigned long long>(launches.events),
                       static_cast<unsigned long long>(launches.short_kernels),
                       static_cast<unsigned long long>(launches.runtime_outliers),
                       static_cast<unsigned long long>(launches.launch_delay_outliers));
}

// A category's share of a rank's step time, or n/a where it was not measured.
std::string share_text(const RankBreakdown& b, StepCategory category) {
  const size_t c = static_cast<size_t>(category);
  if (!b.category_unmeasured[c].empty()) return "n/a";
  return format_percent(b.total.total_ns > 0 ? 100.0 * static_cast<double>(b.total.ns[c]) / b.total.total_ns : 0);
}

// Each rank's step time by category, in the order time is booked; the
// reasons for what is n/a once each, with the ranks they hold for.
void write_breakdown_text(const Report& report, std::string& out) {
  out += "\nstep breakdown (share of each rank's step time; each ns counted once, in this order):\n";
  std::map<std::string, std::vector<int32_t>> reasons;  // "category: why" -> ranks
  size_t shown = 0;
  for (const RankBreakdown& b : report.breakdown) {
    if (report.profile.ranks[static_cast<size_t>(b.rank)].status == RankStatus::kMissing) continue;
    if (++shown > 8 && report.breakdown.size() > 10) {
      out += "  ... " + std::to_string(report.breakdown.size() - 8) + " more ranks (JSON and HTML list every rank)\n";
      break;
    }
    if (!b.unmeasured.empty()) {
      out += printf_string("  rank %-5d n/a: %s\n", b.rank, b.unmeasured.c_str());
      continue;
    }
    const size_t comm = static_cast<size_t>(StepCategory::kCommunication);
    std::string line = printf_string("  rank %-5d communication %s", b.rank, share_text(b, StepCategory::kCommunication).c_str());
    if (b.category_unmeasured[comm].empty()) {
      const double total = b.total.total_ns > 0 ? static_cast<double>(b.total.total_ns) : 1;
      line += b.split_unmeasured.empty()
                  ? " (wait " + format_percent(100.0 * b.total.comm_wait_ns / total) + ", transfer " +
                        format_percent(100.0 * b.total.comm_transfer_ns / total) + ")"
                  : " (wait and transfer n/a)";
    }
    for (int c = 1; c < kStepCategoryCount; ++c) {
      const auto category = static_cast<StepCategory>(c);
      line += std::string(", ") + step_category_label(category) + " " + share_text(b, category);
    }
    const size_t ran = std::max<size_t>(1, std::count_if(b.steps.begin(), b.steps.end(),
                                                         [](const auto& step) { return step.has_value(); }));
    out += line + "; of " + format_duration(b.total.total_ns / static_cast<int64_t>(ran)) + " per step\n";
    for (int c = 0; c < kStepCategoryCount; ++c) {
      if (!b.category_unmeasured[c].empty()) {
        reasons[std::string(step_category_label(static_cast<StepCategory>(c))) + " n/a: " + b.category_unmeasured[c]]
            .push_back(b.rank);
      }
    }
    if (b.category_unmeasured[comm].empty() && !b.split_unmeasured.empty()) {
      reasons["wait and transfer n/a: " + b.split_unmeasured].push_back(b.rank);
    }
  }
  for (const auto& [reason, ranks] : reasons) {
    out += "  (rank" + std::string(ranks.size() > 1 ? "s " : " ") + format_rank_list(ranks) + ") " + reason + "\n";
  }
}

}  // namespace

std::string report_text(const Report& report) {
  const JobProfile& job = report.profile;
  std::string out;
  char line[1024];
  const std::vector<int64_t> steps = step_durations(job);
  const std::string step_time = steps.empty() ? std::string("n/a (") + kNoStepTimesReason + ")"
                                              : format_duration(mean_ns(steps)) + " (median " +
                                                    format_duration(median_ns(steps)) + ")";
  const std::string steps_are = job.steps_are_windows
                                    ? " capture windows taken as steps (no ProfilerStep#N range was captured)"
                                    : " steps";
  out += job.path + ": " + std::to_string(job.world_size) + " ranks, " + std::to_string(job.step_numbers.size()) +
         steps_are + ", mean step " + step_time + "; " + clock_summary(job) + "\n";
  if (!report.damage.empty()) out += "DAMAGED: " + report.damage.summary() + "; every figure here leaves those rows out\n";
  if (!report.losses.empty()) {
    out += "INCOMPLETE: " + event_loss_summary(report.losses) +
           "; those ranks' figures leave them out (`rankscope info` says why each was lost)\n";
  }
  if (!job.steps_cut.empty()) out += "CUT BY CAPTURE WINDOWS: " + describe_steps_cut(job) + "\n";
  size_t ended = 0;
  for (const RankEnd& end : report.ends) {
    if (const std::string how = describe_fatal_signal(end); !how.empty() && ++ended <= 4) {
      out += (end.crashed() ? "CRASHED: rank " : "KILLED: rank ") + std::to_string(end.rank) + " " + how + "\n";
    } else if (const std::string early = describe_early_end(end); !early.empty() && ++ended <= 4) {
      std::string label = rank_status_name(end.status);
      for (char& c : label) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += label + ": rank " + std::to_string(end.rank) + " " + early + "\n";
    }
  }
  if (ended > 4) out += "  ... " + std::to_string(ended - 4) + " more ranks ended early (JSON lists them all)\n";
  for (size_t i = 0; i < report.hangs.size() && i < 3; ++i) out += describe_hang(report.hangs[i]);
  if (report.hangs.size() > 3) {
    out += "  ... " + std::to_string(report.hangs.size() - 3) + " more unfinished collectives (JSON lists them all)\n";
  }
  for (size_t i = 0; i < report.deadlocks.size() && i < 3; ++i) out += describe_deadlock(report.deadlocks[i]);
  if (report.deadlocks.size() > 3) {
    out += "  ... " + std::to_string(report.deadlocks.size() - 3) + " more deadlocks (JSON lists them all)\n";
  }

  write_bottlenecks_text(report, out);

  out += "\nstragglers:";
  if (!report.stragglers.unmeasured.empty()) out += " n/a: " + report.stragglers.unmeasured + "\n";
  else if (report.stragglers.stragglers.empty()) out += " none found\n";
  else out += "\n";
  for (size_t i = 0; i < report.stragglers.stragglers.size() && i < 3; ++i) {
    const Straggler& s = report.stragglers.stragglers[i];
    std::snprintf(line, sizeof(line), "  rank %d: %s (score %.2f); mean step %s, %s if it were as fast as the median rank\n",
                  s.rank, s.cause.c_str(), s.score, format_duration(s.actual_step_ns).c_str(),
                  format_duration(s.what_if_step_ns).c_str());
    out += line;
    out += "    " + s.evidence.substr(0, 400) + (s.evidence.size() > 400 ? "..." : "") + "\n";
  }

  write_critical_path_text(report, out);
  write_breakdown_text(report, out);

  out += "\noverlap (share of communication hidden by compute) and exposed communication per step, of it waiting "
         "for the last rank and transfer:\n";
  if (std::any_of(report.overlap.begin(), report.overlap.end(), [](const RankOverlap& o) { return o.hta; })) {
    out += "  (rankscope's definitions: communication by its source, ranks on aligned clocks, ns; the HTA lines "
           "use HTA's: kernels classified by name, its window, whole µs)\n";
  }
  std::map<std::string, std::vector<int32_t>> unmeasured_waits;  // reason -> ranks
  // Ranks without a shard or trace have nothing to show: they are counted once.
  size_t shown = 0, missing = 0, present = 0;
  for (const RankProfile& r : job.ranks) (r.status == RankStatus::kMissing ? missing : present) += 1;
  for (size_t i = 0; i < report.overlap.size(); ++i) {
    if (job.ranks[i].status == RankStatus::kMissing) continue;
    const RankOverlap& o = report.overlap[i];
    const size_t ran = std::max<size_t>(1, std::count_if(job.ranks[i].steps.begin(), job.ranks[i].steps.end(),
                                                         [](const RankStep& s) { return s.times.begin_ns != kUnknown; }));
    if (shown == 8 && present > 10) {
      std::snprintf(line, sizeof(line), "  ... %zu more ranks (JSON and HTML list every rank)\n", present - 8);
      out += line;
      break;
    }
    ++shown;
    if (const std::string_view unmeasured = rank_unmeasured(job.ranks[i]); !unmeasured.empty()) {
      out += printf_string("  rank %-5d n/a: %s\n", o.rank, unmeasured.data());
      continue;
    }
    if (!o.comm_unmeasured.empty()) {
      out += printf_string("  rank %-5d overlap and exposed communication n/a: %s; idle %.1f %%\n", o.rank,
                           o.comm_unmeasured.c_str(), o.idle_pct);
      continue;
    }
    if (!o.wait_unmeasured.empty()) unmeasured_waits[o.wait_unmeasured].push_back(o.rank);
    std::snprintf(line, sizeof(line), "  rank %-5d overlap %6s   exposed %10s: wait %10s, transfer %10s   idle %5.1f %%\n",
                  o.rank,
                  std::isnan(o.comm_comp_overlap_pct) ? "-" : (std::to_string(std::lround(o.comm_comp_overlap_pct)) + " %").c_str(),
                  format_duration((o.comm_ns - o.overlap_ns) / static_cast<int64_t>(ran)).c_str(),
                  per_step(o.exposed_wait_ns, ran, o.wait_unmeasured).c_str(),
                  per_step(o.exposed_transfer_ns, ran, o.wait_unmeasured).c_str(), o.idle_pct);
    out += line;
    if (o.hta) out += hta_line(*o.hta);
  }
  for (const auto& [reason, ranks] : unmeasured_waits) {
    out += "  wait and transfer n/a (rank" + std::string(ranks.size() > 1 ? "s " : " ") + format_rank_list(ranks) +
           "): " + reason + ", so waiting for the last rank cannot be told from transfer\n";
  }
  if (missing > 0) {
    std::snprintf(line, sizeof(line), "  (%zu rank%s missing: no data)\n", missing, missing == 1 ? "" : "s");
    out += line;
  }

  const BucketReport& b = report.buckets;
  if (!b.unmeasured.empty()) out += "\nDDP buckets and FSDP units: n/a: " + b.unmeasured + "\n";
  if (b.ddp) {
    std::string sizes = b.sizes_unmeasured.empty() ? "" : "sizes n/a: " + b.sizes_unmeasured;
    for (const BucketStats& bucket : b.buckets) {
      if (b.sizes_unmeasured.empty()) sizes += (sizes.empty() ? "" : ", ") + format_bytes(bucket.bytes);
    }
    const std::string tail =
        b.tail_unmeasured.empty() ? format_duration(b.exposed_tail_ns) + " per step" : "n/a (" + b.tail_unmeasured + ")";
    std::snprintf(line, sizeof(line), "\nDDP buckets: %zu (%s); exposed tail after backward %s\n", b.buckets.size(),
                  sizes.c_str(), tail.c_str());
    out += line;
    if (b.sizes_unmeasured.empty()) {
      std::snprintf(line, sizeof(line), "  alpha-beta fit: %.1f us + %.3f ns/byte (R^2 %.2f, %d collectives)\n",
                    b.fit.alpha_ns * 1e-3, b.fit.ns_per_byte, b.fit.r_squared, b.fit.samples);
      out += line;
    }
    if (!b.recommendation.empty()) out += "  " + b.recommendation + "\n";
    if (b.predicted_by == "replay") {
      out += "  (predicted by replaying " + std::to_string(b.replayed_steps) +
             (b.replayed_steps == 1 ? " walked step" : " walked steps") + " with the buckets regrouped" +
             (b.replay_left_out.empty() ? "" : "; " + b.replay_left_out) + ")\n";
    } else if (b.predicted_by == "model" && !b.replay_unmeasured.empty()) {
      out += "  (predicted by the backward model; the replay: n/a: " + b.replay_unmeasured + ")\n";
    }
  }
  if (b.fsdp) {
    std::snprintf(line, sizeof(line), "\nFSDP units: %zu; %s\n", b.units.size(), b.prefetch_note.c_str());
    out += line;
  }

  const std::vector<CollectiveGroup> groups = collective_groups(job);
  if (job.collectives.empty()) {
    out += "\ncollectives: n/a: " + collectives_unmeasured(job) + "\n";
  } else {
    std::snprintf(line, sizeof(line), "\ncollectives: %zu instances matched across ranks\n", job.collectives.size());
    out += line;
  }
  for (size_t i = 0; i < groups.size() && i < 5; ++i) {
    const CollectiveGroup& g = groups[i];
    std::snprintf(line, sizeof(line), "  %-4s %-14s x%-6llu on %u ranks, median %s, skew median %s, transfer median %s\n",
                  source_name(g.source), std::string(comm_op_name(g.op)).c_str(),
                  static_cast<unsigned long long>(g.count), g.ranks,
                  format_bytes(median_ns(g.bytes)).c_str(), median_text(g.skew, arrivals_unmeasured(job, g)).c_str(),
                  median_text(g.transfer, transfer_unmeasured(g)).c_str());
    out += line;
  }
  if (const std::string memory = peak_memory_summary(report.ends); !memory.empty()) out += "\n" + memory + "\n";
  if (!report.capture_cost.empty()) {
    out += "\ncapture cost (time each rank's process spent on capture; calls estimated):\n";
    const CaptureCost& worst = largest_share(report.capture_cost);
    for (size_t i = 0; i < report.capture_cost.size(); ++i) {
      const CaptureCost& c = report.capture_cost[i];
      if (i == 8 && report.capture_cost.size() > 10) {
        std::snprintf(line, sizeof(line), "  ... %zu more ranks; the largest share is rank %d's, %.2f %%\n",
                      report.capture_cost.size() - 8, worst.rank, worst.share_pct());
        out += line;
        break;
      }
      const std::string hook =
          c.python_hook_ns > 0 ? "; Python hook " + format_duration(c.python_hook_ns) + " (measured)" : "";
      std::string polls;
      if (c.polls_counted > 0)
        polls = ", " + std::to_string(c.polls_counted) + " polls counted " +
                (c.polls_unmeasured.empty() ? "~" + format_duration(c.polls_ns) : "n/a (" + c.polls_unmeasured + ")");
      std::snprintf(line, sizeof(line),
                    "  rank %-5d %s of %s (%.2f %%): start %s, MPI_Init %s, MPI_Finalize %s, last flush %s, "
                    "writer thread %s CPU, %llu calls ~%s%s; buffers %s%s\n",
                    c.rank, format_duration(c.total_ns()).c_str(), format_duration(c.capture_ns).c_str(), c.share_pct(),
                    format_duration(c.start_ns).c_str(), format_duration(c.mpi_init_ns).c_str(),
                    format_duration(c.mpi_finalize_ns).c_str(), format_duration(c.finish_ns).c_str(),
                    format_duration(c.flusher_cpu_ns).c_str(), static_cast<unsigned long long>(c.host_events),
                    format_duration(c.events_ns).c_str(), polls.c_str(), format_bytes(c.buffer_bytes).c_str(),
                    hook.c_str());
      out += line;
    }
  }
  return out;
}

}  // namespace rankscope::analysis
