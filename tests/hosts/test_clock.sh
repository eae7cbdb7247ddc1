#!/usr/bin/env bash
# Clock sync across test hosts whose kernel clocks are 3 s apart (time
# namespaces): every measurement of every rank recovers its host's offset
# within the bound it states, ranks of a host share their leader's
# measurement, and the bounds stay near the floor of the link's round trip.
# In-process mode (sync at MPI_Init and MPI_Finalize) and sidecar mode
# (rounds every 0.5 s), on the kernel's clock (exact truth) and on the TSC.
# Usage: test_clock.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 201
rankscope=$1 ddp_sim=$2
hosts up 3 --slots 2 --offset-step 3 >/dev/null

# TSC: each host calibrates the counter onto its own kernel clock, and a
# calibration seconds old is off by well under a microsecond; the kernel's
# own clock (raw) has an exact truth.
declare -A allowance_ns=([raw]=0 [auto]=5000)

check() {
  local timeline=$1 allowance=$2
  "$rankscope" info "$timeline" | sed -n '/^clock:/,/^$/p'
  /usr/bin/python3 - "$timeline" "$allowance" <<'PY'
import sys, h5py
path, allowance = sys.argv[1], int(sys.argv[2])
# A bound beyond this is the spinning-waiter failure (round trips of the
# scheduler's milliseconds), not the link's.
bound_limit_ns = 1_000_000
with h5py.File(path, "r") as f:
    host = {int(r["rank"]): r["host"].decode() for r in f["ranks"][:]}
    points = f["clock_points"][:]
    clock = {int(c["rank"]): c for c in f["clock"][:]}
hosts = sorted(set(host.values()))
assert hosts == ["host1", "host2", "host3"], hosts
truth = {r: 3_000_000_000 * (int(h[4:]) - int(host[0][4:])) for r, h in host.items()}
worst = {}
for p in points:
    r, err, bound = int(p["rank"]), int(p["offset_ns"]) - truth[int(p["rank"])], int(p["bound_ns"])
    assert abs(err) <= bound + allowance, f"rank {r} on {host[r]}: off by {err} ns, beyond its bound {bound} ns"
    assert bound <= bound_limit_ns, f"rank {r} on {host[r]}: bound {bound} ns"
    worst[host[r]] = max(worst.get(host[r], (0, 0)), (bound, abs(err)))
assert all(clock[r]["synced"] for r in host), "a rank is not synchronised"
# The ranks of a host read one clock: they take their leader's measurement.
def measurements(rank):
    return [tuple(p)[1:] for p in points if p["rank"] == rank]
for r in host:
    leader = min(q for q in host if host[q] == host[r])
    assert measurements(r), f"rank {r} has no measurement"
    assert measurements(r) == measurements(leader), f"rank {r} measured apart from its leader, rank {leader}"
print("largest bound / error per host (ns):", {h: b for h, b in sorted(worst.items())})
PY
}

for clock in raw auto; do
  echo "== in-process, RANKSCOPE_CLOCK=$clock"
  RANKSCOPE_CLOCK=$clock hosts mpirun -x RANKSCOPE_CLOCK -n 6 "$rankscope" run -o "inprocess-$clock.h5" -- \
    "$ddp_sim" --steps 5 --layers 4 --layer-mb 1 --forward-us 500 >"inprocess-$clock.log" 2>&1 ||
    { cat "inprocess-$clock.log"; fail "the in-process run failed"; }
  check "inprocess-$clock.h5" "${allowance_ns[$clock]}"

  echo "== sidecar, RANKSCOPE_CLOCK=$clock, rounds every 0.5 s"
  RANKSCOPE_CLOCK=$clock hosts mpirun -x RANKSCOPE_CLOCK -n 6 "$rankscope" run --mode sidecar --sync-interval 0.5 \
    -o "sidecar-$clock.h5" -- /bin/sleep 3 >"sidecar-$clock.log" 2>&1 ||
    { cat "sidecar-$clock.log"; fail "the sidecar run failed"; }
  check "sidecar-$clock.h5" "${allowance_ns[$clock]}"
done
echo "clock sync across hosts ok"
