#!/usr/bin/env bash
# The critical path of ddp_sim jobs with one rank's compute slowed 3x
# (examples/ddp_sim.cpp), and its what-if against a measured run. Two
# ranks, run once with no rank slowed, then once with rank 0 slowed and
# once with rank 1, so that the rank that happens to end last on this
# machine cannot pass for the answer. Whichever rank is slowed:
#  - its compute is the largest compute on the path;
#  - no other rank is above its fair share of the path;
#  - the what-if of the median step, that rank computing as the other's
#    median, replays the step as recorded (within 1 %) and predicts the
#    median step of a run with no rank slowed within 15 % (0.3-6.9 % in
#    sixteen what-ifs on this machine), held against the nearer of two
#    such runs, one before and one after the slowed ones.
# The layers are 1 MiB with 1 ms of forward compute, so that a step is
# about 34 ms of which the gradients' allreduces take one tenth: with
# ddp_sim's default 4 MiB layers and 0.3 ms, transfers over shared memory
# on two shared cores were most of the step and unslowed runs of one
# suite gave median steps from 27 to 52 ms, more than the what-if's
# error could be told from.
# Usage: test_critical_path_ddp.sh RANKSCOPE DDP_SIM MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile() {  # NAME DDP_SIM_OPTIONS...: a profiled run and its JSON report
  local name=$1
  shift
  "$mpiexec" -n 2 "$rankscope" run -o "$work/$name.h5" --overwrite -- "$ddp_sim" --steps 10 --layers 8 --layer-mb 1 --forward-us 1000 "$@" \
    >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
  "$rankscope" report -f --format json -o "$work/$name.json" "$work/$name.h5" 2>/dev/null
}
# The four runs and both checks, measured again once when a check fails:
# on a shared VM a burst of another tenant's load can slow one run and
# not its neighbours (a what-if 15.6 % off once, in a CI whose other build
# had it within 2 %). Both attempts are judged by the same bounds.
attempt() {
  profile even
  profile slow0 --slow-rank 0 --slowdown 3
  profile slow1 --slow-rank 1 --slowdown 3
  profile even_after
  local status=0 slow
  for slow in 0 1; do
    "$(dirname "$0")/critical_path_check.py" "$work/even.json,$work/even_after.json" "$work/slow$slow.json" "$slow" \
      --max-error 0.15 || status=1
  done
  return $status
}
attempt || { echo "measuring the four runs again, once"; attempt; }
