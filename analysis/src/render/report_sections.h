// Sections of the report that live in files of their own, for the text,
// JSON and HTML renderers.
#pragma once

#include <string>

#include "rankscope/analysis/report.h"
#include "rankscope/model/json.h"

namespace rankscope::analysis {

// What is slow in a step: the verdict, the GPU breakdown, top kernels, idle gaps.
void write_bottlenecks_text(const Report& report, std::string& out);
void write_bottlenecks_json(JsonWriter& json, const Report& report);
void write_bottlenecks_html(const Report& report, std::string& out);

// The step's critical path across ranks.
void write_critical_path_text(const Report& report, std::string& out);
void write_critical_path_json(JsonWriter& json, const Report& report);
void write_critical_path_html(const Report& report, std::string& out);

// A rank's device figures over the steps it ran.
struct DeviceTotals {
  StepDeviceWork work;
  int64_t step_ns = 0;
  size_t steps = 0;
};
DeviceTotals device_totals(const RankProfile& rank);
// `part` in % of `whole`; 0 when `whole` is 0.
double share_percent(int64_t part, int64_t whole);
// "12.5 %" of `whole`; "0 %" when it is 0.
std::string share_text(int64_t part, int64_t whole);

}  // namespace rankscope::analysis
