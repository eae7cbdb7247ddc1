#include "rankscope/model/metadata.h"

#include <charconv>
#include <cstring>

#include "rankscope/model/error.h"
#include "rankscope/model/text.h"

namespace rankscope {
namespace {

void put_line(std::string& out, std::string_view key, std::string_view value) {
  out.append(key).push_back('=');
  for (char c : value) out.push_back(c == '\n' ? ' ' : c);
  out.push_back('\n');
}

template <typename Int>
void put_number(std::string& out, std::string_view key, Int value) {
  put_line(out, key, std::string_view(std::to_string(value)));
}

template <typename Int>
bool parse_int(std::string_view text, Int& out) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// Calls visit(key, value) for each "key=value" line.
template <typename Visit>
void for_each_line(std::string_view text, Visit&& visit) {
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    const size_t equals = line.find('=');
    if (equals != std::string_view::npos) visit(line.substr(0, equals), line.substr(equals + 1));
  }
}

}  // namespace

std::string errno_text(int error_number) { return std::strerror(error_number); }

bool JobIdentity::contradicts(const JobIdentity& other) const {
  return (!id.empty() && !other.id.empty() && id != other.id) ||
         (start_wall_ns != 0 && other.start_wall_ns != 0 && start_wall_ns != other.start_wall_ns);
}

std::string JobIdentity::text() const {
  return (id.empty() ? "unnamed job" : id) + ", started " +
         (start_wall_ns != 0 ? format_utc_time(start_wall_ns) : "at an unknown time");
}

std::string RankMetadata::encode() const {
  std::string out;
  put_number(out, "rank", rank);
  put_number(out, "world_size", world_size);
  put_number(out, "local_rank", local_rank);
  put_number(out, "local_size", local_size);
  put_number(out, "node_id", node_id);
  put_number(out, "pid", pid);
  put_line(out, "host", host);
  put_line(out, "gpu_uuids", gpu_uuids);
  put_line(out, "launcher", launcher);
  put_line(out, "agent_version", agent_version);
  put_line(out, "capture", capture);
  put_number(out, "start_wall_ns", start_wall_ns);
  put_number(out, "start_local_ns", start_local_ns);
  put_line(out, "job_id", job.id);
  put_number(out, "job_start_wall_ns", job.start_wall_ns);
  return out;
}

RankMetadata RankMetadata::decode(std::string_view text) {
  RankMetadata m;
  for_each_line(text, [&m](std::string_view key, std::string_view value) {
    if (key == "rank") parse_int(value, m.rank);
    else if (key == "world_size") parse_int(value, m.world_size);
    else if (key == "local_rank") parse_int(value, m.local_rank);
    else if (key == "local_size") parse_int(value, m.local_size);
    else if (key == "node_id") parse_int(value, m.node_id);
    else if (key == "pid") parse_int(value, m.pid);
    else if (key == "host") m.host = value;
    else if (key == "gpu_uuids") m.gpu_uuids = value;
    else if (key == "launcher") m.launcher = value;
    else if (key == "agent_version") m.agent_version = value;
    else if (key == "capture") m.capture = value;
    else if (key == "start_wall_ns") parse_int(value, m.start_wall_ns);
    else if (key == "start_local_ns") parse_int(value, m.start_local_ns);
    else if (key == "job_id") m.job.id = value;
    else if (key == "job_start_wall_ns") parse_int(value, m.job.start_wall_ns);
  });
  return m;
}

void Counters::set(std::string_view name, uint64_t value) {
  for (auto& [key, current] : entries_) {
    if (key == name) {
      current = value;
      return;
    }
  }
  entries_.emplace_back(std::string(name), value);
}

void Counters::add(std::string_view name, uint64_t value) { set(name, get(name) + value); }

uint64_t Counters::get(std::string_view name) const {
  for (const auto& [key, value] : entries_) {
    if (key == name) return value;
  }
  return 0;
}

std::string Counters::encode() const {
  std::string out;
  for (const auto& [key, value] : entries_) put_number(out, key, value);
  return out;
}

Counters Counters::decode(std::string_view text) {
  Counters counters;
  for_each_line(text, [&counters](std::string_view key, std::string_view value) {
    uint64_t number = 0;
    if (parse_int(value, number)) counters.set(key, number);
  });
  return counters;
}

}  // namespace rankscope
