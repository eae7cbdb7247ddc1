// `rankscope report --format json` (docs/report.md, "JSON"), and the parts
// of it `rankscope info --json` shares.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analysis/report.h"
#include "rankscope/model/json.h"
#include "rankscope/model/statistics.h"
#include "report_figures.h"
#include "report_sections.h"

namespace rankscope::analysis {
namespace {

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

  write_critical_path_json(json, report);

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
  json.end_array().figure("exposed_tail_ns", b.exposed_tail_ns, b.tail_unmeasured);
  json.key("fit").begin_object().key("alpha_ns").value(b.fit.alpha_ns).key("ns_per_byte").value(b.fit.ns_per_byte);
  json.figure("r_squared", b.fit.r_squared,
              std::isnan(b.fit.r_squared) ? "fewer than two distinct sizes: latency and bandwidth cannot be told apart" : "");
  json.key("samples").value(static_cast<int64_t>(b.fit.samples)).end_object();
  json.key("predictions").begin_array();
  for (const BucketPrediction& p : b.predictions) {
    json.begin_object().key("bucket_bytes").value(p.bucket_bytes).key("step_ns").value(p.step_ns).end_object();
  }
  json.end_array().key("predicted_by");
  if (b.predicted_by.empty()) json.null();
  else json.value(b.predicted_by);
  json.key("replayed_steps").value(static_cast<uint64_t>(b.replayed_steps)).key("replay_reason");
  if (b.replay_unmeasured.empty()) json.null();
  else json.value(b.replay_unmeasured);
  json.key("replay_left_out");
  if (b.replay_left_out.empty()) json.null();
  else json.value(b.replay_left_out);
  json.key("recommended_bucket_bytes").value(b.recommended_bucket_bytes);
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
    json.key("events_ns").value(c.events_ns).key("polls_counted").value(c.polls_counted);
    json.figure("polls_ns", c.polls_ns, c.polls_unmeasured).key("buffer_bytes").value(c.buffer_bytes);
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
