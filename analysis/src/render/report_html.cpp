// The HTML report (docs/report.md, "HTML report"): one self-contained page,
// its plots SVG drawn with model/html.h's pieces.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analysis/report.h"
#include "report_sections.h"
#include "rankscope/model/format.h"
#include "rankscope/model/html.h"

namespace rankscope::analysis {
namespace {

using namespace html;

// ---------------------------------------------------------- job figures ---

bool has_times(const RankStep& step) { return step.times.begin_ns != kUnknown && step.times.end_ns != kUnknown; }

size_t step_count(const JobProfile& job) {
  size_t steps = job.step_numbers.size();
  for (const RankProfile& rank : job.ranks) steps = std::max(steps, rank.steps.size());
  return steps;
}

// Over every rank's steps, as the text and JSON reports count it, so that the
// three agree.
int64_t mean_step_ns(const JobProfile& job) {
  long double total = 0;
  int64_t counted = 0;
  for (const RankProfile& rank : job.ranks) {
    for (const RankStep& step : rank.steps) {
      if (!has_times(step)) continue;
      total += static_cast<long double>(step.times.duration());
      ++counted;
    }
  }
  return counted == 0 ? kUnknown : static_cast<int64_t>(total / static_cast<long double>(counted));
}

const RankProfile* find_rank(const JobProfile& job, int32_t rank) {
  // Ranks are stored in rank order, so the index is the rank unless some are absent.
  if (rank >= 0 && static_cast<size_t>(rank) < job.ranks.size() && job.ranks[rank].rank == rank) {
    return &job.ranks[rank];
  }
  for (const RankProfile& candidate : job.ranks) {
    if (candidate.rank == rank) return &candidate;
  }
  return nullptr;
}

std::string rank_with_host(const JobProfile& job, int32_t rank) {
  const RankProfile* profile = find_rank(job, rank);
  std::string text = "rank " + std::to_string(rank);
  if (profile != nullptr && !profile->host.empty()) text += " on " + escape(profile->host);
  return text;
}

// Job-wide causes ("rotating", "workload imbalance") have no rank.
std::string straggler_name(const JobProfile& job, const Straggler& straggler) {
  return straggler.rank >= 0 ? rank_with_host(job, straggler.rank) : "no single rank";
}

std::string step_label(const JobProfile& job, size_t step) {
  return std::to_string(step < job.step_numbers.size() ? job.step_numbers[step] : step);
}

// -------------------------------------------------------------- page parts ---

// The report's own plots; model/html.h has the rest.
constexpr const char* kStyle = R"(
.w0{fill:#ffffcc}.w1{fill:#ffeda0}.w2{fill:#fed976}.w3{fill:#feb24c}.w4{fill:#fd8d3c}
.w5{fill:#fc4e2a}.w6{fill:#e31a1c}.w7{fill:#bd0026}.w8{fill:#800026}.w-none{fill:#cfcfcf}
.bar{fill:#4c78a8}.no-comm{fill:#e4e4e4}
.bandwidth{fill:#4c78a8;fill-opacity:.8}.exposed{fill:#e45756;fill-opacity:.8}
.prediction{fill:none;stroke:#555;stroke-width:1.5}.prediction-point{fill:#555}
.recommended{stroke:#2a7a2a;stroke-width:1.5;stroke-dasharray:5 3}.recommended-label{fill:#2a7a2a;font-weight:600}
.mean{stroke:#222;stroke-width:1;stroke-dasharray:4 3}
.c-wait{fill:#e45756}.c-transfer{fill:#f58518}.c-data{fill:#72b7b2}.c-optimizer{fill:#b279a2}
.c-backward{fill:#54a24b}.c-forward{fill:#4c78a8}.c-other{fill:#bab0ac}
.g-kernel{fill:#4c78a8}.g-memcpy{fill:#f58518}.g-memset{fill:#eeca3b}.g-comm{fill:#e45756}
.p0{fill:#4c78a8;background:#4c78a8}.p1{fill:#72b7b2;background:#72b7b2}.p2{fill:#b279a2;background:#b279a2}
.p3{fill:#eeca3b;background:#eeca3b}.p4{fill:#f58518;background:#f58518}.p5{fill:#e45756;background:#e45756}
.p-span{fill:#e4e4e4}.swatch{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:-1px}
.g-runtime{fill:#b279a2}.g-data{fill:#72b7b2}.g-cpu{fill:#54a24b}.g-other{fill:#bab0ac}.memory-point{fill:#4c78a8}
#straggler-table td{background:#fff}
#straggler-table tbody tr:first-child td{border-bottom:none}
)";

void write_header(const Report& report, std::string& out) {
  const JobProfile& job = report.profile;
  out += "<header id=\"summary\">\n<h1>rankscope report</h1>\n<dl class=\"facts\">\n";
  out += "<dt>Job file</dt><dd><code>" + escape(job.path) + "</code></dd>\n";

  std::string ranks = std::to_string(job.world_size);
  std::vector<std::string> unusual;
  for (const RankProfile& rank : job.ranks) {
    if (rank.status != RankStatus::kComplete) {
      unusual.push_back("rank " + std::to_string(rank.rank) + " " + rank_status_name(rank.status));
    }
  }
  constexpr size_t kListedRanks = 8;
  if (!unusual.empty()) {
    ranks += " (";
    for (size_t i = 0; i < std::min(unusual.size(), kListedRanks); ++i) ranks += (i ? ", " : "") + unusual[i];
    if (unusual.size() > kListedRanks) ranks += printf_string(" and %zu more", unusual.size() - kListedRanks);
    ranks += ")";
  }
  out += "<dt>Ranks</dt><dd>" + ranks + "</dd>\n";
  out += "<dt>Steps</dt><dd>" + std::to_string(step_count(job)) +
         (job.steps_are_windows ? " (capture windows: no ProfilerStep#N range was captured)" : "") + "</dd>\n";
  const int64_t mean_step = mean_step_ns(job);
  out += "<dt>Mean step time</dt><dd>" +
         (mean_step == kUnknown ? "n/a <span class=\"note\">(" + escape(kNoStepTimesReason) + ")</span>"
                                : format_duration(mean_step) + " <span class=\"note\">(over every rank's steps)</span>") +
         "</dd>\n";
  out += std::string("<dt>Compute</dt><dd>") +
         (job.gpu ? "GPU kernels" : "CPU time outside MPI calls and torch.distributed waits (no GPU events)") + "</dd>\n";

  int64_t largest_bound = 0;
  size_t unsynced = 0;
  for (const RankClock& clock : job.clocks) {
    if (clock.synced) {
      largest_bound = std::max(largest_bound, clock.bound_ns);
    } else {
      ++unsynced;
    }
  }
  std::string clocks;
  if (job.ranks_with_data().size() < 2) {
    clocks = "one rank with data: no clocks to align";
  } else if (job.clock_corrected) {
    clocks = "<span class=\"good\">corrected</span> onto " + clock_reference_text(job.clock_reference);
    if (job.clocks.size() > unsynced) clocks += ", largest error bound ±" + format_duration(largest_bound);
  } else {
    clocks = "<span class=\"alert\">not corrected</span>: each rank's times are on its own clock, so waits "
             "between ranks on different nodes are off by their clock offsets";
    if (unsynced > 0 && unsynced < job.clocks.size()) {
      clocks += printf_string(" (%zu ranks not synchronised)", unsynced);
    }
  }
  out += "<dt>Clocks</dt><dd>" + clocks + "</dd>\n";

  out += "<dt>Top straggler</dt><dd>";
  if (!report.stragglers.unmeasured.empty()) {
    out += "n/a: " + escape(report.stragglers.unmeasured);
  } else if (report.stragglers.stragglers.empty()) {
    out += "no straggler found";
  } else {
    const Straggler& top = report.stragglers.stragglers.front();
    out += "<span class=\"alert\">" + straggler_name(job, top) + "</span>: " + escape(top.cause) +
           ", score " + trimmed(top.score, 2);
  }
  out += "</dd>\n</dl>\n</header>\n";
}

// ------------------------------------------------------- wait heatmap ---

constexpr int kWaitBins = 9;  // the .w0 … .w8 colours, light to dark

int wait_bin(int64_t wait_ns, int64_t max_wait_ns) {
  if (max_wait_ns <= 0 || wait_ns <= 0) return 0;
  const double share = static_cast<double>(std::min(wait_ns, max_wait_ns)) / static_cast<double>(max_wait_ns);
  return std::min(kWaitBins - 1, static_cast<int>(share * kWaitBins));
}

// One <g> per rank (its <title> names the rank when hovered) holding one path
// per colour, adjacent cells of a colour merged: a cell per <rect> would make
// a 1024-rank page several megabytes.
void write_heatmap_row(const JobProfile& job, const RankProfile& rank, const std::string& wait_unmeasured, size_t steps,
                       int64_t max_wait, double x0, double y, int cell_width, int cell_height, std::string& out) {
  std::array<std::string, kWaitBins + 1> paths;  // the last one: steps this rank lacks
  int64_t total_wait = 0, worst_wait = 0;
  size_t known_steps = 0, worst_step = 0;
  size_t run_start = 0;
  int run_bin = -1;
  for (size_t s = 0; s <= steps; ++s) {
    int bin = -1;  // -1 ends the last run
    if (s < steps) {
      const bool known = s < rank.steps.size() && has_times(rank.steps[s]) && wait_unmeasured.empty();
      const int64_t wait = known ? rank.steps[s].exposed_wait_ns : 0;
      bin = known ? wait_bin(wait, max_wait) : kWaitBins;
      if (known) {
        total_wait += wait;
        ++known_steps;
        if (wait > worst_wait || known_steps == 1) {
          worst_wait = wait;
          worst_step = s;
        }
      }
    }
    if (bin == run_bin) continue;
    if (run_bin >= 0) {
      const int width = static_cast<int>(s - run_start) * cell_width;
      paths[run_bin] += "M" + coord(x0 + static_cast<double>(run_start) * cell_width) + " " + coord(y) + "h" +
                        std::to_string(width) + "v" + std::to_string(cell_height) + "h-" + std::to_string(width) + "z";
    }
    run_start = s;
    run_bin = bin;
  }
  out += "<g><title>" + rank_with_host(job, rank.rank);
  if (!wait_unmeasured.empty()) {
    out += ": exposed wait n/a: " + escape(wait_unmeasured);
  } else if (known_steps == 0) {
    out += ": no steps";
  } else {
    out += ": exposed wait " + format_duration(total_wait / static_cast<int64_t>(known_steps)) +
           " per step, most " + format_duration(worst_wait) + " in step " + step_label(job, worst_step);
  }
  out += "</title>";
  for (int bin = 0; bin <= kWaitBins; ++bin) {
    if (paths[bin].empty()) continue;
    out += "<path class=\"" + (bin == kWaitBins ? std::string("w-none") : "w" + std::to_string(bin)) + "\" d=\"" +
           paths[bin] + "\"/>";
  }
  out += "</g>\n";
}

void write_wait_heatmap(const Report& report, std::string& out) {
  const JobProfile& job = report.profile;
  const size_t steps = step_count(job);
  out += "<section id=\"wait-section\">\n<h2>Exposed wait, rank by step</h2>\n";
  if (job.ranks.empty() || steps == 0) {
    write_note(out, "No steps were found, so there is no wait to draw.", "wait-heatmap-note");
    out += "</section>\n";
    return;
  }
  // Ranks whose wait cannot be told from transfer are grey, as steps without data.
  std::vector<std::string> wait_unmeasured(job.ranks.size());
  for (size_t i = 0; i < job.ranks.size() && i < report.overlap.size(); ++i) {
    wait_unmeasured[i] = report.overlap[i].wait_unmeasured;
  }
  int64_t max_wait = 0;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    for (const RankStep& step : job.ranks[i].steps) {
      if (has_times(step) && wait_unmeasured[i].empty()) max_wait = std::max(max_wait, step.exposed_wait_ns);
    }
  }

  // Cells shrink to fit about 760 × 560 pixels, down to one pixel: every rank
  // keeps its own row however many there are, and the plot scrolls beyond.
  const int cell_width = std::clamp(760 / static_cast<int>(std::min<size_t>(steps, 760)), 1, 40);
  const int cell_height = std::clamp(560 / static_cast<int>(std::min<size_t>(job.ranks.size(), 560)), 1, 22);
  const double left = 64, top = 58, right = 230, bottom = 44;
  const double grid_width = static_cast<double>(steps) * cell_width;
  const double grid_height = static_cast<double>(job.ranks.size()) * cell_height;
  const double legend_swatch = 30;
  const double width = std::max(left + grid_width + right, left + legend_swatch * (kWaitBins + 4) + 40);
  const double height = top + grid_height + bottom;
  write_svg_open(out, "wait-heatmap", width, height, "exposed wait per rank and step");

  // Legend: the colour scale with its edges, and the colour of missing steps.
  write_text(out, left, 14, "exposed wait in a step", "class=\"axis-title\"");
  for (int bin = 0; bin < kWaitBins; ++bin) {
    write_rect(out, left + bin * legend_swatch, 22, legend_swatch, 12, "w" + std::to_string(bin));
  }
  for (int edge = 0; edge <= kWaitBins; edge += 3) {
    const int64_t edge_ns = max_wait * edge / kWaitBins;
    write_text(out, left + edge * legend_swatch, 46, edge_ns == 0 ? "0" : format_duration(edge_ns),
               "text-anchor=\"middle\"");
  }
  const double missing_x = left + (kWaitBins + 1) * legend_swatch;
  write_rect(out, missing_x, 22, legend_swatch, 12, "w-none");
  write_text(out, missing_x + legend_swatch + 4, 32, "no data, or wait n/a");

  out += "<g shape-rendering=\"crispEdges\">\n";
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    write_heatmap_row(job, job.ranks[i], wait_unmeasured[i], steps, max_wait, left,
                      top + static_cast<double>(i) * cell_height, cell_width, cell_height, out);
  }
  out += "</g>\n";

  const int rank_stride = label_stride(14.0 / cell_height);
  for (size_t i = 0; i < job.ranks.size(); i += rank_stride) {
    const double y = top + (static_cast<double>(i) + 0.5) * cell_height;
    write_line(out, left - 4, y, left, y, "axis");
    write_text(out, left - 6, y + 4, std::to_string(job.ranks[i].rank), "text-anchor=\"end\"");
  }
  const int step_stride = label_stride(34.0 / cell_width);
  for (size_t s = 0; s < steps; s += step_stride) {
    const double x = left + (static_cast<double>(s) + 0.5) * cell_width;
    write_line(out, x, top + grid_height, x, top + grid_height + 4, "axis");
    write_text(out, x, top + grid_height + 16, step_label(job, s), "text-anchor=\"middle\"");
  }
  write_text(out, 14, top + grid_height / 2, "rank",
             "class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 14 " +
                 coord(top + grid_height / 2) + ")\"");
  write_text(out, left + grid_width / 2, top + grid_height + 36, "step", "class=\"axis-title\" text-anchor=\"middle\"");

  // Stragglers are marked beside their rows; labels are pushed apart where
  // rows are too thin to hold one each.
  double last_label_y = -1e9;
  std::vector<std::pair<double, const Straggler*>> marked;
  for (const Straggler& straggler : report.stragglers.stragglers) {
    for (size_t i = 0; i < job.ranks.size(); ++i) {
      if (job.ranks[i].rank == straggler.rank) {
        marked.emplace_back(top + (static_cast<double>(i) + 0.5) * cell_height, &straggler);
      }
    }
  }
  std::sort(marked.begin(), marked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [row_y, straggler] : marked) {
    const double y = std::max(row_y, last_label_y + 13);
    last_label_y = y;
    write_text(out, left + grid_width + 6, y + 4,
               "◀ straggler " + std::to_string(straggler->rank) + ": " + escape(straggler->cause),
               "class=\"marker\"");
  }
  write_svg_close(out);
  out += "<p class=\"caption\">Each cell is the time a rank spent, in one step, waiting for the last rank to "
         "reach a collective while it was not computing. The rank everyone waits for shows as a light row among "
         "dark ones; grey cells are steps the rank did not record (it died, or its events were lost), or ranks whose "
         "waiting cannot be told from transfer (no other rank to compare with, no collective matched with another "
         "rank's, or clocks not aligned).</p>\n";
  out += "</section>\n";
}

// ------------------------------------------------------------ stragglers ---

void write_straggler_table(const Report& report, std::string& out) {
  const JobProfile& job = report.profile;
  out += "<section id=\"straggler-section\">\n<h2>Stragglers</h2>\n";
  if (!report.stragglers.unmeasured.empty()) {
    write_note(out, "Stragglers n/a: " + report.stragglers.unmeasured + ".", "straggler-note");
    out += "</section>\n";
    return;
  }
  if (report.stragglers.stragglers.empty()) {
    write_note(out, "No straggler found: no rank was last to arrive often enough, or cost the others enough "
                    "waiting, to stand out.", "straggler-note");
    out += "</section>\n";
    return;
  }
  // The evidence is a paragraph: it gets the table's width on a row of its own.
  out += "<div class=\"table-wrap\"><table id=\"straggler-table\">\n<thead><tr><th class=\"num\">rank</th>"
         "<th>host</th><th class=\"num\">score</th><th>cause</th><th class=\"num\">last to arrive</th>"
         "<th class=\"num\">others waited</th><th class=\"num\">compute vs fastest</th>"
         "<th class=\"num\">mean step: measured / as fast as the median rank</th></tr></thead>\n";
  for (const Straggler& straggler : report.stragglers.stragglers) {
    const RankProfile* profile = find_rank(job, straggler.rank);
    out += "<tbody><tr><td class=\"num\">" + (straggler.rank >= 0 ? std::to_string(straggler.rank) : "—") +
           "</td><td>" + (profile ? escape(profile->host) : std::string()) + "</td><td class=\"num\">" +
           trimmed(straggler.score, 2) + "</td><td>" + escape(straggler.cause) + "</td><td class=\"num\">" +
           format_percent(100 * straggler.last_arriver_rate) + " (chance " +
           format_percent(100 * straggler.baseline_rate) + ")</td><td class=\"num\">" +
           format_duration(straggler.blame_ns) + " (" + format_percent(100 * straggler.blame_fraction) +
           ")</td><td class=\"num\">" + trimmed(straggler.compute_score_relative, 2) + "×</td><td class=\"num\">" +
           format_duration(straggler.actual_step_ns) + " / " + format_duration(straggler.what_if_step_ns) +
           "</td></tr>\n<tr><td></td><td colspan=\"7\" class=\"evidence\">" + escape(straggler.evidence) +
           "</td></tr></tbody>\n";
  }
  out += "</table></div>\n</section>\n";
}

// --------------------------------------------------------------- overlap ---

// ------------------------------------------------------- step breakdown ---

// Per-rank tables of larger jobs start folded so that they do not bury the sections below.
constexpr size_t kRankTablesOpenUpTo = 32;


// The parts of a step as the bars draw them: communication's two halves, then
// the categories in booking order.
struct BreakdownPart {
  const char* label;
  const char* css_class;
  int64_t StepSplit::*ns;  // communication's halves
  StepCategory category;   // the others
};
constexpr BreakdownPart kBreakdownParts[] = {
    {"communication: waiting for the last rank", "c-wait", &StepSplit::comm_wait_ns, StepCategory::kCommunication},
    {"communication: transfer", "c-transfer", &StepSplit::comm_transfer_ns, StepCategory::kCommunication},
    {"data loading", "c-data", nullptr, StepCategory::kDataLoading},
    {"optimizer", "c-optimizer", nullptr, StepCategory::kOptimizer},
    {"backward", "c-backward", nullptr, StepCategory::kBackward},
    {"forward", "c-forward", nullptr, StepCategory::kForward},
    {"other", "c-other", nullptr, StepCategory::kOther},
};

int64_t part_ns(const StepSplit& split, const BreakdownPart& part) {
  return part.ns ? split.*part.ns : split.ns[static_cast<size_t>(part.category)];
}

// One bar per rank, its whole step time split by category. Bars thin down
// to a pixel so that a thousand ranks keep a row each; every k-th is labelled.
void write_breakdown_bars(const Report& report, std::string& out) {
  const size_t ranks = report.breakdown.size();
  const double pitch = std::clamp(560.0 / static_cast<double>(std::max<size_t>(ranks, 1)), 1.0, 22.0);
  const double left = 70, top = 48, bar = pitch >= 4 ? pitch * 0.75 : pitch, plot_width = 620;
  const double height = top + pitch * static_cast<double>(ranks) + 10;
  const int stride = label_stride(14.0 / pitch);
  write_svg_open(out, "breakdown-bars", left + plot_width + 20, height, "each rank's step time by category");
  // The legend in two rows: communication's halves, then the rest.
  double x = left, legend_y = 6;
  for (const BreakdownPart& part : kBreakdownParts) {
    if (part.category == StepCategory::kDataLoading) x = left, legend_y += 18;
    write_rect(out, x, legend_y, 10, 10, part.css_class);
    write_text(out, x + 14, legend_y + 9, escape(part.label));
    x += 14 + 6.5 * static_cast<double>(std::string_view(part.label).size()) + 14;
  }
  double y = top;
  for (size_t i = 0; i < ranks; ++i) {
    const RankBreakdown& b = report.breakdown[i];
    if (i % static_cast<size_t>(stride) == 0) {
      write_text(out, left - 6, y + std::min(bar, 12.0), "rank " + std::to_string(b.rank), "text-anchor=\"end\"");
    }
    if (!b.unmeasured.empty() || b.total.total_ns <= 0) {
      write_rect(out, left, y, plot_width, bar, "w-none", "rank " + std::to_string(b.rank) + ": " + escape(b.unmeasured));
    } else {
      double at = left;
      for (const BreakdownPart& part : kBreakdownParts) {
        const bool split_unknown = part.ns && !b.split_unmeasured.empty();
        if (part.ns == &StepSplit::comm_transfer_ns && split_unknown) continue;  // drawn whole as one part
        const int64_t ns = split_unknown ? b.total.ns[static_cast<size_t>(StepCategory::kCommunication)]
                                         : part_ns(b.total, part);
        const double share = static_cast<double>(std::max<int64_t>(ns, 0)) / static_cast<double>(b.total.total_ns);
        if (share <= 0) continue;
        const char* label = split_unknown ? "communication (wait and transfer n/a)" : part.label;
        write_rect(out, at, y, share * plot_width, bar, part.css_class,
                   "rank " + std::to_string(b.rank) + ": " + escape(label) + " " + format_percent(100 * share));
        at += share * plot_width;
      }
    }
    y += pitch;
  }
  write_svg_close(out);
}

void write_breakdown_section(const Report& report, std::string& out) {
  out += "<section id=\"breakdown-section\">\n<h2>Where the step time goes</h2>\n";
  if (report.breakdown.empty()) {
    write_note(out, "No rank has step figures to break down.", "breakdown-note");
    out += "</section>\n";
    return;
  }
  write_breakdown_bars(report, out);
  out += "<p class=\"caption\">Each rank's step time, each nanosecond counted once, in this order: communication "
         "that nothing hid (waiting for the last rank, then transfer), data loading, optimizer, backward, forward "
         "(the host's ranges of those phases), other. A category never seen on a rank is n/a below; its time is in "
         "other.</p>\n";
  const bool open = report.breakdown.size() <= kRankTablesOpenUpTo;
  out += std::string("<details") + (open ? " open" : "") + "><summary>shares per rank</summary>\n"
         "<div class=\"table-wrap\"><table id=\"breakdown-table\">\n<thead><tr><th class=\"num\">rank</th>"
         "<th class=\"num\">step time</th>";
  for (int c = 0; c < kStepCategoryCount; ++c) {
    out += std::string("<th class=\"num\">") + step_category_label(static_cast<StepCategory>(c)) + "</th>";
  }
  out += "</tr></thead>\n<tbody>\n";
  std::map<std::string, std::vector<int32_t>> reasons;
  for (const RankBreakdown& b : report.breakdown) {
    out += "<tr><td class=\"num\">" + std::to_string(b.rank) + "</td>";
    if (!b.unmeasured.empty()) {
      out += "<td colspan=\"" + std::to_string(kStepCategoryCount + 1) + "\">n/a: " + escape(b.unmeasured) + "</td></tr>\n";
      continue;
    }
    const size_t ran = std::max<size_t>(1, std::count_if(b.steps.begin(), b.steps.end(),
                                                         [](const auto& step) { return step.has_value(); }));
    out += "<td class=\"num\">" + format_duration(b.total.total_ns / static_cast<int64_t>(ran)) + "</td>";
    for (int c = 0; c < kStepCategoryCount; ++c) {
      if (!b.category_unmeasured[c].empty()) {
        out += "<td class=\"num\">n/a</td>";
        reasons[std::string(step_category_label(static_cast<StepCategory>(c))) + ": " + b.category_unmeasured[c]]
            .push_back(b.rank);
        continue;
      }
      const double total = b.total.total_ns > 0 ? static_cast<double>(b.total.total_ns) : 1;
      out += "<td class=\"num\">" + format_percent(100.0 * static_cast<double>(b.total.ns[c]) / total) + "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n</details>\n";
  for (const auto& [reason, ranks] : reasons) {
    write_note(out, "n/a on rank" + std::string(ranks.size() > 1 ? "s " : " ") + format_rank_list(ranks) + ", " +
                        escape(reason) + ".");
  }
  out += "</section>\n";
}

void write_overlap_bars(const Report& report, std::string& out) {
  const size_t ranks = report.overlap.size();
  const int pitch = std::clamp(760 / static_cast<int>(std::min<size_t>(ranks, 760)), 1, 36);
  const int gap = pitch >= 4 ? std::max(1, pitch / 5) : 0;
  const double left = 56, top = 40, plot_height = 180, bottom = 44, right = 90;
  const double plot_width = static_cast<double>(ranks) * pitch;
  const double width = std::max(left + plot_width + right, 520.0);
  write_svg_open(out, "overlap-bars", width, top + plot_height + bottom,
                 "share of each rank's communication overlapped by compute");

  write_rect(out, left, 8, 12, 12, "bar");
  write_text(out, left + 16, 18, "communication overlapped by compute");
  write_rect(out, left + 250, 8, 12, 12, "no-comm");
  write_text(out, left + 266, 18, "no communication");
  write_rect(out, left + 400, 8, 12, 12, "w-none");
  write_text(out, left + 416, 18, "missing: no data");

  const Scale y{0, 100, top + plot_height, top};
  for (const double tick : {0.0, 25.0, 50.0, 75.0, 100.0}) {
    write_line(out, left, y(tick), left + plot_width, y(tick), "grid");
    write_text(out, left - 6, y(tick) + 4, trimmed(tick, 0) + " %", "text-anchor=\"end\"");
  }
  double sum = 0;
  size_t communicating = 0;
  for (size_t i = 0; i < ranks; ++i) {
    const RankOverlap& rank = report.overlap[i];
    const double x = left + static_cast<double>(i) * pitch + gap / 2.0;
    if (rank.status == RankStatus::kMissing) {
      write_rect(out, x, top, pitch - gap, plot_height, "w-none", "rank " + std::to_string(rank.rank) + ": missing, no data");
    } else if (std::isfinite(rank.comm_comp_overlap_pct)) {
      const double pct = std::clamp(rank.comm_comp_overlap_pct, 0.0, 100.0);
      sum += pct;
      ++communicating;
      write_rect(out, x, y(pct), pitch - gap, y(0) - y(pct), "bar",
                 "rank " + std::to_string(rank.rank) + ": " + format_percent(rank.comm_comp_overlap_pct) +
                     " of " + format_duration(rank.comm_ns) + " communication overlapped");
    } else {
      write_rect(out, x, top, pitch - gap, plot_height, "no-comm",
                 "rank " + std::to_string(rank.rank) + ": no communication");
    }
  }
  if (communicating > 0) {
    const double mean = sum / static_cast<double>(communicating);
    write_line(out, left, y(mean), left + plot_width, y(mean), "mean");
    write_text(out, left + plot_width + 4, y(mean) + 4, "mean " + format_percent(mean));
  }
  write_line(out, left, y(0), left + plot_width, y(0), "axis");
  const int stride = label_stride(34.0 / pitch);
  for (size_t i = 0; i < ranks; i += stride) {
    const double x = left + (static_cast<double>(i) + 0.5) * pitch;
    write_line(out, x, y(0), x, y(0) + 4, "axis");
    write_text(out, x, y(0) + 16, std::to_string(report.overlap[i].rank), "text-anchor=\"middle\"");
  }
  write_text(out, left + plot_width / 2, y(0) + 36, "rank", "class=\"axis-title\" text-anchor=\"middle\"");
  write_svg_close(out);
}

void write_rank_table(const Report& report, std::string& out) {
  const JobProfile& job = report.profile;
  out += printf_string("<details%s><summary>per-rank figures, %zu ranks (totals over all steps)</summary>\n",
                       report.overlap.size() <= kRankTablesOpenUpTo ? " open" : "", report.overlap.size());
  out += "<div class=\"table-wrap\"><table id=\"rank-table\">\n<thead><tr><th class=\"num\">rank</th><th>host</th>"
         "<th class=\"num\">node</th><th>status</th><th class=\"num\">comm overlapped</th>"
         "<th class=\"num\">compute</th><th class=\"num\">communication</th><th class=\"num\">overlap</th>"
         "<th class=\"num\">exposed wait</th><th class=\"num\">exposed transfer</th><th class=\"num\">idle</th>"
         "<th class=\"num\">idle share</th></tr></thead>\n<tbody>\n";
  for (const RankOverlap& rank : report.overlap) {
    const RankProfile* profile = find_rank(job, rank.rank);
    if (rank.status == RankStatus::kMissing) {
      out += "<tr><td class=\"num\">" + std::to_string(rank.rank) +
             "</td><td></td><td class=\"num\">—</td><td>missing</td><td colspan=\"8\">no data</td></tr>\n";
      continue;
    }
    if (const std::string_view unmeasured = profile ? rank_unmeasured(*profile) : ""; !unmeasured.empty()) {
      out += "<tr><td class=\"num\">" + std::to_string(rank.rank) + "</td><td>" + escape(profile->host) +
             "</td><td class=\"num\">" + (profile->node_id >= 0 ? std::to_string(profile->node_id) : "—") +
             "</td><td>" + rank_status_name(profile->status) + "</td><td colspan=\"8\">" +
             escape(std::string(unmeasured)) + "</td></tr>\n";
      continue;
    }
    const auto wait_figure = [&](int64_t ns) {
      return rank.wait_unmeasured.empty() ? format_duration(ns)
                                          : "<span title=\"" + escape(rank.wait_unmeasured) + "\">n/a</span>";
    };
    out += "<tr><td class=\"num\">" + std::to_string(rank.rank) + "</td><td>" +
           (profile ? escape(profile->host) : std::string()) + "</td><td class=\"num\">" +
           (profile && profile->node_id >= 0 ? std::to_string(profile->node_id) : std::string("—")) + "</td><td>" +
           (profile ? rank_status_name(profile->status) : "—") + "</td><td class=\"num\">" +
           (std::isfinite(rank.comm_comp_overlap_pct) ? format_percent(rank.comm_comp_overlap_pct)
                                                      : std::string("no communication")) +
           "</td><td class=\"num\">" + format_duration(rank.compute_ns) + "</td><td class=\"num\">" +
           format_duration(rank.comm_ns) + "</td><td class=\"num\">" + format_duration(rank.overlap_ns) +
           "</td><td class=\"num\">" + wait_figure(rank.exposed_wait_ns) + "</td><td class=\"num\">" +
           wait_figure(rank.exposed_transfer_ns) + "</td><td class=\"num\">" + format_duration(rank.idle_ns) +
           "</td><td class=\"num\">" + format_percent(rank.idle_pct) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n</details>\n";
}

// --hta-compat: HTA's own figures per rank, beside rankscope's above.
void write_hta_table(const Report& report, std::string& out) {
  if (std::none_of(report.overlap.begin(), report.overlap.end(), [](const RankOverlap& o) { return o.hta; })) {
    return;
  }
  out += printf_string("<details%s><summary>as Holistic Trace Analysis defines them (--hta-compat): kernels classified "
                       "by name, its window, whole µs</summary>\n",
                       report.overlap.size() <= kRankTablesOpenUpTo ? " open" : "");
  out += "<div class=\"table-wrap\"><table id=\"hta-table\">\n<thead><tr><th class=\"num\">rank</th>"
         "<th class=\"num\">comm overlapped</th><th class=\"num\">kernel time</th><th class=\"num\">idle</th>"
         "<th class=\"num\">compute</th><th class=\"num\">non-compute</th></tr></thead>\n<tbody>\n";
  for (const RankOverlap& rank : report.overlap) {
    if (!rank.hta) continue;
    const HtaFigures& hta = *rank.hta;
    out += "<tr><td class=\"num\">" + std::to_string(rank.rank) + "</td><td class=\"num\">" +
           (std::isnan(hta.comm_comp_overlap_pct) ? std::string("no communication kernel")
                                                  : printf_string("%.2f %%", hta.comm_comp_overlap_pct)) +
           "</td>";
    if (hta.kernel_time_ns == 0) {
      out += "<td colspan=\"4\">no GPU event in its window</td></tr>\n";
      continue;
    }
    out += "<td class=\"num\">" + format_duration(hta.kernel_time_ns) + "</td>" +
           printf_string("<td class=\"num\">%.2f %%</td><td class=\"num\">%.2f %%</td><td class=\"num\">%.2f %%</td>"
                         "</tr>\n",
                         hta.idle_pct, hta.compute_pct, hta.non_compute_pct);
  }
  out += "</tbody></table></div>\n</details>\n";
}

void write_overlap_section(const Report& report, std::string& out) {
  out += "<section id=\"overlap-section\">\n<h2>Communication overlapped by compute</h2>\n";
  if (report.overlap.empty()) {
    write_note(out, "No per-rank figures: the job has no ranks with steps.", "overlap-note");
  } else {
    write_overlap_bars(report, out);
    out += "<p class=\"caption\">The share of each rank's communication time during which it also computed. "
           "Communication that is not overlapped is exposed: the rank waits for it.</p>\n";
    write_rank_table(report, out);
    write_hta_table(report, out);
  }
  out += "</section>\n";
}

// --------------------------------------------------------------- buckets ---

// Byte sizes of both bucket plots share one axis so that they line up.
Scale bucket_size_scale(const BucketReport& buckets, double pixel_low, double pixel_high) {
  double smallest = INFINITY, largest = 0;
  auto include = [&](uint64_t bytes) {
    const double value = std::max<double>(static_cast<double>(bytes), 1);
    smallest = std::min(smallest, value);
    largest = std::max(largest, value);
  };
  for (const BucketStats& bucket : buckets.buckets) include(bucket.bytes);
  for (const BucketPrediction& prediction : buckets.predictions) include(prediction.bucket_bytes);
  if (buckets.recommended_bucket_bytes > 0) include(buckets.recommended_bucket_bytes);
  // Half a power of two of margin on each side, and at least two powers of two shown.
  double low = smallest / std::sqrt(2.0), high = largest * std::sqrt(2.0);
  if (high < low * 4) {
    const double centre = std::sqrt(low * high);
    low = centre / 2;
    high = centre * 2;
  }
  return {low, high, pixel_low, pixel_high, true};
}

// Bus bandwidth (left axis) and exposed time (right axis) of every bucket.
void write_bucket_plot(const BucketReport& buckets, std::string& out) {
  const double left = 64, top = 40, plot_width = 640, plot_height = 220, right = 80, bottom = 46;
  const Scale x = bucket_size_scale(buckets, left, left + plot_width);
  double most_bandwidth = 0;
  int64_t most_exposed = 0;
  for (const BucketStats& bucket : buckets.buckets) {
    if (std::isfinite(bucket.bus_bandwidth_gbps)) most_bandwidth = std::max(most_bandwidth, bucket.bus_bandwidth_gbps);
    most_exposed = std::max(most_exposed, bucket.exposed_ns);
  }
  const std::vector<double> bandwidth_ticks = nice_ticks(0, most_bandwidth > 0 ? most_bandwidth : 1, 5);
  const std::vector<double> exposed_ticks =
      nice_ticks(0, most_exposed > 0 ? static_cast<double>(most_exposed) : 1000, 5);
  const Scale bandwidth{0, bandwidth_ticks.back(), top + plot_height, top};
  const Scale exposed{0, exposed_ticks.back(), top + plot_height, top};

  write_svg_open(out, "bucket-plot", left + plot_width + right, top + plot_height + bottom,
                 "bus bandwidth and exposed time by bucket size");
  out += "<circle cx=\"" + coord(left + 6) + "\" cy=\"14\" r=\"5\" class=\"bandwidth\"/>\n";
  write_text(out, left + 16, 18, "bus bandwidth (left axis)");
  write_rect(out, left + 200, 9, 10, 10, "exposed");
  write_text(out, left + 216, 18, "exposed time per step (right axis)");

  for (const double tick : bandwidth_ticks) {
    write_line(out, left, bandwidth(tick), left + plot_width, bandwidth(tick), "grid");
    write_text(out, left - 6, bandwidth(tick) + 4, significant(tick), "text-anchor=\"end\"");
  }
  for (const double tick : exposed_ticks) {
    write_text(out, left + plot_width + 6, exposed(tick) + 4, tick == 0 ? "0" : format_duration(std::llround(tick)));
  }
  write_line(out, left, top, left, top + plot_height, "axis");
  write_line(out, left + plot_width, top, left + plot_width, top + plot_height, "axis");
  write_text(out, 14, top + plot_height / 2, "GB/s",
             "class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 14 " +
                 coord(top + plot_height / 2) + ")\"");
  write_size_axis(out, x, top + plot_height, "bucket size");

  for (const BucketStats& bucket : buckets.buckets) {
    const std::string title = "bucket " + std::to_string(bucket.index) + ": " +
                              format_bytes(static_cast<double>(bucket.bytes)) + ", " +
                              format_bandwidth(bucket.bus_bandwidth_gbps) + ", exposed " +
                              format_duration(bucket.exposed_ns) + " per step";
    const double cx = x(static_cast<double>(bucket.bytes));
    if (std::isfinite(bucket.bus_bandwidth_gbps)) {
      out += "<circle cx=\"" + coord(cx) + "\" cy=\"" + coord(bandwidth(bucket.bus_bandwidth_gbps)) +
             "\" r=\"5\" class=\"bandwidth\"><title>" + title + "</title></circle>\n";
    }
    const double exposed_y = exposed(static_cast<double>(std::max<int64_t>(bucket.exposed_ns, 0)));
    write_rect(out, cx - 4, exposed_y - 4, 8, 8, "exposed", title);
  }
  write_svg_close(out);
}

// Predicted step time for each bucket size, the recommended size marked.
void write_prediction_plot(const BucketReport& buckets, std::string& out) {
  const double left = 64, top = 28, plot_width = 640, plot_height = 200, right = 80, bottom = 46;
  const Scale x = bucket_size_scale(buckets, left, left + plot_width);
  std::vector<BucketPrediction> predictions = buckets.predictions;
  std::sort(predictions.begin(), predictions.end(),
            [](const BucketPrediction& a, const BucketPrediction& b) { return a.bucket_bytes < b.bucket_bytes; });
  double fastest = INFINITY, slowest = -INFINITY;
  for (const BucketPrediction& prediction : predictions) {
    fastest = std::min(fastest, static_cast<double>(prediction.step_ns));
    slowest = std::max(slowest, static_cast<double>(prediction.step_ns));
  }
  // The differences between bucket sizes are often a few per cent of the
  // step: the axis spans the predictions, not zero to the slowest.
  const double margin = std::max({(slowest - fastest) * 0.1, std::fabs(slowest) * 0.02, 1.0});
  const std::vector<double> ticks = nice_ticks(std::max(fastest - margin, 0.0), slowest + margin, 5);
  const Scale y{ticks.front(), ticks.back(), top + plot_height, top};

  write_svg_open(out, "bucket-prediction-plot", left + plot_width + right, top + plot_height + bottom,
                 "predicted step time by bucket size");
  write_text(out, left, 14, "predicted step time", "class=\"axis-title\"");
  for (const double tick : ticks) {
    write_line(out, left, y(tick), left + plot_width, y(tick), "grid");
    write_text(out, left - 6, y(tick) + 4, tick == 0 ? "0" : format_duration(std::llround(tick)),
               "text-anchor=\"end\"");
  }
  write_line(out, left, top, left, top + plot_height, "axis");
  write_size_axis(out, x, top + plot_height, "bucket size");

  std::string path;
  for (const BucketPrediction& prediction : predictions) {
    path += (path.empty() ? "M" : "L") + coord(x(static_cast<double>(prediction.bucket_bytes))) + " " +
            coord(y(static_cast<double>(prediction.step_ns)));
  }
  out += "<path class=\"prediction\" d=\"" + path + "\"/>\n";
  for (const BucketPrediction& prediction : predictions) {
    out += "<circle cx=\"" + coord(x(static_cast<double>(prediction.bucket_bytes))) + "\" cy=\"" +
           coord(y(static_cast<double>(prediction.step_ns))) + "\" r=\"3.5\" class=\"prediction-point\"><title>" +
           format_bytes(static_cast<double>(prediction.bucket_bytes)) + " buckets: step " +
           format_duration(prediction.step_ns) + "</title></circle>\n";
  }
  if (buckets.recommended_bucket_bytes > 0) {
    const double rx = x(static_cast<double>(buckets.recommended_bucket_bytes));
    write_line(out, rx, top, rx, top + plot_height, "recommended");
    const bool label_left = rx > left + plot_width * 0.7;
    write_text(out, rx + (label_left ? -6 : 6), top + 12,
               "recommended " + format_bytes(static_cast<double>(buckets.recommended_bucket_bytes)),
               label_left ? "class=\"recommended-label\" text-anchor=\"end\"" : "class=\"recommended-label\"");
  }
  write_svg_close(out);
}

// A size, or n/a where the collectives carry none.
std::string size_cell(const BucketReport& buckets, uint64_t bytes) {
  return buckets.sizes_unmeasured.empty() ? format_bytes(static_cast<double>(bytes)) : "n/a";
}

void write_bucket_table(const BucketReport& buckets, std::string& out) {
  out += "<div class=\"table-wrap\"><table id=\"bucket-table\">\n<thead><tr><th class=\"num\">bucket</th>"
         "<th class=\"num\">size</th><th class=\"num\">transfer (median)</th><th class=\"num\">bus bandwidth</th>"
         "<th>algorithm</th><th class=\"num\">overlapped</th><th class=\"num\">exposed per step</th></tr></thead>\n"
         "<tbody>\n";
  for (const BucketStats& bucket : buckets.buckets) {
    out += "<tr><td class=\"num\">" + std::to_string(bucket.index) + "</td><td class=\"num\">" +
           size_cell(buckets, bucket.bytes) + "</td><td class=\"num\">" + format_duration(bucket.transfer_ns) +
           "</td><td class=\"num\">" +
           (buckets.sizes_unmeasured.empty() ? format_bandwidth(bucket.bus_bandwidth_gbps) : std::string("n/a")) +
           "</td><td>" +
           (bucket.algorithm == Algorithm::kNone ? std::string("—") : std::string(algorithm_name(bucket.algorithm))) +
           "</td><td class=\"num\">" + format_percent(bucket.overlap_pct) + "</td><td class=\"num\">" +
           format_duration(bucket.exposed_ns) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n";
}

void write_fsdp_units(const BucketReport& buckets, std::string& out) {
  out += "<h3>FSDP units</h3>\n<div class=\"table-wrap\"><table id=\"fsdp-unit-table\">\n<thead><tr>"
         "<th class=\"num\">unit</th><th class=\"num\">all-gather</th><th class=\"num\">all-gather exposed</th>"
         "<th class=\"num\">reduce-scatter</th><th class=\"num\">reduce-scatter exposed</th></tr></thead>\n<tbody>\n";
  for (const BucketReport::Unit& unit : buckets.units) {
    out += "<tr><td class=\"num\">" + std::to_string(unit.index) + "</td><td class=\"num\">" +
           size_cell(buckets, unit.allgather_bytes) + "</td><td class=\"num\">" +
           format_duration(unit.allgather_exposed_ns) + "</td><td class=\"num\">" +
           size_cell(buckets, unit.reduce_scatter_bytes) + "</td><td class=\"num\">" +
           format_duration(unit.reduce_scatter_exposed_ns) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n";
  if (!buckets.prefetch_note.empty()) out += "<p>" + escape(buckets.prefetch_note) + "</p>\n";
}

void write_bucket_section(const Report& report, std::string& out) {
  const BucketReport& buckets = report.buckets;
  out += "<section id=\"bucket-section\">\n<h2>Gradient buckets</h2>\n";
  if (!buckets.unmeasured.empty()) {
    write_note(out, "Gradient buckets and FSDP units n/a: " + buckets.unmeasured + ".", "bucket-note");
    out += "</section>\n";
    return;
  }
  if (buckets.buckets.empty() && buckets.predictions.empty() && buckets.units.empty()) {
    write_note(out, "No gradient buckets were found: the job has no gradient allreduces (DDP) nor all-gather and "
                    "reduce-scatter units (FSDP) inside its steps.", "bucket-note");
    out += "</section>\n";
    return;
  }
  if (!buckets.recommendation.empty()) out += "<p><strong>" + escape(buckets.recommendation) + "</strong></p>\n";
  if (!buckets.sizes_unmeasured.empty()) {
    write_note(out, "Sizes and bandwidths n/a: " + escape(buckets.sizes_unmeasured) + ".", "bucket-sizes-note");
  } else if (!buckets.buckets.empty()) {
    write_bucket_plot(buckets, out);
    out += "<p class=\"caption\">Each bucket's allreduce: the bus bandwidth it reached (as nccl-tests counts it), "
           "and how long per step it kept the ranks waiting. Small buckets reach less bandwidth; the last "
           "buckets of the backward pass have no compute left to hide behind.</p>\n";
  }
  if (!buckets.predictions.empty()) {
    write_prediction_plot(buckets, out);
    out += buckets.predicted_by == "replay"
               ? "<p class=\"caption\">The step time predicted for each bucket size by replaying " +
                     std::to_string(buckets.replayed_steps) + (buckets.replayed_steps == 1 ? " walked step" : " walked steps") +
                     " on the critical path's graph with the gradient allreduces regrouped" +
                     (buckets.replay_left_out.empty() ? "" : " (" + escape(buckets.replay_left_out) + ")")
               : std::string("<p class=\"caption\">The step time the transfer model predicts for each bucket size");
    if (buckets.fit.samples > 0) {
      out += ", from a fit over " + std::to_string(buckets.fit.samples) +
             " allreduces: latency α = " + format_duration(std::llround(buckets.fit.alpha_ns));
      // ns per byte is the inverse of bytes per ns, that is of GB/s.
      if (buckets.fit.ns_per_byte > 0) out += ", bandwidth " + format_bandwidth(1.0 / buckets.fit.ns_per_byte);
      out += ", R² = " + trimmed(buckets.fit.r_squared, 3);
    }
    out += ".</p>\n";
  }
  if (!buckets.buckets.empty()) {
    out += "<p>Exposed tail after the backward pass's last compute: " +
           (buckets.tail_unmeasured.empty() ? format_duration(buckets.exposed_tail_ns) + " per step (median)"
                                            : "n/a: " + escape(buckets.tail_unmeasured)) +
           ".</p>\n";
    write_bucket_table(buckets, out);
  }
  if (!buckets.units.empty()) write_fsdp_units(buckets, out);
  out += "</section>\n";
}

// ------------------------------------------------------------ processes ---

void write_process_section(const Report& report, std::string& out) {
  const std::string memory = peak_memory_summary(report.ends);
  if (memory.empty()) return;  // no agent or launcher recorded any
  out += "<section id=\"process-section\">\n<h2>What each rank's process used</h2>\n<p>" + escape(memory) + "</p>\n";
  out += "<details><summary>per-rank memory and CPU</summary>\n<div class=\"table-wrap\"><table id=\"process-table\">\n"
         "<thead><tr><th class=\"num\">rank</th><th>status</th><th class=\"num\">peak memory</th>"
         "<th class=\"num\">user CPU</th><th class=\"num\">system CPU</th>"
         "<th class=\"num\">involuntary switches</th><th class=\"num\">major faults</th></tr></thead>\n<tbody>\n";
  for (const RankEnd& end : report.ends) {
    if (!end.usage) continue;
    const ProcessUsage& u = *end.usage;
    out += "<tr><td class=\"num\">" + std::to_string(end.rank) + "</td><td>" +
           std::string(rank_status_name(end.status)) + "</td><td class=\"num\">" +
           format_bytes(static_cast<double>(u.peak_rss_bytes)) + "</td><td class=\"num\">" +
           format_duration(static_cast<double>(u.user_cpu_ns)) + "</td><td class=\"num\">" +
           format_duration(static_cast<double>(u.system_cpu_ns)) + "</td><td class=\"num\">" +
           std::to_string(u.involuntary_switches) + "</td><td class=\"num\">" + std::to_string(u.major_faults) +
           "</td></tr>\n";
  }
  out += "</tbody></table></div>\n</details>\n<p class=\"caption\">As the kernel counted them (getrusage): the "
         "agent's figures as the rank closed its shard, <code>rankscope run</code>'s for a process killed before it "
         "could. Many involuntary switches mean more runnable threads than cores; major faults, memory paged back "
         "in from disk.</p>\n</section>\n";
}

// ---------------------------------------------------------- capture cost ---

std::string polls_cell(const CaptureCost& c) {
  if (c.polls_counted == 0) return "0";
  const std::string count = std::to_string(c.polls_counted) + " × ";
  if (c.polls_unmeasured.empty()) return count + "≈ " + format_duration(c.polls_ns);
  return count + "n/a <span class=\"note\">(" + escape(c.polls_unmeasured) + ")</span>";
}

void write_capture_cost_section(const Report& report, std::string& out) {
  if (report.capture_cost.empty()) return;  // imported traces: no agent measured anything
  out += "<section id=\"cost-section\">\n<h2>What profiling cost</h2>\n";
  out += "<details><summary>per-rank capture cost, " + std::to_string(report.capture_cost.size()) +
         " ranks</summary>\n<div class=\"table-wrap\"><table id=\"cost-table\">\n<thead><tr>"
         "<th class=\"num\">rank</th><th class=\"num\">total</th><th class=\"num\">share of the run</th>"
         "<th class=\"num\">agent start</th><th class=\"num\">MPI_Init</th><th class=\"num\">MPI_Finalize</th>"
         "<th class=\"num\">last flush</th><th class=\"num\">writer thread CPU</th>"
         "<th class=\"num\">recorded calls (estimated)</th><th class=\"num\">counted polls (estimated)</th>"
         "<th class=\"num\">Python hook</th>"
         "<th class=\"num\">buffer memory</th></tr></thead>\n<tbody>\n";
  for (const CaptureCost& c : report.capture_cost) {
    out += "<tr><td class=\"num\">" + std::to_string(c.rank) + "</td><td class=\"num\">" +
           format_duration(c.total_ns()) + "</td><td class=\"num\">" + format_percent(c.share_pct()) +
           "</td><td class=\"num\">" + format_duration(c.start_ns) + "</td><td class=\"num\">" +
           format_duration(c.mpi_init_ns) + "</td><td class=\"num\">" + format_duration(c.mpi_finalize_ns) +
           "</td><td class=\"num\">" + format_duration(c.finish_ns) + "</td><td class=\"num\">" +
           format_duration(c.flusher_cpu_ns) + "</td><td class=\"num\">" + std::to_string(c.host_events) + " × " +
           "≈ " + format_duration(c.events_ns) + "</td><td class=\"num\">" + polls_cell(c) +
           "</td><td class=\"num\">" + format_duration(c.python_hook_ns) +
           "</td><td class=\"num\">" + format_bytes(static_cast<double>(c.buffer_bytes)) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n</details>\n<p class=\"caption\">Time the rank's process spent on capture "
         "rather than on the application: measured for start-up, MPI_Init, MPI_Finalize and the agent's writer "
         "thread; estimated for the recorded calls and the polls only counted (their number times the cost of one, "
         "calibrated on the rank's machine; n/a where the calibration could not tell a poll from MPI's own call, "
         "and the total then leaves the polls out); measured for the Python hook's own code.</p>\n</section>\n";
}

}  // namespace

std::string report_html(const Report& report) {
  std::string out = page_start("rankscope report: " + escape(report.profile.path), kStyle);
  write_header(report, out);
  if (!report.damage.empty()) {
    out += "<p class=\"alert\">Damaged timeline: " + escape(report.damage.summary()) +
           "; every figure here leaves those rows out.</p>\n";
  }
  if (!report.losses.empty()) {
    out += "<p class=\"alert\" id=\"lost-events\">Incomplete capture: " + escape(event_loss_summary(report.losses)) +
           "; those ranks' figures leave them out (<code>rankscope info</code> says why each was lost).</p>\n";
  }
  if (!report.profile.steps_cut.empty()) {
    out += "<p class=\"alert\" id=\"steps-cut\">Cut by capture windows: " +
           escape(describe_steps_cut(report.profile)) + ".</p>\n";
  }
  std::string killed;
  for (const RankEnd& end : report.ends) {
    if (const std::string how = describe_fatal_signal(end); !how.empty()) killed += "rank " + std::to_string(end.rank) + " " + how + "\n";
  }
  if (!killed.empty()) {
    out += "<section id=\"killed-section\">\n<h2>Ranks killed or crashed</h2>\n<pre class=\"alert\">" + escape(killed) +
           "</pre>\n<p class=\"caption\">Processes killed before they could close their shards (a SIGKILL from "
           "<code>kill -9</code>, the OOM killer or mpirun signalled twice), as <code>rankscope run</code> saw them: "
           "their events after the last flush are lost. A crashed process (a fault or abort()) closed its shard "
           "first: its events up to the crash are kept, unless the crash came where its capture could not catch "
           "it (before its handlers were in place, or under a handler the program set first).</p>\n</section>\n";
  }
  if (!report.hangs.empty() || !report.deadlocks.empty()) {
    out += "<section id=\"hang-section\">\n<h2>Hangs</h2>\n<pre class=\"alert\">";
    for (const Hang& hang : report.hangs) out += escape(describe_hang(hang));
    for (const Deadlock& deadlock : report.deadlocks) out += escape(describe_deadlock(deadlock));
    out += "</pre>\n<p class=\"caption\">Collectives some ranks entered and never left (run --hang-timeout, or "
           "ranks ended inside them), and NCCL sends and receives whose kernels waited for their peer or for the "
           "transfer itself, with what "
           "the ranks that had not entered were doing; ranks that each waited for a message of the next, in a "
           "cycle.</p>\n</section>\n";
  }
  write_bottlenecks_html(report, out);
  write_wait_heatmap(report, out);
  write_straggler_table(report, out);
  write_critical_path_html(report, out);
  write_breakdown_section(report, out);
  write_overlap_section(report, out);
  write_bucket_section(report, out);
  write_process_section(report, out);
  write_capture_cost_section(report, out);
  out += page_end();
  return out;
}

}  // namespace rankscope::analysis
