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
#    median step of the run with no stage slowed (1.1-19.0 % in ten runs
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
  "$(dirname "$0")/critical_path_check.py" "$work/even.json" "$work/slow$slow.json" "$slow" --max-error 0.35 --min-compute-share 50 --named --max-predicted 0.8 || status=1
done
exit $status
