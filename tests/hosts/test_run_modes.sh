#!/usr/bin/env bash
# `rankscope run` in both modes across two test hosts: every rank named by
# its host and node; in sidecar mode the torch.distributed environment is
# right across hosts (LOCAL_RANK per host, a MASTER_ADDR every host reaches,
# proven by a TCP rendezvous like TCPStore's), also where each host's name
# resolves to a loopback address on itself (Debian's 127.0.1.1).
# Usage: test_run_modes.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 202
rankscope=$1 ddp_sim=$2
hosts up 2 --slots 2 >/dev/null

placement() {
  "$rankscope" info --json "$1" >"$1.json"
  /usr/bin/python3 - "$1.json" <<'PY'
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
got = [(r["rank"], r["host"], r["node_id"], r["local_rank"], r["status"]) for r in ranks]
want = [(0, "host1", 0, 0, "complete"), (1, "host1", 0, 1, "complete"),
        (2, "host2", 1, 0, "complete"), (3, "host2", 1, 1, "complete")]
assert got == want, got
PY
}

echo "== in-process"
hosts mpirun -n 4 "$rankscope" run -o inprocess.h5 -- "$ddp_sim" --steps 3 --layers 4 --layer-mb 1 >inprocess.log 2>&1 ||
  { cat inprocess.log; fail "the in-process run failed"; }
placement inprocess.h5

sidecar() {
  local name=$1
  hosts mpirun -n 4 "$rankscope" run --mode sidecar -o "$name.h5" -- /usr/bin/python3 "$here/rendezvous.py" "$work/$name.txt" \
    >"$name.log" 2>&1 || { cat "$name.log"; fail "the sidecar run ($name) failed"; }
  cat "$name.txt"
  placement "$name.h5"
  /usr/bin/python3 - "$name.txt" <<'PY'
import sys
rows = [dict(f.split("=") for f in line.split()[1:]) | {"host": line.split()[0]} for line in open(sys.argv[1])]
assert [r["RANK"] for r in rows] == ["0", "1", "2", "3"], rows
assert [(r["host"], r["LOCAL_RANK"], r["LOCAL_WORLD_SIZE"]) for r in rows] == [
    ("host1", "0", "2"), ("host1", "1", "2"), ("host2", "0", "2"), ("host2", "1", "2")], rows
assert all(r["WORLD_SIZE"] == "4" for r in rows), rows
assert len({(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in rows}) == 1, rows
print("MASTER_ADDR", rows[0]["MASTER_ADDR"])
PY
}
echo "== sidecar"
sidecar sidecar
grep -q "MASTER_ADDR=host1 " sidecar.txt || fail "MASTER_ADDR is not rank 0's host name, which every host resolves"

echo "== sidecar, each host's name on a loopback address"
hosts up 2 --slots 2 --loopback-names >/dev/null
sidecar loopback
grep -q "MASTER_ADDR=198.18.202.1 " loopback.txt || fail "MASTER_ADDR is not rank 0's address on the hosts' network"
echo "run modes across hosts ok"
