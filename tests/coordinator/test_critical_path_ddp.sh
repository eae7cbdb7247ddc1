#!/usr/bin/env bash
# The critical path of ddp_sim jobs with one rank's compute slowed 3x
# (examples/ddp_sim.cpp): whichever rank is slowed, its compute dominates
# the path: more of the path than any other rank's compute, and 30 % of it
# or more. (How much of the rest is the allreduces' transfer on the other
# rank depends on how busy the machine's two cores are.) Two ranks, each
# run once with the slow rank 0 and once with rank 1, so that the rank that
# happens to end last on this machine cannot pass for the answer.
# Usage: test_critical_path_ddp.sh RANKSCOPE DDP_SIM MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for slow in 0 1; do
  "$mpiexec" -n 2 "$rankscope" run -o "$work/job.h5" --overwrite -- \
    "$ddp_sim" --steps 10 --layers 8 --slow-rank "$slow" --slowdown 3 >"$work/run.log" 2>&1 ||
    { cat "$work/run.log"; exit 1; }
  "$rankscope" report -f --format json -o "$work/report.json" "$work/job.h5" 2>/dev/null
  python3 - "$work/report.json" "$slow" <<'PY' || status=1
import json, sys
report, slow = json.load(open(sys.argv[1])), int(sys.argv[2])
path = report["critical_path"]
assert path is not None, report.get("critical_path_reason")
by_compute = sorted(path["ranks"], key=lambda r: r["compute_share_pct"], reverse=True)
ok = by_compute[0]["rank"] == slow and by_compute[0]["compute_share_pct"] >= 30
print(f"slow rank {slow}: path by rank", [(r["rank"], round(r["share_pct"], 1), round(r["compute_share_pct"], 1)) for r in path["ranks"]],
      "ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
done
exit $status
