// The output formats: each writes a plan's selection to `out`, Perfetto and
// Chrome JSON by walking it once (export_walk.h).
#pragma once

#include "export_output.h"
#include "export_plan.h"

namespace rankscope::export_detail {

struct Written {
  ExportCounts counts;
  uint64_t events_read = 0;
  uint64_t events_written = 0;
};

Written write_perfetto(const Timeline& timeline, const Plan& plan, OutputFile& out);
Written write_chrome_json(const Timeline& timeline, const Plan& plan, OutputFile& out);
Written write_kineto(const Timeline& timeline, const Plan& plan, OutputFolder& out);
Written write_otf2(const Timeline& timeline, const Plan& plan, OutputFolder& out);

}  // namespace rankscope::export_detail
