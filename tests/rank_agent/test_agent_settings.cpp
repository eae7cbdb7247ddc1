// The agent's settings: what the launcher writes is what the agent reads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "rankscope/rank_agent/agent.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope::agent {
namespace {

void clear_table_variables() {
  for (const AgentVariable& v : agent_variables()) ::unsetenv(std::string(v.variable).c_str());
  for (const char* torchrun : {"WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "CUDA_PATH"}) ::unsetenv(torchrun);
}

TEST(AgentSettings, WhatTheLauncherWritesTheAgentReads) {
  clear_table_variables();
  AgentSettings written;
  written.shard_dir = "/tmp/job.h5.shards";
  written.capture = "mpi,cuda";
  written.buffer_mb = 128;
  written.flush_ms = 50;
  written.hang_timeout_s = 2.5;
  written.hang_action = "abort";
  written.ring_s = 30;
  written.delay_s = 0.25;
  written.duration_s = 4;
  written.paused = true;
  written.steps = "3:5/10";
  written.capture_range = "nvtx:backward@torch";
  written.rank = 7;
  written.world_size = 16;
  written.local_rank = 3;
  written.local_size = 4;
  written.launcher = "openmpi";
  written.job_id = "job-42";
  written.mode = "sidecar";
  written.sync_interval_s = 0.1;
  written.clock_thread = "never";
  for (const auto& [variable, value] : written.environment()) ::setenv(std::string(variable).c_str(), value.c_str(), 1);

  const AgentSettings read = AgentSettings::from_environment();
  EXPECT_EQ(read.shard_dir, written.shard_dir);
  EXPECT_EQ(read.capture, written.capture);
  EXPECT_EQ(read.buffer_mb, written.buffer_mb);
  EXPECT_EQ(read.flush_ms, written.flush_ms);
  EXPECT_EQ(read.hang_timeout_s, written.hang_timeout_s);
  EXPECT_EQ(read.hang_action, written.hang_action);
  EXPECT_EQ(read.ring_s, written.ring_s);
  EXPECT_EQ(read.delay_s, written.delay_s);
  EXPECT_EQ(read.duration_s, written.duration_s);
  EXPECT_EQ(read.paused, written.paused);
  EXPECT_EQ(read.steps, written.steps);
  EXPECT_EQ(read.capture_range, written.capture_range);
  EXPECT_EQ(read.rank, written.rank);
  EXPECT_EQ(read.world_size, written.world_size);
  EXPECT_EQ(read.local_rank, written.local_rank);
  EXPECT_EQ(read.local_size, written.local_size);
  EXPECT_EQ(read.launcher, written.launcher);
  EXPECT_EQ(read.job_id, written.job_id);
  EXPECT_EQ(read.mode, written.mode);
  EXPECT_EQ(read.sync_interval_s, written.sync_interval_s);
  EXPECT_EQ(read.clock_thread, written.clock_thread);
  clear_table_variables();
}

TEST(AgentSettings, UnsetVariablesReadAsTheTableSays) {
  clear_table_variables();
  const AgentSettings read = AgentSettings::from_environment();
  EXPECT_TRUE(read.shard_dir.empty());
  EXPECT_EQ(read.capture, kDefaultCapture);
  EXPECT_EQ(read.buffer_mb, 64u);
  EXPECT_EQ(read.flush_ms, 200);
  EXPECT_EQ(read.delay_s, -1);
  EXPECT_EQ(read.duration_s, -1);
  EXPECT_EQ(read.sync_interval_s, 10);
  EXPECT_FALSE(read.torchrun.restart_count.has_value());
  const auto unset_reads = [](std::string_view variable) {
    for (const AgentVariable& v : agent_variables()) {
      if (v.variable == variable) return v.default_value;
    }
    return std::string_view("(not in the table)");
  };
  EXPECT_EQ(unset_reads(kEnvCapture), kDefaultCapture);
  EXPECT_EQ(unset_reads(kEnvBufferMb), "64");
  EXPECT_EQ(unset_reads(kEnvFlushMs), "200");
  EXPECT_EQ(unset_reads(kEnvSyncInterval), "10");
}

TEST(AgentSettings, AFlushIntervalBelowTenMsIsTen) {
  clear_table_variables();
  ::setenv(kEnvFlushMs, "1", 1);
  EXPECT_EQ(AgentSettings::from_environment().flush_ms, 10);
  ::unsetenv(kEnvFlushMs);
}

TEST(AgentSettings, EveryVariableWrittenIsInTheTableOnce) {
  std::set<std::string_view> table;
  for (const AgentVariable& v : agent_variables()) EXPECT_TRUE(table.insert(v.variable).second) << v.variable;
  AgentSettings settings;
  settings.delay_s = settings.duration_s = 1;
  settings.paused = true;
  for (const auto& [variable, value] : settings.environment()) EXPECT_TRUE(table.count(variable)) << variable;
}

}  // namespace
}  // namespace rankscope::agent
