#!/usr/bin/env bash
# torchrun under `rankscope run` across two test hosts, one rankscope per
# host (mpirun --map-by node), as on a cluster: torchrun's workers are the
# job's ranks, each named by its host and local rank, on one clock with the
# host's offset measured, a slow worker named the straggler; with 1 and 2
# workers per host.
# Usage: test_torchrun.sh RANKSCOPE TORCH_VENV
. "$(dirname "$0")/common.sh" 205
rankscope=$1 venv=$2
[ -x "$venv/bin/torchrun" ] || { echo "SKIP: no torch in $venv (the torch.venv test makes it)"; exit 77; }
hosts up 2 --slots 2 >/dev/null
script=$here/../torch/train_ddp.py

for per_host in 1 2; do
  ranks=$((2 * per_host)) slow=$((2 * per_host - 1))
  echo "== $per_host worker(s) per host, rank $slow slowed"
  hosts mpirun -n 2 --map-by node "$rankscope" run -o "torchrun$per_host.h5" -- "$venv/bin/torchrun" \
    --nproc-per-node "$per_host" "$script" --steps 20 --slow-rank "$slow" >"torchrun$per_host.log" 2>&1 ||
    { cat "torchrun$per_host.log"; fail "the run with $per_host worker(s) per host failed"; }
  "$rankscope" info --json "torchrun$per_host.h5" >info.json
  "$rankscope" report --format json "torchrun$per_host.h5" >report.json
  /usr/bin/python3 - info.json report.json "$per_host" "$slow" <<'PY' || fail "$per_host worker(s) per host: not as expected"
import json, sys
info, report = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
per_host, slow = int(sys.argv[3]), int(sys.argv[4])
ranks = info["ranks"]
got = [(r["rank"], r["host"], r["local_rank"], r["status"]) for r in ranks]
want = [(h * per_host + l, "host%d" % (h + 1), l, "complete") for h in range(2) for l in range(per_host)]
assert got == want, got
clocks = {c["rank"]: c for c in info["clock"]["ranks"]}
for r in ranks:
    offset = clocks[r["rank"]]["offset_ns"]
    expected = 0 if r["host"] == "host1" else 3_000_000_000
    # The host's offset, within the bound measured (here: a few ms, two hosts of one rankscope each).
    assert abs(offset - expected) <= clocks[r["rank"]]["bound_ns"] + 1_000_000, (r["rank"], offset)
assert report["steps"]["numbers"] == list(range(20)), report["steps"]["numbers"]
first = (report["stragglers"] or [{}])[0]
assert first.get("rank") == slow and first.get("cause") == "slow compute", first
print("placement, clocks and straggler as expected:", got)
PY
done
echo "torchrun across hosts: passed"
