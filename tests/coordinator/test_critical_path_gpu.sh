#!/usr/bin/env bash
# The critical path's what-if on GPU jobs: DDP-shaped torch.profiler traces
# from bench/make_kineto_trace.py (a main thread launching forward, an
# autograd thread launching backward, bucket all-reduces by NCCL on a stream
# of their own that waits for the gradients' kernels, loss.item()'s copy
# and cudaStreamSynchronize), one rank's kernels slowed and the same job
# with none slowed (the generator's twin: same seed, same kernels).
# Replaying the slowed job's median step with that rank's kernels at the
# others' median must give the twin's median step within 2 %, that rank
# must hold most of the path's compute and be named alone above its fair
# share. A job with skewed clocks, random kernels and a slow DataLoader is
# replayed unchanged in the time it took. Its steps are walked and replayed
# several at once: the report on one CPU must be the same, byte for byte.
# Usage: test_critical_path_gpu.sh RANKSCOPE PYTHON GENERATOR
set -euo pipefail
rankscope=$1 python=$2 generator=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check=$(dirname "$0")/critical_path_check.py
job() {  # NAME GENERATOR_OPTIONS...: the traces, imported, and their JSON report
  local name=$1
  shift
  "$python" "$generator" "$work/$name" --ranks 4 --events-per-rank 20000 "$@" >"$work/gen.log" 2>&1 ||
    { cat "$work/gen.log"; exit 1; }
  "$rankscope" import-kineto "$work/$name" -o "$work/$name.h5" >"$work/import.log" 2>&1 ||
    { cat "$work/import.log"; exit 1; }
  "$rankscope" report -f --format json -o "$work/$name.json" "$work/$name.h5" 2>/dev/null
}
status=0
for case in "1 2 1" "3 1.3 2"; do
  read -r rank factor seed <<<"$case"
  job "even$seed" --seed "$seed" --healthy
  job "slow$seed" --seed "$seed" --healthy --inject slow_rank --inject-ranks "$rank" --slow-rank-factor "$factor"
  "$python" "$check" "$work/even$seed.json" "$work/slow$seed.json" "$rank" --max-error 0.02 --named \
    --min-compute-share 50 || status=1
done
job skewed --clock-offset-us 0,1500.25,-730,88000
"$python" - "$work/skewed.json" <<'PY' || status=1
import json, sys
path = json.load(open(sys.argv[1]))["critical_path"]
assert path["what_if_reason"] is None, path["what_if_reason"]
assert path["what_if"], "no what-if"
for w in path["what_if"]:
    assert w["replayed_ns"] == w["recorded_ns"], w
    assert w["predicted_ns"] <= w["recorded_ns"], w
print("skewed clocks: every drawn step replayed as recorded:", [(w["step"], w["change"], w["predicted_ns"]) for w in path["what_if"]])
PY
one_cpu=$("$python" -c 'import os; print(min(os.sched_getaffinity(0)))')
taskset -c "$one_cpu" "$rankscope" report -f --format json -o "$work/skewed.one-cpu.json" "$work/skewed.h5" 2>/dev/null
if cmp -s "$work/skewed.json" "$work/skewed.one-cpu.json"; then
  echo "skewed clocks: the report on one CPU is the report on every CPU"
else
  echo "FAIL: the report on CPU $one_cpu alone differs from the report on every CPU:"
  diff <("$python" -m json.tool "$work/skewed.json") <("$python" -m json.tool "$work/skewed.one-cpu.json") | head -20
  status=1
fi
exit $status
