#!/usr/bin/env bash
# bench/bottleneck_bench.sh [OLD_RANKSCOPE]: what the bottleneck finder
# (docs/report-reference.md, "What is slow in a step") costs `rankscope report`.
#  1. Time, with OLD_RANKSCOPE (a build from before the finder) given: the
#     report benchmark's two 10 M-event jobs (bench/report_bench.sh: 4,096
#     ranks and 64 ranks, CPU) and a 10 M-event GPU job, reported by the old
#     and this build in interleaved pairs, ROUNDS times (default 3); the
#     median of each and their ratio.
#  2. Memory: `report --format json`'s peak RSS on GPU jobs of 10 M events
#     with 100,000 kernel names, of 10 M events with 1,000 names and of 5 M
#     events with 100,000 names (8 ranks each, no collective matched across
#     ranks): memory follows kernel names, not events.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
old=${1:-}
rounds=${ROUNDS:-3}
make_shards=$build/tests/support/make_synthetic_shards
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"

job() {  # NAME RANKS EVENTS_PER_RANK [make_synthetic_shards options...]
  local name=$1 ranks=$2 per_rank=$3
  shift 3
  "$make_shards" "$work/shards" "$ranks" "$per_rank" "$@" >/dev/null
  mpirun -n 2 "$rankscope" merge "$work/shards" -o "$work/$name.h5" >/dev/null
  rm -rf "$work/shards"
}

# Seconds and peak KiB of one report.
measure() {  # RANKSCOPE TIMELINE
  /usr/bin/time -f "%e %M" -o "$work/time" "$1" report --overwrite "$2" --format json -o "$work/report.json" 2>/dev/null
  cat "$work/time"
}

median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

if [ -n "$old" ] && [ -z "${MEMORY_ONLY:-}" ]; then
  job cpu-4096 4096 2441 --shared-collectives 1
  job cpu-64 64 156250 --shared-collectives 1
  job gpu-8 8 1250000 --shared-collectives 1 --gpu-kernel-names 1000
  printf "%-10s %-10s %-10s %-8s\n" job "old s" "new s" ratio
  for name in cpu-4096 cpu-64 gpu-8; do
    old_times=() new_times=()
    for ((round = 0; round < rounds; round++)); do
      read -r seconds _ < <(measure "$old" "$work/$name.h5")
      old_times+=("$seconds")
      read -r seconds _ < <(measure "$rankscope" "$work/$name.h5")
      new_times+=("$seconds")
    done
    old_median=$(median "${old_times[@]}") new_median=$(median "${new_times[@]}")
    printf "%-10s %-10s %-10s %-8.3f\n" "$name" "$old_median" "$new_median" \
      "$(python3 -c "print($new_median / $old_median)")"
  done
  rm -f "$work"/cpu-*.h5 "$work"/gpu-8.h5
fi

printf "%-28s %-10s %-10s\n" "GPU job (8 ranks)" seconds "peak MiB"
for spec in 10000000:100000 10000000:1000 5000000:100000; do
  events=${spec%%:*} names=${spec##*:}
  # No collective matched across ranks: the profile holds every matched
  # instance (ranks × collectives, docs/report-reference.md), which would hide what
  # the kernels' names cost.
  job memory 8 $((events / 8)) --shared-collectives 0 --gpu-kernel-names "$names"
  read -r seconds peak_kib < <(measure "$rankscope" "$work/memory.h5")
  printf "%-28s %-10s %-10.1f\n" "$events events, $names names" "$seconds" "$(python3 -c "print($peak_kib / 1024)")"
  rm -f "$work/memory.h5"
done
