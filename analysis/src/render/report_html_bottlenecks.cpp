// The HTML report's overview of what is slow in a step: the verdict, the GPU
// step breakdown per rank, top kernels, idle gaps, transfers and device
// memory over the steps (docs/report.md, "HTML report").
#include <algorithm>
#include <map>

#include "rankscope/model/format.h"
#include "rankscope/model/html.h"
#include "rankscope/model/text.h"
#include "report_sections.h"

namespace rankscope::analysis {
namespace {

using html::escape;

constexpr const char* kWorkClasses[kWorkCategoryCount] = {"g-kernel",  "g-memcpy", "g-memset", "g-comm",
                                                          "g-runtime", "g-data",   "g-cpu",    "g-other"};

std::string ms(int64_t ns) { return format_duration(static_cast<double>(ns)); }

std::vector<const RankProfile*> gpu_ranks(const JobProfile& job) {
  std::vector<const RankProfile*> ranks;
  for (const RankProfile& rank : job.ranks) {
    if (rank.device.gpu) ranks.push_back(&rank);
  }
  return ranks;
}

// Tables of up to this many rows start open.
constexpr size_t kOpenTableRows = 32;
// Tables list this many ranks, so that a page of thousands stays one to open; JSON has every rank.
constexpr size_t kTableRanks = 64;

std::vector<const RankProfile*> listed(const std::vector<const RankProfile*>& ranks) {
  return {ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(std::min(ranks.size(), kTableRanks))};
}

void write_more_ranks_note(const std::vector<const RankProfile*>& ranks, std::string& out) {
  if (ranks.size() <= kTableRanks) return;
  html::write_note(out, "The table lists the first " + std::to_string(kTableRanks) + " of " +
                            std::to_string(ranks.size()) + " GPU ranks; <code>--format json</code> has every rank.");
}

void write_verdict(const Report& report, std::string& out) {
  const BottleneckReport& b = report.bottlenecks;
  out += "<section id=\"verdict-section\">\n<h2>What is slow in a step</h2>\n";
  if (b.found.empty()) {
    html::write_note(out, "No bottleneck class reached its threshold: no class took 5 % of a rank's step (10 % for "
                    "communication).", "verdict-none");
  } else {
    out += "<ol id=\"verdict\">\n";
    for (const Bottleneck& f : b.found) {
      out += "<li><strong>" + escape(f.klass) + "</strong>: " + ms(f.cost_ns_per_step) + " a step (" +
             format_percent(100.0 * f.step_share) + "), rank" + (f.ranks.size() > 1 ? "s " : " ") +
             escape(format_rank_list(f.ranks)) + "<br><span class=\"caption\">" + escape(f.evidence) +
             "</span><br>fix: " + escape(f.fix) + "</li>\n";
    }
    out += "</ol>\n";
  }
  std::map<std::string, std::vector<std::string>> unmeasured;
  for (const auto& [klass, why] : b.unmeasured) unmeasured[why].push_back(klass);
  for (const auto& [why, classes] : unmeasured) {
    std::string names;
    for (const std::string& c : classes) names += (names.empty() ? "" : ", ") + c;
    html::write_note(out, "n/a: " + escape(names) + ": " + escape(why) + ".");
  }
  out += "<p class=\"caption\">Each class costs the step time it took on the rank where it cost most, per step: "
         "what fixing it would give back. Definitions: docs/report-reference.md, \"What is slow in a step\".</p>\n</section>\n";
}

// One bar per GPU rank, its step time split by the GPU breakdown's categories.
void write_gpu_bars(const std::vector<const RankProfile*>& ranks, std::string& out) {
  const double pitch = std::clamp(560.0 / static_cast<double>(std::max<size_t>(ranks.size(), 1)), 1.0, 22.0);
  const double left = 70, top = 30, bar = pitch >= 4 ? pitch * 0.75 : pitch, plot_width = 620;
  const int stride = html::label_stride(14.0 / pitch);
  html::write_svg_open(out, "gpu-breakdown-bars", left + plot_width + 20, top + pitch * static_cast<double>(ranks.size()) + 10,
                       "each GPU rank's step time by category");
  double x = left;
  for (int c = 0; c < kWorkCategoryCount; ++c) {
    const std::string label = work_category_label(static_cast<WorkCategory>(c));
    html::write_rect(out, x, 6, 10, 10, kWorkClasses[c]);
    html::write_text(out, x + 14, 15, escape(label));
    x += 14 + 6.5 * static_cast<double>(label.size()) + 12;
  }
  double y = top;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankProfile& rank = *ranks[i];
    if (i % static_cast<size_t>(stride) == 0) {
      html::write_text(out, left - 6, y + std::min(bar, 12.0), "rank " + std::to_string(rank.rank), "text-anchor=\"end\"");
    }
    const DeviceTotals t = device_totals(rank);
    double at = left;
    for (int c = 0; c < kWorkCategoryCount && t.step_ns > 0; ++c) {
      const double part = static_cast<double>(t.work.work_ns[c]) / static_cast<double>(t.step_ns);
      if (part <= 0) continue;
      html::write_rect(out, at, y, part * plot_width, bar, kWorkClasses[c],
                       "rank " + std::to_string(rank.rank) + ": " +
                           escape(work_category_label(static_cast<WorkCategory>(c))) + " " + format_percent(100 * part));
      at += part * plot_width;
    }
    y += pitch;
  }
  html::write_svg_close(out);
}

void write_gpu_breakdown(const Report& report, const std::vector<const RankProfile*>& ranks, std::string& out) {
  const JobProfile& job = report.profile;
  out += "<section id=\"gpu-breakdown-section\">\n<h2>GPU step breakdown</h2>\n";
  write_gpu_bars(ranks, out);
  out += "<p class=\"caption\">Each GPU rank's step time, each nanosecond counted once, in this order: kernels, "
         "copies, memsets, communication nothing hid, CUDA calls on the host, data loading, the host's other "
         "ranges, other. The table gives each rank's steps together (\"all\") and one by one, with the GPU's idle time by cause.</p>\n";
  size_t rows_wanted = 0;
  for (const RankProfile* rank : listed(ranks)) rows_wanted += 1 + rank->steps.size();
  out += std::string("<details") + (rows_wanted <= kOpenTableRows ? " open" : "") +
         "><summary>per rank and step</summary>\n<div class=\"table-wrap\"><table id=\"gpu-breakdown-table\">\n"
         "<thead><tr><th class=\"num\">rank</th><th class=\"num\">step</th><th class=\"num\">step time (mean)</th>";
  for (int c = 0; c < kWorkCategoryCount; ++c) {
    out += "<th class=\"num\">" + escape(work_category_label(static_cast<WorkCategory>(c))) + "</th>";
  }
  out += "<th>GPU idle by cause</th></tr></thead>\n<tbody>\n";
  constexpr size_t kMostRows = 400;
  size_t rows = 0;
  // A row of one step, or of all a rank's (their mean step time, the shares of their sum).
  const auto row = [&](const std::string& rank, const std::string& step, const StepDeviceWork& w, int64_t step_ns,
                       size_t steps = 1) {
    out += "<tr><td class=\"num\">" + rank + "</td><td class=\"num\">" + step + "</td><td class=\"num\">" +
           ms(step_ns / static_cast<int64_t>(std::max<size_t>(steps, 1))) + "</td>";
    for (int c = 0; c < kWorkCategoryCount; ++c) out += "<td class=\"num\">" + share_text(w.work_ns[c], step_ns) + "</td>";
    std::string idle;
    for (int c = 0; c < kIdleCauseCount; ++c) {
      if (w.idle_ns[c] > 0) idle += (idle.empty() ? "" : ", ") + std::string(idle_cause_label(static_cast<IdleCause>(c))) + " " + share_text(w.idle_ns[c], step_ns);
    }
    out += "<td>" + escape(idle.empty() ? "none" : idle) + "</td></tr>\n";
  };
  for (const RankProfile* rank : listed(ranks)) {
    const DeviceTotals t = device_totals(*rank);
    row(std::to_string(rank->rank), "all " + std::to_string(t.steps), t.work, t.step_ns, t.steps);
    for (size_t s = 0; s < rank->steps.size() && rows < kMostRows; ++s, ++rows) {
      const RankStep& step = rank->steps[s];
      if (step.times.begin_ns == kUnknown) continue;
      row(std::to_string(rank->rank), std::to_string(job.step_numbers[s]), step.device, step.times.duration());
    }
  }
  out += "</tbody></table></div>\n</details>\n";
  write_more_ranks_note(ranks, out);
  out += "</section>\n";
}

void write_top_kernels(const Report& report, std::string& out) {
  const JobProfile& job = report.profile;
  out += "<section id=\"kernels-section\">\n<h2>Top kernels</h2>\n<div class=\"table-wrap\"><table "
         "id=\"top-kernels-table\">\n<thead><tr><th>kernel</th><th class=\"num\">time</th><th class=\"num\">launches"
         "</th><th class=\"num\">mean</th><th class=\"num\">per rank: min</th><th class=\"num\">median</th>"
         "<th class=\"num\">max</th></tr></thead>\n<tbody>\n";
  for (const KernelAcrossRanks& k : report.bottlenecks.top_by_time) {
    out += "<tr><td>" + escape(job.name(k.name_id).substr(0, 200)) + "</td><td class=\"num\">" + ms(k.total_ns) +
           "</td><td class=\"num\">" + std::to_string(k.count) + "</td><td class=\"num\">" +
           ms(k.count ? k.total_ns / static_cast<int64_t>(k.count) : 0) + "</td><td class=\"num\">" +
           ms(k.rank_min_ns) + " (rank " + std::to_string(k.rank_min) + ")</td><td class=\"num\">" +
           ms(k.rank_median_ns) + "</td><td class=\"num\">" + ms(k.rank_max_ns) + " (rank " +
           std::to_string(k.rank_max) + ")</td></tr>\n";
  }
  out += "</tbody></table></div>\n<p class=\"caption\">By time over every rank; a rank far above the median is "
         "where a straggler's kernel shows. By launches: ";
  for (size_t i = 0; i < report.bottlenecks.top_by_count.size() && i < 5; ++i) {
    const KernelAcrossRanks& k = report.bottlenecks.top_by_count[i];
    out += (i ? "; " : "") + std::to_string(k.count) + " × " + escape(job.name(k.name_id).substr(0, 80));
  }
  out += ".</p>\n</section>\n";
}

void write_idle_gaps(const Report& report, std::string& out) {
  const JobProfile& job = report.profile;
  out += "<section id=\"gaps-section\">\n<h2>Longest GPU idle gaps</h2>\n";
  if (report.bottlenecks.largest_gaps.empty()) {
    html::write_note(out, "No GPU was idle between two of its operations.");
    out += "</section>\n";
    return;
  }
  out += "<div class=\"table-wrap\"><table id=\"idle-gaps-table\">\n<thead><tr><th class=\"num\">length</th>"
         "<th class=\"num\">rank</th><th class=\"num\">GPU</th><th class=\"num\">step</th><th>cause</th></tr></thead>\n"
         "<tbody>\n";
  for (const RankIdleGap& g : report.bottlenecks.largest_gaps) {
    out += "<tr><td class=\"num\">" + ms(g.gap.end_ns - g.gap.begin_ns) + "</td><td class=\"num\">" +
           std::to_string(g.rank) + "</td><td class=\"num\">" + std::to_string(g.gap.device) + "</td><td class=\"num\">" +
           (g.gap.step >= 0 ? std::to_string(job.step_numbers[static_cast<size_t>(g.gap.step)]) : "—") + "</td><td>" +
           escape(idle_cause_label(g.gap.cause)) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n</section>\n";
}

void write_transfers(const std::vector<const RankProfile*>& ranks, std::string& out) {
  out += std::string("<section id=\"transfers-section\">\n<h2>Transfers</h2>\n<details") +
         (ranks.size() <= kOpenTableRows ? " open" : "") +
         "><summary>copies per rank</summary>\n<div class=\"table-wrap\"><table "
         "id=\"transfers-table\">\n<thead><tr><th class=\"num\">rank</th>";
  for (int d = 0; d < kCopyDirectionCount; ++d) {
    out += std::string("<th class=\"num\">") + copy_direction_key(static_cast<CopyDirection>(d)) + " a step</th>";
  }
  out += "<th class=\"num\">pageable copies</th><th class=\"num\">syncs a step</th></tr></thead>\n<tbody>\n";
  for (const RankProfile* rank : listed(ranks)) {
    const DeviceTotals t = device_totals(*rank);
    const double steps = static_cast<double>(std::max<size_t>(t.steps, 1));
    out += "<tr><td class=\"num\">" + std::to_string(rank->rank) + "</td>";
    for (int d = 0; d < kCopyDirectionCount; ++d) {
      const double gbps = t.work.copy_ns[d] > 0 ? static_cast<double>(t.work.copy_bytes[d]) / static_cast<double>(t.work.copy_ns[d]) : 0;
      out += "<td class=\"num\">" +
             (t.work.copy_bytes[d] ? format_bytes(static_cast<double>(t.work.copy_bytes[d]) / steps) +
                                         printf_string(" at %.2f GB/s", gbps)
                                   : std::string("—")) +
             "</td>";
    }
    out += "<td class=\"num\">" + std::to_string(t.work.pageable_copies) + " (" +
           format_bytes(static_cast<double>(t.work.pageable_bytes)) + ")</td><td class=\"num\">" +
           printf_string("%.1f", static_cast<double>(t.work.syncs) / steps) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n</details>\n";
  write_more_ranks_note(ranks, out);
  out += "</section>\n";
}

// Device memory at each step's end, a line per rank that recorded it.
void write_memory(const Report& report, const std::vector<const RankProfile*>& ranks, std::string& out) {
  out += "<section id=\"memory-section\">\n<h2>Device memory over the steps</h2>\n";
  std::vector<const RankProfile*> with_memory;
  uint64_t peak = 0;
  for (const RankProfile* rank : ranks) {
    if (!rank->device.device_memory_seen) continue;
    with_memory.push_back(rank);
    peak = std::max(peak, rank->device.memory.peak_bytes);
  }
  if (with_memory.empty() || peak == 0) {
    html::write_note(out, "n/a: " + escape(kNoDeviceMemoryReason) + ".", "memory-note");
    out += "</section>\n";
    return;
  }
  const size_t steps = report.profile.step_numbers.size();
  const double left = 70, top = 10, width = 620, height = 180;
  html::write_svg_open(out, "memory-plot", left + width + 20, top + height + 30, "device memory at each step's end");
  html::write_line(out, left, top + height, left + width, top + height, "axis");
  html::write_text(out, left - 6, top + 10, escape(format_bytes(static_cast<double>(peak))), "text-anchor=\"end\"");
  html::write_text(out, left - 6, top + height, "0", "text-anchor=\"end\"");
  for (const RankProfile* rank : with_memory) {
    const auto& values = rank->device.memory.step_end_bytes;
    for (size_t s = 0; s < values.size(); ++s) {
      if (values[s] < 0) continue;
      const double x = left + width * (steps > 1 ? static_cast<double>(s) / static_cast<double>(steps - 1) : 0.5);
      const double y = top + height * (1.0 - static_cast<double>(values[s]) / static_cast<double>(peak));
      html::write_rect(out, x - 2, y - 2, 4, 4, "memory-point",
                       "rank " + std::to_string(rank->rank) + ", step " +
                           std::to_string(report.profile.step_numbers[s]) + ": " +
                           escape(format_bytes(static_cast<double>(values[s]))));
    }
  }
  html::write_svg_close(out);
  out += "<p class=\"caption\">Device memory allocated at each step's end, a point per rank and step; a rise every "
         "step is a leak (the memory class of the verdict says so).</p>\n</section>\n";
}

}  // namespace

void write_bottlenecks_html(const Report& report, std::string& out) {
  write_verdict(report, out);
  const std::vector<const RankProfile*> ranks = gpu_ranks(report.profile);
  if (ranks.empty()) return;
  write_gpu_breakdown(report, ranks, out);
  write_top_kernels(report, out);
  write_idle_gaps(report, out);
  write_transfers(ranks, out);
  write_memory(report, ranks, out);
}

}  // namespace rankscope::analysis
