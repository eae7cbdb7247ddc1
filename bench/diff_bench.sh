#!/usr/bin/env bash
# bench/diff_bench.sh [PAIRS]: `rankscope diff`'s false alarms and cost.
#  1. False alarms: PAIRS (default 20) pairs of healthy ddp_sim runs of one
#     configuration (4 ranks, 30 steps, as tests/coordinator/test_diff.sh),
#     each pair compared; a pair with any significant change is a false
#     alarm. Target: at most 5 % of pairs.
#  2. Cost: diff of two 10 M-event timelines (bench/report_bench.sh's 64-rank
#     job, two seeds): seconds and peak RSS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
ddp_sim=$build/examples/ddp_sim
pairs=${1:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"

profile() {
  mpirun --bind-to none -n 4 "$rankscope" run --overwrite -o "$1" -- "$ddp_sim" --compute sleep --layers 8 \
    --layer-mb 0.25 --forward-us 3000 --optimizer-us 4000 --steps 30 --warmup-steps 2 >/dev/null 2>&1
}

alarms=0
for ((pair = 0; pair < pairs; pair++)); do
  profile "$work/a.h5"
  profile "$work/b.h5"
  "$rankscope" diff "$work/a.h5" "$work/b.h5" --format json -o "$work/diff.json" --overwrite 2>/dev/null
  found=$(python3 -c "
import json
d = json.load(open('$work/diff.json'))
print(' '.join(f\"{c['metric']}@{'job' if c['rank'] is None else c['rank']}:{c['ratio']:.3f}\" for c in d['changes'] if c['significant']))")
  # The largest change the test alone found certain, as a share of the step: what the floor must stand above.
  largest=$(python3 -c "
import json
d = json.load(open('$work/diff.json'))
step = next(c['base'] for c in d['changes'] if c['metric'] == 'step_ns' and c['rank'] is None)
moved = [c['step_ns_explained'] / step for c in d['changes'] if c['p_value'] is not None and c['p_value'] < 0.05 and c['unit'] == 'ns']
print(f'{100 * max(moved, default=0):.2f} %')")
  tested=$(python3 -c "import json; print(json.load(open('$work/diff.json'))['tested'])")
  if [ -n "$found" ]; then alarms=$((alarms + 1)); fi
  echo "pair $pair: $tested figures tested; largest change with p < 0.05: $largest of the step; significant: ${found:-none}"
done
echo "false alarms: $alarms of $pairs pairs"

make_shards=$build/tests/support/make_synthetic_shards
for seed in 1 2; do
  "$make_shards" "$work/shards" 64 156250 --shared-collectives 1 --seed "$seed" >/dev/null
  mpirun -n 2 "$rankscope" merge "$work/shards" -o "$work/big-$seed.h5" >/dev/null
  rm -rf "$work/shards"
done
/usr/bin/time -f "%e %M" -o "$work/time" "$rankscope" diff "$work/big-1.h5" "$work/big-2.h5" --format json \
  -o "$work/big.json" 2>/dev/null
read -r seconds peak_kib <"$work/time"
echo "diff of two 10 M-event timelines (64 ranks): $seconds s, peak $((peak_kib / 1024)) MiB"
