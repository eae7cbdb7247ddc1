#!/usr/bin/env bash
# Runs test_nccl_plugin as `rankscope run --capture nccl` would start a rank
# (the agent's environment, NCCL_PROFILER_PLUGIN naming the capture library,
# this very process named as the one that captures): with KernelCh timing,
# with CUPTI timing, then the cases where NCCL capture must stay off and say
# why. Usage: test_nccl_plugin.sh TEST_BINARY CAPTURE_LIBRARY
set -euo pipefail
binary=$1 library=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TEST_CAPTURE_LIBRARY=$library RANKSCOPE_CAPTURE=nccl RANKSCOPE_RANK=0
unset RANKSCOPE_NCCL_GPU_TIME NCCL_PROFILER_PLUGIN

# `sh -c 'exec'` keeps the pid the agent is told is its own.
as_rank() {
  RANKSCOPE_SHARD_DIR=$work/$1 TEST_NCCL_EXPECT=$1 sh -c 'RANKSCOPE_AGENT_PID=$$ exec "$0"' "$binary"
}

NCCL_PROFILER_PLUGIN=$library as_rank kernelch
NCCL_PROFILER_PLUGIN=$library RANKSCOPE_NCCL_GPU_TIME=cupti as_rank cupti

# NCCL capture refused, with the reason on stderr; the program runs on.
off_case() {
  local expect=$1
  as_rank off 2>"$work/off.log" || { cat "$work/off.log"; fail "the refused case failed"; }
  grep -q "NCCL capture is off: .*$expect" "$work/off.log" || { cat "$work/off.log"; fail "no line saying: $expect"; }
  rm -rf "$work/off"
}
(off_case "NCCL_PROFILER_PLUGIN is not set")
(NCCL_PROFILER_PLUGIN=/usr/lib/libnccl-profiler.so off_case "does not name the capture library")
(NCCL_PROFILER_PLUGIN=$library RANKSCOPE_NCCL_GPU_TIME=sometimes off_case "expected kernelch, cupti or both")

# A process that does not capture: the plugin loads and asks NCCL for nothing.
env -u RANKSCOPE_CAPTURE NCCL_PROFILER_PLUGIN=$library TEST_NCCL_EXPECT=off "$binary"
