#include "rankscope/model/process_usage.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "rankscope/model/counters.h"
#include "rankscope/model/text.h"

namespace rankscope {
namespace {

int64_t timeval_ns(const timeval& t) { return int64_t{t.tv_sec} * 1'000'000'000 + int64_t{t.tv_usec} * 1000; }

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

bool names_memory(std::string_view list) {
  for (const std::string_view item : split(list, ',')) {
    if (item == "memory") return true;
  }
  return false;
}

// Each line of `text`, until visit returns true.
template <typename Visit>
void each_line(std::string_view text, Visit&& visit) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (visit(text.substr(0, end))) return;
    if (end == std::string_view::npos) return;
    text.remove_prefix(end + 1);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void set_usage_counters(Counters& counters, const rusage& usage) {
  counters.set(counter::kProcessPeakRssBytes, static_cast<uint64_t>(usage.ru_maxrss) * 1024);
  counters.set(counter::kProcessUserCpuNs, static_cast<uint64_t>(timeval_ns(usage.ru_utime)));
  counters.set(counter::kProcessSystemCpuNs, static_cast<uint64_t>(timeval_ns(usage.ru_stime)));
  counters.set(counter::kProcessInvoluntarySwitches, static_cast<uint64_t>(usage.ru_nivcsw));
  counters.set(counter::kProcessMajorFaults, static_cast<uint64_t>(usage.ru_majflt));
}

std::string memory_cgroup_oom_file(std::string_view proc_cgroup, std::string_view mountinfo) {
  // The process's cgroup: cgroup v1's memory controller ("N:memory:/path"),
  // else its cgroup v2 ("0::/path").
  std::string_view v1_path, v2_path;
  bool in_v1 = false;
  each_line(proc_cgroup, [&](std::string_view line) {
    const std::vector<std::string_view> fields = split(line, ':');
    if (fields.size() < 3) return false;
    const std::string_view path = line.substr(fields[0].size() + fields[1].size() + 2);
    if (fields[0] == "0" && fields[1].empty()) v2_path = path;
    if (names_memory(fields[1])) v1_path = path, in_v1 = true;
    return false;
  });
  // Its mount: "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER_OPTIONS".
  std::string file;
  each_line(mountinfo, [&](std::string_view line) {
    const std::vector<std::string_view> fields = split(line, ' ');
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 5 || dash + 3 >= fields.size()) return false;
    const std::string_view type = fields[dash + 1];
    const bool v1_memory = type == "cgroup" && names_memory(fields[dash + 3]);
    if (!(in_v1 ? v1_memory : type == "cgroup2")) return false;
    std::string_view path = in_v1 ? v1_path : v2_path;
    const std::string_view root = fields[3];
    if (root != "/" && path.starts_with(root)) path.remove_prefix(root.size());
    file = std::string(fields[4]) + (path == "/" ? "" : std::string(path)) +
           (in_v1 ? "/memory.oom_control" : "/memory.events");
    return true;
  });
  return (in_v1 || !v2_path.empty()) ? file : std::string();
}

std::optional<uint64_t> parse_oom_kill_count(std::string_view text) {
  std::optional<uint64_t> count;
  each_line(text, [&](std::string_view line) {
    constexpr std::string_view kKey = "oom_kill ";
    if (!line.starts_with(kKey)) return false;
    count = parse_integer<uint64_t>(line.substr(kKey.size()));
    return true;
  });
  return count;
}

std::optional<uint64_t> oom_kill_count(pid_t pid) {
  const std::string file =
      memory_cgroup_oom_file(read_file("/proc/" + std::to_string(pid) + "/cgroup"), read_file("/proc/self/mountinfo"));
  if (file.empty()) return std::nullopt;
  return parse_oom_kill_count(read_file(file));
}

}  // namespace rankscope
