#!/usr/bin/env bash
# End-to-end: synthetic shards -> `mpiexec -n 2 rankscope merge` -> `rankscope info`
# (text and JSON) -> the timeline read by h5dump, which knows nothing of rankscope.
# Usage: test_cli.sh RANKSCOPE MAKE_SYNTHETIC_SHARDS MPIEXEC
set -euo pipefail
rankscope=$1 make_shards=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$make_shards" "$work/shards" 3 2000 --dead 1

out=$("$mpiexec" -n 2 "$rankscope" merge "$work/shards" -o "$work/job.h5")
echo "$out"
grep -q "merged 3 ranks, 6000 events" <<<"$out" || fail "merge summary: $out"
grep -q "dead ranks (shard without its end record): 1" <<<"$out" || fail "dead rank not reported"

text=$("$rankscope" info "$work/job.h5")
echo "$text"
grep -qE '^ +1 +node-0 .* dead ' <<<"$text" || fail "info does not show rank 1 as dead"
grep -qx "job: synthetic:1, started 2023-11-14T22:13:20.000000000Z" <<<"$text" || fail "info does not show the job"
grep -q "nvtx_range" <<<"$text" || fail "info lacks events by kind"

"$rankscope" info --json "$work/job.h5" >"$work/info.json"
python3 - "$work/info.json" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
for key in ("ranks", "events_by_kind", "span_ns", "missing_ranks"):
    assert key in info, key
assert [r["rank"] for r in info["ranks"]] == [0, 1, 2]
for r in info["ranks"]:
    for key in ("rank", "host", "events", "drops"):
        assert key in r, key
    assert r["events"] == 2000 and r["drops"] == 0 and r["host"] == "node-0"
assert [r["status"] for r in info["ranks"]] == ["complete", "dead", "complete"]
assert sum(info["events_by_kind"].values()) == 6000 == info["events"]
assert info["missing_ranks"] == [] and info["dead_ranks"] == [1]
assert info["span_ns"] > 0
assert info["job"] == {"id": "synthetic:1", "start_wall_ns": 1700000000000000000}, info["job"]
assert info["clock"]["corrected"] is False and not any(r["synced"] for r in info["clock"]["ranks"])
print("json ok")
PY

# Readable without rankscope.
h5dump -d /ranks "$work/job.h5" | grep -q '"node-0"' || fail "h5dump cannot read /ranks"
h5dump -d /events -c 1 "$work/job.h5" | grep -q 'begin_ns' || fail "h5dump cannot read /events"

# Skewed clocks with their measurements: info shows each rank's offset, drift and bound.
"$make_shards" "$work/skewed" 3 1000 --skewed 1
"$rankscope" merge "$work/skewed" -o "$work/skewed.h5" >/dev/null
"$rankscope" info "$work/skewed.h5" | grep -q "clock: every rank on rank 0's clock" || fail "info text lacks the clock"
"$rankscope" info --json "$work/skewed.h5" | python3 -c '
import json, sys
clock = json.load(sys.stdin)["clock"]
assert clock["corrected"] is True
assert [r["rank"] for r in clock["ranks"]] == [0, 1, 2]
for r in clock["ranks"]:
    for key in ("rank", "offset_ns", "drift_ppm", "bound_ns"):
        assert key in r, key
    assert r["synced"] and r["bound_ns"] == 25
# Over this short job (a few ms), one nanosecond of rounding is a few tenths of a ppm.
assert abs(clock["ranks"][1]["drift_ppm"] - (-163 - 20)) < 1, clock["ranks"][1]
assert clock["ranks"][1]["offset_ns"] > 1e9
assert clock["reference_rank"] == 0, clock
'
# Without rank 0's shard, no rank with data reads the clock the others were
# measured against: info and the report say so, and name no other rank's.
mkdir "$work/skewed-no-0"
cp "$work/skewed/"*.shard "$work/skewed-no-0/"
rm "$work/skewed-no-0/rank-00000.shard"
"$rankscope" merge "$work/skewed-no-0" -o "$work/skewed-no-0.h5" >/dev/null
"$rankscope" info "$work/skewed-no-0.h5" |
  grep -qF "clock: every rank on the reference clock (rank 0's in a captured job), which no rank with data reads" ||
  fail "info names a clock rank 0's absence leaves unread"
"$rankscope" report --format json "$work/skewed-no-0.h5" | python3 -c '
import json, sys
report = json.load(sys.stdin)
clock = report["clock"]
assert clock["corrected"] and clock["reference_rank"] is None and "no rank with data" in clock["reference_rank_reason"], clock
missing = clock["ranks"][0]
assert missing["status"] == "missing" and missing["offset_ns"] is None and missing["offset_ns_reason"], missing
overlap = report["overlap"][0]
assert overlap["status"] == "missing" and overlap["compute_ns"] is None and overlap["compute_ns_reason"], overlap
'

# A missing rank shows up too.
rm "$work/shards/rank-00002.shard"
"$rankscope" merge "$work/shards" -o "$work/job2.h5" >/dev/null
"$rankscope" info --json "$work/job2.h5" | python3 -c 'import json,sys; i=json.load(sys.stdin); assert i["missing_ranks"]==[2], i["missing_ranks"]'

# A shard cut before its first whole chunk: when it was last heard from is unknown, not a number.
mkdir "$work/cut"
cp "$work/shards/rank-00000.shard" "$work/shards/rank-00001.shard" "$work/cut/"
truncate -s 100 "$work/cut/rank-00001.shard"
"$rankscope" merge "$work/cut" -o "$work/cut.h5" >/dev/null 2>&1 || fail "merge of a shard cut at 100 bytes failed"
"$rankscope" info "$work/cut.h5" | grep -qE '^ +1 +- .* dead +unknown$' || fail "info shows a time for a rank never heard from"
"$rankscope" info --json "$work/cut.h5" | python3 -c '
import json, sys
ranks = json.load(sys.stdin)["ranks"]
assert ranks[1]["last_heard_ns"] is None and ranks[0]["last_heard_ns"] > 0, ranks'

# A shard of another job of the same size among the job's: refused, naming both.
"$make_shards" "$work/other" 3 100 --job-id synthetic:2
mkdir "$work/mixed"
cp "$work/shards/rank-00000.shard" "$work/shards/rank-00001.shard" "$work/other/rank-00002.shard" "$work/mixed/"
set +e
msg=$("$rankscope" merge "$work/mixed" -o "$work/mixed.h5" 2>&1); status=$?
set -e
[ $status -eq 1 ] || fail "merge of shards of two jobs exited $status: $msg"
grep -qF "$work/mixed/rank-00000.shard and $work/mixed/rank-00002.shard are shards of different jobs: synthetic:1, started 2023-11-14T22:13:20.000000000Z; and synthetic:2, started 2023-11-14T22:13:20.000000000Z" <<<"$msg" ||
  fail "merge of shards of two jobs: $msg"
[ ! -e "$work/mixed.h5" ] || fail "a merge of two jobs left a timeline"

# Bad input: a clear message naming the file, exit status 1.
set +e
msg=$("$rankscope" info "$work/absent.h5" 2>&1); status=$?
set -e
[ $status -eq 1 ] || fail "info on a missing file exited $status"
grep -q "absent.h5" <<<"$msg" || fail "info error does not name the file: $msg"
echo "not a shard" >"$work/bogus.shard"
set +e
msg=$("$rankscope" merge "$work/bogus.shard" -o "$work/x.h5" 2>&1); status=$?
set -e
[ $status -eq 1 ] || fail "merge of a bogus shard exited $status"
grep -q "bogus.shard is not a rankscope shard" <<<"$msg" || fail "merge error: $msg"
[ ! -e "$work/x.h5" ] || fail "a failed merge left a timeline"
set +e
msg=$("$rankscope" info 2>&1); status=$?
set -e
[ $status -eq 2 ] && grep -q "give a timeline" <<<"$msg" || fail "info without a timeline: $status $msg"
set +e
msg=$("$rankscope" report "$work/job.h5" -o "$work/no/such/dir/r.txt" 2>&1); status=$?
set -e
[ $status -eq 1 ] && grep -q "rankscope report: error: cannot write $work/no/such/dir/r.txt.partial: No such file" <<<"$msg" ||
  fail "report to an unwritable place: $status $msg"
# Under mpiexec, process 0 checks the outputs and every process stops alike:
# one message, no process left waiting.
set +e
msg=$(timeout 60 "$mpiexec" -n 2 "$rankscope" report "$work/job.h5" -o "$work/no/such/dir/r.txt" 2>&1); status=$?
set -e
[ $status -ne 0 ] && [ $status -ne 124 ] && [ "$(grep -c "rankscope report: error: cannot write" <<<"$msg")" -eq 1 ] ||
  fail "report of 2 processes to an unwritable place: $status $msg"
set +e
msg=$(timeout 60 "$mpiexec" -n 2 "$rankscope" report "$work/none.h5" 2>&1); status=$?
set -e
[ $status -ne 0 ] && [ $status -ne 124 ] && [ "$(grep -c "rankscope report: error: .*none.h5" <<<"$msg")" -eq 1 ] ||
  fail "report of 2 processes of a missing timeline: $status $msg"
set +e
msg=$("$rankscope" run --capture mpi,gpu -- true 2>&1); status=$?
set -e
[ $status -eq 2 ] && grep -q "rankscope run: --capture: unknown source 'gpu' (known: mpi, nvtx, cuda, nccl, python)" <<<"$msg" ||
  fail "run with an unknown capture source: $status $msg"

# Every counter listed once, each with its meaning on the next line.
"$rankscope" info --counters >"$work/counters.txt"
[ "$(grep -c '^[a-z]' "$work/counters.txt")" -ge 55 ] || fail "info --counters lists too few counters"
grep -A1 -x "shard_chunks_corrupt" "$work/counters.txt" | grep -q "failed their checksum" ||
  fail "info --counters does not explain shard_chunks_corrupt"
echo "cli ok"
