#!/usr/bin/env bash
# Programs nobody here wrote, unchanged under `rankscope run`: an mpi4py
# script (Debian's python3-mpi4py) and NetPIPE (Debian's netpipe-openmpi).
# Their MPI calls must be in the timeline at the counts they make, every
# collective matched on every rank, every send matched with its receive.
# Usage: test_foreign.sh RANKSCOPE TIMELINE_SUMMARY MPIEXEC
set -euo pipefail
rankscope=$1 summary=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

python=/usr/bin/python3
"$python" -c "import mpi4py" || fail "python3-mpi4py is not installed (scripts/setup-deps.sh installs it)"
cat >ring.py <<'PY'
import array
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
send, total = array.array("d", [rank] * 1024), array.array("d", [0.0] * 1024)
for _ in range(10):
    comm.Allreduce(send, total, op=MPI.SUM)
assert total[0] == sum(range(size))
for _ in range(5):
    comm.Bcast(total, root=0)
left, right = (rank - 1) % size, (rank + 1) % size
incoming = array.array("d", [0.0] * 1024)
for step in range(3):
    comm.Sendrecv(send, dest=right, sendtag=step, recvbuf=incoming, source=left, recvtag=step)
half = comm.Split(rank % 2, rank)
half.Allreduce(send, total, op=MPI.SUM)
comm.Barrier()
comm.Barrier()
PY

echo "== an mpi4py script on 4 ranks"
"$mpiexec" -n 4 "$rankscope" run -o "$work/py.h5" -- "$python" ring.py >py.log 2>&1 || { cat py.log; fail "mpi4py run failed"; }
cat py.log
grep -q "in-process mode (ring.py imports mpi4py)" py.log || fail "auto mode did not see that the script uses MPI"
# The same code given with -c.
"$mpiexec" -n 2 "$rankscope" run -o "$work/py-c.h5" -- "$python" -c "$(cat ring.py)" >py-c.log 2>&1 ||
  { cat py-c.log; fail "mpi4py run of python -c failed"; }
grep -q "in-process mode ($python -c imports mpi4py)" py-c.log || { cat py-c.log; fail "auto mode did not see that -c uses MPI"; }
# A script that only mentions mpi4py (a comment, a string) loads no MPI: sidecar mode.
printf '# Unlike the mpi4py version, this one needs no MPI.\nprint("no MPI here: mpi4py")\n' >mentions.py
"$mpiexec" -n 1 "$rankscope" run -o "$work/mentions.h5" -- "$python" mentions.py >mentions.log 2>&1 ||
  { cat mentions.log; fail "the run of a script that mentions mpi4py failed"; }
grep -q "sidecar mode (found no MPI in" mentions.log || { cat mentions.log; fail "a comment made auto mode pick in-process"; }
"$summary" py.h5 >py.json
python3 - <<'PY'
import json
s = json.load(open("py.json"))
for rank in s["ranks"]:
    c = rank["counts"]
    assert rank["status"] == "complete", rank
    assert c.get("mpi_collective MPI_Allreduce") == 11, c   # 10 on the world, 1 on the split communicator
    assert c.get("mpi_collective MPI_Bcast") == 5, c
    assert c.get("mpi_collective MPI_Barrier") == 2, c
    assert c.get("mpi_p2p MPI_Sendrecv") == 6, c            # a send and a receive per call
    assert c.get("mpi_call MPI_Comm_split") == 1, c
by_size = {}
for c in s["collectives"]:
    by_size.setdefault(c["ranks"], []).append(c)
assert len(by_size.get(2, [])) == 2, by_size.keys()   # the split communicator's allreduce, one per half
assert set(by_size) <= {2, 4}, by_size.keys()
assert s["p2p"] == {"sends": 12, "receives": 12, "matched": 12, "unmatched_receives": []}, s["p2p"]
print("mpi4py timeline ok")
PY

echo "== NetPIPE on 2 ranks"
"$mpiexec" -n 2 "$rankscope" run -o "$work/np.h5" -- NPopenmpi -n 20 -p 0 -a -u 4096 -o "$work/np.out" >np.log 2>&1 ||
  { cat np.log; fail "NetPIPE run failed"; }
tail -3 np.log
"$summary" np.h5 >np.json
python3 - <<'PY'
import json
s = json.load(open("np.json"))
p2p = s["p2p"]
assert p2p["sends"] > 100 and p2p["sends"] == p2p["receives"] == p2p["matched"], p2p
for rank in s["ranks"]:
    assert rank["status"] == "complete" and rank["out_of_order"] == 0, rank
print("NetPIPE timeline ok:", p2p)
PY
