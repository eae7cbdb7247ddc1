// `rankscope info`: what a timeline holds and how sound it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/timeline/timeline.h"

namespace rankscope {

// `events_read`: what Timeline::check_events read of each rank, when every
// event was read; the integrity verdict then covers the events too, a
// rank's events left out as damaged are told apart from those read, and the
// events by kind are those read, not the counts the merge stored.
using EventsRead = std::optional<std::vector<EventsReadOfRank>>;
std::string info_text(const Timeline& timeline, const EventsRead& events_read);

// Keys: file, format_version, world_size, events, events_readable, span_ns,
// job (id, start_wall_ns; null where unknown), ranks (rank, host, pid,
// local_rank, node_id, launcher, agent_version, capture, gpu_uuids,
// start_wall_ns, status, events, events_readable, drops, first_ns, last_ns,
// last_heard_ns, counters), events_by_kind, missing_ranks, dead_ranks,
// terminated_ranks, aborted_ranks, crashed_ranks, clock, integrity
// (checksummed, events_checked, sound, damage). events_readable is null
// unless the events were read.
std::string info_json(const Timeline& timeline, const EventsRead& events_read);

// Every data-quality counter rankscope knows, with what it means
// (`rankscope info --counters`).
std::string counters_text();

}  // namespace rankscope
