// The agent's settings, with one owner. `rankscope run` writes them into the
// environment it gives the program (AgentSettings::environment()); the
// agent reads them once, when it starts (AgentSettings::from_environment(),
// the one place the capture side reads the environment), and hands them to
// every capture source and, through rankscope_agent_settings(), to the MPI
// shim. The table says what each variable is: `rankscope info
// --environment` prints it, and docs/agent-reference.md ("The environment
// it uses") lists the same variables.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/model/capture_sources.h"

namespace rankscope::agent {

// One variable the capture side reads.
struct AgentVariable {
  std::string_view variable;
  std::string_view option;         // the `rankscope run` option it carries; empty: none
  std::string_view default_value;  // what an unset variable means; empty: nothing
  std::string_view meaning;
};
// Every variable: rankscope's own, then the other programs' it reads beside them.
std::span<const AgentVariable> agent_variables();
// The same as a Markdown table, as the reference prints it (`rankscope info
// --environment`; docs/agent-reference.md holds this very table).
std::string agent_variables_table();

struct AgentSettings {
  // Who captures: the process `rankscope run` started (agent_pid), or the
  // workers of the torchrun it started (workers_of), each of which adds its
  // shard's name to worker_list.
  std::string shard_dir;  // empty: the agent stays off
  int64_t agent_pid = -1;
  int64_t workers_of = -1;
  std::string worker_list;
  // Who the rank is, as the launcher's variables said.
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_rank = -1;
  int32_t local_size = 0;
  int32_t node_id = -1;
  std::string launcher;
  std::string mode = "inprocess";
  std::string job_id;
  int64_t job_start_wall_ns = 0;  // sidecar mode; in-process mode learns it at MPI_Init
  // What is captured, and how.
  std::string capture = std::string(kDefaultCapture);
  uint64_t buffer_mb = 64;
  int flush_ms = 200;  // at least 10
  double hang_timeout_s = 0;
  std::string hang_action = "report";
  double ring_s = 0;
  double delay_s = -1;     // -1: no --delay
  double duration_s = -1;  // -1: to the end
  bool paused = false;
  std::string steps;          // --steps as given; empty: none
  std::string capture_range;  // --capture-range as given; empty: none
  double sync_interval_s = 10;  // a value that is not a positive number leaves this
  std::string clock_thread = "auto";
  std::string cupti_path;       // empty: CUPTI looked for where CUDA keeps it
  std::string nccl_gpu_timing;  // empty: NCCL capture's own choice
  // Other programs' variables, read beside rankscope's.
  struct Torchrun {
    std::optional<int32_t> restart_count;  // TORCHELASTIC_RESTART_COUNT: only torchrun's workers have it
    std::optional<int32_t> rank, world_size, local_rank, local_world_size;
  } torchrun;
  std::vector<std::string> cuda_roots;  // CUDA_HOME, CUDA_PATH, where set
  std::string nvtx_injection_path;      // NVTX_INJECTION64_PATH
  std::string nccl_profiler_plugin;     // NCCL_PROFILER_PLUGIN

  static AgentSettings from_environment();
  // The variables `rankscope run` sets for every rank from these settings
  // (rankscope's own, but those it sets per process as it starts them:
  // agent_pid, workers_of, worker_list, node_id, job_start_wall_ns).
  std::vector<std::pair<std::string_view, std::string>> environment() const;
};

}  // namespace rankscope::agent
