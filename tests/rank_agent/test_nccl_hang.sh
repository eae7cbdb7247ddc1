#!/usr/bin/env bash
# --hang-timeout on NCCL's kernels, in sidecar mode: nccl_hang_app makes
# NCCL's profiler calls, its kernels waiting for their peers (its modes say
# how). With --hang-action abort each hung job ends within a minute, and the
# report says what hung:
# - allreduce, rank 2 sleeping 100 s before the fourth: the all-reduce (#3 of
#   the communicator), ranks 0 and 1 inside it since the timeout, and rank 2
#   as the one that never came, with its last call;
# - pipeline, rank 1 sleeping before the fourth iteration: rank 0's send #3
#   to rank 1 and rank 2's receive #3 from it, each a hang on rank 1 alone;
# - ring, each rank receiving before it sends from the fourth iteration on:
#   the deadlock 0 > 2 > 1 > 0 of their receives, and no hang besides;
# - stall, rank 1's group kernel of the fourth iteration stalling once begun:
#   each send #3 and its peer's receive both inside (every rank's send and
#   receive share their kernel's start stamp, and both are written), no deadlock;
# - relay, rank 1's receive kernel of the fourth iteration stalling once begun,
#   its send to rank 2 called but queued behind it: rank 0's send #3 with
#   rank 1 inside the receive, and rank 2's receive #3 as a hang on rank 1,
#   which made the call but had not begun it; no deadlock.
# Without a hang, the all-reduces and the ring's grouped sends and receives
# pass with no hang in the report.
# Usage: test_nccl_hang.sh RANKSCOPE NCCL_HANG_APP MPIEXEC
set -euo pipefail
rankscope=$1 app=$2 mpiexec=$3
. "$(dirname "$0")/../support/job_script.sh"
export OMPI_MCA_mpi_yield_when_idle=1

# healthy NAME MODE ITERATIONS
healthy() {
  echo "== no hang: $2"
  mkdir "meet-$1"
  "$mpiexec" -n 3 "$rankscope" run -o "$work/$1.h5" --mode sidecar --capture nccl --hang-timeout 5 -- \
    "$app" "$2" "$work/meet-$1" "$3" >"$1.log" 2>&1 || { cat "$1.log"; fail "the healthy $2 run failed"; }
  "$rankscope" report --format json "$1.h5" >"$1.json"
  /usr/bin/python3 -c "
import json, sys
r = json.load(open('$1.json'))
assert r.get('hangs', []) == [] and r.get('deadlocks', []) == [], r
" || fail "a hang in a healthy $2 job"
  if grep -q "hang-timeout" "$1.log"; then cat "$1.log"; fail "a healthy $2 job was taken for hung"; fi
}

# hung NAME EXPECTED_LINE MODE ARGS...: the job, ended by --hang-action abort, its report in NAME.json
hung() {
  local name=$1 line=$2
  shift 2
  echo "== hung: $*"
  mkdir "meet-$name"
  local started status=0 took
  started=$(date +%s)
  timeout 120 "$mpiexec" -n 3 "$rankscope" run -o "$work/$name.h5" --mode sidecar --capture nccl --hang-timeout 5 \
    --hang-action abort -- "$app" "$1" "$work/meet-$name" "${@:2}" >"$name.log" 2>&1 || status=$?
  took=$(($(date +%s) - started))
  [ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { cat "$name.log"; fail "the hung $1 job ended with status $status"; }
  [ "$took" -lt 60 ] || fail "the hung $1 job took $took s to end"
  grep -Eq "$line for [0-9.]* s \(--hang-timeout\)" "$name.log" || { cat "$name.log"; fail "no rank said what hung in $1"; }
  [ -f "$name.h5" ] || "$rankscope" merge "$work/$name.h5.shards" -o "$name.h5" >/dev/null
  "$rankscope" report --format json "$name.h5" >"$name.json"
  "$rankscope" report "$name.h5" >"$name.txt"
  echo "ended in $took s"
  awk '/^(HANG|DEADLOCK)/ { shown = 1 } /^$/ { shown = 0 } shown' "$name.txt"
}

healthy healthy allreduce 6
healthy healthy-ring ring 6

hung hung "inside AllReduce #3 of communicator 5eed000000000001" allreduce 6 2 3 100
/usr/bin/python3 - <<'PY'
import json
r = json.load(open("hung.json"))
[h] = r["hangs"]
assert r["deadlocks"] == [], r["deadlocks"]
assert (h["op"], h["seq"], h["comm_hash"], h["point_to_point"]) == ("AllReduce", 3, 0x5eed000000000001, False), h
assert h["comm"] == "NCCL world (3 ranks)", h["comm"]
assert [e["rank"] for e in h["entered"]] == [0, 1] and all(e["waited_ns"] >= 4.5e9 for e in h["entered"]), h
assert h["missing_ranks"] == [2] and h["members_known"], h
m = h["missing"][0]
assert m["wrote_state"] and m["inside"] == "" and m["last_call"] == "ncclAllReduce" and m["entered_at_ns"] is None, m
print(f"hang named: {h['call']} #{h['seq']} of {h['comm']}, ranks 0,1 inside; rank 2 missing, last call {m['last_call']}")
PY

hung pipeline "inside (Send #3 to|Recv #3 from) rank 1 of communicator 5eed000000000001" pipeline 6 1 3 100
/usr/bin/python3 - <<'PY'
import json
r = json.load(open("pipeline.json"))
assert r["deadlocks"] == [], r["deadlocks"]
hangs = sorted(r["hangs"], key=lambda h: h["entered"][0]["rank"])
assert [(h["call"], h["seq"], h["peer"], h["point_to_point"]) for h in hangs] == \
    [("ncclSend", 3, 1, True), ("ncclRecv", 3, 1, True)], hangs
for h, waiter in zip(hangs, (0, 2)):
    assert [e["rank"] for e in h["entered"]] == [waiter] and h["entered"][0]["waited_ns"] >= 4.5e9, h
    assert h["missing_ranks"] == [1] and h["members_known"], h
    m = h["missing"][0]
    assert m["wrote_state"] and m["inside"] == "" and m["last_call"] == "ncclSend" and m["entered_at_ns"] is None, m
print("pipeline: rank 0's send #3 and rank 2's receive #3 each a hang on rank 1, last call", hangs[0]["missing"][0]["last_call"])
PY
grep -q "^HANG: ncclSend #3 to rank 1 of NCCL world (3 ranks): rank 0 inside, up to .*; rank 1 had not begun the matching receive$" \
  pipeline.txt || { cat pipeline.txt; fail "the text report does not name rank 0's send as waiting for rank 1"; }

hung ring "inside Recv #3 from rank [0-2] of communicator 5eed000000000001" ring 6 3
/usr/bin/python3 - <<'PY'
import json
r = json.load(open("ring.json"))
assert r["hangs"] == [], r["hangs"]
[d] = r["deadlocks"]
waits = [(w["rank"], w["peer"], w["inside"]) for w in d["waits"]]
assert waits == [(0, 2, "ncclRecv from rank 2"), (2, 1, "ncclRecv from rank 1"), (1, 0, "ncclRecv from rank 0")], waits
assert all(w["waited_ns"] >= 4.5e9 for w in d["waits"]), d
print("ring: deadlock", " > ".join(str(w[0]) for w in waits), "> 0")
PY
grep -q "^DEADLOCK: ranks 0 > 2 > 1 > 0 each wait for the next" ring.txt || { cat ring.txt; fail "no DEADLOCK line"; }
hung stall "inside (Send #3 to|Recv #3 from) rank [0-2] of communicator 5eed000000000001" stall 6 1 3 100
/usr/bin/python3 - <<'PY'
import json
r = json.load(open("stall.json"))
assert r["deadlocks"] == [], r["deadlocks"]
hangs = sorted(r["hangs"], key=lambda h: h["entered"][0]["rank"])
assert [(h["call"], h["seq"], h["peer"]) for h in hangs] == [("ncclSend", 3, 1), ("ncclSend", 3, 2), ("ncclSend", 3, 0)], hangs
for sender, h in enumerate(hangs):
    assert [e["rank"] for e in h["entered"]] == [sender, (sender + 1) % 3], h
    assert all(e["waited_ns"] >= 4.5e9 for e in h["entered"]) and h["missing_ranks"] == [], h
print("stall: each rank's send #3 and its peer's receive both inside, no deadlock")
PY
grep -q "^HANG: ncclSend #3 to rank 1 of NCCL world (3 ranks): ranks 0,1 inside, up to .*; rank 1 is inside the matching receive: the transfer itself did not complete$" \
  stall.txt || { cat stall.txt; fail "the text report does not tell the stalled transfer"; }
hung relay "inside (Send #3 to rank 1|Recv #3 from rank [01]) of communicator 5eed000000000001" relay 6 1 3 100
/usr/bin/python3 - <<'PY'
import json
r = json.load(open("relay.json"))
assert r["deadlocks"] == [], r["deadlocks"]
hangs = sorted(r["hangs"], key=lambda h: h["entered"][0]["rank"])
assert [(h["call"], h["seq"], h["peer"]) for h in hangs] == [("ncclSend", 3, 1), ("ncclRecv", 3, 1)], hangs
transfer, downstream = hangs
assert [e["rank"] for e in transfer["entered"]] == [0, 1] and transfer["missing_ranks"] == [], transfer
assert [e["rank"] for e in downstream["entered"]] == [2] and downstream["missing_ranks"] == [1], downstream
m = downstream["missing"][0]
assert m["wrote_state"] and m["inside"] == "ncclRecv from rank 0" and m["last_call"] == "ncclSend", m
assert m["entered_at_ns"] is None, m
print("relay: the stalled transfer 0 > 1, and rank 2's receive waiting on rank 1's send, called but not begun")
PY
grep -q "^HANG: ncclRecv #3 from rank 1 of NCCL world (3 ranks): rank 2 inside, up to .*; rank 1 had not begun the matching send$" \
  relay.txt || { cat relay.txt; fail "the text report does not tell rank 2's receive as waiting on rank 1"; }
echo "NCCL hangs ok"
