// Sections of the report that live in files of their own, for report.cpp.
#pragma once

#include <string>

#include "rankscope/analysis/analysis.h"
#include "rankscope/model/json.h"

namespace rankscope::analysis {

// What is slow in a step: the verdict, the GPU breakdown, top kernels, idle gaps.
void write_bottlenecks_text(const Report& report, std::string& out);
void write_bottlenecks_json(JsonWriter& json, const Report& report);

}  // namespace rankscope::analysis
