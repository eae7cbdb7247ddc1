#!/usr/bin/env bash
# bench/clock_rounds_cost.sh RANKSCOPE DDP_SIM PAIRS: what clock sync rounds
# during an in-process run cost the program (docs/clocksync.md, "Rounds
# during the run"). ddp_sim on 2 ranks (as root, Open MPI), interleaved
# pairs of `--clock-thread never` (MPI_Init as the program asks, rounds at
# MPI_Init and MPI_Finalize alone) and `--clock-thread always`
# (MPI_THREAD_MULTIPLE asked for, a round every second): the median step
# as ddp_sim measures it, each pair's ratio, and the median and range of
# the ratios.
set -euo pipefail
rankscope=$1 ddp_sim=$2 pairs=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The median step of one run, in ms, from ddp_sim's own summary line.
median_step() {
  mpirun -n 2 "$rankscope" run --mode inprocess --sync-interval 1 --clock-thread "$1" -f -o "$work/job.h5" -- \
    "$ddp_sim" --steps 150 --warmup-steps 5 --layers 8 --layer-mb 1 --forward-us 1000 2>/dev/null |
    sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'
}
ratios=()
echo "| pair | never (ms) | always (ms) | ratio |"
echo "|---|---|---|---|"
for pair in $(seq "$pairs"); do
  never=$(median_step never)
  always=$(median_step always)
  ratio=$(/usr/bin/python3 -c "print(f'{$always / $never:.4f}')")
  ratios+=("$ratio")
  echo "| $pair | $never | $always | $ratio |"
done
/usr/bin/python3 - "${ratios[@]}" <<'PY'
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
print(f"\nratio always/never: median {statistics.median(r):.4f}, range {min(r):.4f}-{max(r):.4f} over {len(r)} pairs")
PY
