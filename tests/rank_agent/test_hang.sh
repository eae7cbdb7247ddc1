#!/usr/bin/env bash
# --hang-timeout: a job where one rank is late to an MPI_Allreduce. With
# --hang-action abort the job ends soon after the timeout, every rank's
# state is in its shard, and the report of the merged shards names the
# collective, the ranks inside it and the rank that never came with what it
# was doing; with report, the job goes on and the stall is in the report; a
# rank killed before it could write its state is named from what it flushed;
# ranks waiting for each other's messages in a cycle are a deadlock.
# Usage: test_hang.sh RANKSCOPE HANG_APP MPIEXEC nvtx|none (whether HANG_APP has its NVTX ranges) STALL_THREAD
#        STEP_CHECK_APP|none (built with the NCCL plugin)
set -euo pipefail
rankscope=$1 hang_app=$2 mpiexec=$3 stall_thread=$5 step_check_app=$6
export hang_app_ranges=$4
. "$(dirname "$0")/../support/job_script.sh"
export OMPI_MCA_mpi_yield_when_idle=1  # waiting ranks leave the cores to the others

# check_hang REPORT_JSON CALL ENTERED MISSING WROTE_STATE INSIDE_PREFIX LAST_CALL (a regular expression)
check_hang() {
  python3 - "$@" <<'PY'
import json, re, sys
report, call, entered, missing, wrote, inside, last = sys.argv[1:]
hangs = json.load(open(report))["hangs"]
assert len(hangs) == 1, hangs
h = hangs[0]
assert (h["call"], h["op"], h["comm"], h["seq"]) == (call, "AllReduce", "MPI_COMM_WORLD", 3), h
assert [e["rank"] for e in h["entered"]] == [int(r) for r in entered.split(",")], h
assert all(e["waited_ns"] >= 2e9 for e in h["entered"]), h
assert h["missing_ranks"] == [int(missing)] and h["members_known"], h
m = h["missing"][0]
assert m["rank"] == int(missing) and m["wrote_state"] == (wrote == "yes"), m
assert m["inside"].startswith(inside) if inside else m["inside"] == "", m
assert re.fullmatch(last, m["last_call"]), m
# The ranges open in its written state; a rank killed before it wrote one has none.
import os
ranges = ["step 4", "late work"] if os.environ["hang_app_ranges"] == "nvtx" and wrote == "yes" else []
assert m["open_ranges"] == ranges, m
print("hang named:", h["call"], "#%d" % h["seq"], "ranks", entered, "inside; rank", missing, "missing:", m)
PY
}

echo "== --hang-action abort: one rank sleeps before the fourth allreduce"
started=$(date +%s)
status=0
timeout 120 "$mpiexec" -n 3 "$rankscope" run -o "$work/abort.h5" --hang-timeout 3 --hang-action abort -- \
  "$hang_app" 2 sleep 100 >abort.log 2>&1 || status=$?
took=$(( $(date +%s) - started ))
cat abort.log
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || fail "the hung job ended with status $status (124: it was not ended)"
[ "$took" -lt 60 ] || fail "the job took $took s to end after a 3 s hang timeout"
grep -q "rank [01]: inside AllReduce #3 of communicator [0-9a-f]* for [0-9.]* s (--hang-timeout)" abort.log ||
  fail "no line naming the hung collective"
grep -q "merge them with: .*rankscope merge $work/abort.h5.shards -o $work/abort.h5" abort.log ||
  fail "the command to merge the shards was not printed"
"$rankscope" merge "$work/abort.h5.shards" -o abort.h5 >/dev/null
"$rankscope" info abort.h5 | grep -q "rank 2: hang_dumps = 1" || fail "info does not show rank 2's written state"
"$rankscope" report abort.h5 --format json -o abort.json
check_hang abort.json MPI_Allreduce 0,1 2 yes "" MPI_Barrier
"$rankscope" report abort.h5 >abort.txt
grep -q "^HANG: MPI_Allreduce #3 of MPI_COMM_WORLD: ranks 0,1 inside, up to .*; had not entered: rank 2$" abort.txt ||
  { cat abort.txt; fail "the text report does not lead with the hang"; }
"$rankscope" report abort.h5 --format html -o abort.html
grep -q 'id="hang-section"' abort.html && grep -q "HANG: MPI_Allreduce #3 of MPI_COMM_WORLD" abort.html ||
  fail "the HTML report has no hang section"

echo "== the late rank waits in an MPI_Recv nobody sends to"
status=0
timeout 120 "$mpiexec" -n 4 "$rankscope" run -o "$work/recv.h5" --hang-timeout 2 --hang-action abort -- \
  "$hang_app" 1 recv >recv.log 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat recv.log; fail "the hung job ended with status $status"; }
"$rankscope" merge "$work/recv.h5.shards" -o recv.h5 >/dev/null
"$rankscope" report recv.h5 --format json -o recv.json
check_hang recv.json MPI_Allreduce 0,2,3 1 yes "MPI_Recv from any rank, tag 99" MPI_Barrier

# The late rank waits for a message in each blocking call that can, and
# polls for one: the report names the call, the peer and the tag
# (MODE|INSIDE|LAST_CALL). A poll that took 10 µs or more is recorded, and
# may be the last call. A rank whose polling ended in a receive, then
# sleeps, polls no more; one that tested a receive once and then sleeps
# (a check between its work) is not polling, nor one that freed the
# request it polled.
while IFS='|' read -r -u 3 mode inside last; do
  echo "== the late rank waits for a message in $mode"
  status=0
  timeout 120 "$mpiexec" -n 2 "$rankscope" run -o "$work/late-$mode.h5" --hang-timeout 2 --hang-action abort -- \
    "$hang_app" 1 "$mode" >"late-$mode.log" 2>&1 || status=$?
  [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat "late-$mode.log"; fail "the hung job ended with status $status"; }
  "$rankscope" merge "$work/late-$mode.h5.shards" -o "late-$mode.h5" >/dev/null
  "$rankscope" report "late-$mode.h5" --format json -o "late-$mode.json"
  check_hang "late-$mode.json" MPI_Allreduce 0 1 yes "$inside" "$last"
done 3<<'MODES'
wait|MPI_Wait from rank 0, tag 98|MPI_Irecv
waitany|MPI_Waitany from rank 0, tag 98|MPI_Irecv
waitall|MPI_Waitall from rank 0, tag 98|MPI_Irecv
sendrecv|MPI_Sendrecv from rank 0, tag 98|MPI_Barrier
mprobe|MPI_Mprobe from any rank, any tag|MPI_Barrier
test|MPI_Test from rank 0, tag 98 (polling)|MPI_Irecv|MPI_Test
iprobe|MPI_Iprobe from rank 0, tag 98 (polling)|MPI_Barrier|MPI_Iprobe
tested||MPI_Test
checked||MPI_Irecv|MPI_Test
freed||MPI_Irecv|MPI_Test|MPI_Request_free
MODES

# A stop message tested once a step, with the step's NCCL all-reduce
# between the tests, is no wait; the same tests in a row are polling.
if [ "$step_check_app" != none ]; then
  while IFS='|' read -r -u 3 mode inside last; do
    echo "== the late rank tests a stop message each step, with NCCL calls: $mode"
    status=0
    timeout 120 "$mpiexec" -n 2 "$rankscope" run -o "$work/step-$mode.h5" --capture mpi,nccl --hang-timeout 2 \
      --hang-action abort -- "$step_check_app" 1 20 "$mode" >"step-$mode.log" 2>&1 || status=$?
    [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat "step-$mode.log"; fail "the hung job ended with status $status"; }
    "$rankscope" merge "$work/step-$mode.h5.shards" -o "step-$mode.h5" >/dev/null
    "$rankscope" report "step-$mode.h5" --format json -o "step-$mode.json"
    hang_app_ranges=none check_hang "step-$mode.json" MPI_Allreduce 0 1 yes "$inside" "$last"
  done 3<<'MODES'
nccl||ncclAllReduce
none|MPI_Test from rank 0, tag 98 (polling)|MPI_Irecv|MPI_Test
MODES
fi

echo "== a deadlock: each rank waits in an MPI_Recv from the next, until mpirun ends the job"
# No collective is involved, so no --hang-timeout: the ranks write the calls
# they are inside of when mpirun passes on timeout's SIGTERM (to mpirun alone,
# as a batch system or Ctrl-C sends it: --foreground).
status=0
timeout --foreground -s TERM 6 "$mpiexec" -n 3 "$rankscope" run -o "$work/ring.h5" -- "$hang_app" 0 ring >ring.log 2>&1 || status=$?
[ "$status" -eq 124 ] || { cat ring.log; fail "the deadlocked job ended with status $status, not by timeout"; }
"$rankscope" merge "$work/ring.h5.shards" -o ring.h5 >/dev/null 2>&1 || true
"$rankscope" report ring.h5 --format json -o ring.json
python3 - <<'PY' || { cat ring.log; "$rankscope" info ring.h5; fail "the deadlock was not named"; }
import json
report = json.load(open("ring.json"))
assert report["hangs"] == [], report["hangs"]
[deadlock] = report["deadlocks"]
waits = deadlock["waits"]
assert [(w["rank"], w["peer"]) for w in waits] == [(0, 1), (1, 2), (2, 0)], waits
assert all(w["inside"] == "MPI_Recv from rank %d, tag 5" % w["peer"] and w["waited_ns"] > 2e9 for w in waits), waits
print("deadlock named:", waits)
PY
"$rankscope" report ring.h5 >ring.txt
grep -q "^DEADLOCK: ranks 0 > 1 > 2 > 0 each wait for the next, up to " ring.txt ||
  { cat ring.txt; fail "the text report does not lead with the deadlock"; }
"$rankscope" report ring.h5 --format html -o ring.html
grep -q 'id="hang-section"' ring.html && grep -q "DEADLOCK: ranks 0 &gt; 1 &gt; 2 &gt; 0 each wait for the next" ring.html ||
  fail "the HTML report has no deadlock in its hang section"

echo "== the deadlock again, each rank polling its receive with MPI_Test"
# Polls are shown under the hang watch, which no collective sets off here.
status=0
timeout --foreground -s TERM 6 "$mpiexec" -n 3 "$rankscope" run -o "$work/ring-test.h5" --hang-timeout 600 -- \
  "$hang_app" 0 ring test >ring-test.log 2>&1 || status=$?
[ "$status" -eq 124 ] || { cat ring-test.log; fail "the deadlocked job ended with status $status, not by timeout"; }
"$rankscope" merge "$work/ring-test.h5.shards" -o ring-test.h5 >/dev/null 2>&1 || true
"$rankscope" report ring-test.h5 --format json -o ring-test.json
python3 - <<'PY' || { cat ring-test.log; "$rankscope" info ring-test.h5; fail "the deadlock of polling ranks was not named"; }
import json
[deadlock] = json.load(open("ring-test.json"))["deadlocks"]
waits = deadlock["waits"]
assert [(w["rank"], w["peer"]) for w in waits] == [(0, 1), (1, 2), (2, 0)], waits
assert all(w["inside"] == "MPI_Test from rank %d, tag 5 (polling)" % w["peer"] and w["waited_ns"] > 2e9 for w in waits), waits
print("deadlock of polling ranks named:", waits)
PY

echo "== the deadlock again, rank 0's writer thread held stopped: the shard is closed without it"
# As a writer thread at nice 19 that finds no core for seconds where every
# core runs a rank: the close after mpirun's SIGTERM must not wait for it.
"$mpiexec" -n 2 "$rankscope" run -o "$work/stalled.h5" -- "$hang_app" 0 ring >stalled.log 2>&1 &
job=$!
# Both ranks inside their receive: their shards have what came before it.
victim=$(rank_process hang_app 0 stalled.h5.shards 2 +1k)
[ -n "$victim" ] || { cat stalled.log; fail "rank 0 never started"; }
sleep 1
"$stall_thread" "$victim" rankscope-flush 60 >stall.log 2>&1 &
for _ in $(seq 100); do grep -q "^stalled" stall.log && break; sleep 0.1; done
grep -q "^stalled" stall.log || { cat stall.log; fail "rank 0's writer thread could not be stopped"; }
kill -TERM "$job"
timeout 60 tail --pid="$job" -f /dev/null || fail "the job did not end after its SIGTERM"
job=
"$rankscope" merge "$work/stalled.h5.shards" -o stalled.h5 >/dev/null 2>&1 || true
"$rankscope" report stalled.h5 --format json -o stalled.json
"$rankscope" info --json stalled.h5 >stalled-info.json
python3 - <<'PY' || { cat stalled.log; "$rankscope" info stalled.h5; fail "rank 0's shard was not closed without its writer thread"; }
import json
ranks = json.load(open("stalled-info.json"))["ranks"]
assert [r["status"] for r in ranks] == ["terminated", "terminated"], [r["status"] for r in ranks]
[deadlock] = json.load(open("stalled.json"))["deadlocks"]
assert [(w["rank"], w["peer"]) for w in deadlock["waits"]] == [(0, 1), (1, 0)], deadlock
print("closed without the writer thread:", deadlock)
PY

echo "== the others wait in MPI_Wait for an MPI_Iallreduce"
status=0
timeout 120 "$mpiexec" -n 3 "$rankscope" run -o "$work/wait.h5" --hang-timeout 2 --hang-action abort -- \
  "$hang_app" 0 sleep 100 nonblocking >wait.log 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat wait.log; fail "the hung job ended with status $status"; }
"$rankscope" merge "$work/wait.h5.shards" -o wait.h5 >/dev/null
"$rankscope" report wait.h5 --format json -o wait.json
check_hang wait.json MPI_Iallreduce 1,2 0 yes "" MPI_Barrier

echo "== --hang-action report: the late rank comes after 6 s, the job ends well"
"$mpiexec" -n 3 "$rankscope" run -o "$work/report.h5" --hang-timeout 2 -- "$hang_app" 2 sleep 6 >report.log 2>&1 ||
  { cat report.log; fail "the job with a passing stall failed"; }
[ -f report.h5 ] && [ ! -e report.h5.shards ] || fail "no timeline, or the shard folder (and its hang file) was left"
! "$rankscope" info report.h5 | grep -q clock_violations ||
  fail "the unfinished copies of the collective were taken for clock violations"
"$rankscope" report report.h5 --format json -o report.json
check_hang report.json MPI_Allreduce 0,1 2 yes "" MPI_Barrier
python3 - <<'PY'
import json
h = json.load(open("report.json"))["hangs"][0]
entered = min(e["since_ns"] for e in h["entered"])
late = h["missing"][0]["entered_at_ns"]
assert late is not None and 4e9 < late - entered < 9e9, (late, entered)
# The collective itself is matched on every rank once, the unfinished copies left out.
report = json.load(open("report.json"))
allreduce = [g for g in report["collectives_summary"]["groups"] if g["op"] == "AllReduce"][0]
assert allreduce["count"] == 4 and allreduce["ranks"] == 3, allreduce
PY

echo "== ranks that poll an MPI_Iallreduce while the late rank sleeps 6 s set off no hang watch"
# They may be at work between their polls; waited on (above), it is a hang.
"$mpiexec" -n 3 "$rankscope" run -o "$work/polled.h5" --hang-timeout 2 --hang-action abort -- \
  "$hang_app" 2 sleep 6 polled >polled.log 2>&1 || { cat polled.log; fail "the job polling its collective was ended"; }
! grep -q "(--hang-timeout)" polled.log || { cat polled.log; fail "a polled collective set off the hang watch"; }
"$rankscope" report polled.h5 --format json | python3 -c 'import json, sys; assert json.load(sys.stdin)["hangs"] == []'

echo "== no --hang-timeout: a long wait is no hang"
"$mpiexec" -n 3 "$rankscope" run -o "$work/plain.h5" -- "$hang_app" 2 sleep 3 >plain.log 2>&1 ||
  { cat plain.log; fail "the job failed"; }
! grep -q "hang-timeout" plain.log || fail "a hang was announced without --hang-timeout"
"$rankscope" report plain.h5 --format json | python3 -c 'import json, sys; assert json.load(sys.stdin)["hangs"] == []'

echo "== a late rank killed before anyone wrote a state: named from its flushed events"
"$mpiexec" -n 3 "$rankscope" run -o "$work/killed.h5" --flush-ms 50 -- "$hang_app" 2 sleep 100 >killed.log 2>&1 &
job=$!
# Once the others are inside the allreduce (the barrier before it flushed).
victim=$(rank_process hang_app 2 killed.h5.shards 3 +4k)
[ -n "$victim" ] || { cat killed.log; fail "rank 2 never started"; }
sleep 1
kill -9 "$victim"
status=0
timeout 60 tail --pid=$job -f /dev/null || fail "the job did not end after rank 2 was killed"
wait $job || status=$?
job=
"$rankscope" merge "$work/killed.h5.shards" -o killed.h5 >/dev/null 2>&1 || true
"$rankscope" report killed.h5 --format json -o killed.json
python3 - <<'PY'
import json
h = json.load(open("killed.json"))["hangs"]
assert len(h) == 1 and h[0]["missing_ranks"] == [2], h
m = h[0]["missing"][0]
assert m["status"] == "dead" and not m["wrote_state"] and m["last_call"] == "MPI_Barrier", m
assert m["open_ranges"] == [], m
print("killed rank named:", m)
PY
echo "all hang checks passed"
