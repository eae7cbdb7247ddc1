#!/usr/bin/env bash
# Clock sync rounds during an in-process run (docs/clocksync.md, "Rounds
# during the run"): rank 1's clock changes its rate mid-run (+400 ppm from
# 1.2 s after the start, RANKSCOPE_FAKE_CLOCK), and the timeline's clock
# model must follow it within its bounds. Debian's mpi4py (MPI_THREAD_MULTIPLE
# by default) gets rounds on its own; ddp_sim (MPI_Init: a single thread) gets
# them with --clock-thread always, and without it two measurements and the
# counter saying so. Without rounds the straight line misses the change by
# about 300 µs: the check below would see it.
# Usage: test_clock_rounds.sh RANKSCOPE DDP_SIM MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
/usr/bin/python3 -c "import mpi4py, h5py" || fail "Debian's python3-mpi4py and python3-h5py are needed (scripts/setup-deps.sh --tests)"

cat >job.py <<'EOF'
import sys, time
from mpi4py import MPI
# About 3 s, by a count all ranks share: ranks that each watched their own
# clock for the end left after different numbers of barriers, and one waited
# in a barrier no other rank entered.
for _ in range(150):
    MPI.COMM_WORLD.Barrier()
    time.sleep(0.02)
# One write, so that mpirun never interleaves the two ranks' lines.
sys.stdout.write(f"rank {MPI.COMM_WORLD.rank}: MPI_THREAD_MULTIPLE {MPI.Query_thread() == MPI.THREAD_MULTIPLE}\n")
EOF

# run NAME RANKSCOPE_OPTIONS... -- PROGRAM...: rank 1's clock 2 s ahead, at +400 ppm from 1.2 s on.
run() {
  local name=$1 change_at
  shift
  change_at=$(/usr/bin/python3 -c "import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW) + 1_200_000_000)")
  echo "$change_at" >"$name.change_at"
  RANKSCOPE_FAKE_CLOCK=1:+2000000000:0:$change_at:+400 "$mpiexec" -x RANKSCOPE_FAKE_CLOCK -n 2 \
    "$rankscope" run --mode inprocess --sync-interval 0.2 -o "$name.h5" "$@" >"$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: rankscope run failed"; }
  "$rankscope" info --json "$name.h5" >"$name.json"
}

# check NAME rounds|ends: rank 1's every measurement within its bound of the truth; with rounds, the
# model (straight lines between measurements) within the largest bound plus what a line between the
# two measurements furthest apart can miss of a 400 ppm bend (400e-6 × 0.2 s / 4 = 20 µs at 0.2 s)
# at every moment of the run; at the ends only, two measurements, the bend missed, and the counter set.
check() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
import h5py
name, expected = sys.argv[1], sys.argv[2]
change_at = int(open(f"{name}.change_at").read())
OFFSET = 2_000_000_000

def truth(local):
    """Rank 1's offset to rank 0 (its base clock) when rank 1 reads `local`."""
    virtual_change = OFFSET + change_at
    raw = local - OFFSET if local <= virtual_change else change_at + (local - virtual_change) / (1 + 400e-6)
    return local - raw

with h5py.File(f"{name}.h5", "r") as f:
    points = sorted((int(p["local_ns"]), int(p["offset_ns"]), int(p["bound_ns"]))
                    for p in f["clock_points"][:] if p["rank"] == 1)
for local, offset, bound in points:
    assert abs(offset - truth(local)) <= bound, (name, local, offset - truth(local), bound)
first, last = points[0][0], points[-1][0]
assert first < OFFSET + change_at < last, f"{name}: the change is not inside the run"

def model(local):
    for (a, oa, _), (b, ob, _) in zip(points, points[1:]):
        if a <= local <= b:
            return oa + (ob - oa) * (local - a) / (b - a)

grid = [first + (last - first) * i // 400 for i in range(401)]
worst = max(abs(model(t) - truth(t)) for t in grid)
largest_bound = max(bound for _, _, bound in points)
info = json.load(open(f"{name}.json"))
counter = info["ranks"][1]["counters"].get("clock_measured_at_ends_only", 0)
print(f"{name}: {len(points)} measurements, model off by {worst / 1e3:.1f} µs at worst, largest bound "
      f"{largest_bound / 1e3:.1f} µs, clock_measured_at_ends_only {counter}")
if expected == "rounds":
    assert len(points) >= 8, f"{name}: {len(points)} measurements in 3 s of rounds every 0.2 s"
    widest = max(b - a for (a, _, _), (b, _, _) in zip(points, points[1:]))
    # A round late on a loaded machine widens its gap: the bend a line can miss grows with it.
    allowed = largest_bound + 400e-6 * widest / 4 + 2_000
    assert worst <= allowed, f"{name}: the model missed the clock by {worst:.0f} ns, beyond {allowed:.0f}"
    assert counter == 0, counter
else:
    assert len(points) == 2, f"{name}: {len(points)} measurements, not the two ends"
    assert worst > 100_000, f"{name}: a straight line missed the bend by only {worst:.0f} ns"
    assert counter == 1, f"{name}: clock_measured_at_ends_only is {counter}"
PY
}

echo "== mpi4py (MPI_THREAD_MULTIPLE): rounds on the agent's thread"
run mpi4py -- /usr/bin/python3 job.py
check mpi4py rounds || fail "mpi4py: the clock was not followed"
for rank in 0 1; do grep -q "^rank $rank: MPI_THREAD_MULTIPLE True$" mpi4py.log || fail "mpi4py's output changed"; done

echo "== the same with --clock-thread never"
run mpi4py_never --clock-thread never -- /usr/bin/python3 job.py
check mpi4py_never ends || fail "mpi4py without rounds"

ddp=("$ddp_sim" --steps 120 --warmup-steps 1 --layers 8 --layer-mb 1 --forward-us 1000)
echo "== ddp_sim (MPI_Init, one thread): no rounds, and the counter says so"
run ddp_auto -- "${ddp[@]}"
check ddp_auto ends || fail "ddp_sim with a single thread"

echo "== ddp_sim with --clock-thread always"
run ddp_always --clock-thread always -- "${ddp[@]}"
check ddp_always rounds || fail "ddp_sim with --clock-thread always"
grep -q "120 steps after" ddp_always.log || { cat ddp_always.log; fail "ddp_sim's summary is missing"; }
echo "PASS"
