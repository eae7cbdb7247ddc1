#!/usr/bin/env bash
# --hang-timeout on NCCL collectives, in sidecar mode: nccl_hang_app makes
# NCCL's profiler calls for an all-reduce per iteration, its kernels waiting
# for every rank; rank 2 sleeps 100 s before the fourth. With --hang-action
# abort the job ends within a minute, and the report names the all-reduce
# (#3 of the communicator), ranks 0 and 1 inside it since the timeout, and
# rank 2 as the one that never came, with its last call. Without a hang the
# same job passes with no hang in the report.
# Usage: test_nccl_hang.sh RANKSCOPE NCCL_HANG_APP MPIEXEC
set -euo pipefail
rankscope=$1 app=$2 mpiexec=$3
. "$(dirname "$0")/../support/job_script.sh"
export OMPI_MCA_mpi_yield_when_idle=1

echo "== no hang"
mkdir meet-healthy
"$mpiexec" -n 3 "$rankscope" run -o "$work/healthy.h5" --mode sidecar --capture nccl --hang-timeout 5 -- \
  "$app" "$work/meet-healthy" 6 >healthy.log 2>&1 || { cat healthy.log; fail "the healthy run failed"; }
"$rankscope" report --format json healthy.h5 >healthy.json
/usr/bin/python3 -c "
import json, sys
r = json.load(open('healthy.json'))
assert r.get('hangs', []) == [], r['hangs']
" || fail "a hang in a healthy job"
grep -q "hang-timeout" healthy.log && { cat healthy.log; fail "a healthy job was taken for hung"; }

echo "== rank 2 sleeps before the fourth all-reduce"
mkdir meet-hung
started=$(date +%s)
status=0
timeout 120 "$mpiexec" -n 3 "$rankscope" run -o "$work/hung.h5" --mode sidecar --capture nccl --hang-timeout 5 \
  --hang-action abort -- "$app" "$work/meet-hung" 6 2 3 100 >hung.log 2>&1 || status=$?
took=$(($(date +%s) - started))
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat hung.log; fail "the hung job ended with status $status"; }
[ "$took" -lt 60 ] || fail "the hung job took $took s to end"
grep -q "inside AllReduce #3 of communicator 5eed000000000001 for [0-9.]* s (--hang-timeout)" hung.log ||
  { cat hung.log; fail "no rank said which collective hung"; }
[ -f hung.h5 ] || "$rankscope" merge "$work/hung.h5.shards" -o hung.h5 >/dev/null
"$rankscope" report --format json hung.h5 >hung.json
/usr/bin/python3 - <<'PY'
import json
[h] = json.load(open("hung.json"))["hangs"]
assert (h["op"], h["seq"], h["comm_hash"]) == ("AllReduce", 3, 0x5eed000000000001), h
assert [e["rank"] for e in h["entered"]] == [0, 1] and all(e["waited_ns"] >= 4.5e9 for e in h["entered"]), h
assert h["missing_ranks"] == [2] and h["members_known"], h
m = h["missing"][0]
assert m["wrote_state"] and m["inside"] == "" and m["last_call"] == "ncclAllReduce" and m["entered_at_ns"] is None, m
print(f"hang named: {h['call']} #{h['seq']} of {h['comm']}, ranks 0,1 inside; rank 2 missing, last call {m['last_call']}")
PY
echo "NCCL hang ok (ended in $took s)"
