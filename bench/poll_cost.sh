#!/usr/bin/env bash
# bench/poll_cost.sh [ROUNDS] [RANKS]: what a started agent costs a program
# that polls between memory-bound work (bench/poll_table.c, the pattern of
# HPCC's MPIRandomAccess), in interleaved rounds: ns per update and its poll,
#   bare        mpirun -n RANKS poll_table
#   preloaded   the agent's libraries preloaded, the agent not started
#   no-mpi      rankscope run --capture nvtx (started; MPI not captured)
#   captured    rankscope run (every source)
#   no-polls    bare and captured without polls (POLLS=0)
# With RANKSCOPE_BEFORE=OLD_BUILD_DIR, preloaded and captured again with that
# build's rankscope and agent libraries, in the same rounds ("before-").
# Median and spread of each. Defaults: 5 rounds, 1 rank.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
agent=$build/rank_agent
before=${RANKSCOPE_BEFORE:-}
rounds=${1:-5} ranks=${2:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/poll_table" "$root/bench/poll_table.c"
cd "$work"
echo "date: $(date -u +%F), machine: $(nproc) cores, commit $(git -C "$root" rev-parse --short HEAD), $ranks rank(s)"
run() {  # NAME COMMAND...: one run's ns per update, appended to NAME
  local name=$1
  shift
  rm -rf t.h5 t.h5.shards
  "$@" 2>/dev/null | tail -n 1 >>"$name"
}
for ((i = 0; i < rounds; i++)); do
  run bare mpirun -n "$ranks" ./poll_table
  run preloaded mpirun -n "$ranks" -x LD_PRELOAD="$agent/librankscope_mpi.so:$agent/librankscope_capture.so" ./poll_table
  run no-mpi mpirun -n "$ranks" "$rankscope" run --capture nvtx -o t.h5 -- ./poll_table
  run captured mpirun -n "$ranks" "$rankscope" run -o t.h5 -- ./poll_table
  run bare-no-polls mpirun -n "$ranks" ./poll_table 10000000 0
  run captured-no-polls mpirun -n "$ranks" "$rankscope" run -o t.h5 -- ./poll_table 10000000 0
  if [ -n "$before" ]; then
    run before-preloaded mpirun -n "$ranks" \
      -x LD_PRELOAD="$before/rank_agent/librankscope_mpi.so:$before/rank_agent/librankscope_capture.so" ./poll_table
    run before-captured mpirun -n "$ranks" "$before/coordinator/rankscope" run -o t.h5 -- ./poll_table
  fi
done
names=(bare preloaded no-mpi captured bare-no-polls captured-no-polls)
[ -n "$before" ] && names+=(before-preloaded before-captured)
for name in "${names[@]}"; do
  sort -n "$name" | awk -v name="$name" '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2;
    printf "  %-18s median %6.1f ns (%s-%s)\n", name, m, a[1], a[NR]}'
done
