// What a rank's process used and whether the kernel's OOM killer struck,
// as the kernel tells it: the agent asks as it closes the shard, and
// `rankscope run` for a process killed before it could (docs/agent-reference.md,
// "How each rank ended").
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rankscope/model/metadata.h"

namespace rankscope {

// Sets the process_* counters (counters.h) from getrusage's or wait4's figures.
void set_usage_counters(Counters& counters, const rusage& usage);

// The file that counts OOM kills in the memory cgroup a process is in:
// memory.oom_control of cgroup v1's memory controller, or memory.events of
// cgroup v2, from the process's /proc/PID/cgroup and /proc/self/mountinfo;
// "" when neither is mounted.
std::string memory_cgroup_oom_file(std::string_view proc_cgroup, std::string_view mountinfo);
// The "oom_kill N" line of either file; nullopt without one.
std::optional<uint64_t> parse_oom_kill_count(std::string_view text);
// OOM kills counted so far in the memory cgroup of process `pid`; nullopt
// where that cannot be read.
std::optional<uint64_t> oom_kill_count(pid_t pid);

}  // namespace rankscope
