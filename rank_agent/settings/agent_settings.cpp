#include "rankscope/rank_agent/agent_settings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "rankscope/clocksync/clock.h"
#include "rankscope/model/text.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::agent {
namespace {

constexpr AgentVariable kVariables[] = {
    {kEnvShardDir, "-o", "", "the shard folder, beside the timeline; without it the agent stays off"},
    {kEnvAgentPid, "", "", "the pid of the one process that captures (its children stay quiet)"},
    {kEnvCapture, "--capture", kDefaultCapture, "the capture sources"},
    {kEnvBufferMb, "--buffer-mb", "64", "the event buffers of a rank, MiB"},
    {kEnvFlushMs, "--flush-ms", "200", "how often the agent writes to its shard, ms (at least 10)"},
    {kEnvHangTimeout, "--hang-timeout", "0", "seconds inside one collective that make every rank write its state (0: never)"},
    {kEnvHangAction, "--hang-action", "report", "report, or abort: each rank then ends itself"},
    {kEnvRing, "--ring", "0", "the flight recorder: the last seconds of events kept in memory (0: off)"},
    {kEnvDelay, "--delay", "", "seconds after the job's start before recording begins"},
    {kEnvDuration, "--duration", "", "seconds recorded after the delay"},
    {kEnvPaused, "--paused", "0", "1: capture starts paused until `rankscope trigger JOB start`"},
    {kEnvSteps, "--steps", "", "the ProfilerStep#N ranges to record (A:B[/PERIOD])"},
    {kEnvCaptureRange, "--capture-range", "", "record while a range is open (nvtx:NAME[@DOMAIN] or cudaProfilerApi)"},
    {kEnvSyncInterval, "--sync-interval", "10", "seconds between clock sync rounds during the run (in-process mode)"},
    {kEnvClockThread, "--clock-thread", "auto", "where those rounds run: auto, always or never"},
    {kEnvRank, "", "0", "the rank, from the launcher's variables (Open MPI, PMI, Slurm, torchrun)"},
    {kEnvWorldSize, "", "1", "the number of ranks"},
    {kEnvLocalRank, "", "-1", "the rank among its node's"},
    {kEnvLocalSize, "", "0", "the number of ranks on its node"},
    {kEnvNodeId, "", "-1", "the node's number (sidecar mode)"},
    {kEnvLauncher, "", "", "the launcher that started the rank"},
    {kEnvMode, "--mode", "inprocess", "inprocess or sidecar"},
    {kEnvJobId, "", "", "the launcher's name for the job"},
    {kEnvJobStart, "", "0", "sidecar mode: when the job started, ns since the epoch, as the sidecars agreed"},
    {kEnvWorkersOf, "", "", "torchrun under rankscope run: the pid of the torchrun whose workers capture"},
    {kEnvWorkerList, "", "", "torchrun under rankscope run: the file each worker adds its shard's name to"},
    {kEnvCuptiPath, "", "", "CUPTI's library, where it is not on the loader's path or under CUDA_HOME"},
    {kEnvNcclGpuTime, "", "kernelch", "which clock times NCCL's GPU work: kernelch, cupti or both"},
    {"TORCHELASTIC_RESTART_COUNT", "", "", "torchrun's: set in its workers alone, the run a restarted worker is"},
    {"RANK", "", "", "torchrun's worker's rank (also WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)"},
    {"CUDA_HOME", "", "/usr/local/cuda", "where CUPTI is looked for (also CUDA_PATH)"},
    {"NVTX_INJECTION64_PATH", "", "", "set by rankscope run to the capture library, for NVTX"},
    {"NCCL_PROFILER_PLUGIN", "", "", "set by rankscope run to the capture library, for NCCL"},
    {clocksync::kFakeClockVariable, "", "", "skew injection for tests (docs/clocksync.md), read where clocks are read"},
};

std::string text_of(const char* name) {
  const char* text = std::getenv(name);
  return text ? text : "";
}

std::optional<int32_t> integer_of(const char* name) {
  const char* text = std::getenv(name);
  return text ? parse_integer<int32_t>(text) : std::nullopt;
}

// Seconds as the launcher writes them; `unset` where the variable is not set.
double seconds_of(const char* name, double unset) {
  const char* text = std::getenv(name);
  return text && *text ? std::max(0.0, std::strtod(text, nullptr)) : unset;
}

std::string seconds_text(double seconds) { return printf_string("%.17g", seconds); }

}  // namespace

std::span<const AgentVariable> agent_variables() { return kVariables; }

std::string agent_variables_table() {
  const auto cell = [](std::string_view text, bool code) {
    return text.empty() ? std::string() : code ? "`" + std::string(text) + "`" : std::string(text);
  };
  std::string out = "| variable | `rankscope run` option | unset | meaning |\n|---|---|---|---|\n";
  for (const AgentVariable& v : kVariables) {
    out += "| " + cell(v.variable, true) + " | " + cell(v.option, true) + " | " + cell(v.default_value, true) + " | " +
           std::string(v.meaning) + " |\n";
  }
  return out;
}

AgentSettings AgentSettings::from_environment() {
  AgentSettings s;
  s.shard_dir = text_of(kEnvShardDir);
  s.agent_pid = env_integer<int64_t>(kEnvAgentPid, -1);
  s.workers_of = env_integer<int64_t>(kEnvWorkersOf, -1);
  s.worker_list = text_of(kEnvWorkerList);
  s.rank = env_integer<int32_t>(kEnvRank, 0);
  s.world_size = env_integer<int32_t>(kEnvWorldSize, 1);
  s.local_rank = env_integer<int32_t>(kEnvLocalRank, -1);
  s.local_size = env_integer<int32_t>(kEnvLocalSize, 0);
  s.node_id = env_integer<int32_t>(kEnvNodeId, -1);
  s.launcher = text_of(kEnvLauncher);
  if (const char* mode = std::getenv(kEnvMode)) s.mode = mode;
  s.job_id = text_of(kEnvJobId);
  s.job_start_wall_ns = env_integer<int64_t>(kEnvJobStart, 0);
  if (const char* capture = std::getenv(kEnvCapture)) s.capture = capture;
  s.buffer_mb = env_integer<uint64_t>(kEnvBufferMb, 64);
  s.flush_ms = std::max(10, env_integer<int>(kEnvFlushMs, 200));
  s.hang_timeout_s = seconds_of(kEnvHangTimeout, 0);
  if (const char* action = std::getenv(kEnvHangAction)) s.hang_action = action;
  s.ring_s = seconds_of(kEnvRing, 0);
  s.delay_s = seconds_of(kEnvDelay, -1);
  s.duration_s = seconds_of(kEnvDuration, -1);
  s.paused = env_integer<int>(kEnvPaused, 0) != 0;
  s.steps = text_of(kEnvSteps);
  s.capture_range = text_of(kEnvCaptureRange);
  if (const char* interval = std::getenv(kEnvSyncInterval)) {
    char* end = nullptr;
    const double seconds = std::strtod(interval, &end);
    if (end != interval && *end == '\0' && seconds > 0) s.sync_interval_s = seconds;
  }
  if (const char* thread = std::getenv(kEnvClockThread)) s.clock_thread = thread;
  s.cupti_path = text_of(kEnvCuptiPath);
  s.nccl_gpu_timing = text_of(kEnvNcclGpuTime);
  s.torchrun = {integer_of("TORCHELASTIC_RESTART_COUNT"), integer_of("RANK"), integer_of("WORLD_SIZE"),
                integer_of("LOCAL_RANK"), integer_of("LOCAL_WORLD_SIZE")};
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(variable); root && *root) s.cuda_roots.emplace_back(root);
  }
  s.nvtx_injection_path = text_of("NVTX_INJECTION64_PATH");
  s.nccl_profiler_plugin = text_of("NCCL_PROFILER_PLUGIN");
  return s;
}

std::vector<std::pair<std::string_view, std::string>> AgentSettings::environment() const {
  std::vector<std::pair<std::string_view, std::string>> out = {
      {kEnvShardDir, shard_dir},
      {kEnvCapture, capture},
      {kEnvBufferMb, std::to_string(buffer_mb)},
      {kEnvFlushMs, std::to_string(flush_ms)},
      {kEnvHangTimeout, seconds_text(hang_timeout_s)},
      {kEnvHangAction, hang_action},
      {kEnvRing, seconds_text(ring_s)},
  };
  if (delay_s >= 0) out.emplace_back(kEnvDelay, seconds_text(delay_s));
  if (duration_s >= 0) out.emplace_back(kEnvDuration, seconds_text(duration_s));
  if (paused) out.emplace_back(kEnvPaused, "1");
  out.insert(out.end(), {{kEnvSteps, steps},
                         {kEnvCaptureRange, capture_range},
                         {kEnvRank, std::to_string(rank)},
                         {kEnvWorldSize, std::to_string(world_size)},
                         {kEnvLocalRank, std::to_string(local_rank)},
                         {kEnvLocalSize, std::to_string(local_size)},
                         {kEnvLauncher, launcher},
                         {kEnvJobId, job_id},
                         {kEnvMode, mode}});
  out.emplace_back(kEnvSyncInterval, seconds_text(sync_interval_s));
  out.emplace_back(kEnvClockThread, clock_thread);
  return out;
}

}  // namespace rankscope::agent
