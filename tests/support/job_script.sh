# Sourced by the test scripts that run a job in the background: a work
# folder of their own (the current folder), removed at exit with the job
# (its pid in $job) killed if still running; fail MESSAGE ends the test.
set -euo pipefail
work=$(mktemp -d)
job=
cleanup() { [ -n "$job" ] && kill -9 "$job" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# rank_process PROGRAM RANK SHARDS COUNT SIZE: the pid of the process of
# PROGRAM that runs as RANK, once it exists and COUNT shards in the folder
# SHARDS are larger than SIZE (as find -size has it: +4k); waits 30 s at
# most, and prints nothing when that did not come.
rank_process() {
  local program=$1 rank=$2 shards=$3 count=$4 size=$5 pid found=
  for _ in $(seq 300); do
    for pid in $(pgrep -x "$program" || true); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "RANKSCOPE_RANK=$rank"; then found=$pid; fi
    done
    [ -n "$found" ] && [ "$(find "$shards" -name 'rank-*.shard' -size "$size" 2>/dev/null | wc -l)" -eq "$count" ] && break
    sleep 0.1
  done
  echo "$found"
}
