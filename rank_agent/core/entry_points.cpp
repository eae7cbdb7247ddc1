// The capture library's C entry points (rankscope/rank_agent/agent.h): what
// the MPI shim, the capture sources and the Python hook call. Without an
// agent (a process `rankscope run` did not name) each does nothing.

#include "agent_parts.h"

using rankscope::agent::agent;

void rankscope_agent_range_edge(uint32_t name_id, uint64_t domain_key, int64_t at_ns, bool begins) {
  if (auto* a = agent()) a->range_windows().range_edge(name_id, domain_key, at_ns, begins);
}

void rankscope_agent_profiler_api(bool start, int64_t at_ns) {
  if (auto* a = agent()) a->range_windows().profiler_api(start, at_ns);
}

bool rankscope_agent_capturing(uint32_t source) {
  const auto* a = agent();
  return a && a->capturing(source);
}

const uint32_t* rankscope_agent_capture_bits() {
  static constexpr uint32_t kNone = 0;
  const auto* a = agent();
  return a ? a->capture_bits() : &kNone;
}

int32_t rankscope_agent_rank() {
  const auto* a = agent();
  return a ? a->rank() : -1;
}

int64_t rankscope_agent_now() {
  const auto* a = agent();
  return a ? a->now() : rankscope::clocksync::raw_now_ns();
}

void rankscope_agent_record(const rankscope::Event* event) {
  if (auto* a = agent()) a->recorder().record(*event);
}

uint32_t rankscope_agent_intern(const char* text, uint64_t length) {
  auto* a = agent();
  if (!a) return rankscope::agent::kNoName;
  const uint32_t id = a->recorder().strings().intern(std::string_view(text, length));
  if (id == rankscope::agent::kNoId) a->note_name_dropped();
  return id;
}

uint32_t rankscope_agent_thread_track() {
  auto* a = agent();
  return a ? a->recorder().thread_track() : rankscope::agent::kNoId;
}

rankscope::agent::CallInProgress* rankscope_agent_call_in_progress() {
  auto* a = agent();
  return a ? a->recorder().call_in_progress() : nullptr;
}

uint32_t rankscope_agent_track(rankscope::TrackType type, uint64_t os_id, int16_t device, const char* name) {
  auto* a = agent();
  if (!a) return rankscope::agent::kNoId;
  const uint32_t name_id = a->recorder().strings().intern(name);
  return a->recorder().tracks().find_or_add(type, os_id, device, name_id == rankscope::agent::kNoId ? 0 : name_id);
}

void rankscope_agent_set_placement(int32_t world_size, int32_t local_rank, int32_t local_size, int32_t node_id) {
  if (auto* a = agent()) a->set_placement(world_size, local_rank, local_size, node_id);
}

void rankscope_agent_set_job_start(int64_t wall_ns) {
  if (auto* a = agent()) a->set_job_start(wall_ns);
}

void rankscope_agent_add_sync_point(const rankscope::SyncPoint* point) {
  if (auto* a = agent()) a->add_sync_point(*point);
}

bool rankscope_agent_finish() {
  auto* a = agent();
  return a && a->in_this_process() && a->finish();
}

const char* rankscope_agent_shard_path() {
  const auto* a = agent();
  return a ? a->shard_path().c_str() : "";
}

void rankscope_agent_disable(const char* reason) {
  if (auto* a = agent()) a->disable(reason);
}

void rankscope_agent_source_off(uint32_t source, const char* why) {
  if (auto* a = agent(); a && why) a->source_off(source, why);
}

void rankscope_agent_add_gpu_uuid(const char* uuid) {
  if (auto* a = agent(); a && uuid) a->add_gpu_uuid(uuid);
}

void rankscope_agent_add_counter(const char* name, uint64_t value) {
  if (auto* a = agent(); a && name) a->add_to_counter(name, value);
}

void rankscope_agent_say(const char* line) {
  if (const auto* a = agent(); a && line) a->say(line);
}

void rankscope_agent_at_close(void (*add_counters)()) {
  if (auto* a = agent()) a->call_at_close(add_counters);
}


const rankscope::agent::AgentSettings* rankscope_agent_settings() {
  const auto* a = agent();
  return a ? &a->settings() : nullptr;
}

const char* rankscope_agent_clock_base() {
  const auto* a = agent();
  return a ? a->clock_base().c_str() : "raw";  // what rankscope_agent_now() reads without an agent
}
