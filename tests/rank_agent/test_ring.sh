#!/usr/bin/env bash
# --ring: the flight recorder. A steady job (an allreduce and a broadcast
# every 20 ms for 6 s) under --ring 2 leaves only its last 2 s or so in the
# timeline, the rest counted as aged out on every rank; SIGUSR2 to mpirun
# midway writes a window then too; a hang writes the window with the state
# the hang report needs; the option's bad values are refused.
# Usage: test_ring.sh RANKSCOPE RING_APP HANG_APP MPIEXEC
set -euo pipefail
rankscope=$1 ring_app=$2 hang_app=$3 mpiexec=$4
. "$(dirname "$0")/../support/job_script.sh"
export OMPI_MCA_mpi_yield_when_idle=1

# check NAME DUMPS MIN_SECONDS MAX_SECONDS: each rank wrote DUMPS windows and aged
# out the rest; the collectives kept span MIN to MAX seconds of the job's
# (2 per iteration of 20 ms and a bit: 85 to 100 per second and rank).
check() {
  "$rankscope" info --check --json "$1.h5" >"$1-info.json" || fail "$1: info --check refused the timeline"
  /usr/bin/python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, re, sys
name, dumps, low, high = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
info = json.load(open(name + "-info.json"))
made = int(re.search(r"ring_app: (\d+) allreduces", open(name + ".log").read()).group(1))
kept = info["events_by_kind"]["mpi_collective"]
ranks = info["world_size"]
per_second = 2 * made / 6.0
print(f"{name}: {made} iterations made, {kept} collectives kept on {ranks} ranks "
      f"({kept / ranks / per_second:.2f} s of {per_second:.0f}/s per rank)")
assert low * per_second * ranks <= kept <= high * per_second * ranks, (kept, low, high)
for rank in info["ranks"]:
    c = rank["counters"]
    assert c["ring_dumps"] == dumps, (rank["rank"], c["ring_dumps"])
    assert c["ring_events_aged_out"] > 0 and c["ring_events_crowded_out"] == 0, (rank["rank"], c)
    assert c["events_dropped"] == 0, (rank["rank"], c["events_dropped"])
PY
}

echo "== --ring 2 on a 6 s job: the last 2 s"
"$mpiexec" -n 3 "$rankscope" run -o "$work/tail.h5" --ring 2 -- "$ring_app" 6 20 >tail.log 2>&1 || { cat tail.log; fail "the run failed"; }
check tail 1 1.5 2.5
"$rankscope" report --format json tail.h5 >tail.json || fail "report on a ring's timeline failed"

echo "== SIGUSR2 to mpirun at 3 s: that window too"
"$mpiexec" -n 3 "$rankscope" run -o "$work/signal.h5" --ring 1 -- "$ring_app" 6 20 >signal.log 2>&1 &
job=$!
sleep 3
kill -USR2 "$job"
wait "$job" || { cat signal.log; fail "the run failed after SIGUSR2"; }
job=
grep -q "SIGUSR2: wrote the last 1.0 s of events (--ring)" signal.log || { cat signal.log; fail "no rank said it wrote its ring"; }
check signal 2 1.5 2.5

echo "== a hang writes the window and the state"
status=0
timeout 120 "$mpiexec" -n 3 "$rankscope" run -o "$work/hang.h5" --ring 30 --hang-timeout 3 --hang-action abort -- \
  "$hang_app" 2 sleep 100 >hang.log 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat hang.log; fail "the hung job ended with status $status"; }
"$rankscope" merge "$work/hang.h5.shards" -o hang.h5 >/dev/null
"$rankscope" report hang.h5 --format json -o hang.json
/usr/bin/python3 - <<'PY'
import json
[h] = json.load(open("hang.json"))["hangs"]
assert (h["call"], h["seq"], h["missing_ranks"]) == ("MPI_Allreduce", 3, [2]), h
assert h["missing"][0]["last_call"] == "MPI_Barrier", h["missing"][0]
print("hang named from the ring's window:", h["call"], "#3, rank 2 missing, last call", h["missing"][0]["last_call"])
PY

echo "== bad values"
for bad in -1 nan 1e6 two; do
  status=0
  "$rankscope" run --ring "$bad" -- true >bad.log 2>&1 || status=$?
  [ "$status" -eq 2 ] && grep -q -- "--ring" bad.log || { cat bad.log; fail "--ring $bad was not refused (status $status)"; }
done
echo "ring ok"
