#!/usr/bin/env bash
# What MPI_Finalize costs the application under `rankscope run`, and the job's
# whole wall time, against a bare run and against another rankscope build
# (e.g. one from before a change), in interleaved rounds.
# Usage: bench/finalize_cost.sh RANKSCOPE [OTHER_RANKSCOPE] [ROUNDS] [CALLS]
set -euo pipefail
new=$1 old=${2:-} rounds=${3:-5} calls=${4:-100000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/probe" "$(dirname "$0")/finalize_probe.c"
variants=(bare new)
[ -n "$old" ] && variants+=(old)
for ((round = 1; round <= rounds; round++)); do
  for variant in "${variants[@]}"; do
    case $variant in
      bare) command=("$work/probe" "$calls") ;;
      new) command=("$new" run -o "$work/t.h5" -- "$work/probe" "$calls") ;;
      old) command=("$old" run -o "$work/t.h5" -- "$work/probe" "$calls") ;;
    esac
    start=$(date +%s.%N)
    mpirun -n 2 --bind-to core "${command[@]}" >"$work/out" 2>&1
    end=$(date +%s.%N)
    finalize=$(awk '/finalize_ms/ { if ($4 > m) m = $4 } END { print m }' "$work/out")
    echo "$variant $round $finalize $(echo "$end - $start" | bc)"
    rm -rf "$work/t.h5" "$work/t.h5.shards"
  done
done | tee "$work/runs"
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    variant, _, finalize, wall = line.split()
    runs.setdefault(variant, []).append((float(finalize), float(wall)))
print(f"{'variant':8} {'MPI_Finalize ms (median, min-max)':36} {'job wall s (median, min-max)':32}")
for variant, values in runs.items():
    f = [v[0] for v in values]; w = [v[1] for v in values]
    print(f"{variant:8} {statistics.median(f):8.1f} ({min(f):.1f}-{max(f):.1f}){'':16} "
          f"{statistics.median(w):6.2f} ({min(w):.2f}-{max(w):.2f})")
PY
