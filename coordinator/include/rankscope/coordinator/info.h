// `rankscope info`: what a timeline holds and how sound it is.
#pragma once

#include <string>

#include "rankscope/timeline/timeline.h"

namespace rankscope {

// `events_checked`: every event was read (Timeline::check_events), so the
// integrity verdict covers the events too.
std::string info_text(const Timeline& timeline, bool events_checked);

// Keys: file, format_version, world_size, events, span_ns, job (id,
// start_wall_ns; null where unknown), ranks (rank, host,
// pid, local_rank, node_id, launcher, agent_version, capture, gpu_uuids,
// start_wall_ns, status, events, drops, first_ns, last_ns, last_heard_ns,
// counters), events_by_kind, missing_ranks, dead_ranks, terminated_ranks,
// aborted_ranks, crashed_ranks, clock, integrity (checksummed, events_checked, sound, damage).
std::string info_json(const Timeline& timeline, bool events_checked);

// Every data-quality counter rankscope knows, with what it means
// (`rankscope info --counters`).
std::string counters_text();

}  // namespace rankscope
