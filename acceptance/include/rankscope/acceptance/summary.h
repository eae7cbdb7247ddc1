// The verdict as `rankscope accept` writes it (docs/accept.md, "Outputs"):
// text, JSON and the HTML page.
#pragma once

#include <string>
#include <vector>

#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/verdict.h"

namespace rankscope {
class JsonWriter;
}

namespace rankscope::acceptance {

// One screen, failed items first.
std::string summary_text(const Acceptance& acceptance);
std::string summary_json(const Acceptance& acceptance, const Measurements& measurements);
// One self-contained page (docs/accept.md, "The HTML page"): the verdict,
// what failed with its evidence, the links as a heatmap, compute and memory
// as bars against `rules`' fail line, the collectives' bus bandwidth by size,
// the inventory.
std::string summary_html(const Acceptance& acceptance, const Measurements& measurements, const Rules& rules = {});

// The run-level section of the reference job: text lines, and the value of
// the JSON key `reference_job`.
std::string reference_job_text(const ReferenceJob& job, const std::vector<NodeVerdict>& nodes);
void write_reference_job_json(JsonWriter& json, const ReferenceJob& job, const std::vector<NodeVerdict>& nodes);

}  // namespace rankscope::acceptance
