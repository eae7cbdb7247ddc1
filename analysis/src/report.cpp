// `rankscope report`: the analyses of one timeline, as text, JSON or HTML,
// and the matched collectives written back into the timeline.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "report_sections.h"
#include "rankscope/analysis/analysis.h"
#include "rankscope/model/format.h"
#include "rankscope/model/json.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/text.h"
#include "rankscope/timeline/collectives.h"
#include "report_sections.h"

namespace rankscope::analysis {
namespace {

// Each rank's step durations, over the steps it ran.
std::vector<int64_t> step_durations(const JobProfile& job) {
  std::vector<int64_t> out;
  for (const RankProfile& rank : job.ranks) {
    for (const RankStep& s : rank.steps) {
      if (s.times.begin_ns != kUnknown) out.push_back(s.times.duration());
    }
  }
  return out;
}

// Collectives grouped by (source, operation, communicator).
struct CollectiveGroup {
  CollectiveSource source;
  CommOp op;
  uint64_t comm_hash;
  uint64_t count = 0;
  uint32_t ranks = 0;
  std::vector<int64_t> bytes, skew, transfer, wait;
};

std::vector<CollectiveGroup> collective_groups(const JobProfile& job) {
  std::map<std::tuple<int, int, uint64_t>, CollectiveGroup> groups;
  for (const CollectiveInstance& c : job.collectives) {
    auto& g = groups[{static_cast<int>(c.source), static_cast<int>(c.op), c.comm_hash}];
    g.source = c.source;
    g.op = c.op;
    g.comm_hash = c.comm_hash;
    ++g.count;
    g.ranks = std::max(g.ranks, static_cast<uint32_t>(c.ranks.size()));
    g.bytes.push_back(static_cast<int64_t>(c.bytes));
    g.skew.push_back(c.arrival_skew_ns());
    if (const int64_t x = c.transfer_ns(); x != kUnknown) g.transfer.push_back(x);
    for (const Participation& p : c.ranks) g.wait.push_back(p.wait_ns);
  }
  std::vector<CollectiveGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const CollectiveGroup& a, const CollectiveGroup& b) { return a.count > b.count; });
  return out;
}

const char* source_name(CollectiveSource source) {
  switch (source) {
    case CollectiveSource::kNccl: return "NCCL";
    case CollectiveSource::kTorch: return "c10d";
    case CollectiveSource::kMpi: break;
  }
  return "MPI";
}

// Why a group's arrival skew and waits are not measured; empty when they are.
std::string arrivals_unmeasured(const JobProfile& job, const CollectiveGroup& g) {
  if (g.ranks < 2) return "its instances were matched with no other rank";
  return job.clock_corrected ? "" : kClocksNotAlignedReason;
}

// Why a group's transfer is not measured; empty when it is.
std::string transfer_unmeasured(const CollectiveGroup& g) {
  return g.transfer.empty() ? "no instance's execution time is known" : "";
}

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

// A rank's split over its steps: each category's ns and share of the whole
// (null with why where not measured).
void write_split_json(JsonWriter& json, const RankBreakdown& b, const StepSplit& split) {
  json.begin_object();
  for (int c = 0; c < kStepCategoryCount; ++c) {
    const auto category = static_cast<StepCategory>(c);
    const std::string& unmeasured = b.category_unmeasured[c];
    json.key(step_category_key(category)).begin_object().figure("ns", split.ns[c], unmeasured);
    json.figure("pct", split.total_ns > 0 ? 100.0 * static_cast<double>(split.ns[c]) / split.total_ns : 0.0,
                unmeasured);
    if (category == StepCategory::kCommunication) {
      const std::string& split_unmeasured = unmeasured.empty() ? b.split_unmeasured : unmeasured;
      json.figure("wait_ns", split.comm_wait_ns, split_unmeasured);
      json.figure("transfer_ns", split.comm_transfer_ns, split_unmeasured);
    }
    json.end_object();
  }
  json.end_object();
}

// One step's split, compact: each category's ns, null where the rank's
// categories say why.
void write_step_split_json(JsonWriter& json, const RankBreakdown& b, const StepSplit& split) {
  json.begin_object();
  const auto number = [&](const std::string& key, int64_t ns, const std::string& unmeasured) {
    json.key(key);
    unmeasured.empty() ? json.value(ns) : json.null();
  };
  for (int c = 0; c < kStepCategoryCount; ++c) {
    const auto category = static_cast<StepCategory>(c);
    number(step_category_key(category), split.ns[c], b.category_unmeasured[c]);
    if (category == StepCategory::kCommunication) {
      const std::string& unmeasured = b.category_unmeasured[c].empty() ? b.split_unmeasured : b.category_unmeasured[c];
      number("communication_wait", split.comm_wait_ns, unmeasured);
      number("communication_transfer", split.comm_transfer_ns, unmeasured);
    }
  }
  json.end_object();
}

void write_breakdown_json(JsonWriter& json, const Report& report) {
  const JobProfile& job = report.profile;
  json.key("breakdown").begin_array();
  for (const RankBreakdown& b : report.breakdown) {
    json.begin_object().key("rank").value(b.rank);
    if (!b.unmeasured.empty()) {
      json.key("categories").null().key("categories_reason").value(b.unmeasured).end_object();
      continue;
    }
    json.key("step_ns").value(b.total.total_ns).key("categories");
    write_split_json(json, b, b.total);
    json.key("steps").begin_array();
    for (size_t s = 0; s < b.steps.size(); ++s) {
      if (!b.steps[s]) continue;
      json.begin_object().key("step").value(job.step_numbers[s]).key("step_ns").value(b.steps[s]->total_ns);
      json.key("ns");
      write_step_split_json(json, b, *b.steps[s]);
      json.end_object();
    }
    json.end_array().end_object();
  }
  json.end_array();
}

}  // namespace

void write_clock_json(JsonWriter& json, int32_t rank, RankStatus status, const RankClock& clock) {
  const std::string unmeasured = status == RankStatus::kMissing ? kNoDataReason
                                 : clock.synced                ? ""
                                                               : "not synchronised: the rank keeps its own clock";
  json.key("rank").value(rank).key("status").value(rank_status_name(status)).key("synced").value(clock.synced);
  json.figure("offset_ns", clock.offset_ns, unmeasured).figure("drift_ppm", clock.drift_ppm, unmeasured);
  json.figure("bound_ns", clock.bound_ns, unmeasured);
}

void write_clock_reference_json(JsonWriter& json, bool corrected, std::optional<int32_t> reference) {
  json.key("corrected").value(corrected);
  const std::string unmeasured = !corrected  ? "clocks not corrected: each rank keeps its own"
                                 : reference ? ""
                                             : "the times are on " + clock_reference_text(reference);
  json.figure("reference_rank", reference.value_or(-1), unmeasured);
}

Report make_report(const Timeline& timeline, const ReportOptions& options, const WorkShare& share) {
  Report report;
  report.profile = build_profile(timeline, share);
  report.breakdown = step_breakdown(report.profile);
  report.overlap = overlap_by_rank(report.profile);
  if (options.hta_compat) {
    const std::vector<std::optional<HtaFigures>> hta = hta_figures(timeline);
    for (size_t r = 0; r < report.overlap.size(); ++r) report.overlap[r].hta = hta[r];
  }
  report.stragglers = find_stragglers(report.profile);
  report.buckets = analyze_buckets(report.profile, report.overlap);
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

void write_damage_json(JsonWriter& json, const TimelineDamage& damage) {
  if (damage.empty()) {
    json.null();
    return;
  }
  json.begin_object().key("rows_left_out").begin_object();
  for (const auto& [dataset, rows] : damage.rows_left_out) json.key(dataset).value(rows);
  json.end_object().key("findings").begin_array();
  for (const TimelineDamage::Finding& f : damage.findings) {
    json.begin_object().key("dataset").value(f.dataset).key("row").value(f.row).key("rows").value(f.rows);
    json.key("field").value(f.field).key("problem").value(f.problem).end_object();
  }
  json.end_array().end_object();
}

void write_collectives_table(const std::string& timeline_path, const JobProfile& job) {
  std::vector<CollectiveRow> instances;
  std::vector<ParticipantRow> participants;
  instances.reserve(job.collectives.size());
  for (const CollectiveInstance& c : job.collectives) {
    instances.push_back({c.comm_hash, c.seq, c.bytes, participants.size(), static_cast<uint32_t>(c.ranks.size()),
                         c.name_id, c.step, c.op, static_cast<uint8_t>(c.source), c.nonblocking, c.datatype,
                         c.algorithm, c.protocol});
    for (const Participation& p : c.ranks) {
      participants.push_back({p.rank, p.enqueue_ns, p.arrival_ns, p.start_ns, p.end_ns, p.wait_ns, p.exposed_wait_ns,
                              p.exposed_transfer_ns});
    }
  }
  write_collectives(timeline_path, instances, participants);
}

// One unfinished collective: who was inside and for how long, and what each
// rank that never came was doing.
std::string describe_hang(const Hang& h) {
  const auto ranges_text = [](const std::vector<std::string>& ranges) {
    std::string text;
    for (const std::string& range : ranges) text += (text.empty() ? "; in ranges " : " > ") + range;
    return text;
  };
  std::vector<int32_t> entered;
  int64_t written_ns = 0, longest_ns = 0, first_entered_ns = INT64_MAX;
  for (const HangEntry& e : h.entered) {
    entered.push_back(e.rank);
    first_entered_ns = std::min(first_entered_ns, e.since_ns);
    written_ns = std::max(written_ns, e.since_ns + e.waited_ns);
    longest_ns = std::max(longest_ns, e.waited_ns);
  }
  std::sort(entered.begin(), entered.end());
  const bool sends = h.op == CommOp::kSend;
  const std::string peer = !h.point_to_point    ? std::string()
                           : h.peer == kNoPeer ? (sends ? " to a rank" : " from a rank")
                                               : (sends ? " to rank " : " from rank ") + std::to_string(h.peer);
  std::string out = "HANG: " + h.call + " #" + std::to_string(h.seq) + peer + " of " +
                    (h.comm.empty() ? "an unknown communicator" : h.comm) + ": rank" + (entered.size() > 1 ? "s " : " ") +
                    format_rank_list(entered) + " inside, up to " + format_duration(longest_ns) + "; ";
  if (h.point_to_point) {
    if (h.missing_ranks.empty()) {
      const bool peer_inside =
          std::any_of(h.entered.begin(), h.entered.end(), [&](const HangEntry& e) { return e.rank == h.peer; });
      return out + (peer_inside ? "rank " + std::to_string(h.peer) + " is inside the matching " +
                                      (sends ? "receive" : "send") + ": the transfer itself did not complete\n"
                    : h.members_known ? "its peer is itself\n"
                                      : "its peer is not in the timeline\n");
    }
  } else if (h.missing_ranks.empty()) {
    out += h.members_known ? "every member entered\n" : "the communicator's other members are not known\n";
    return out;
  }
  if (h.point_to_point) {
    out += "rank " + std::to_string(h.peer) + " had not begun the matching " + (sends ? "receive" : "send") + "\n";
  } else {
    out += "had not entered: rank" + std::string(h.missing_ranks.size() > 1 ? "s " : " ") +
           format_rank_list(h.missing_ranks) + (h.members_known ? "" : " (of the members known)") + "\n";
  }
  for (size_t i = 0; i < h.missing.size() && i < 4; ++i) {
    const MissingRank& m = h.missing[i];
    // "crashed with SIGSEGV …" says the status too.
    const std::string how = m.killed.empty() ? m.status : m.status == "crashed" ? m.killed : m.status + ", " + m.killed;
    out += "  rank " + std::to_string(m.rank) + " (" + how +
           (m.wrote_state ? ", wrote its state" : ", state not written") +
           "): " + (m.inside.empty() ? "in no collective" : "inside " + m.inside) +
           ranges_text(m.open_ranges) +
           (m.last_call.empty() ? "; no call recorded"
                                : "; last call " + m.last_call + " ended " +
                                      format_duration(written_ns - m.last_call_end_ns) + " before the state was written") +
           (m.entered_at_ns != 0 ? "; entered " + format_duration(m.entered_at_ns - first_entered_ns) + " after the first rank"
                                 : std::string()) +
           "\n";
  }
  if (h.missing.size() > 4) out += "  ... " + std::to_string(h.missing.size() - 4) + " more\n";
  return out;
}

// A cycle of ranks waiting for each other's messages, and each one's call.
std::string describe_deadlock(const Deadlock& d) {
  std::string cycle;
  int64_t longest_ns = 0;
  for (const MessageWait& w : d.waits) {
    cycle += std::to_string(w.rank) + " > ";
    longest_ns = std::max(longest_ns, w.waited_ns);
  }
  std::string out = "DEADLOCK: rank" + std::string(d.waits.size() > 1 ? "s " : " ") + cycle +
                    std::to_string(d.waits.front().rank) + " each wait for the next, up to " +
                    format_duration(longest_ns) + "\n";
  for (const MessageWait& w : d.waits) {
    out += "  rank " + std::to_string(w.rank) + ": inside " + w.inside + " for " + format_duration(w.waited_ns) + "\n";
  }
  return out;
}

std::string describe_steps_cut(const JobProfile& job) {
  constexpr size_t kStepsNamed = 4;
  std::string out;
  for (size_t i = 0; i < job.steps_cut.size() && i < kStepsNamed; ++i) {
    const StepCut& cut = job.steps_cut[i];
    out += (i > 0 ? "; step " : "step ") + std::to_string(cut.step) + " on rank" + (cut.ranks.size() > 1 ? "s " : " ") +
           format_rank_list(cut.ranks);
  }
  if (job.steps_cut.size() > kStepsNamed) out += "; " + std::to_string(job.steps_cut.size() - kStepsNamed) + " more steps";
  return out + ": " + (job.steps_cut.size() > 1 ? "they" : "it") +
         " lay partly outside those ranks' windows, where nothing was recorded; their figures there are n/a and left "
         "out";
}

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
    std::snprintf(line, sizeof(line), "\nDDP buckets: %zu (%s); exposed tail after backward %s per step\n",
                  b.buckets.size(), sizes.c_str(), format_duration(b.exposed_tail_ns).c_str());
    out += line;
    if (b.sizes_unmeasured.empty()) {
      std::snprintf(line, sizeof(line), "  alpha-beta fit: %.1f us + %.3f ns/byte (R^2 %.2f, %d collectives)\n",
                    b.fit.alpha_ns * 1e-3, b.fit.ns_per_byte, b.fit.r_squared, b.fit.samples);
      out += line;
    }
    if (!b.recommendation.empty()) out += "  " + b.recommendation + "\n";
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
      std::snprintf(line, sizeof(line),
                    "  rank %-5d %s of %s (%.2f %%): start %s, MPI_Init %s, MPI_Finalize %s, last flush %s, "
                    "writer thread %s CPU, %llu calls ~%s; buffers %s%s\n",
                    c.rank, format_duration(c.total_ns()).c_str(), format_duration(c.capture_ns).c_str(), c.share_pct(),
                    format_duration(c.start_ns).c_str(), format_duration(c.mpi_init_ns).c_str(),
                    format_duration(c.mpi_finalize_ns).c_str(), format_duration(c.finish_ns).c_str(),
                    format_duration(c.flusher_cpu_ns).c_str(), static_cast<unsigned long long>(c.host_events),
                    format_duration(c.events_ns).c_str(), format_bytes(c.buffer_bytes).c_str(), hook.c_str());
      out += line;
    }
  }
  return out;
}

void write_hangs_json(JsonWriter& json, const std::vector<Hang>& hangs) {
  json.begin_array();
  for (const Hang& h : hangs) {
    json.begin_object().key("call").value(h.call).key("op").value(comm_op_name(h.op));
    json.key("comm_hash").value(h.comm_hash).key("comm").value(h.comm).key("seq").value(h.seq);
    json.key("point_to_point").value(h.point_to_point).key("peer");
    if (h.point_to_point && h.peer != kNoPeer) json.value(h.peer);
    else json.null();
    json.key("entered").begin_array();
    for (const HangEntry& e : h.entered) {
      json.begin_object().key("rank").value(e.rank).key("since_ns").value(e.since_ns).key("waited_ns").value(e.waited_ns);
      json.end_object();
    }
    json.end_array().key("missing_ranks").begin_array();
    for (const int32_t r : h.missing_ranks) json.value(r);
    json.end_array().key("members_known").value(h.members_known).key("missing").begin_array();
    for (const MissingRank& m : h.missing) {
      json.begin_object().key("rank").value(m.rank).key("status").value(m.status).key("wrote_state").value(m.wrote_state);
      json.key("killed");
      if (m.killed.empty()) json.null();
      else json.value(m.killed);
      json.key("inside").value(m.inside).key("open_ranges").begin_array();
      for (const std::string& range : m.open_ranges) json.value(range);
      json.end_array().key("last_call").value(m.last_call);
      json.key("last_call_end_ns").value(m.last_call_end_ns);
      if (m.entered_at_ns != 0) json.key("entered_at_ns").value(m.entered_at_ns);
      else json.key("entered_at_ns").null();
      json.end_object();
    }
    json.end_array().end_object();
  }
  json.end_array();
}

void write_deadlocks_json(JsonWriter& json, const std::vector<Deadlock>& deadlocks) {
  json.begin_array();
  for (const Deadlock& d : deadlocks) {
    json.begin_object().key("waits").begin_array();
    for (const MessageWait& w : d.waits) {
      json.begin_object().key("rank").value(w.rank).key("peer").value(w.peer).key("inside").value(w.inside);
      json.key("since_ns").value(w.since_ns).key("waited_ns").value(w.waited_ns).end_object();
    }
    json.end_array().end_object();
  }
  json.end_array();
}

// Inside a rank's object: `ended_early`, `killed`, `crashed` and `process`, each null where not recorded.
void write_rank_end_json(JsonWriter& json, const RankEnd& end) {
  json.key("stopped");
  if (end.stopped_by_signal > 0) {
    json.begin_object().key("signal").value(int64_t{end.stopped_by_signal}).key("ns").value(end.stopped_ns).end_object();
  } else {
    json.null();
  }
  json.key("ended_early");
  if (const std::string early = describe_early_end(end); !early.empty()) {
    json.begin_object().key("exit_status");
    if (end.exit_status) json.value(int64_t{*end.exit_status});
    else json.null();
    json.key("mpi_abort_code");
    if (end.mpi_abort_code) json.value(int64_t{*end.mpi_abort_code});
    else json.null();
    json.key("signal");
    if (end.terminating_signal > 0) json.value(int64_t{end.terminating_signal});
    else json.null();
    json.key("text").value(early).end_object();
  } else {
    json.null();
  }
  json.key("killed");
  if (end.killed_by_signal > 0) {
    json.begin_object().key("signal").value(int64_t{end.killed_by_signal}).key("oom_kills").value(end.oom_kills);
    json.key("text").value(describe_fatal_signal(end)).end_object();
  } else {
    json.null();
  }
  json.key("crashed");
  if (end.crash) {
    json.begin_object().key("signal").value(int64_t{end.crash->signal}).key("code").value(int64_t{end.crash->code});
    json.key("address").value(end.crash->address).key("thread").value(end.crash->thread);
    json.key("where").value(end.crash->where);
    json.key("text").value(describe_fatal_signal(end)).end_object();
  } else {
    json.null();
  }
  json.key("process");
  if (!end.usage) {
    json.null();
    return;
  }
  const ProcessUsage& u = *end.usage;
  json.begin_object().key("peak_rss_bytes").value(u.peak_rss_bytes).key("user_cpu_ns").value(u.user_cpu_ns);
  json.key("system_cpu_ns").value(u.system_cpu_ns).key("involuntary_switches").value(u.involuntary_switches);
  json.key("major_faults").value(u.major_faults).end_object();
}

std::string report_json(const Report& report) {
  const JobProfile& job = report.profile;
  JsonWriter json;
  json.begin_object();
  json.key("file").value(job.path).key("world_size").value(job.world_size).key("gpu").value(job.gpu);
  json.key("damage");
  write_damage_json(json, report.damage);
  json.key("lost_events").begin_array();
  for (const EventLoss& loss : report.losses) {
    json.begin_object().key("rank").value(loss.rank).key("events").value(loss.events()).key("counters").begin_object();
    for (const auto& [name, n] : loss.counted) json.key(name).value(n);
    json.end_object().end_object();
  }
  json.end_array();
  json.key("hangs");
  write_hangs_json(json, report.hangs);
  json.key("deadlocks");
  write_deadlocks_json(json, report.deadlocks);
  const std::vector<int64_t> steps = step_durations(job);
  json.key("steps").begin_object().key("numbers").begin_array();
  for (uint64_t n : job.step_numbers) json.value(n);
  const char* no_step_times = steps.empty() ? kNoStepTimesReason : "";
  json.end_array().figure("mean_step_ns", mean_ns(steps), no_step_times);
  json.figure("median_step_ns", median_ns(steps), no_step_times);
  json.key("are_capture_windows").value(job.steps_are_windows).key("windowed_ranks").begin_array();
  for (const int32_t r : job.windowed_ranks) json.value(r);
  json.end_array().key("cut").begin_array();
  for (const StepCut& cut : job.steps_cut) {
    json.begin_object().key("step").value(cut.step).key("ranks").begin_array();
    for (const int32_t r : cut.ranks) json.value(r);
    json.end_array().key("reason").value(kStepCutReason).end_object();
  }
  json.end_array().end_object();

  json.key("ranks").begin_array();
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    const RankProfile& rank = job.ranks[r];
    json.begin_object().key("rank").value(rank.rank).key("host").value(rank.host).key("node_id").value(rank.node_id);
    json.key("status").value(rank_status_name(rank.status));
    write_rank_end_json(json, report.ends.at(r));
    if (rank.status == RankStatus::kMissing) {
      json.key("scores").null().key("scores_reason").value(kNoDataReason);
    } else if (r < report.stragglers.ranks.size()) {
      const RankScores& s = report.stragglers.ranks[r];
      const std::string& arrivals = rank.arrivals_unmeasured;
      json.key("scores").begin_object();
      json.figure("last_arriver_rate", s.last_arriver_rate, arrivals).figure("baseline_rate", s.baseline_rate, arrivals);
      json.figure("blame_ns", s.blame_ns, arrivals).figure("mean_wait_ns", s.mean_wait_ns, arrivals);
      json.figure("compute_score_relative", s.compute_score_relative, report.stragglers.unmeasured);
      json.key("compute_score_individual").value(s.compute_score_individual);
      json.key("median_compute_ns").value(s.median_compute_ns).end_object();
    }
    const std::string& wait_unmeasured = report.overlap.at(r).wait_unmeasured;
    json.key("steps").begin_array();
    for (size_t i = 0; i < rank.steps.size(); ++i) {
      const RankStep& s = rank.steps[i];
      if (s.times.begin_ns == kUnknown) continue;
      json.begin_object().key("step").value(job.step_numbers[i]).key("begin_ns").value(s.times.begin_ns);
      json.key("duration_ns").value(s.times.duration()).key("compute_ns").value(s.compute_ns);
      json.key("comm_ns").value(s.comm_ns).key("overlap_ns").value(s.overlap_ns);
      json.figure("exposed_wait_ns", s.exposed_wait_ns, wait_unmeasured);
      json.figure("exposed_transfer_ns", s.exposed_transfer_ns, wait_unmeasured);
      json.key("idle_ns").value(s.idle_ns).end_object();
    }
    json.end_array().end_object();
  }
  json.end_array();

  write_breakdown_json(json, report);
  write_bottlenecks_json(json, report);

  if (!report.stragglers.unmeasured.empty()) {
    json.key("stragglers").null().key("stragglers_reason").value(report.stragglers.unmeasured);
  } else {
    json.key("stragglers").begin_array();
    for (const Straggler& s : report.stragglers.stragglers) {
      json.begin_object().key("rank").value(s.rank).key("score").value(s.score).key("cause").value(s.cause);
      json.key("evidence").value(s.evidence).key("last_arriver_rate").value(s.last_arriver_rate);
      json.key("baseline_rate").value(s.baseline_rate).key("blame_ns").value(s.blame_ns);
      json.key("blame_fraction").value(s.blame_fraction);
      json.key("compute_score_relative").value(s.compute_score_relative);
      json.key("compute_score_individual").value(s.compute_score_individual);
      json.key("what_if_step_ns").value(s.what_if_step_ns).key("actual_step_ns").value(s.actual_step_ns).end_object();
    }
    json.end_array();
  }

  json.key("overlap").begin_array();
  for (size_t r = 0; r < report.overlap.size(); ++r) {
    const RankOverlap& o = report.overlap[r];
    const std::string no_data = rank_unmeasured(job.ranks.at(r));
    const auto unless_missing = [&](const std::string& reason) { return no_data.empty() ? reason : no_data; };
    json.begin_object().key("rank").value(o.rank).key("status").value(rank_status_name(o.status));
    const std::string comm_unmeasured = unless_missing(o.comm_unmeasured);
    json.figure("comm_comp_overlap_pct", o.comm_comp_overlap_pct,
                !comm_unmeasured.empty() ? comm_unmeasured
                                         : unless_missing(std::isnan(o.comm_comp_overlap_pct) ? "no communication" : ""));
    json.figure("compute_ns", o.compute_ns, no_data).figure("comm_ns", o.comm_ns, comm_unmeasured);
    json.figure("overlap_ns", o.overlap_ns, comm_unmeasured)
        .figure("exposed_comm_ns", o.comm_ns - o.overlap_ns, comm_unmeasured);
    json.figure("exposed_wait_ns", o.exposed_wait_ns, unless_missing(o.wait_unmeasured));
    json.figure("exposed_transfer_ns", o.exposed_transfer_ns, unless_missing(o.wait_unmeasured));
    json.figure("idle_ns", o.idle_ns, no_data).figure("idle_pct", o.idle_pct, no_data);
    if (o.hta) {
      const std::string no_gpu_events = o.hta->kernel_time_ns == 0 ? "no GPU event in HTA's window" : "";
      json.key("hta").begin_object();
      json.figure("comm_comp_overlap_pct", o.hta->comm_comp_overlap_pct,
                  std::isnan(o.hta->comm_comp_overlap_pct) ? "no communication kernel by HTA's name rules" : "");
      json.figure("kernel_time_ns", o.hta->kernel_time_ns, no_gpu_events);
      json.figure("idle_pct", o.hta->idle_pct, no_gpu_events).figure("compute_pct", o.hta->compute_pct, no_gpu_events);
      json.figure("non_compute_pct", o.hta->non_compute_pct, no_gpu_events);
      json.key("idle_breakdown").begin_array();
      for (const HtaStreamIdle& idle : o.hta->idle_breakdown) {
        json.begin_object().key("stream").value(idle.stream).key("host_wait_ns").value(idle.host_wait_ns);
        json.key("kernel_wait_ns").value(idle.kernel_wait_ns).key("other_ns").value(idle.other_ns).end_object();
      }
      json.end_array().key("kernel_breakdown").begin_array();
      for (const HtaKernelType& type : o.hta->kernel_breakdown) {
        json.begin_object().key("kernel_type").value(type.kernel_type).key("sum_ns").value(type.sum_ns).end_object();
      }
      const HtaLaunchStats& launches = o.hta->launch_stats;
      json.end_array().key("launch_stats").begin_object().key("events").value(launches.events);
      json.key("short_kernels").value(launches.short_kernels).key("runtime_outliers").value(launches.runtime_outliers);
      json.key("launch_delay_outliers").value(launches.launch_delay_outliers).end_object().end_object();
    }
    json.end_object();
  }
  json.end_array();

  const BucketReport& b = report.buckets;
  json.key("buckets").begin_object().figure("ddp", b.ddp, b.unmeasured).figure("fsdp", b.fsdp, b.unmeasured);
  json.key("buckets").begin_array();
  for (const BucketStats& bucket : b.buckets) {
    json.begin_object().key("index").value(bucket.index).figure("bytes", bucket.bytes, b.sizes_unmeasured);
    json.key("transfer_ns").value(bucket.transfer_ns).figure("bus_bandwidth_gbps", bucket.bus_bandwidth_gbps,
                                                             b.sizes_unmeasured);
    json.key("algorithm").value(algorithm_name(bucket.algorithm));
    json.figure("overlap_pct", bucket.overlap_pct, std::isnan(bucket.overlap_pct) ? "no time in flight is known" : "");
    json.key("exposed_ns").value(bucket.exposed_ns).end_object();
  }
  json.end_array().key("exposed_tail_ns").value(b.exposed_tail_ns);
  json.key("fit").begin_object().key("alpha_ns").value(b.fit.alpha_ns).key("ns_per_byte").value(b.fit.ns_per_byte);
  json.figure("r_squared", b.fit.r_squared,
              std::isnan(b.fit.r_squared) ? "fewer than two distinct sizes: latency and bandwidth cannot be told apart" : "");
  json.key("samples").value(static_cast<int64_t>(b.fit.samples)).end_object();
  json.key("predictions").begin_array();
  for (const BucketPrediction& p : b.predictions) {
    json.begin_object().key("bucket_bytes").value(p.bucket_bytes).key("step_ns").value(p.step_ns).end_object();
  }
  json.end_array().key("recommended_bucket_bytes").value(b.recommended_bucket_bytes);
  json.key("recommendation").value(b.recommendation).key("units").begin_array();
  for (const BucketReport::Unit& u : b.units) {
    json.begin_object().key("index").value(u.index).figure("allgather_bytes", u.allgather_bytes, b.sizes_unmeasured);
    json.figure("reduce_scatter_bytes", u.reduce_scatter_bytes, b.sizes_unmeasured);
    json.key("allgather_exposed_ns").value(u.allgather_exposed_ns);
    json.key("reduce_scatter_exposed_ns").value(u.reduce_scatter_exposed_ns).end_object();
  }
  json.end_array().key("prefetch_note").value(b.prefetch_note).end_object();

  json.key("collectives_summary").begin_object();
  json.figure("instances", static_cast<uint64_t>(job.collectives.size()),
              job.collectives.empty() ? collectives_unmeasured(job) : "");
  json.key("groups").begin_array();
  for (const CollectiveGroup& g : collective_groups(job)) {
    json.begin_object().key("source").value(source_name(g.source)).key("op").value(comm_op_name(g.op));
    json.key("comm_hash").value(g.comm_hash).key("count").value(g.count).key("ranks").value(static_cast<int64_t>(g.ranks));
    const std::string arrivals = arrivals_unmeasured(job, g);
    json.key("median_bytes").value(median_ns(g.bytes)).figure("median_skew_ns", median_ns(g.skew), arrivals);
    json.figure("max_skew_ns", g.skew.empty() ? 0 : *std::max_element(g.skew.begin(), g.skew.end()), arrivals);
    json.figure("median_transfer_ns", median_ns(g.transfer), transfer_unmeasured(g));
    json.figure("median_wait_ns", median_ns(g.wait), arrivals).end_object();
  }
  json.end_array().end_object();

  json.key("capture_cost").begin_array();
  for (const CaptureCost& c : report.capture_cost) {
    json.begin_object().key("rank").value(c.rank).key("capture_ns").value(c.capture_ns);
    json.key("total_ns").value(c.total_ns()).key("share_pct").value(c.share_pct());
    json.key("start_ns").value(c.start_ns).key("mpi_init_ns").value(c.mpi_init_ns);
    json.key("mpi_finalize_ns").value(c.mpi_finalize_ns).key("finish_ns").value(c.finish_ns);
    json.key("flusher_cpu_ns").value(c.flusher_cpu_ns).key("host_events").value(c.host_events);
    json.key("events_ns").value(c.events_ns).key("buffer_bytes").value(c.buffer_bytes);
    json.key("python_hook_ns").value(c.python_hook_ns).end_object();
  }
  json.end_array();

  json.key("clock").begin_object();
  write_clock_reference_json(json, job.clock_corrected, job.clock_reference);
  json.key("ranks").begin_array();
  for (size_t r = 0; r < job.clocks.size(); ++r) {
    json.begin_object();
    write_clock_json(json, job.ranks[r].rank, job.ranks[r].status, job.clocks[r]);
    json.end_object();
  }
  json.end_array().end_object();
  json.end_object();
  return json.str() + "\n";
}

}  // namespace rankscope::analysis
