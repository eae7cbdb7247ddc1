#!/usr/bin/env bash
# What a crash costs the crashing rank before it goes on: the close of its
# shard (agent_cost_finish_ns), with COUNT events that no routine flush had
# written (--flush-ms 60000), against the second the crash handler waits at
# most. Rank 1 of tests/rank_agent/crash_app makes COUNT allreduces, then
# writes through a null pointer.
# Usage: bench/crash_close.sh BUILD_DIR [COUNT...]   (default counts: 20 100000 400000)
set -euo pipefail
build=$(readlink -f "$1"); shift
counts=("${@:-20 100000 400000}")
[ $# -gt 0 ] || counts=(20 100000 400000)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf '| events unflushed | rank 1 status | its events in the timeline | close (agent_cost_finish_ns) |\n|---|---|---|---|\n'
for count in "${counts[@]}"; do
  rm -rf c.h5 c.h5.shards
  mpiexec -n 2 "$build/coordinator/rankscope" run --flush-ms 60000 -o c.h5 -- "$build/tests/crash_app" segv "$count" \
    >run.log 2>&1 || true
  "$build/coordinator/rankscope" merge c.h5.shards -o c.h5 >/dev/null 2>&1
  "$build/coordinator/rankscope" info --json c.h5 >info.json
  python3 - "$count" <<'PY'
import json, sys
rank1 = json.load(open("info.json"))["ranks"][1]
close_ms = rank1["counters"].get("agent_cost_finish_ns", 0) / 1e6
print(f"| {sys.argv[1]} | {rank1['status']} | {rank1['events']} | {close_ms:.1f} ms |")
PY
done
