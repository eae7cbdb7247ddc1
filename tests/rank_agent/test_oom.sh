#!/usr/bin/env bash
# The kernel's OOM killer ends one rank: a job of two mpi4py ranks runs in a
# memory cgroup of its own, limited to 256 MiB, and rank 1 grows until it is
# killed. That rank's `rankscope run` records the SIGKILL, the OOM kill of
# its cgroup and the process's peak memory; info and report say so. As root,
# with cgroup v1's memory controller or cgroup v2 with memory delegated to
# the root's children; exit 77 (skipped) elsewhere.
# Usage: test_oom.sh RANKSCOPE MPIEXEC
set -euo pipefail
rankscope=$1 mpiexec=$2
. "$(dirname "$0")/../support/job_script.sh"

limit=$((256 << 20))
v1_path=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup)
if [ -n "$v1_path" ] && [ -d "/sys/fs/cgroup/memory$v1_path" ] && [ -w "/sys/fs/cgroup/memory$v1_path" ]; then
  parent=/sys/fs/cgroup/memory${v1_path%/}
elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && [ -w /sys/fs/cgroup ]; then
  parent=/sys/fs/cgroup
else
  echo "SKIP: no memory cgroup this test can make (run as root)"
  exit 77
fi
groups=()
trap 'cleanup; for g in "${groups[@]}"; do rmdir "$g" 2>/dev/null || true; done' EXIT

# make_group: a fresh memory cgroup of $limit bytes and no swap, its path in $group.
make_group() {
  group=$parent/rankscope-oom-$$-${#groups[@]}
  mkdir "$group"
  groups+=("$group")
  if [ -e "$group/memory.limit_in_bytes" ]; then
    echo "$limit" >"$group/memory.limit_in_bytes"
    # No swap to spill into where the kernel counts it.
    [ -e "$group/memory.memsw.limit_in_bytes" ] && echo "$limit" >"$group/memory.memsw.limit_in_bytes"
  else
    echo "$limit" >"$group/memory.max"
    echo 0 >"$group/memory.swap.max" 2>/dev/null || true
  fi
}
# The processes the OOM killer has killed in $group (cgroup v1, v2).
oom_kills() {
  local file=$group/memory.oom_control
  [ -e "$file" ] || file=$group/memory.events
  sed -n 's/^oom_kill \([0-9]*\)$/\1/p' "$file"
}

# run_in_group LOG OUTPUT COMMAND...: runs the job in a fresh group, its
# status in $status. Within milliseconds of the first kill the kernel can
# choose a second victim there, before the first one's memory is given back:
# the largest of the small processes left, a sidecar or mpiexec (a real job's
# other ranks dwarf them). What rankscope records is judged on a run where
# the OOM killer killed rank 1 alone; after one where it killed more, the
# job runs again in a fresh group (three runs at most), its OUTPUT removed.
run_in_group() {
  local log=$1 output=$2 kills
  shift 2
  for _ in 1 2 3; do
    make_group
    status=0
    (echo "$BASHPID" >"$group/cgroup.procs" && exec "$@") >"$log" 2>&1 || status=$?
    kills=$(oom_kills)
    [ "${kills:-0}" -gt 1 ] || return 0
    echo "the OOM killer killed $kills processes of the job, not rank 1 alone: the job runs again"
    rm -rf "$output" "$output.shards"
  done
  cat "$log"
  fail "in three runs the OOM killer never killed rank 1 alone"
}
/usr/bin/python3 -c "import mpi4py" 2>/dev/null || fail "Debian's python3-mpi4py is missing (scripts/setup-deps.sh --tests installs it)"

cat >grow.py <<'PY'
import time
from mpi4py import MPI
comm = MPI.COMM_WORLD
held = []
for step in range(2000):
    comm.Barrier()
    if comm.rank == 1:
        held.append(b"\x01" * (8 << 20))  # written, so resident
    time.sleep(0.01)
PY
run_in_group run.log "$work/job.h5" "$mpiexec" -n 2 "$rankscope" run -o "$work/job.h5" --flush-ms 50 -- \
  /usr/bin/python3 grow.py
cat run.log
[ "$status" -ne 0 ] || fail "the job ended well: the OOM killer never struck"
grep -q "rankscope run: rank 1: the application was killed by SIGKILL (signal 9) before its shard was closed; the kernel's OOM killer killed 1 process of its memory cgroup meanwhile; peak memory" run.log ||
  fail "rank 1's rankscope run did not say the OOM killer killed it"

"$rankscope" merge job.h5.shards -o job.h5
"$rankscope" info job.h5 | tee info.txt
grep -q "^  rank 1: killed by SIGKILL (signal 9) before its shard was closed; the kernel's OOM killer killed 1 process of its memory cgroup meanwhile; peak memory" info.txt ||
  fail "info does not say how rank 1 ended"
"$rankscope" info --json job.h5 >info.json
"$rankscope" report job.h5 | tee report.txt
grep -q "^KILLED: rank 1 killed by SIGKILL" report.txt || fail "the report does not name rank 1 as killed"
"$rankscope" report --format json job.h5 -o report.json
"$rankscope" report --format html job.h5 -o report.html
grep -q 'id="killed-section"' report.html || fail "the HTML report has no section for the killed rank"
grep -q 'id="process-table"' report.html || fail "the HTML report has no table of the ranks' processes"
python3 - <<'PY'
import json
info = json.load(open("info.json"))
ranks = {r["rank"]: r for r in info["ranks"]}
assert info["dead_ranks"] == [1], info["dead_ranks"]
killed = ranks[1]["counters"]
assert killed.get("killed_by_signal") == 9, killed
assert killed.get("oom_kills", 0) >= 1, killed
# The process grew to the limit, less what the other processes held.
assert 128 << 20 < killed["process_peak_rss_bytes"] <= 256 << 20, killed
assert ranks[0]["counters"].get("process_peak_rss_bytes", 0) > 0, ranks[0]
assert "killed_by_signal" not in ranks[0]["counters"], ranks[0]
report = {r["rank"]: r for r in json.load(open("report.json"))["ranks"]}
assert report[1]["killed"]["signal"] == 9 and report[1]["killed"]["oom_kills"] >= 1, report[1]
assert report[0]["killed"] is None and report[0]["process"]["peak_rss_bytes"] > 0, report[0]
print("OOM test ok: rank 1 killed at", killed["process_peak_rss_bytes"] >> 20, "MiB")
PY

# Sidecar mode: rank 1's sidecar records the kill before its clock
# measurements, and the sidecars write the timeline themselves.
cat >grow_alone.py <<'PY'
import os, time
held = []
for step in range(2000):
    if os.environ["RANK"] == "1":
        held.append(b"\x01" * (8 << 20))
    time.sleep(0.01)
PY
run_in_group sidecar.log "$work/sidecar.h5" "$mpiexec" -n 2 "$rankscope" run --mode sidecar -o "$work/sidecar.h5" -- \
  /usr/bin/python3 grow_alone.py
cat sidecar.log
[ "$status" -ne 0 ] || fail "the sidecar job ended well: the OOM killer never struck"
[ -f sidecar.h5 ] || fail "the sidecars wrote no timeline"
"$rankscope" info --json sidecar.h5 >sidecar-info.json
python3 - <<'PY'
import json
info = json.load(open("sidecar-info.json"))
ranks = {r["rank"]: r for r in info["ranks"]}
assert info["dead_ranks"] == [1], info["dead_ranks"]
assert ranks[1]["counters"].get("killed_by_signal") == 9 and ranks[1]["counters"].get("oom_kills", 0) >= 1, ranks[1]
clocks = {c["rank"]: c for c in info["clock"]["ranks"]}
assert clocks[1]["points"] >= 2, f"the measurements appended after the kill's record were lost: {clocks[1]}"
print("OOM test ok in sidecar mode")
PY
