#!/usr/bin/env bash
# The critical path and its what-if on a pipeline of four stages that
# pass microbatches by point-to-point messages (pipeline_stages.cpp:
# blocking sends and receives forward, nonblocking ones backward, 8 KiB
# messages, which Open MPI's shared memory sends by rendezvous: a send
# waits for its receive). Run once with no stage slowed, then with stage
# 2 and with stage 1 slowed 3x. Whichever is slowed:
#  - its compute is the largest on the path, above half of it, and it
#    alone is above its fair share of the path;
#  - the what-if of the median step, that stage computing as the others'
#    median, replays the step as recorded (within 1 %) and predicts a
#    step at least a fifth shorter than recorded, within 35 % of the
#    median step of the run with no stage slowed (0.2-24 % in eight runs
#    of each on a 2-core VM, four ranks on two cores).
# Usage: test_critical_path_pipeline.sh RANKSCOPE PIPELINE_STAGES MPIEXEC
set -euo pipefail
rankscope=$1 stages=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile() {  # NAME SLOW_RANK: a profiled run and its JSON report
  "$mpiexec" -n 4 "$rankscope" run -o "$work/$1.h5" --overwrite -- "$stages" 10 4 2000 "$2" 3 8 \
    >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
  grep '^pipeline_stages:' "$work/run.log"
  "$rankscope" report -f --format json -o "$work/$1.json" "$work/$1.h5" 2>/dev/null
}
profile even -1
status=0
for slow in 2 1; do
  profile "slow$slow" "$slow"
  python3 - "$work/even.json" "$work/slow$slow.json" "$slow" <<'PY' || status=1
import json, sys
even, path, slow = json.load(open(sys.argv[1]))["critical_path"], json.load(open(sys.argv[2]))["critical_path"], int(sys.argv[3])
assert even is not None and path is not None, "no critical path"
by_compute = sorted(path["ranks"], key=lambda r: r["compute_share_pct"], reverse=True)
ranks = [(r["rank"], round(r["share_pct"], 1), round(r["compute_share_pct"], 1)) for r in path["ranks"]]
above = [r["rank"] for r in path["ranks"] if r["above_fair_share"]]
ok = by_compute[0]["rank"] == slow and by_compute[0]["compute_share_pct"] > 50 and above == [slow]
measured = next(s["end_ns"] - s["begin_ns"] for s in even["steps"] if "median" in s["which"])
median_step = next(s["step"] for s in path["steps"] if "median" in s["which"])
what_if = [w for w in path["what_if"] if w["step"] == median_step and w["rank"] == slow]
line = f"slow stage {slow}: path by rank {ranks}, above its fair share: {above}"
if what_if:
    w = what_if[0]
    error = abs(w["predicted_ns"] - measured) / measured
    replay_error = abs(w["replayed_ns"] - w["recorded_ns"]) / w["recorded_ns"]
    ok = ok and error <= 0.35 and replay_error <= 0.01 and w["predicted_ns"] <= 0.8 * w["recorded_ns"]
    line += (f"; what-if x{w['factor']:.2f}: predicted {w['predicted_ns']} ns (recorded {w['recorded_ns']}, "
             f"replayed {w['replayed_ns']}), measured with no stage slowed {measured} ns: {100 * error:.1f} % off")
else:
    ok = False
    line += f"; no what-if for rank {slow}: {path['what_if']} {path.get('what_if_reason')}"
print(line, "ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
done
exit $status
