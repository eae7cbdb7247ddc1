#!/usr/bin/env bash
# bench/report_processes.sh [PAIRS] [RANKS:EVENTS_PER_RANK...]: `rankscope
# report` shared among MPI processes against one process, interleaved, on
# the synthetic jobs of report_bench.sh (every rank in every collective, 3
# threads of nested ranges per rank). Per job and round, in turn:
#   one-cpu    taskset -c 0 rankscope report           (1 process, 1 CPU)
#   two-procs  mpirun -n 2 --bind-to core rankscope report  (2 processes, 1 CPU each)
#   one-proc   rankscope report                        (1 process, every CPU)
# With RANKSCOPE_BEFORE=OLD/rankscope, the same two one-process runs of that
# build too, in the same rounds ("before"). Each writes the JSON report; all
# must be the same bytes. Prints the median wall time of each, and each
# process's peak memory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
make_shards=$build/tests/support/make_synthetic_shards
work=${RANKSCOPE_BENCH_DIR:-$(mktemp -d)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
pairs=${1:-5}
shift || true
jobs=(64:156250 4096:2441)
[ $# -gt 0 ] && jobs=("$@")
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, commit $(git -C "$root" rev-parse --short HEAD)"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
timed() {  # NAME COMMAND...: one run; wall seconds to $work/NAME.wall, peak KiB of each process to $work/NAME.mem
  local name=$1
  shift
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>"$work/$name.err" || { cat "$work/$name.err" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "print($end - $start)" >>"$work/$name.wall"
}
report() {  # OUTPUT [RANKSCOPE]: the report command of one process, its peak memory kept
  echo /usr/bin/time -f %M -o "$work/mem.\${OMPI_COMM_WORLD_RANK:-0}" "${2:-$rankscope}" report -f "$work/job.h5" --format json -o "$1"
}
before=${RANKSCOPE_BEFORE:-}
names=(one-cpu two-procs one-proc)
[ -n "$before" ] && names+=(before-one-cpu before-one-proc)
for job in "${jobs[@]}"; do
  ranks=${job%%:*} per_rank=${job##*:}
  rm -rf "$work/shards" "$work"/*.wall "$work"/*.mem "$work/job.h5"
  "$make_shards" "$work/shards" "$ranks" "$per_rank" --shared-collectives 1 >/dev/null
  mpirun -n 2 "$rankscope" merge "$work/shards" -o "$work/job.h5" >/dev/null
  rm -rf "$work/shards"
  for ((i = 0; i < pairs; i++)); do
    timed one-cpu taskset -c 0 sh -c "$(report "$work/one-cpu.json")"
    cat "$work/mem.0" >>"$work/one-cpu.mem"
    timed two-procs mpirun -n 2 --bind-to core sh -c "$(report "$work/two-procs.json")"
    cat "$work/mem.0" "$work/mem.1" >>"$work/two-procs.mem"
    timed one-proc sh -c "$(report "$work/one-proc.json")"
    cat "$work/mem.0" >>"$work/one-proc.mem"
    if [ -n "$before" ]; then
      timed before-one-cpu taskset -c 0 sh -c "$(report "$work/before-one-cpu.json" "$before")"
      cat "$work/mem.0" >>"$work/before-one-cpu.mem"
      timed before-one-proc sh -c "$(report "$work/before-one-proc.json" "$before")"
      cat "$work/mem.0" >>"$work/before-one-proc.mem"
    fi
    for name in "${names[@]}"; do cmp "$work/one-cpu.json" "$work/$name.json"; done
  done
  events=$(( ranks * per_rank ))
  echo "job: $ranks ranks, $events events; $pairs rounds; every report the same bytes"
  for name in "${names[@]}"; do
    wall=$(median <"$work/$name.wall")
    printf "  %-15s median %6.2f s  (%s)  %5.2f M events/s  peak MiB per process %s\n" "$name" "$wall" \
      "$(sort -n "$work/$name.wall" | awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1}')" \
      "$(python3 -c "print($events / $wall / 1e6)")" "$(python3 -c "print(round(max(int(l) for l in open('$work/$name.mem')) / 1024))")"
  done
done
if [ -z "${RANKSCOPE_BENCH_DIR:-}" ]; then rm -rf "$work"; fi
