// The critical path's section of the report: text and JSON.
#include <algorithm>
#include <string>

#include "rankscope/model/format.h"
#include "report_sections.h"

namespace rankscope::analysis {
namespace {

double percent(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0; }

std::string name_of(const JobProfile& job, uint32_t name_id) {
  return name_id < job.strings->size() ? (*job.strings)[name_id] : "(outside any range)";
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
           " hops between ranks";
    if (!step.undecided.empty()) {
      out += "; " + std::to_string(step.undecided.size()) + " of them closer than the clocks' bounds tell apart";
    }
    out += "\n";
  }
  out += "  by rank:";
  for (size_t i = 0; i < path.ranks.size() && i < 4; ++i) {
    const PathShare& share = path.ranks[i];
    out += (i ? ", " : " ") + std::string("rank ") + std::to_string(share.rank) + " " +
           format_percent(percent(share.ns, path.total_ns));
  }
  out += "\n  by category:";
  for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
    int64_t ns = 0;
    for (const PathShare& share : path.ranks) ns += share.by_category[c];
    out += (c ? ", " : " ") + std::string(path_category_name(static_cast<PathCategory>(c))) + " " +
           format_percent(percent(ns, path.total_ns));
  }
  out += "\n";
  for (size_t i = 0; i < path.items.size() && i < 3; ++i) {
    const PathItem& item = path.items[i];
    out += "  rank " + std::to_string(item.rank) + ": " + name_of(report.profile, item.name_id) + " (" +
           std::string(path_category_name(item.category)) + "), " + format_duration(static_cast<double>(item.ns)) + "\n";
  }
}

void write_critical_path_json(JsonWriter& json, const Report& report) {
  const CriticalPath& path = report.critical_path;
  if (!path.unmeasured.empty()) {
    json.key("critical_path").null().key("critical_path_reason").value(path.unmeasured);
    return;
  }
  json.key("critical_path").begin_object().key("path_ns").value(path.total_ns);
  json.key("ranks").begin_array();
  for (const PathShare& share : path.ranks) {
    json.begin_object().key("rank").value(share.rank).key("ns").value(share.ns);
    json.key("share_pct").value(percent(share.ns, path.total_ns));
    for (size_t c = 0; c < static_cast<size_t>(PathCategory::kCount); ++c) {
      std::string key(path_category_name(static_cast<PathCategory>(c)));
      std::replace(key.begin(), key.end(), ' ', '_');
      json.key(key + "_share_pct").value(percent(share.by_category[c], path.total_ns));
    }
    json.end_object();
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
    json.end_array().key("segments").begin_array();
    for (const PathSegment& s : step.segments) {
      json.begin_object().key("rank").value(s.rank).key("begin_ns").value(s.begin_ns).key("end_ns").value(s.end_ns);
      json.key("category").value(path_category_name(s.category)).key("name").value(name_of(report.profile, s.name_id));
      json.end_object();
    }
    json.end_array().end_object();
  }
  json.end_array().end_object();
}

}  // namespace rankscope::analysis
