#!/usr/bin/env bash
# The rank agent's cost to a training job: ddp_sim's step time at 4 and 8
# ranks, plain (`mpirun -n N ddp_sim`) and profiled (`mpirun -n N rankscope
# run -o JOB.h5 -- ddp_sim`, capture mpi,nvtx), the four configurations
# interleaved in every round (plain and profiled alternate which goes first).
# Step times are rank 0's, from ddp_sim's --truth file (warm-up steps left
# out). Prints, per rank count: median step time of each, the overhead of the
# median, the per-round paired overhead, the spread, the job's wall time
# (which includes the agent's start-up and its merge at MPI_Finalize), and the
# events each rank captured per step.
#
# Usage: bench/agent_overhead.sh [ROUNDS=8] [STEPS=10] [ddp_sim flags...]
# About 5 minutes with the defaults on a 2-core machine.
# RANKSCOPE_BUILD_DIR picks another build folder (default build/);
# RANKSCOPE_BENCH_NO_BUILD=1 uses its binaries as they are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-8}
steps=${2:-10}
shift $(($# < 2 ? $# : 2))
extra=("$@")
build=${RANKSCOPE_BUILD_DIR:-$root/build}
if [ -z "${RANKSCOPE_BENCH_NO_BUILD:-}" ]; then
  "$root/scripts/build.sh" "$build" >/dev/null
fi
ddp_sim=$build/examples/ddp_sim
rankscope=$build/coordinator/rankscope
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d /tmp/agent-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "# rank agent overhead on ddp_sim: $rounds rounds, $steps steps (+2 warm-up) per run, $(nproc) cores, $(date -u +%F)"
echo "# ddp_sim flags: --steps $steps ${extra[*]:-(defaults)}"
run_one() {  # ROUND RANKS MODE
  local round=$1 ranks=$2 mode=$3
  local tag=r$round-n$ranks-$mode
  local start end
  cut -d' ' -f1 /proc/loadavg >"$work/$tag.load"  # others' work on the machine shows here
  start=$(date +%s.%N)
  local profile=()
  [ "$mode" = on ] && profile=("$rankscope" run -o "$work/$tag.h5" --)
  if ! mpirun -n "$ranks" "${profile[@]}" "$ddp_sim" --steps "$steps" --truth "$work/$tag.json" "${extra[@]}" \
    >"$work/$tag.log" 2>&1; then
    echo "run $tag failed:" >&2
    cat "$work/$tag.log" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }' >"$work/$tag.wall"
  if [ "$mode" = on ]; then
    "$rankscope" info --json "$work/$tag.h5" >"$work/$tag.info.json"
    rm -rf "$work/$tag.h5" "$work/$tag.h5.shards"
  fi
  printf '  round %d, %d ranks, agent %-3s: wall %6.2f s\n' "$round" "$ranks" "$mode" "$(cat "$work/$tag.wall")" >&2
}

for round in $(seq 1 "$rounds"); do
  for ranks in 4 8; do
    if [ $((round % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
    for mode in $order; do run_one "$round" "$ranks" "$mode"; done
  done
done

python3 - "$work" "$rounds" "$steps" <<'EOF'
import json, statistics, sys
work, rounds, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def pct(values, p):
    s = sorted(values)
    k = (len(s) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)

print()
print("| ranks | agent | median step ms | p25–p75 step ms | per-run medians ms (min–max) | overhead of the median | paired overhead, median (min–max) | job wall s (median) | events/step/rank |")
print("|---|---|---|---|---|---|---|---|---|")
for ranks in (4, 8):
    steps_of, run_medians, walls = {}, {}, {}
    events_per_step = []
    for mode in ("off", "on"):
        steps_of[mode], run_medians[mode], walls[mode] = [], [], []
        for r in range(1, rounds + 1):
            tag = f"{work}/r{r}-n{ranks}-{mode}"
            truth = json.load(open(tag + ".json"))
            steps_of[mode] += truth["step_times_ms"]
            run_medians[mode].append(statistics.median(truth["step_times_ms"]))
            walls[mode].append(float(open(tag + ".wall").read()))
            if mode == "on":
                info = json.load(open(tag + ".info.json"))
                total_steps = truth["steps"] + truth["warmup_steps"]
                events_per_step.append(info["events"] / info["world_size"] / total_steps)
    med = {m: statistics.median(steps_of[m]) for m in steps_of}
    paired = [on / off - 1 for on, off in zip(run_medians["on"], run_medians["off"])]
    for mode in ("off", "on"):
        over = f"{100 * (med['on'] / med['off'] - 1):+.1f} %" if mode == "on" else ""
        pair = (f"{100 * statistics.median(paired):+.1f} % ({100 * min(paired):+.1f} to {100 * max(paired):+.1f} %)"
                if mode == "on" else "")
        eps = f"{statistics.median(events_per_step):.0f}" if mode == "on" else ""
        print(f"| {ranks} | {mode} | {med[mode]:.1f} | {pct(steps_of[mode], .25):.1f}–{pct(steps_of[mode], .75):.1f} "
              f"| {min(run_medians[mode]):.1f}–{max(run_medians[mode]):.1f} | {over} | {pair} "
              f"| {statistics.median(walls[mode]):.2f} | {eps} |")
print()
loads = [float(open(f"{work}/r{r}-n{n}-{m}.load").read()) for r in range(1, rounds + 1) for n in (4, 8) for m in ("off", "on")]
print(f"1-minute load average at the start of each run: median {statistics.median(loads):.2f}, "
      f"{min(loads):.2f}–{max(loads):.2f}")
for ranks in (4, 8):
    for mode in ("off", "on"):
        meds = []
        for r in range(1, rounds + 1):
            meds.append(statistics.median(json.load(open(f"{work}/r{r}-n{ranks}-{mode}.json"))["step_times_ms"]))
        print(f"per-run median step ms, {ranks} ranks, agent {mode}: " + ", ".join(f"{m:.1f}" for m in meds))
EOF
