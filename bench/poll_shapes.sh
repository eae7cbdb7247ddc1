#!/usr/bin/env bash
# bench/poll_shapes.sh [ROUNDS]: what each thing an MPI_Testany wrapper does
# around MPI's call costs a poll between memory-bound updates: each shape of
# bench/poll_shapes.c preloaded into bench/poll_table.c (one rank), bare in
# the same rounds. Prints each shape's ns per update and poll, and its median
# difference to bare over the rounds. Default: 5 rounds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-5}
shapes=(lean branch count branch_count call jump reload loads)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/poll_table" "$root/bench/poll_table.c"
for shape in "${shapes[@]}"; do
  mpicc -O2 -fPIC -shared -DSHAPE="$shape" -o "$work/$shape.so" "$root/bench/poll_shapes.c"
done
echo "date: $(date -u +%F), machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $rounds rounds"
for ((i = 0; i < rounds; i++)); do
  echo "bare $(mpirun -n 1 "$work/poll_table" | tail -n 1)" >>"$work/runs"
  for shape in "${shapes[@]}"; do
    echo "$shape $(mpirun -n 1 -x LD_PRELOAD="$work/$shape.so" "$work/poll_table" | tail -n 1)" >>"$work/runs"
  done
done
python3 - "$work/runs" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, ns = line.split()
    runs[name].append(float(ns))
bare = runs["bare"]
for name, ns in runs.items():
    extra = statistics.median(x - b for x, b in zip(ns, bare))
    print(f"  {name:13s} {statistics.median(ns):6.1f} ns ({min(ns):.1f}-{max(ns):.1f}), {extra:+5.1f} over bare")
PY
