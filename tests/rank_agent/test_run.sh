#!/usr/bin/env bash
# `rankscope run` end to end: an MPI program in-process with skewed clocks, a
# program without MPI in sidecar mode, exit statuses and signals passed on
# (SIGUSR2 on mpirun too),
# and the guard that stops an MPI program started in sidecar mode.
# Usage: test_run.sh RANKSCOPE DDP_SIM NVTX_APP|none TIMELINE_SUMMARY MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 nvtx_app=$3 summary=$4 mpiexec=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== in-process: ddp_sim on 4 ranks with skewed clocks"
RANKSCOPE_FAKE_CLOCK=1:+2500000000:+80,3:-730000:-150 \
  "$mpiexec" -x RANKSCOPE_FAKE_CLOCK -n 4 "$rankscope" run -o "$work/job.h5" -- \
  "$ddp_sim" --steps 3 --warmup-steps 1 --layers 8 --layer-mb 1 --forward-us 100 --truth "$work/truth.json" \
  >run.log 2>&1 || { cat run.log; fail "rankscope run of ddp_sim failed"; }
cat run.log
grep -q "in-process mode" run.log || fail "auto mode did not pick in-process for an MPI program"
[ -f job.h5 ] || fail "no timeline"
[ ! -e job.h5.shards ] || fail "the shards are still there after the timeline was written"
"$rankscope" info --json job.h5 >info.json
"$summary" job.h5 >summary.json
! grep -q "records no job identity" run.log || fail "a rank's shard lacks the job's identity"
expect_nvtx=$([ "$nvtx_app" = none ] && echo 0 || echo 1) python3 - <<'PY'
import json, os
info, summary, truth = (json.load(open(f)) for f in ("info.json", "summary.json", "truth.json"))
assert [r["status"] for r in info["ranks"]] == ["complete"] * 4, info["ranks"]
assert all(r["drops"] == 0 for r in info["ranks"])
# What each rank's agent wrote about itself, through shard, merge and timeline.
import re, socket, time
for r in info["ranks"]:
    assert r["launcher"] == "openmpi" and r["host"] == socket.gethostname(), r
    assert r["local_rank"] == r["rank"] and r["node_id"] == 0 and r["pid"] > 0, r
    assert r["capture"].startswith("mpi,nvtx,python mode=inprocess"), r["capture"]
    assert r["agent_version"] and r["gpu_uuids"] == "", r
    assert 0 < time.time() - r["start_wall_ns"] * 1e-9 < 600, r["start_wall_ns"]
assert len({r["pid"] for r in info["ranks"]}) == 4
# The job as Open MPI names it, and when it started as the ranks agreed at MPI_Init.
job = info["job"]
assert re.fullmatch(r"openmpi:[0-9]+", job["id"]) and 0 < time.time() - job["start_wall_ns"] * 1e-9 < 600, job
assert info["clock"]["corrected"] and all(r["synced"] and r["points"] >= 2 for r in info["clock"]["ranks"])
steps = 3 + 1
buckets = len(truth["buckets"])
for rank in summary["ranks"]:
    counts = rank["counts"]
    assert rank["out_of_order"] == 0, rank
    assert counts.get("mpi_collective MPI_Iallreduce") == buckets * steps, (buckets, counts)
    assert counts.get("mpi_call MPI_Iallreduce") == buckets * steps, counts
    assert counts.get("mpi_call MPI_Init") == 1 and counts.get("mpi_call MPI_Finalize") == 1, counts
    if os.environ["expect_nvtx"] == "1":  # a build without NVTX builds ddp_sim without its ranges
        assert sum(n for k, n in counts.items() if k.startswith("nvtx_range ProfilerStep#")) == steps, counts
        assert counts.get("nvtx_range forward") == steps and counts.get("nvtx_range backward") == steps, counts
allreduces = [c for c in summary["collectives"] if c["op"] == "AllReduce"]
assert len(allreduces) == buckets * steps, len(allreduces)
assert all(c["ranks"] == 4 for c in summary["collectives"]), "an instance not matched on every rank"
print("in-process timeline ok:", buckets, "buckets x", steps, "steps on 4 ranks")
PY

echo "== what capture cost each rank, in info and the report"
"$rankscope" info job.h5 >info.txt
"$rankscope" report job.h5 --format json -o report.json
"$rankscope" report job.h5 >report.txt
grep -q "^capture cost: " info.txt || fail "info does not state the capture cost"
! grep -q "agent_cost_" info.txt || fail "info lists capture costs among the data-quality problems"
grep -q "^capture cost" report.txt || fail "the text report does not state the capture cost"
# Every counter the ranks carry is one `rankscope info --counters` explains.
"$rankscope" info --counters >counters.txt
python3 -c '
import json, sys
known = {line.strip() for line in open("counters.txt") if not line.startswith(" ")}
unknown = {n for r in json.load(open("info.json"))["ranks"] for n in r["counters"]} - known
sys.exit("counters not in the registry: %s" % sorted(unknown) if unknown else 0)' || fail "a rank carries an undescribed counter"
python3 - <<'PY'
import json
info, report, summary = (json.load(open(f)) for f in ("info.json", "report.json", "summary.json"))
summary_by_rank = {r["rank"]: r["counts"] for r in summary["ranks"]}
costs = report["capture_cost"]
assert [c["rank"] for c in costs] == [0, 1, 2, 3], costs
for c, rank in zip(costs, info["ranks"]):
    counters = rank["counters"]
    # Every part measured, each a small share of the rank's run.
    for part in ("start_ns", "mpi_init_ns", "mpi_finalize_ns", "finish_ns", "flusher_cpu_ns", "events_ns"):
        assert 0 < c[part] < c["capture_ns"], (part, c)
    assert c["total_ns"] == sum(c[p] or 0 for p in ("start_ns", "mpi_init_ns", "mpi_finalize_ns", "finish_ns",
                                                      "flusher_cpu_ns", "events_ns", "polls_ns")), c
    assert abs(c["share_pct"] - 100 * c["total_ns"] / c["capture_ns"]) < 1e-6, c
    # The calls' part: host events times the calibrated cost of one (tens of ns: two clock reads).
    host_kinds = ("nvtx_range", "nvtx_mark", "mpi_call", "mpi_collective", "mpi_p2p", "nccl_coll_enqueue", "nccl_p2p_enqueue")
    host = sum(n for name, n in summary_by_rank[rank["rank"]].items() if name.split()[0] in host_kinds)
    assert c["host_events"] == host + counters.get("mpi_polls_timed", 0), (c, host, counters)
    assert 1_000 < counters["agent_cost_event_ps"] < 5_000_000, counters
    # A poll's cost, or where the wrapper's few ns were below what the calibration resolves (ranks outnumber
    # cores here), no cost and the counter saying so: the polls' part n/a with why, never 0.
    if counters.get("agent_cost_poll_unresolved"):
        assert "agent_cost_poll_ps" not in counters, counters
        assert c["polls_counted"] == 0 or (c["polls_ns"] is None and "calibration" in c["polls_ns_reason"]), c
    else:
        assert 0 < counters["agent_cost_poll_ps"] < 1_000_000, counters
        assert c["polls_ns"] == c["polls_counted"] * counters["agent_cost_poll_ps"] // 1000, (c, counters)
    # The buffers: whole blocks, only those used (a few of --buffer-mb's 64 MiB).
    assert 0 < c["buffer_bytes"] < 16 << 20, c
assert any("agent_cost_poll_ps" in rank["counters"] for rank in info["ranks"]), "no rank resolved a poll's cost"
PY

echo "== an earlier timeline is replaced only with --overwrite, by the merge at the end too"
small_job=("$ddp_sim" --steps 1 --warmup-steps 1 --layers 2 --layer-mb 1 --forward-us 100)
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/job.h5" -- "${small_job[@]}" >again.log 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "job.h5 (-o) exists and is a rankscope timeline: give --overwrite" again.log ||
  { cat again.log; fail "run without --overwrite over an earlier timeline: status $status"; }
"$mpiexec" -n 2 "$rankscope" run --overwrite -o "$work/job.h5" -- "${small_job[@]}" >again.log 2>&1 ||
  { cat again.log; fail "run --overwrite failed"; }
"$rankscope" info --json job.h5 | python3 -c 'import json, sys; assert json.load(sys.stdin)["world_size"] == 2' ||
  fail "run --overwrite did not replace the timeline"

echo "== exit status passes through"
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/bad.h5" -- "$ddp_sim" --layers 0 >bad.log 2>&1 || status=$?
[ "$status" -eq 2 ] || { cat bad.log; fail "ddp_sim's exit status 2 came back as $status"; }
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/missing.h5" -- /nonexistent/program >missing.log 2>&1 || status=$?
[ "$status" -eq 127 ] || { cat missing.log; fail "a missing program gave status $status, not 127"; }
grep -q "cannot run /nonexistent/program" missing.log || fail "no message for a missing program"

echo "== the sidecar guard: an MPI program in sidecar mode stops at once"
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/guard.h5" --mode sidecar -- "$ddp_sim" --steps 1 >guard.log 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "an MPI program ran in sidecar mode"
grep -q -- "--mode inprocess" guard.log || { cat guard.log; fail "the guard's message does not name --mode inprocess"; }

if [ "$nvtx_app" = none ]; then
  echo "sidecar checks skipped: built without NVTX"
  exit 0
fi

echo "== sidecar: a program without MPI on 2 ranks"
"$mpiexec" -n 2 "$rankscope" run -o "$work/side.h5" --sync-interval 0.1 -- "$nvtx_app" 400 1000 >side.log 2>&1 ||
  { cat side.log; fail "sidecar run failed"; }
cat side.log
! grep -q "records no job identity" side.log || fail "a sidecar rank's shard lacks the job's identity"
grep -q "sidecar mode" side.log || fail "auto mode did not pick sidecar for a program without MPI"
for expected in RANK=0 RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2; do
  grep -qx "$expected" side.log || fail "the application did not get $expected"
done
grep -qE '^MASTER_ADDR=.+' side.log && grep -qE '^MASTER_PORT=[0-9]+$' side.log || fail "no rendezvous address"
"$rankscope" info --json side.h5 >side-info.json
"$summary" side.h5 >side-summary.json
python3 - <<'PY'
import json
info, summary = json.load(open("side-info.json")), json.load(open("side-summary.json"))
assert [r["status"] for r in info["ranks"]] == ["complete"] * 2, info["ranks"]
# Measured at start, at the end, and periodically while the application ran.
assert all(r["synced"] and r["points"] >= 3 for r in info["clock"]["ranks"]), info["clock"]
# The sidecars agreed on when the job started, and told the application's agents.
import re, time
assert re.fullmatch(r"openmpi:[0-9]+", info["job"]["id"]), info["job"]
assert 0 < time.time() - info["job"]["start_wall_ns"] * 1e-9 < 600, info["job"]
for rank in summary["ranks"]:
    assert rank["counts"].get("nvtx_range app step") == 800, rank["counts"]
    assert rank["counts"].get("nvtx_range app work") == 800, rank["counts"]
print("sidecar timeline ok")
PY

echo "== a job that captured nothing: its report says so, never measured-looking zeros"
"$mpiexec" -n 2 "$rankscope" run -o "$work/nothing.h5" -- true >nothing.log 2>&1 || { cat nothing.log; fail "run of true failed"; }
grep -q "warning: rank 1 captured nothing" nothing.log || { cat nothing.log; fail "no warning that nothing was captured"; }
"$rankscope" report nothing.h5 >nothing.txt
head -1 nothing.txt | grep -qF "2 ranks, 1 steps, mean step n/a (no rank has an event to time a step by" ||
  { cat nothing.txt; fail "the headline of an empty job gives a step time"; }
grep -qF "stragglers: n/a: no rank has an event to time a step by" nothing.txt || { cat nothing.txt; fail "stragglers judged on no events"; }
# Each rank n/a in the step breakdown and in the overlap lines.
[ "$(grep -cF "n/a: the rank captured no event" nothing.txt)" -eq 4 ] && ! grep -q "  rank 0 .* idle " nothing.txt ||
  { cat nothing.txt; fail "the overlap lines of ranks without events show figures"; }
"$rankscope" report nothing.h5 --format json -o nothing.json
"$rankscope" report nothing.h5 --format html -o nothing.html
grep -qF '<td colspan="8">the rank captured no event' nothing.html || fail "the HTML table shows figures for no events"
python3 - <<'PY'
import json
report = json.load(open("nothing.json"))
assert report["steps"]["mean_step_ns"] is None and report["steps"]["median_step_ns"] is None, report["steps"]
assert "no rank has an event to time a step by" in report["steps"]["mean_step_ns_reason"], report["steps"]
for rank in report["overlap"]:
    for key in ("compute_ns", "comm_ns", "idle_ns", "idle_pct", "exposed_wait_ns"):
        assert rank[key] is None and "captured no event" in rank[key + "_reason"], rank
assert report["stragglers"] is None, report["stragglers"]
PY

echo "== sidecar: MASTER_ADDR and MASTER_PORT the user set are kept; a bad MASTER_PORT is refused"
MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 "$mpiexec" -x MASTER_ADDR -x MASTER_PORT -n 2 "$rankscope" run \
  -o "$work/given.h5" -- "$nvtx_app" 10 0 >given.log 2>&1 || { cat given.log; fail "sidecar run with MASTER_ADDR failed"; }
[ "$(grep -cx 'MASTER_ADDR=127.0.0.1' given.log)" -eq 2 ] && [ "$(grep -cx 'MASTER_PORT=29555' given.log)" -eq 2 ] ||
  { cat given.log; fail "the user's MASTER_ADDR and MASTER_PORT were not handed on"; }
status=0
MASTER_PORT=notaport "$mpiexec" -x MASTER_PORT -n 2 "$rankscope" run -o "$work/badport.h5" -- "$nvtx_app" 10 0 \
  >badport.log 2>&1 || status=$?
[ "$status" -ne 0 ] || fail "a MASTER_PORT that is no port number was accepted"
grep -q "MASTER_PORT='notaport' is not a port number (1-65535)" badport.log || { cat badport.log; fail "no message naming MASTER_PORT"; }

echo "== sidecar: the application's exit status and its signal pass through"
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/exit.h5" -- "$nvtx_app" 10 0 exit 3 >exit.log 2>&1 || status=$?
[ "$status" -eq 3 ] || { cat exit.log; fail "exit status 3 came back as $status"; }
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/quick.h5" -- "$nvtx_app" 10 0 _exit 4 >quick.log 2>&1 || status=$?
[ "$status" -eq 4 ] || { cat quick.log; fail "_exit status 4 came back as $status"; }
# _exit runs no exit handlers: the agent closes the shard on its way out.
"$rankscope" info --json quick.h5 >quick.json || { cat quick.log; fail "no timeline after the program's _exit"; }
python3 - <<'PY' || fail "the ranks of a program that ended by _exit"
import json
info = json.load(open("quick.json"))
assert info["aborted_ranks"] == [0, 1] and info["dead_ranks"] == [], info
for rank in info["ranks"]:
    assert rank["counters"]["ended_by_exit_call"] == 1 and rank["counters"]["exit_status"] == 4, rank
assert info["events_by_kind"]["nvtx_range"] == 80, info["events_by_kind"]  # 2 ranks, 2 threads, 10 steps of 2
PY
status=0
"$mpiexec" -n 2 "$rankscope" run -o "$work/signal.h5" -- "$nvtx_app" 10 0 signal 9 >signal.log 2>&1 || status=$?
[ "$status" -eq 137 ] || { cat signal.log; fail "death by signal 9 came back as status $status"; }
"$rankscope" info signal.h5 | grep -q "dead ranks: 0,1" || fail "ranks killed by a signal are not shown dead"

echo "== a SIGTERM while the shard is being closed at exit: the shard is closed whole"
# 800,000 events held to the end (--flush-ms 60000) take some 30 ms to
# write; the signal comes 10 ms into that, and the close it would wait for
# is its own thread's unless that thread holds it back.
status=0
"$mpiexec" -n 1 "$rankscope" run -o "$work/late.h5" --flush-ms 60000 -- "$nvtx_app" 200000 0 term-at-exit 10 \
  >late.log 2>&1 || status=$?
[ -f late.h5 ] || "$rankscope" merge late.h5.shards -o late.h5 >/dev/null 2>&1
"$rankscope" info --json late.h5 >late.json || { cat late.log; fail "no timeline after a SIGTERM at exit"; }
# A signal that came ends the process as it would have without the agent
# (143); one that came too late, after a quick close, found no process (0).
python3 - "$status" <<'PY' || { cat late.log; fail "a SIGTERM at exit lost the shard's end, or its exit status"; }
import json, sys
[rank] = json.load(open("late.json"))["ranks"]
expected = {"terminated": 143, "complete": 0}
assert rank["status"] in expected and rank["events"] == 800000, (rank["status"], rank["events"])
assert int(sys.argv[1]) == expected[rank["status"]], (rank["status"], "exit status", sys.argv[1])
PY

echo "== sidecar: SIGUSR2 on mpirun reaches the program, not the end of the sidecars"
# The program (no MPI: sidecar mode) says it is ready, then ends well on SIGUSR2.
cat >usr2.sh <<'SH'
trap 'echo "rank $RANK got SIGUSR2" >"usr2.$RANK"; exit 0' USR2
touch "ready.$RANK"
for _ in $(seq 600); do sleep 0.1; done
exit 9
SH
"$mpiexec" -n 2 "$rankscope" run -o "$work/usr2.h5" --mode sidecar -- bash usr2.sh >usr2.log 2>&1 &
job=$!
for _ in $(seq 300); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.1; done
[ -e ready.0 ] && [ -e ready.1 ] || { kill -9 $job; cat usr2.log; fail "the program never started on both ranks"; }
kill -USR2 $job
status=0
wait $job || status=$?
[ "$status" -eq 0 ] && [ -s usr2.0 ] && [ -s usr2.1 ] && [ -f usr2.h5 ] ||
  { cat usr2.log; fail "SIGUSR2 on mpirun: exit status $status, the program's signal files and the timeline"; }
echo "all rankscope run checks passed"
