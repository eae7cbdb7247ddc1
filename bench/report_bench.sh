#!/usr/bin/env bash
# bench/report_bench.sh [RANKS:EVENTS_PER_RANK...]: `rankscope report`
# throughput and memory on synthetic jobs (every rank in every collective,
# 3 threads of nested ranges per rank): events per second of the two passes
# and peak memory, for each job size given, so memory can be seen to follow
# ranks × collectives and not the event count.
# Defaults: a 4,096-rank job of 10 M events, and a 64-rank job of 10 M events.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
make_shards=$build/tests/support/make_synthetic_shards
work=${RANKSCOPE_BENCH_DIR:-$(mktemp -d)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
jobs=(4096:2441 64:156250)
[ $# -gt 0 ] && jobs=("$@")
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
printf "%-8s %-12s %-10s %-14s %-12s %-10s\n" ranks events seconds "M events/s" "peak MiB" collectives
for job in "${jobs[@]}"; do
  ranks=${job%%:*} per_rank=${job##*:}
  rm -rf "$work/shards" "$work/job.h5"
  "$make_shards" "$work/shards" "$ranks" "$per_rank" --shared-collectives 1 >/dev/null
  mpirun -n 2 "$rankscope" merge "$work/shards" -o "$work/job.h5" >/dev/null
  rm -rf "$work/shards"
  /usr/bin/time -f "%e %M" -o "$work/time" "$rankscope" report --overwrite "$work/job.h5" --format json -o "$work/report.json" 2>/dev/null
  read -r seconds peak_kib <"$work/time"
  events=$(( ranks * per_rank ))
  collectives=$(python3 -c "import json; print(json.load(open('$work/report.json'))['collectives_summary']['instances'])")
  printf "%-8s %-12s %-10s %-14.2f %-12.1f %-10s\n" "$ranks" "$events" "$seconds" \
    "$(python3 -c "print($events / $seconds / 1e6)")" "$(python3 -c "print($peak_kib / 1024)")" "$collectives"
done
[ -z "${RANKSCOPE_BENCH_DIR:-}" ] && rm -rf "$work"
