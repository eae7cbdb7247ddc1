#!/usr/bin/env bash
# Merge throughput with 1, 2 and 4 processes on a synthetic job, against the
# disk's sequential write bandwidth measured by dd in the same run, plus peak
# memory per process at a quarter and at the full event count.
# Usage: bench/merge_bench.sh [MILLION_EVENTS=100] [RANKS=16] [WORKDIR=/tmp/rankscope-bench]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
millions=${1:-100}
ranks=${2:-16}
work=${3:-/tmp/rankscope-bench}
"$root/scripts/build.sh" "$root/build" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rankscope=$root/build/coordinator/rankscope
make_shards=$root/build/tests/support/make_synthetic_shards
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

echo "# merge benchmark: $millions M events, $ranks ranks, $(nproc) cores, $(date -u +%F), $(uname -m)"
per_rank=$((millions * 1000000 / ranks))

run_merge() {  # run_merge PROCESSES SHARD_DIR -> prints "seconds events_per_s peak_mib"
  rm -f "$work/job.h5"; sync
  local line
  line=$(mpirun -n "$1" "$rankscope" merge "$2" -o "$work/job.h5" | head -1)
  local seconds peak
  seconds=$(sed -E 's/.* in ([0-9.]+) s \(.*/\1/' <<<"$line")
  peak=$(sed -E 's/.*peak memory ([0-9.]+) MiB.*/\1/' <<<"$line")
  echo "$seconds $peak"
}

"$make_shards" "$work/quarter" "$ranks" $((per_rank / 4))
quarter=($(run_merge 1 "$work/quarter"))
rm -rf "$work/quarter"

"$make_shards" "$work/shards" "$ranks" "$per_rank"
events=$((per_rank * ranks))
shard_bytes=$(du -sb "$work/shards" | cut -f1)

# Three rounds, the configurations interleaved, so page-cache writeback hits them alike; the median counts.
# The ceiling: as many bytes as the timeline, written sequentially by dd the way
# the merge writes them (no fsync), measured in every round beside the merges.
run_dd() {  # prints MB/s
  sync
  local line
  line=$(dd if=/dev/zero of="$work/dd.bin" bs=16M count=$(( (events * 64 + (16 << 20) - 1) / (16 << 20) )) 2>&1 | tail -1)
  rm -f "$work/dd.bin"
  awk -v b="$(awk '{print $1}' <<<"$line")" -v s="$(sed -E 's/.*copied, ([0-9.]+) s.*/\1/' <<<"$line")" \
    'BEGIN{printf "%.0f", b/s/1e6}'
}

declare -A times peaks
dd_runs=""
for round in 1 2 3; do
  dd_runs+="$(run_dd) "
  echo "round $round, dd: $(awk '{print $NF}' <<<"$dd_runs") MB/s" >&2
  for np in 1 2 4; do
    r=($(run_merge "$np" "$work/shards"))
    times[$np]+="${r[0]} "
    peaks[$np]=${r[1]}
    echo "round $round, $np process(es): ${r[0]} s" >&2
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | sed -n 2p; }
results=()
for np in 1 2 4; do results+=("$np $(median "${times[$np]}") ${peaks[$np]}"); done
timeline_bytes=$(stat -c %s "$work/job.h5")
rm -f "$work/job.h5"
dd_mbps=$(median "$dd_runs")


echo
echo "events: $events; shards: $((shard_bytes / 1000000)) MB; timeline: $((timeline_bytes / 1000000)) MB; dd ceiling (median of 3): $dd_mbps MB/s"
echo
echo "runs: dd MB/s: $dd_runs| merge seconds, 1 process: ${times[1]}| 2: ${times[2]}| 4: ${times[4]}"
echo
echo "| processes | seconds (median of 3) | M events/s | timeline MB/s | share of dd ceiling | peak MiB/process |"
echo "|---|---|---|---|---|---|"
for r in "${results[@]}"; do
  set -- $r
  awk -v np="$1" -v s="$2" -v peak="$3" -v ev="$events" -v tb="$timeline_bytes" -v dd="$dd_mbps" \
    'BEGIN{printf "| %d | %.2f | %.1f | %.0f | %.0f %% | %.1f |\n", np, s, ev/s/1e6, tb/s/1e6, 100*tb/s/1e6/dd, peak}'
done
echo
echo "peak memory, 1 process: ${quarter[1]} MiB at $((events / 4)) events, ${results[0]##* } MiB at $events events"
