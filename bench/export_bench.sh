#!/usr/bin/env bash
# bench/export_bench.sh [RANKS] [EVENTS_PER_RANK] [ROUNDS]: `rankscope export`
# to native Perfetto protobuf, Chrome JSON, torch.profiler traces (a file per
# rank) and an OTF2 archive, side by side on the same
# synthetic timeline (3 threads of nested ranges per rank, every rank in every
# allreduce): seconds, events per second, bytes per event and peak memory of
# each, the median of ROUNDS rounds with the formats interleaved, and the
# size of the Perfetto output against the JSON. Each output is written twice:
# to the work folder (disk: the page cache and its write-back are part of the
# time) and, where there is one, to /dev/shm (memory: the exporter alone).
# Defaults: 16 ranks, 625,000 events each (10 M events), 3 rounds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
make_shards=$build/tests/support/make_synthetic_shards
ranks=${1:-16} per_rank=${2:-625000} rounds=${3:-3}
work=${RANKSCOPE_BENCH_DIR:-$(mktemp -d)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
events=$((ranks * per_rank))
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $ranks ranks, $events events"

rm -rf "$work/shards" "$work/job.h5"
"$make_shards" "$work/shards" "$ranks" "$per_rank" --shared-collectives 1 >/dev/null
mpirun -n 2 "$rankscope" merge "$work/shards" -o "$work/job.h5" >/dev/null
rm -rf "$work/shards"

formats="perfetto chrome kineto otf2"
destinations=("$work")
[ -d /dev/shm ] && [ -w /dev/shm ] && destinations+=(/dev/shm)
declare -A seconds bytes peak
for round in $(seq "$rounds"); do
  for destination in "${destinations[@]}"; do
    for format in $formats; do
      out=$destination/rankscope-bench-out.$format
      rm -rf "$out"
      /usr/bin/time -f "%M" -o "$work/time" "$rankscope" export "$work/job.h5" "--$format" "$out" --warn-size-mb 100000 \
        >"$work/export.out"
      # The exporter's own time: both passes and the writing, not the process start.
      seconds[$destination,$format]+="$(grep -oE 'in [0-9.]+ s' "$work/export.out" | cut -d' ' -f2) "
      bytes[$destination,$format]=$(du -sb "$out" | cut -f1)
      peak[$destination,$format]+="$(cat "$work/time") "
      rm -rf "$out"
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf "%-10s %-12s %-10s %-12s %-14s %-12s %-10s %s\n" format destination seconds "M events/s" bytes "bytes/event" "peak MiB" "runs (s)"
for destination in "${destinations[@]}"; do
  where=$([ "$destination" = /dev/shm ] && echo "memory" || echo "disk")
  for format in $formats; do
    s=$(echo "${seconds[$destination,$format]}" | median)
    m=$(echo "${peak[$destination,$format]}" | median)
    b=${bytes[$destination,$format]}
    printf "%-10s %-12s %-10s %-12.2f %-14s %-12.1f %-10.1f %s\n" "$format" "$where" "$s" \
      "$(awk "BEGIN {print $events / $s / 1e6}")" "$b" "$(awk "BEGIN {print $b / $events}")" \
      "$(awk "BEGIN {print $m / 1024}")" "${seconds[$destination,$format]}"
  done
done
ratio=$(awk "BEGIN {printf \"%.3f\", ${bytes[$work,perfetto]} / ${bytes[$work,chrome]}}")
echo "Perfetto output / Chrome JSON output: $ratio of the size"
[ -z "${RANKSCOPE_BENCH_DIR:-}" ] && rm -rf "$work"
exit 0
