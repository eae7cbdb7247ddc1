// The critical path's section of the report: text and JSON.
#include <algorithm>
#include <string>

#include "rankscope/model/format.h"
#include "rankscope/model/html.h"
#include "report_sections.h"

namespace rankscope::analysis {
namespace {

std::string name_of(const JobProfile& job, uint32_t name_id) {
  return name_id < job.strings->size() ? (*job.strings)[name_id] : "(outside any range)";
}

// Touching stretches of one rank and category, as one: a path of thousands
// of short calls or kernels stays a page of a few hundred shapes, and its
// JSON megabytes, not tens of them.
struct JoinedStretch {
  size_t first = 0, last = 0;  // in the step's segments, latest first
  size_t longest = 0;          // the part that took the longest
  size_t parts() const { return last - first + 1; }
};

std::vector<JoinedStretch> joined_stretches(const StepPath& step) {
  std::vector<JoinedStretch> joined;
  const std::vector<PathSegment>& segments = step.segments;
  for (size_t first = 0; first < segments.size();) {
    JoinedStretch stretch{first, first, first};
    while (stretch.last + 1 < segments.size() && segments[stretch.last + 1].rank == segments[first].rank &&
           segments[stretch.last + 1].category == segments[first].category &&
           segments[stretch.last + 1].end_ns == segments[stretch.last].begin_ns) {
      ++stretch.last;
      if (segments[stretch.last].ns() > segments[stretch.longest].ns()) stretch.longest = stretch.last;
    }
    joined.push_back(stretch);
    first = stretch.last + 1;
  }
  return joined;
}

// A step's path in JSON whole up to this many segments; beyond, as joined stretches.
constexpr size_t kJsonSegmentsWhole = 10'000;

// The CSS class of a category's stretches (report_html.cpp's style).
std::string category_class(PathCategory category) { return "p" + std::to_string(static_cast<int>(category)); }

// One walked step: a row per rank on its path, the rank's step as a grey
// band and the path's stretches on it, coloured by category.
void write_step_strips(const Report& report, const StepPath& step, size_t index, std::string& out) {
  using namespace html;
  const JobProfile& job = report.profile;
  std::vector<int32_t> ranks;
  for (const PathSegment& s : step.segments) ranks.push_back(s.rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  const double left = 64, top = 12, row = 22, plot_width = 760, bottom = 40;
  const double span = static_cast<double>(std::max<int64_t>(step.end_ns - step.begin_ns, 1));
  const auto x_of = [&](int64_t t) { return left + plot_width * static_cast<double>(t - step.begin_ns) / span; };
  const double height = top + row * static_cast<double>(ranks.size()) + bottom;
  write_svg_open(out, "critical-path-" + std::to_string(index), left + plot_width + 20, height,
                 "the critical path of step " + std::to_string(job.step_numbers.at(step.step)));
  for (size_t i = 0; i < ranks.size(); ++i) {
    const double y = top + row * static_cast<double>(i);
    write_text(out, left - 6, y + 15, "rank " + std::to_string(ranks[i]), "text-anchor=\"end\"");
    const RankProfile& rank = job.ranks.at(static_cast<size_t>(ranks[i]));
    if (step.step < rank.steps.size() && rank.steps[step.step].times.begin_ns != kUnknown) {
      const StepTimes& t = rank.steps[step.step].times;
      write_rect(out, x_of(t.begin_ns), y + 3, std::max(x_of(t.end_ns) - x_of(t.begin_ns), 0.5), row - 6, "p-span");
    }
  }
  out += "<g shape-rendering=\"crispEdges\">\n";
  for (const JoinedStretch& stretch : joined_stretches(step)) {
    const PathSegment& s = step.segments[stretch.first];
    const int64_t begin = step.segments[stretch.last].begin_ns;
    const size_t i = static_cast<size_t>(std::lower_bound(ranks.begin(), ranks.end(), s.rank) - ranks.begin());
    const double y = top + row * static_cast<double>(i);
    const std::string what = stretch.parts() == 1 ? name_of(job, s.name_id) : std::to_string(stretch.parts()) + " stretches";
    write_rect(out, x_of(begin), y + 1, std::max(x_of(s.end_ns) - x_of(begin), 0.5), row - 2, category_class(s.category),
               escape(what + " (" + std::string(path_category_name(s.category)) + "), " +
                      format_duration(static_cast<double>(s.end_ns - begin))));
  }
  out += "</g>\n";
  const double axis_y = top + row * static_cast<double>(ranks.size()) + 4;
  write_line(out, left, axis_y, left + plot_width, axis_y, "axis");
  write_text(out, left, axis_y + 14, "0");
  write_text(out, left + plot_width, axis_y + 14, format_duration(span), "text-anchor=\"end\"");
  write_text(out, left + plot_width / 2, axis_y + 30, "time in the step", "class=\"axis-title\" text-anchor=\"middle\"");
  write_svg_close(out);
}

// "rank 3 computed at the other ranks' median (x0.41): step 12 in 61.2 ms,
// not 97.0 ms (-36.9 %; replayed unchanged: 97.0 ms)"
std::string what_if_text(const Report& report, const PathWhatIf& what_if) {
  std::string text = what_if.change;
  if (what_if.rank >= 0) text += " (x" + significant(what_if.factor) + ")";
  const double change = what_if.recorded_ns > 0 ? 100.0 * static_cast<double>(what_if.predicted_ns - what_if.recorded_ns) /
                                                      static_cast<double>(what_if.recorded_ns)
                                                : 0.0;
  return text + ": step " + std::to_string(report.profile.step_numbers.at(what_if.step)) + " in " +
         format_duration(static_cast<double>(what_if.predicted_ns)) + ", not " +
         format_duration(static_cast<double>(what_if.recorded_ns)) + " (" + format_percent(change) +
         "; replayed unchanged: " + format_duration(static_cast<double>(what_if.replayed_ns)) + ")";
}

// "over 16 steps walked, no rank is above its fair share beyond the steps'
// spread" / "rank 3 is above its fair share (+41.2 ± 1.3 points) ..."
std::string fair_share_text(const CriticalPath& path) {
  if (!path.fair_share_unmeasured.empty()) return "fair share n/a: " + path.fair_share_unmeasured;
  std::string above;
  for (const PathShare& share : path.ranks) {
    if (!share.above_fair_share) continue;
    above += std::string(above.empty() ? "" : ", ") + "rank " + std::to_string(share.rank) + " (+" +
             significant(100 * share.excess_mean) + " ± " + significant(100 * share.excess_error) + " points)";
  }
  const std::string over = "over " + std::to_string(path.steps_walked) + " steps walked, ";
  if (above.empty()) return over + "no rank is above its fair share beyond the steps' spread";
  return over + "above its fair share beyond the steps' spread: " + above;
}

std::string node_share_text(const CriticalPath& path) {
  std::string out;
  for (size_t i = 0; i < path.nodes.size() && i < 4; ++i) {
    out += (i ? ", " : "") + path.nodes[i].host + " " + share_text(path.nodes[i].ns, path.total_ns);
  }
  return out;
}

}  // namespace

void write_critical_path_text(const Report& report, std::string& out) {
  const CriticalPath& path = report.critical_path;
  out += "\ncritical path:";
  if (!path.unmeasured.empty()) {
    out += " n/a: " + path.unmeasured + "\n";
    return;
  }
  out += "\n";
  for (const StepPath& step : path.steps) {
    out += "  " + step.which + " step (" + std::to_string(report.profile.step_numbers.at(step.step)) + "): " +
           format_duration(static_cast<double>(step.path_ns())) + " on the path, " + std::to_string(step.hops) +
           (step.hops == 1 ? " crossing" : " crossings") + " between ranks";
    if (!step.undecided.empty()) {
      out += "; " + std::to_string(step.undecided.size()) + " of them closer than the clocks' bounds tell apart";
    }
    out += "\n";
  }
  out += "  by rank:";
  for (size_t i = 0; i < path.ranks.size() && i < 4; ++i) {
    const PathShare& share = path.ranks[i];
    out += (i ? ", " : " ") + std::string("rank ") + std::to_string(share.rank) + " " +
           share_text(share.ns, path.total_ns);
  }
  out += "\n  " + fair_share_text(path) + "\n";
  if (path.nodes.size() > 1) out += "  by node: " + node_share_text(path) + "\n";
  out += "  by category:";
  for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
    int64_t ns = 0;
    for (const PathShare& share : path.ranks) ns += share.by_category[c];
    out += (c ? ", " : " ") + std::string(path_category_name(static_cast<PathCategory>(c))) + " " +
           share_text(ns, path.total_ns);
  }
  out += "\n";
  for (size_t i = 0; i < path.items.size() && i < 3; ++i) {
    const PathItem& item = path.items[i];
    out += "  rank " + std::to_string(item.rank) + ": " + name_of(report.profile, item.name_id) + " (" +
           std::string(path_category_name(item.category)) + "), " + format_duration(static_cast<double>(item.ns)) + "\n";
  }
  if (!path.what_if_unmeasured.empty()) out += "  what if: n/a: " + path.what_if_unmeasured + "\n";
  for (const PathWhatIf& what_if : path.what_if) out += "  what if " + what_if_text(report, what_if) + "\n";
}

void write_critical_path_json(JsonWriter& json, const Report& report) {
  const CriticalPath& path = report.critical_path;
  if (!path.unmeasured.empty()) {
    json.key("critical_path").null().key("critical_path_reason").value(path.unmeasured);
    return;
  }
  json.key("critical_path").begin_object().key("path_ns").value(path.total_ns);
  json.key("steps_walked").value(path.steps_walked).key("fair_share_reason");
  if (path.fair_share_unmeasured.empty()) json.null();
  else json.value(path.fair_share_unmeasured);
  json.key("ranks").begin_array();
  for (const PathShare& share : path.ranks) {
    json.begin_object().key("rank").value(share.rank).key("ns").value(share.ns);
    json.key("share_pct").value(share_percent(share.ns, path.total_ns));
    json.key("excess_share_pct").value(100 * share.excess_mean).key("excess_error_pct").value(100 * share.excess_error);
    json.key("above_fair_share").value(share.above_fair_share);
    for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
      std::string key(path_category_name(static_cast<PathCategory>(c)));
      std::replace(key.begin(), key.end(), ' ', '_');
      json.key(key + "_share_pct").value(share_percent(share.by_category[c], path.total_ns));
    }
    json.end_object();
  }
  json.end_array().key("nodes").begin_array();
  for (const NodeShare& node : path.nodes) {
    json.begin_object().key("host").value(node.host).key("ns").value(node.ns);
    json.key("share_pct").value(share_percent(node.ns, path.total_ns)).end_object();
  }
  json.end_array().key("items").begin_array();
  for (const PathItem& item : path.items) {
    json.begin_object().key("name").value(name_of(report.profile, item.name_id)).key("rank").value(item.rank);
    json.key("category").value(path_category_name(item.category)).key("ns").value(item.ns).end_object();
  }
  json.end_array().key("steps").begin_array();
  for (const StepPath& step : path.steps) {
    json.begin_object().key("step").value(report.profile.step_numbers.at(step.step)).key("which").value(step.which);
    json.key("begin_ns").value(step.begin_ns).key("end_ns").value(step.end_ns).key("path_ns").value(step.path_ns());
    json.key("hops").value(step.hops).key("undecided").begin_array();
    for (const UndecidedEdge& edge : step.undecided) {
      json.begin_object().key("from_rank").value(edge.from_rank).key("to_rank").value(edge.to_rank);
      json.key("apart_ns").value(edge.apart_ns).key("bound_ns").value(edge.bound_ns).end_object();
    }
    const bool joined = step.segments.size() > kJsonSegmentsWhole;
    json.end_array().key("segments_joined").value(joined).key("segments").begin_array();
    const auto write_stretch = [&](const JoinedStretch& stretch) {
      const PathSegment& latest = step.segments[stretch.first];
      json.begin_object().key("rank").value(latest.rank).key("begin_ns").value(step.segments[stretch.last].begin_ns);
      json.key("end_ns").value(latest.end_ns).key("category").value(path_category_name(latest.category));
      json.key("name").value(name_of(report.profile, step.segments[stretch.longest].name_id));
      if (joined) json.key("parts").value(static_cast<uint64_t>(stretch.parts()));
      json.end_object();
    };
    if (joined) {
      for (const JoinedStretch& stretch : joined_stretches(step)) write_stretch(stretch);
    } else {
      for (size_t i = 0; i < step.segments.size(); ++i) write_stretch({i, i, i});
    }
    json.end_array().end_object();
  }
  json.end_array().key("what_if").begin_array();
  for (const PathWhatIf& what_if : path.what_if) {
    json.begin_object().key("step").value(report.profile.step_numbers.at(what_if.step));
    json.key("change").value(what_if.change).key("rank").value(what_if.rank).key("factor").value(what_if.factor);
    json.key("transfers").value(what_if.transfers).key("recorded_ns").value(what_if.recorded_ns);
    json.key("replayed_ns").value(what_if.replayed_ns).key("predicted_ns").value(what_if.predicted_ns).end_object();
  }
  json.end_array().key("what_if_reason");
  if (path.what_if_unmeasured.empty()) json.null();
  else json.value(path.what_if_unmeasured);
  json.end_object();
}

void write_critical_path_html(const Report& report, std::string& out) {
  using namespace html;
  const CriticalPath& path = report.critical_path;
  out += "<section id=\"critical-path-section\">\n<h2>Critical path</h2>\n";
  if (!path.unmeasured.empty()) {
    write_note(out, escape("Critical path n/a: " + path.unmeasured + "."), "critical-path-note");
    out += "</section>\n";
    return;
  }
  out += "<p class=\"legend\">";
  for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
    out += "<span class=\"swatch " + category_class(static_cast<PathCategory>(c)) + "\"></span>" +
           escape(path_category_name(static_cast<PathCategory>(c))) + " ";
  }
  out += "</p>\n";
  for (size_t i = 0; i < path.steps.size(); ++i) {
    const StepPath& step = path.steps[i];
    out += "<h3>" + escape(step.which) + " step (" + std::to_string(report.profile.step_numbers.at(step.step)) + "): " +
           format_duration(static_cast<double>(step.path_ns())) + " on the path, " + std::to_string(step.hops) +
           (step.hops == 1 ? " crossing" : " crossings") + " between ranks" +
           (step.undecided.empty() ? std::string()
                                   : ", " + std::to_string(step.undecided.size()) +
                                         " of them closer than the clocks' bounds tell apart") +
           "</h3>\n";
    write_step_strips(report, step, i, out);
  }
  out += "<div class=\"table-wrap\"><table id=\"critical-path-table\">\n<thead><tr><th class=\"num\">rank</th>"
         "<th class=\"num\">on the path</th>";
  for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
    out += "<th class=\"num\">" + escape(path_category_name(static_cast<PathCategory>(c))) + "</th>";
  }
  out += "</tr></thead>\n<tbody>\n";
  for (const PathShare& share : path.ranks) {
    out += "<tr><td class=\"num\">" + std::to_string(share.rank) + "</td><td class=\"num\">" +
           share_text(share.ns, path.total_ns) + "</td>";
    for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
      out += "<td class=\"num\">" + share_text(share.by_category[c], path.total_ns) + "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n<p class=\"caption\">The path walked back from where the step ended last "
         "(docs/report-reference.md, \"The critical path\"); each row a rank it crossed, its step in grey. Shares " +
         escape(fair_share_text(path)) + (path.nodes.size() > 1 ? "; by node: " + escape(node_share_text(path)) : "") +
         ". Longest on it: ";
  for (size_t i = 0; i < path.items.size() && i < 3; ++i) {
    const PathItem& item = path.items[i];
    out += (i ? "; " : "") + escape(name_of(report.profile, item.name_id)) + " on rank " + std::to_string(item.rank) +
           ", " + format_duration(static_cast<double>(item.ns));
  }
  out += ".</p>\n";
  if (!path.what_if_unmeasured.empty()) {
    write_note(out, escape("What-if on the path n/a: " + path.what_if_unmeasured + "."), "critical-path-what-if-note");
  }
  if (!path.what_if.empty()) {
    out += "<ul id=\"critical-path-what-if\">\n";
    for (const PathWhatIf& what_if : path.what_if) out += "<li>What if " + escape(what_if_text(report, what_if)) + "</li>\n";
    out += "</ul>\n<p class=\"caption\">The step replayed from the step before with one change: each rank's own "
           "time between its blocking calls as recorded, each blocking call ending once the collective or message "
           "it waited for arrived and was transferred as recorded (docs/report-reference.md, \"What-if on the "
           "path\").</p>\n";
  }
  out += "</section>\n";
}

}  // namespace rankscope::analysis
