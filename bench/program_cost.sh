#!/usr/bin/env bash
# What profiling costs whole programs: `mpirun -n 2 PROGRAM` against
# `mpirun -n 2 rankscope run -o T -- PROGRAM`, in interleaved pairs (which of
# the two runs first alternates), 2 ranks with a core each (Open MPI binds
# each rank to a core at this size; run it on a 2-core machine, or one where
# nothing else runs). Per program: wall time, CPU time (user + system of
# every process of the job: mpirun, the ranks, rankscope's own processes) and
# peak RSS (the largest process of the job), as ratios profiled / bare with
# their spread over the pairs.
#
# The fixed cost of a job (start-up, clock sync, MPI_Finalize, the timeline
# written) is the median paired difference of a job that does nothing but
# MPI_Init, MPI_Barrier and MPI_Finalize ("empty"); a program's steady-state
# cost is its paired difference less that, as a share of its bare wall time.
#
# Usage: bench/program_cost.sh [-r RANKSCOPE] [-s SCALE] [PROGRAM...]
#   RANKSCOPE  the rankscope binary (default: build/coordinator/rankscope)
#   SCALE      multiplies every program's number of pairs (default 1)
#   PROGRAM    any of: empty hpcc-1500 hpcc-3500 ddp_sim lammps (default: all)
# Needs hpcc and lammps (Debian packages: scripts/setup-deps.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rankscope=$here/../build/coordinator/rankscope
scale=1
while getopts r:s: option; do
  case $option in
    r) rankscope=$OPTARG ;;
    s) scale=$OPTARG ;;
    *) sed -n '2,/^set/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(empty hpcc-1500 hpcc-3500 ddp_sim lammps)
rankscope=$(realpath "$rankscope")
ddp_sim=$(dirname "$rankscope")/../examples/ddp_sim
for tool in mpirun mpicc /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "program_cost.sh: $tool is missing" >&2; exit 1; }
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# PROGRAM -> pairs, and the command line of one rank (run in $work/PROGRAM).
pairs_of() {
  case $1 in
    empty | hpcc-1500) echo 10 ;;
    hpcc-3500) echo 4 ;;
    ddp_sim | lammps) echo 6 ;;
  esac
}
hpcc_input() {
  # Debian's example input with one problem size and a 1 x 2 process grid.
  sed -e "s/^1000 .*Ns$/$1         Ns/" -e 's/^2            Ps$/1            Ps/' \
    /usr/share/doc/hpcc/examples/_hpccinf.txt >"$2/hpccinf.txt"
  grep -q "^$1 " "$2/hpccinf.txt" || { echo "program_cost.sh: cannot make an HPCC input" >&2; exit 1; }
}
prepare() {
  local dir=$work/$1
  mkdir -p "$dir"
  case $1 in
    empty)
      printf '#include <mpi.h>\nint main(int c, char** v) { MPI_Init(&c, &v); MPI_Barrier(MPI_COMM_WORLD);'\
' MPI_Finalize(); return 0; }\n' >"$dir/empty.c"
      mpicc -O2 -o "$dir/empty" "$dir/empty.c" ;;
    hpcc-*) command -v hpcc >/dev/null || { echo "program_cost.sh: hpcc is missing" >&2; exit 1; }
      hpcc_input "${1#hpcc-}" "$dir" ;;
    lammps) command -v lmp >/dev/null || { echo "program_cost.sh: lmp (lammps) is missing" >&2; exit 1; } ;;
    ddp_sim) [ -x "$ddp_sim" ] || { echo "program_cost.sh: $ddp_sim is not built" >&2; exit 1; } ;;
  esac
}
command_of() {
  case $1 in
    empty) echo "./empty" ;;
    hpcc-*) echo "hpcc" ;;
    ddp_sim) echo "$ddp_sim --compute spin --layers 24 --layer-mb 1 --forward-us 1000 --steps 30" ;;
    lammps) echo "lmp -in $here/lj_melt.in -log none -var cells 16 -var steps 1000" ;;
  esac
}

# One run: "PROGRAM VARIANT PAIR wall user sys maxrss_kib events".
run_one() {
  local program=$1 variant=$2 pair=$3 dir=$work/$1
  local -a command
  read -r -a command <<<"$(command_of "$program")"
  [ "$variant" = profiled ] && command=("$rankscope" run -o "$dir/t.h5" -- "${command[@]}")
  rm -rf "$dir/t.h5" "$dir/t.h5.shards" "$dir/hpccoutf.txt"
  (cd "$dir" && /usr/bin/time -f "%e %U %S %M" -o "$dir/time" mpirun -n 2 "${command[@]}" >"$dir/out" 2>&1) || {
    echo "program_cost.sh: $program ($variant) failed:" >&2; tail -20 "$dir/out" >&2; exit 1; }
  local events=0
  [ "$variant" = profiled ] && events=$("$rankscope" info "$dir/t.h5" | awk 'NR == 1 { print $4 }')
  echo "$program $variant $pair $(tail -1 "$dir/time") $events"
}

for program in "${programs[@]}"; do
  prepare "$program"
  pairs=$(awk -v p="$(pairs_of "$program")" -v s="$scale" 'BEGIN { n = int(p * s + 0.5); print n < 1 ? 1 : n }')
  run_one "$program" bare 0 >/dev/null  # warms the page cache and the TSC calibration
  for ((pair = 1; pair <= pairs; pair++)); do
    if ((pair % 2)); then order=(bare profiled); else order=(profiled bare); fi
    for variant in "${order[@]}"; do run_one "$program" "$variant" "$pair"; done
  done
  cp "$work/$program/t.h5" "$work/$program.h5" 2>/dev/null || true
done | tee "$work/runs" >&2

echo "rankscope $("$rankscope" --version | awk '{ print $2 }'), $(nproc) cores, $(date -u +%F)"
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    program, variant, pair, wall, user, system, rss, events = line.split()
    runs.setdefault(program, {}).setdefault(int(pair), {})[variant] = (
        float(wall), float(user) + float(system), int(rss) / 1024, int(events))

def spread(values, digits=3):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

rows, fixed = [], None
for program, pairs in runs.items():
    pairs = [p for p in pairs.values() if len(p) == 2]
    bare = [p["bare"] for p in pairs]; prof = [p["profiled"] for p in pairs]
    difference = statistics.median(p["profiled"][0] - p["bare"][0] for p in pairs)
    if program == "empty":
        fixed = difference
    rows.append((program, len(pairs), bare, prof, pairs, difference))

print("| program | pairs | bare wall s | profiled wall s | wall ratio | extra wall s | CPU ratio "
      "| peak RSS MiB bare / profiled | events per rank | steady-state cost |")
print("|---|---|---|---|---|---|---|---|---|---|")
for program, n, bare, prof, pairs, difference in rows:
    bare_wall = statistics.median(b[0] for b in bare)
    steady = "" if fixed is None or program == "empty" else f"{(difference - fixed) / bare_wall * 100:+.2f} %"
    print(f"| {program} | {n} | {spread([b[0] for b in bare], 2)} | {spread([p[0] for p in prof], 2)} "
          f"| {spread([p['profiled'][0] / p['bare'][0] for p in pairs])} | {difference:+.3f} "
          f"| {spread([p['profiled'][1] / p['bare'][1] for p in pairs])} "
          f"| {statistics.median(b[2] for b in bare):.1f} / {statistics.median(p[2] for p in prof):.1f} "
          f"| {statistics.median(p[3] for p in prof) // 2:.0f} | {steady} |")
if fixed is not None:
    print(f"\nfixed cost per job (empty job, median paired difference): {fixed:.3f} s")
PY
for program in "${programs[@]}"; do
  [ -f "$work/$program.h5" ] || continue
  echo
  echo "capture cost of the last profiled $program run, from its timeline:"
  "$rankscope" report "$work/$program.h5" --format text | sed -n '/^capture cost/,/^$/p'
done
