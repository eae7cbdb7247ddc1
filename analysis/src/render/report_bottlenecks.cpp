// The report's sections on what is slow in a step: the verdict, the GPU
// step breakdown, top kernels and idle gaps, as text and JSON (docs/report-reference.md).
#include <algorithm>
#include <map>

#include "report_sections.h"
#include "rankscope/model/format.h"
#include "rankscope/model/json.h"
#include "rankscope/model/text.h"

namespace rankscope::analysis {
namespace {

constexpr const char* kNoGpuWork =
    "no GPU work in the timeline: no CUDA kernel, copy or memset was recorded (a CPU job, or a run without "
    "--capture cuda)";

bool any_gpu(const JobProfile& job) {
  return std::any_of(job.ranks.begin(), job.ranks.end(), [](const RankProfile& r) { return r.device.gpu; });
}

std::string histogram_text(const std::array<uint64_t, KernelTotals::kBuckets>& histogram) {
  static constexpr const char* kLimits[KernelTotals::kBuckets] = {"<1µs", "<4µs", "<16µs", "<64µs",
                                                                  "<256µs", "<1ms", "<4ms", "≥4ms"};
  std::string text;
  for (int b = 0; b < KernelTotals::kBuckets; ++b) {
    if (histogram[b] == 0) continue;
    text += printf_string("%s%s %llu", text.empty() ? "" : ", ", kLimits[b], static_cast<unsigned long long>(histogram[b]));
  }
  return text;
}

}  // namespace

DeviceTotals device_totals(const RankProfile& rank) {
  DeviceTotals t;
  for (const RankStep& s : rank.steps) {
    if (s.times.begin_ns == kUnknown) continue;
    t.step_ns += s.times.duration();
    t.work += s.device;
    ++t.steps;
  }
  return t;
}

double share_percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
}

std::string share_text(int64_t part, int64_t whole) { return format_percent(share_percent(part, whole)); }

void write_bottlenecks_text(const Report& report, std::string& out) {
  const BottleneckReport& b = report.bottlenecks;
  const JobProfile& job = report.profile;
  out += "\nwhat is slow in a step (the step time each costs, on the rank it costs most; fixing it gives that back):\n";
  if (b.found.empty()) out += "  no class reached its threshold (docs/report-reference.md, \"What is slow in a step\")\n";
  for (size_t i = 0; i < b.found.size(); ++i) {
    const Bottleneck& f = b.found[i];
    out += printf_string("  %zu. %-15s %s a step (%s), rank%s %s\n", i + 1, f.klass.c_str(),
                         format_duration(static_cast<double>(f.cost_ns_per_step)).c_str(),
                         format_percent(100.0 * f.step_share).c_str(), f.ranks.size() > 1 ? "s" : "",
                         format_rank_list(f.ranks).c_str());
    out += "     " + f.evidence + "\n     fix: " + f.fix + "\n";
  }
  std::map<std::string, std::vector<std::string>> unmeasured;  // why -> classes
  for (const auto& [klass, why] : b.unmeasured) unmeasured[why].push_back(klass);
  for (const auto& [why, classes] : unmeasured) {
    std::string names;
    for (const std::string& c : classes) names += (names.empty() ? "" : ", ") + c;
    out += "  n/a: " + names + ": " + why + "\n";
  }
  if (!any_gpu(job)) return;

  out += "\nGPU step breakdown (share of each rank's step time; each ns counted once, in this order):\n";
  size_t shown = 0;
  for (const RankProfile& rank : job.ranks) {
    if (!rank.device.gpu) continue;
    if (++shown > 8) {
      out += "  ... more ranks (JSON lists every rank)\n";
      break;
    }
    const DeviceTotals t = device_totals(rank);
    std::string line = printf_string("  rank %-5d", rank.rank);
    for (int c = 0; c < kWorkCategoryCount; ++c) {
      line += std::string(c ? ", " : " ") + work_category_label(static_cast<WorkCategory>(c)) + " " +
              share_text(t.work.work_ns[c], t.step_ns);
    }
    int64_t idle = 0;
    for (int c = 0; c < kIdleCauseCount; ++c) idle += t.work.idle_ns[c];
    line += "; GPU idle " + share_text(idle, t.step_ns) + " (";
    bool first = true;
    for (int c = 0; c < kIdleCauseCount; ++c) {
      if (t.work.idle_ns[c] == 0) continue;
      line += std::string(first ? "" : ", ") + idle_cause_label(static_cast<IdleCause>(c)) + " " +
              share_text(t.work.idle_ns[c], t.step_ns);
      first = false;
    }
    out += line + (first ? "none)\n" : ")\n");
  }

  out += "\ntop kernels by time (all ranks; time on each rank: min, median, max):\n";
  for (size_t i = 0; i < b.top_by_time.size() && i < 5; ++i) {
    const KernelAcrossRanks& k = b.top_by_time[i];
    out += printf_string("  %s  %llu launches, mean %s; per rank %s (rank %d), %s, %s (rank %d)\n",
                         format_duration(static_cast<double>(k.total_ns)).c_str(),
                         static_cast<unsigned long long>(k.count),
                         format_duration(static_cast<double>(k.total_ns) / static_cast<double>(k.count)).c_str(),
                         format_duration(static_cast<double>(k.rank_min_ns)).c_str(), k.rank_min,
                         format_duration(static_cast<double>(k.rank_median_ns)).c_str(),
                         format_duration(static_cast<double>(k.rank_max_ns)).c_str(), k.rank_max);
    out += "    " + job.name(k.name_id).substr(0, 160) + "\n    durations: " + histogram_text(k.histogram) + "\n";
  }
  out += "top kernels by launches:";
  for (size_t i = 0; i < b.top_by_count.size() && i < 5; ++i) {
    const KernelAcrossRanks& k = b.top_by_count[i];
    out += printf_string("%s %llu × %s", i ? ";" : "", static_cast<unsigned long long>(k.count),
                         job.name(k.name_id).substr(0, 60).c_str());
  }
  out += "\n\nlongest GPU idle gaps:\n";
  for (size_t i = 0; i < b.largest_gaps.size() && i < 5; ++i) {
    const RankIdleGap& g = b.largest_gaps[i];
    out += printf_string("  %s on rank %d, GPU %d, %s, %s\n",
                         format_duration(static_cast<double>(g.gap.end_ns - g.gap.begin_ns)).c_str(), g.rank,
                         g.gap.device, idle_cause_label(g.gap.cause),
                         g.gap.step >= 0 ? ("step " + std::to_string(job.step_numbers[static_cast<size_t>(g.gap.step)])).c_str()
                                         : "outside the steps");
  }
}

namespace {

void write_kernel_json(JsonWriter& json, const JobProfile& job, const KernelAcrossRanks& k) {
  json.begin_object().key("name").value(job.name(k.name_id)).key("count").value(k.count).key("total_ns").value(k.total_ns);
  json.key("mean_ns").value(k.count ? k.total_ns / static_cast<int64_t>(k.count) : 0);
  json.key("min_ns").value(k.min_ns).key("max_ns").value(k.max_ns).key("ranks").value(k.ranks);
  json.key("rank_total_ns").begin_object().key("min").value(k.rank_min_ns).key("min_rank").value(k.rank_min);
  json.key("median").value(k.rank_median_ns).key("max").value(k.rank_max_ns).key("max_rank").value(k.rank_max);
  json.end_object().key("histogram").begin_array();
  for (const uint64_t n : k.histogram) json.value(n);
  json.end_array().end_object();
}

void write_work_json(JsonWriter& json, const StepDeviceWork& w) {
  json.key("categories").begin_object();
  for (int c = 0; c < kWorkCategoryCount; ++c) json.key(work_category_key(static_cast<WorkCategory>(c))).value(w.work_ns[c]);
  json.end_object().key("idle_ns").begin_object();
  for (int c = 0; c < kIdleCauseCount; ++c) json.key(idle_cause_key(static_cast<IdleCause>(c))).value(w.idle_ns[c]);
  json.end_object();
}

void write_rank_device_json(JsonWriter& json, const JobProfile& job, const RankProfile& rank) {
  const DeviceTotals t = device_totals(rank);
  const RankDeviceWork& d = rank.device;
  json.begin_object().key("rank").value(rank.rank).key("step_ns").value(t.step_ns);
  write_work_json(json, t.work);
  json.key("idle_gaps").begin_object();
  for (int c = 0; c < kIdleCauseCount; ++c) json.key(idle_cause_key(static_cast<IdleCause>(c))).value(d.idle_gaps[c]);
  json.end_object().key("gap_causes_unknown").value(d.gap_causes_unknown);
  json.key("launches").begin_object().key("linked").value(d.launches.linked).key("unlinked").value(d.launches.unlinked);
  json.key("tiny_kernels").value(d.launches.tiny_kernels).key("cpu_ns").value(d.launches.cpu_ns);
  json.key("gpu_ns").value(d.launches.gpu_ns).key("delay_ns").value(d.launches.delay_ns).end_object();
  json.key("syncs").begin_array();
  for (const SyncTotals& s : d.syncs) {
    json.begin_object().key("call").value(job.name(s.name_id)).key("range");
    s.range_id >= 0 ? json.value(job.name(static_cast<uint32_t>(s.range_id))) : json.null();
    json.key("count").value(s.count);
    json.key("blocked_ns").value(s.blocked_ns).key("longest_ns").value(s.longest_ns).end_object();
  }
  json.end_array().key("transfers").begin_object();
  for (int c = 0; c < kCopyDirectionCount; ++c) {
    json.key(copy_direction_key(static_cast<CopyDirection>(c))).begin_object();
    json.key("bytes").value(t.work.copy_bytes[c]).key("ns").value(t.work.copy_ns[c]);
    json.figure("gbps", t.work.copy_ns[c] > 0 ? static_cast<double>(t.work.copy_bytes[c]) / static_cast<double>(t.work.copy_ns[c]) : 0.0,
                t.work.copy_ns[c] > 0 ? "" : "no copy");
    json.end_object();
  }
  json.key("pageable_copies").value(t.work.pageable_copies).key("pageable_bytes").value(t.work.pageable_bytes);
  json.end_object().key("memory").begin_object().key("allocations").value(t.work.allocations);
  json.key("allocation_ns").value(t.work.allocation_ns);
  const char* no_counter = d.device_memory_seen ? "" : kNoDeviceMemoryReason;
  json.figure("device_peak_bytes", d.memory.peak_bytes, no_counter);
  json.key("device_peak_step");
  d.device_memory_seen && d.memory.peak_step >= 0 ? json.value(job.step_numbers[static_cast<size_t>(d.memory.peak_step)])
                                                  : json.null();
  json.end_object().key("steps").begin_array();
  for (size_t s = 0; s < rank.steps.size(); ++s) {
    const RankStep& step = rank.steps[s];
    if (step.times.begin_ns == kUnknown) continue;
    json.begin_object().key("step").value(job.step_numbers[s]).key("step_ns").value(step.times.duration());
    write_work_json(json, step.device);
    json.key("launches").value(step.device.launches).key("tiny_kernels").value(step.device.tiny_kernels);
    json.key("syncs").value(step.device.syncs).key("sync_ns").value(step.device.sync_ns);
    json.key("allocations").value(step.device.allocations);
    json.key("device_memory_bytes");
    d.device_memory_seen && s < d.memory.step_end_bytes.size() && d.memory.step_end_bytes[s] >= 0
        ? json.value(d.memory.step_end_bytes[s])
        : json.null();
    json.end_object();
  }
  json.end_array().end_object();
}

}  // namespace

void write_bottlenecks_json(JsonWriter& json, const Report& report) {
  const BottleneckReport& b = report.bottlenecks;
  const JobProfile& job = report.profile;
  json.key("bottlenecks").begin_array();
  for (const Bottleneck& f : b.found) {
    json.begin_object().key("class").value(f.klass).key("cost_ns_per_step").value(f.cost_ns_per_step);
    json.key("step_share").value(f.step_share).key("ranks").begin_array();
    for (const int32_t r : f.ranks) json.value(r);
    json.end_array().key("evidence").value(f.evidence).key("fix").value(f.fix).end_object();
  }
  json.end_array().key("bottlenecks_unmeasured").begin_array();
  for (const auto& [klass, why] : b.unmeasured) json.begin_object().key("class").value(klass).key("reason").value(why).end_object();
  json.end_array();
  if (!any_gpu(job)) {
    json.key("top_kernels").null().key("top_kernels_reason").value(kNoGpuWork);
    json.key("idle_gaps").null().key("idle_gaps_reason").value(kNoGpuWork);
    json.key("device").null().key("device_reason").value(kNoGpuWork);
    return;
  }
  json.key("top_kernels").begin_object().key("by_time").begin_array();
  for (const KernelAcrossRanks& k : b.top_by_time) write_kernel_json(json, job, k);
  json.end_array().key("by_count").begin_array();
  for (const KernelAcrossRanks& k : b.top_by_count) write_kernel_json(json, job, k);
  json.end_array().end_object();
  json.key("idle_gaps").begin_array();
  for (const RankIdleGap& g : b.largest_gaps) {
    json.begin_object().key("rank").value(g.rank).key("device").value(static_cast<int32_t>(g.gap.device));
    json.key("step");
    g.gap.step >= 0 ? json.value(job.step_numbers[static_cast<size_t>(g.gap.step)]) : json.null();
    json.key("begin_ns").value(g.gap.begin_ns).key("duration_ns").value(g.gap.end_ns - g.gap.begin_ns);
    json.key("cause").value(idle_cause_key(g.gap.cause)).end_object();
  }
  json.end_array().key("device").begin_array();
  for (const RankProfile& rank : job.ranks) {
    if (rank.device.gpu) write_rank_device_json(json, job, rank);
  }
  json.end_array();
}

}  // namespace rankscope::analysis
