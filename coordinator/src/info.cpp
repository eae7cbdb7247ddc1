#include "rankscope/coordinator/info.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "rankscope/analysis/capture_cost.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/analysis/report.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/format.h"
#include "rankscope/model/json.h"
#include "rankscope/model/text.h"

namespace rankscope {
namespace {

struct JobSummary {
  int64_t first_ns = INT64_MAX;
  int64_t last_ns = INT64_MIN;
  std::vector<uint64_t> by_kind = std::vector<uint64_t>(kEventKindCount, 0);
  std::vector<int32_t> missing, dead, terminated, aborted, crashed, exited;

  JobIdentity job;  // each part as the lowest rank that knows it says (the merge let no rank contradict it)

  int64_t span_ns() const { return first_ns <= last_ns ? last_ns - first_ns : 0; }
};

JobSummary summarize(const Timeline& timeline, const EventsRead& events_read) {
  JobSummary job;
  for (const RankInfo& rank : timeline.ranks()) {
    if (rank.status == RankStatus::kMissing) job.missing.push_back(rank.rank);
    if (rank.status == RankStatus::kDead) job.dead.push_back(rank.rank);
    if (rank.status == RankStatus::kTerminated) job.terminated.push_back(rank.rank);
    if (rank.status == RankStatus::kAborted) job.aborted.push_back(rank.rank);
    if (rank.status == RankStatus::kCrashed) job.crashed.push_back(rank.rank);
    if (rank.status == RankStatus::kExited) job.exited.push_back(rank.rank);
    if (rank.event_count > 0) {
      job.first_ns = std::min(job.first_ns, rank.first_ns);
      job.last_ns = std::max(job.last_ns, rank.last_ns);
    }
    const std::vector<uint64_t>& by_kind =
        events_read ? events_read->at(static_cast<size_t>(rank.rank)).by_kind : rank.events_by_kind;
    for (size_t k = 0; k < by_kind.size(); ++k) job.by_kind[k] += by_kind[k];
    if (job.job.id.empty()) job.job.id = rank.job.id;
    if (job.job.start_wall_ns == 0) job.job.start_wall_ns = rank.job.start_wall_ns;
  }
  return job;
}

// Every event, when they were not read.
uint64_t total_read(const EventsRead& events_read, const Timeline& timeline) {
  if (!events_read) return timeline.event_count();
  uint64_t total = 0;
  for (const EventsReadOfRank& rank : *events_read) total += rank.events();
  return total;
}

// The windowed ranks' capture windows, ranks with as many windows together:
// one line each, with the least and most time they held.
std::string capture_windows_text(const Timeline& timeline) {
  struct Group {
    std::vector<int32_t> ranks;
    int64_t least_ns = INT64_MAX, most_ns = 0;
  };
  std::map<size_t, Group> by_count;
  for (const RankInfo& rank : timeline.ranks()) {
    if (!rank.capture_windowed) continue;
    int64_t held = 0;
    for (const auto& [from, until] : rank.capture_windows) held += until - from;
    Group& group = by_count[rank.capture_windows.size()];
    group.ranks.push_back(rank.rank);
    group.least_ns = std::min(group.least_ns, held);
    group.most_ns = std::max(group.most_ns, held);
  }
  if (by_count.empty()) return "";
  std::string out = "capture windows (the spans each windowed rank recorded in full):\n";
  for (const auto& [windows, group] : by_count) {
    const auto seconds = [](int64_t ns) { return format_duration(static_cast<double>(ns)); };
    out += "  rank" + std::string(group.ranks.size() > 1 ? "s " : " ") + format_rank_list(group.ranks) + ": " +
           std::to_string(windows) + (windows == 1 ? " window, " : " windows, ") + seconds(group.least_ns) +
           (group.most_ns != group.least_ns ? " to " + seconds(group.most_ns) : "") + " in all\n";
  }
  return out;
}

}  // namespace

std::string counters_text() {
  std::string out;
  for (const counter::Definition& definition : counter::registry()) {
    out += std::string(definition.name) + "\n    " + std::string(definition.meaning) + "\n";
  }
  return out;
}

std::string info_text(const Timeline& timeline, const EventsRead& events_read) {
  const JobSummary job = summarize(timeline, events_read);
  const bool events_checked = events_read.has_value();
  std::string out;
  char line[512];
  std::string events = std::to_string(timeline.event_count()) + " events";
  if (const uint64_t damaged = timeline.event_count() - total_read(events_read, timeline); damaged > 0) {
    events += " (" + std::to_string(damaged) + " of them damaged and left out)";
  }
  std::snprintf(line, sizeof(line), "%s: %d ranks, %s over %s\n", timeline.path().c_str(), timeline.world_size(),
                events.c_str(), format_duration(job.span_ns()).c_str());
  out += line;
  out += "job: " +
         (job.job.known() ? job.job.text() : "unknown (its shards were written before rankscope recorded it)") + "\n";
  std::snprintf(line, sizeof(line), "\n%6s  %-24s %8s %12s %10s  %-9s %s\n", "rank", "host", "pid", "events", "drops",
                "status", "last heard");
  out += line;
  for (const RankInfo& rank : timeline.ranks()) {
    const std::string heard = rank.status == RankStatus::kMissing || job.first_ns > job.last_ns ? "-"
                              : rank.last_heard_ns == analysis::kUnknown
                                  ? "unknown"
                                  : "+" + format_duration(rank.last_heard_ns - job.first_ns);
    const uint64_t read = events_read ? events_read->at(static_cast<size_t>(rank.rank)).events() : rank.event_count;
    const std::string events = read == rank.event_count ? std::to_string(read)
                                                        : std::to_string(read) + " of " + std::to_string(rank.event_count);
    std::snprintf(line, sizeof(line), "%6d  %-24s %8lld %12s %10llu  %-9s %s\n", rank.rank,
                  rank.host.empty() ? "-" : rank.host.c_str(), static_cast<long long>(rank.pid), events.c_str(),
                  static_cast<unsigned long long>(rank.counters.get(counter::kEventsDropped)),
                  rank_status_name(rank.status), heard.c_str());
    out += line;
  }
  out += "\nevents by kind:\n";
  for (size_t k = 0; k < job.by_kind.size(); ++k) {
    if (job.by_kind[k] == 0) continue;
    std::snprintf(line, sizeof(line), "  %-20s %14llu\n",
                  std::string(event_kind_name(static_cast<EventKind>(k + 1))).c_str(),
                  static_cast<unsigned long long>(job.by_kind[k]));
    out += line;
  }
  out += "\nmissing ranks: " + format_rank_list(job.missing) + "\n";
  out += "dead ranks: " + format_rank_list(job.dead);
  out += job.dead.empty() ? "\n" : " (no end-of-capture record; see 'last heard')\n";
  const std::vector<analysis::RankEnd> ends = analysis::rank_ends(timeline);
  // Each rank's own line under its list: how it ended. Eight of each at most.
  const auto how_each_ended = [&](RankStatus status) {
    size_t said = 0, unsaid = 0;
    for (const analysis::RankEnd& end : ends) {
      if (end.status != status) continue;
      const std::string how = status == RankStatus::kDead || status == RankStatus::kCrashed
                                  ? analysis::describe_fatal_signal(end)
                                  : analysis::describe_early_end(end);
      if (how.empty()) continue;
      if (++said > 8) ++unsaid;
      else out += "  rank " + std::to_string(end.rank) + ": " + how + "\n";
    }
    if (unsaid > 0) out += "  ... and " + std::to_string(unsaid) + " more\n";
  };
  how_each_ended(RankStatus::kDead);
  if (!job.terminated.empty()) {
    out += "terminated ranks: " + format_rank_list(job.terminated) + " (ended by a signal, shard closed first)\n";
    how_each_ended(RankStatus::kTerminated);
  }
  if (!job.aborted.empty()) {
    out += "aborted ranks: " + format_rank_list(job.aborted) + " (called MPI_Abort, or ended by MPI or the program with _exit)\n";
    how_each_ended(RankStatus::kAborted);
  }
  if (!job.crashed.empty()) {
    out += "crashed ranks: " + format_rank_list(job.crashed) +
           " (a crash or abort() ended the process; its shard was closed first)\n";
    how_each_ended(RankStatus::kCrashed);
  }
  if (!job.exited.empty()) {
    out += "exited ranks: " + format_rank_list(job.exited) + " (ended after MPI_Init without MPI_Finalize)\n";
    how_each_ended(RankStatus::kExited);
  }

  out += capture_windows_text(timeline);

  std::string quality;
  for (const RankInfo& rank : timeline.ranks()) {
    for (const auto& [name, value] : rank.counters.entries()) {
      if (value == 0 || counter::is_cost(name) || counter::is_process_usage(name)) continue;  // shown below
      const std::string_view meaning = counter::meaning(name);
      quality += "  rank " + std::to_string(rank.rank) + ": " + name + " = " + std::to_string(value) + "  (" +
                 std::string(meaning.empty() ? "not known to this version of rankscope" : meaning) + ")\n";
      if (name == counter::kNothingCaptured) {
        quality += "    why: " + counter::nothing_captured_causes(rank.counters, rank.capture) + "\n";
      }
    }
  }
  out += "data quality: " + std::string(quality.empty() ? "no problems counted\n" : "\n" + quality);

  if (const std::string memory = analysis::peak_memory_summary(ends); !memory.empty()) {
    out += memory + " (`rankscope report` in HTML or JSON has each rank's memory and CPU)\n";
  }
  if (const std::vector<analysis::CaptureCost> costs = analysis::capture_cost(timeline); !costs.empty()) {
    const analysis::CaptureCost& worst = analysis::largest_share(costs);
    int64_t total = 0;
    for (const analysis::CaptureCost& c : costs) total += c.total_ns();
    std::snprintf(line, sizeof(line),
                  "capture cost: %.3f ms per rank on average, at most %.2f %% of a rank's run (rank %d); "
                  "`rankscope report` shows where\n",
                  static_cast<double>(total) / static_cast<double>(costs.size()) * 1e-6, worst.share_pct(), worst.rank);
    out += line;
  }

  out += timeline.clock_corrected()
             ? "\nclock: every rank on " + analysis::clock_reference_text(analysis::clock_reference(timeline)) + "\n"
             : "\nclock: not corrected (ranks without measurements keep their local clock)\n";
  std::snprintf(line, sizeof(line), "%6s  %16s %12s %10s %7s %14s\n", "rank", "offset ns", "drift ppm", "bound ns",
                "points", "repair ns");
  out += line;
  for (const RankInfo& rank : timeline.ranks()) {
    if (!rank.clock.synced) continue;
    std::snprintf(line, sizeof(line), "%6d  %16lld %12.3f %10lld %7zu %14lld\n", rank.rank,
                  static_cast<long long>(rank.clock.offset_ns), rank.clock.drift_ppm,
                  static_cast<long long>(rank.clock.bound_ns), rank.clock.points.size(),
                  static_cast<long long>(rank.clock.repair_shift_ns));
    out += line;
  }

  const TimelineDamage damage = timeline.damage();
  out += "\nintegrity: ";
  out += timeline.checksummed() ? "checksummed (CRC-32C per 16,384 events of a rank, Fletcher32 per chunk elsewhere"
                                : "no checksums of rows (written before rankscope added them";
  out += timeline.metadata_checksummed() ? ", HDF5's on its metadata); "
                                         : "; HDF5's metadata without checksums: written before file format 1.10); ";
  if (!damage.empty()) {
    out += "DAMAGED: " + damage.summary() + "\n";
    for (const TimelineDamage::Finding& finding : damage.findings) out += "  " + TimelineDamage::describe(finding) + "\n";
    if (damage.findings.size() == TimelineDamage::kFindingsKept) out += "  ...\n";
  } else {
    out += events_checked ? "every row read and valid\n"
                          : "the tables are valid; events not read (`rankscope info --check` reads them all)\n";
  }
  return out;
}

std::string info_json(const Timeline& timeline, const EventsRead& events_read) {
  const JobSummary job = summarize(timeline, events_read);
  const bool events_checked = events_read.has_value();
  JsonWriter json;
  json.begin_object();
  json.key("file").value(timeline.path());
  json.key("format_version").value(int64_t{kTimelineVersion});
  json.key("world_size").value(timeline.world_size());
  json.key("events").value(timeline.event_count());
  json.key("events_readable");
  if (events_read) json.value(total_read(events_read, timeline));
  else json.null();
  json.key("span_ns").value(job.span_ns());
  json.key("job").begin_object().key("id");
  if (job.job.id.empty()) json.null();
  else json.value(job.job.id);
  json.key("start_wall_ns");
  if (job.job.start_wall_ns == 0) json.null();
  else json.value(job.job.start_wall_ns);
  json.end_object();
  json.key("ranks").begin_array();
  for (const RankInfo& rank : timeline.ranks()) {
    json.begin_object();
    json.key("rank").value(rank.rank);
    json.key("host").value(rank.host);
    json.key("pid").value(rank.pid);
    json.key("local_rank").value(rank.local_rank);
    json.key("node_id").value(rank.node_id);
    json.key("launcher").value(rank.launcher);
    json.key("agent_version").value(rank.agent_version);
    json.key("capture").value(rank.capture);
    json.key("gpu_uuids").value(rank.gpu_uuids);
    json.key("start_wall_ns").value(rank.start_wall_ns);
    json.key("status").value(rank_status_name(rank.status));
    json.key("events").value(rank.event_count);
    json.key("events_readable");
    if (events_read) json.value(events_read->at(static_cast<size_t>(rank.rank)).events());
    else json.null();
    json.key("drops").value(rank.counters.get(counter::kEventsDropped));
    json.key("first_ns").value(rank.first_ns);
    json.key("last_ns").value(rank.last_ns);
    json.key("last_heard_ns");
    if (rank.last_heard_ns == analysis::kUnknown) json.null();
    else json.value(rank.last_heard_ns);
    // Not windowed: recorded throughout, and no window listed.
    json.key("capture_windowed").value(rank.capture_windowed).key("capture_windows").begin_array();
    for (const auto& [from, until] : rank.capture_windows) {
      json.begin_object().key("from_ns").value(from).key("until_ns").value(until).end_object();
    }
    json.end_array();
    json.key("counters").begin_object();
    for (const auto& [name, value] : rank.counters.entries()) json.key(name).value(value);
    json.end_object();
    json.end_object();
  }
  json.end_array();
  json.key("events_by_kind").begin_object();
  for (size_t k = 0; k < job.by_kind.size(); ++k) {
    json.key(event_kind_name(static_cast<EventKind>(k + 1))).value(job.by_kind[k]);
  }
  json.end_object();
  json.key("missing_ranks").begin_array();
  for (int32_t r : job.missing) json.value(r);
  json.end_array();
  json.key("dead_ranks").begin_array();
  for (int32_t r : job.dead) json.value(r);
  json.end_array();
  json.key("terminated_ranks").begin_array();
  for (int32_t r : job.terminated) json.value(r);
  json.end_array();
  json.key("aborted_ranks").begin_array();
  for (int32_t r : job.aborted) json.value(r);
  json.end_array();
  json.key("crashed_ranks").begin_array();
  for (int32_t r : job.crashed) json.value(r);
  json.end_array();
  json.key("exited_ranks").begin_array();
  for (int32_t r : job.exited) json.value(r);
  json.end_array();
  json.key("clock").begin_object();
  analysis::write_clock_reference_json(json, timeline.clock_corrected(), analysis::clock_reference(timeline));
  json.key("ranks").begin_array();
  for (const RankInfo& rank : timeline.ranks()) {
    json.begin_object();
    analysis::write_clock_json(json, rank.rank, rank.status, rank.clock);
    json.key("points").value(uint64_t{rank.clock.points.size()});
    json.key("repair_shift_ns").value(rank.clock.repair_shift_ns);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  const TimelineDamage damage = timeline.damage();
  json.key("integrity").begin_object();
  json.key("checksummed").value(timeline.checksummed());
  json.key("metadata_checksummed").value(timeline.metadata_checksummed());
  json.key("events_checked").value(events_checked);
  json.key("sound");
  if (!damage.empty()) {
    json.value(false);
  } else if (events_checked) {
    json.value(true);
  } else {
    json.null();
  }
  json.key("damage");
  analysis::write_damage_json(json, damage);
  json.end_object();
  json.end_object();
  return json.str() + "\n";
}

}  // namespace rankscope
