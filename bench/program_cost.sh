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
# Usage: bench/program_cost.sh [-r RANKSCOPE] [-b BEFORE] [-s SCALE] [PROGRAM...]
#   RANKSCOPE  the rankscope binary (default: build/coordinator/rankscope)
#   BEFORE     another rankscope binary (one built before a change), profiled
#              in the same rounds: the order of the three runs rotates
#   SCALE      multiplies every program's number of pairs (default 1)
#   PROGRAM    any of: empty hpcc-N (N: the problem size) ddp_sim lammps meep
#              (default: empty hpcc-1500 hpcc-3500 ddp_sim lammps meep)
# Needs hpcc, lammps and meep-openmpi (Debian packages: scripts/setup-deps.sh --bench).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rankscope=$here/../build/coordinator/rankscope
before=""
scale=1
while getopts r:b:s: option; do
  case $option in
    r) rankscope=$OPTARG ;;
    b) before=$(realpath "$OPTARG") ;;
    s) scale=$OPTARG ;;
    *) sed -n '2,/^set/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(empty hpcc-1500 hpcc-3500 ddp_sim lammps meep)
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
    empty | hpcc-* | meep) echo 10 ;;
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
    meep) command -v meep >/dev/null || { echo "program_cost.sh: meep (meep-openmpi) is missing" >&2; exit 1; }
      sed -e 's/(set! resolution 10)/(set! resolution 40)/' -e 's/(run-until 40/(run-until 100/' \
        "$here/../tests/programs/waveguide.ctl" >"$dir/waveguide.ctl" ;;
    ddp_sim) [ -x "$ddp_sim" ] || { echo "program_cost.sh: $ddp_sim is not built" >&2; exit 1; } ;;
  esac
}
command_of() {
  case $1 in
    empty) echo "./empty" ;;
    hpcc-*) echo "hpcc" ;;
    ddp_sim) echo "$ddp_sim --compute spin --layers 24 --layer-mb 1 --forward-us 1000 --steps 30" ;;
    lammps) echo "lmp -in $here/lj_melt.in -log none -var cells 16 -var steps 1000" ;;
    meep) echo "meep waveguide.ctl" ;;
  esac
}

# One run: "PROGRAM VARIANT PAIR wall user sys maxrss_kib events merge_s" (the
# time rank 0's `rankscope run` spent writing the timeline, as `rankscope
# merge` reports it).
run_one() {
  local program=$1 variant=$2 pair=$3 dir=$work/$1
  local -a command
  read -r -a command <<<"$(command_of "$program")"
  case $variant in
    profiled) command=("$rankscope" run -o "$dir/t.h5" -- "${command[@]}") ;;
    before) command=("$before" run -o "$dir/t.h5" -- "${command[@]}") ;;
  esac
  rm -rf "$dir/t.h5" "$dir/t.h5.shards" "$dir/hpccoutf.txt" "$dir"/waveguide-*.h5
  (cd "$dir" && /usr/bin/time -f "%e %U %S %M" -o "$dir/time" mpirun -n 2 "${command[@]}" >"$dir/out" 2>&1) || {
    echo "program_cost.sh: $program ($variant) failed:" >&2; tail -20 "$dir/out" >&2; exit 1; }
  local events=0 merge=0
  if [ "$variant" != bare ]; then
    events=$("$rankscope" info "$dir/t.h5" | awk 'NR == 1 { print $4 }')
    merge=$(sed -n 's/^merged .* in \([0-9.]*\) s (.*/\1/p' "$dir/out" | tail -1)
  fi
  echo "$program $variant $pair $(tail -1 "$dir/time") $events ${merge:-0}"
}

for program in "${programs[@]}"; do
  prepare "$program"
  pairs=$(awk -v p="$(pairs_of "$program")" -v s="$scale" 'BEGIN { n = int(p * s + 0.5); print n < 1 ? 1 : n }')
  run_one "$program" bare 0 >/dev/null  # warms the page cache and the TSC calibration
  variants=(bare profiled)
  [ -n "$before" ] && variants+=(before)
  for ((pair = 1; pair <= pairs; pair++)); do
    for ((i = 0; i < ${#variants[@]}; i++)); do
      variant=${variants[(pair + i) % ${#variants[@]}]}
      run_one "$program" "$variant" "$pair"
      if [ "$variant" = profiled ]; then cp "$work/$program/t.h5" "$work/$program.h5"; fi
    done
  done
done | tee "$work/runs" >&2

echo "rankscope $("$rankscope" --version | awk '{ print $2 }'), $(nproc) cores, $(date -u +%F)"
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    program, variant, pair, wall, user, system, rss, events, merge = line.split()
    runs.setdefault(program, {}).setdefault(int(pair), {})[variant] = (
        float(wall), float(user) + float(system), int(rss) / 1024, int(events), float(merge))

def spread(values, digits=3):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

# The fixed cost leaves out the empty job's own merge time; each program's
# merge is taken off its difference, so that what is left is the steady state.
fixed = {}
for variant in ("profiled", "before"):
    pairs = [p for p in runs.get("empty", {}).values() if variant in p and "bare" in p]
    if pairs:
        fixed[variant] = statistics.median(p[variant][0] - p["bare"][0] - p[variant][4] for p in pairs)

print("| program | rankscope | pairs | bare wall s | profiled wall s | wall ratio | extra wall s | of which merge s "
      "| CPU ratio | peak RSS MiB bare / profiled | events per rank | steady-state cost |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for program, by_pair in runs.items():
    for variant in ("profiled", "before"):
        pairs = [p for p in by_pair.values() if variant in p and "bare" in p]
        if not pairs:
            continue
        bare_wall = statistics.median(p["bare"][0] for p in pairs)
        difference = statistics.median(p[variant][0] - p["bare"][0] for p in pairs)
        merge = statistics.median(p[variant][4] for p in pairs)
        steady = "" if variant not in fixed or program == "empty" else \
            f"{(statistics.median(p[variant][0] - p['bare'][0] - p[variant][4] for p in pairs) - fixed[variant]) / bare_wall * 100:+.2f} %"
        print(f"| {program} | {'this' if variant == 'profiled' else 'before'} | {len(pairs)} "
              f"| {spread([p['bare'][0] for p in pairs], 2)} | {spread([p[variant][0] for p in pairs], 2)} "
              f"| {spread([p[variant][0] / p['bare'][0] for p in pairs])} | {difference:+.3f} | {merge:.3f} "
              f"| {spread([p[variant][1] / p['bare'][1] for p in pairs])} "
              f"| {statistics.median(p['bare'][2] for p in pairs):.1f} / {statistics.median(p[variant][2] for p in pairs):.1f} "
              f"| {statistics.median(p[variant][3] for p in pairs) // 2:.0f} | {steady} |")
for variant, seconds in fixed.items():
    print(f"\nfixed cost per job ({'this' if variant == 'profiled' else 'before'}; the empty job's median paired "
          f"difference, its merge left out): {seconds:.3f} s")
PY
for program in "${programs[@]}"; do
  [ -f "$work/$program.h5" ] || continue
  echo
  echo "capture cost of the last profiled $program run, from its timeline:"
  "$rankscope" report "$work/$program.h5" --format text | sed -n '/^capture cost/,/^$/p'
done
