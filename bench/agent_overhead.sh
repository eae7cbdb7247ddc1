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
# With RANKSCOPE_BENCH_RING=S, a third configuration runs beside them in
# every round: profiled with the flight recorder (`--ring S`), which keeps
# the events in memory instead of writing them; the table then also gives
# each profiled configuration's writer-thread CPU time per rank.
#
# Usage: bench/agent_overhead.sh [ROUNDS=8] [STEPS=10] [ddp_sim flags...]
# About 5 minutes with the defaults on a 2-core machine (8 with a ring).
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

ring=${RANKSCOPE_BENCH_RING:-}
modes=(off on)
[ -n "$ring" ] && modes+=(ring)
echo "# rank agent overhead on ddp_sim: $rounds rounds, $steps steps (+2 warm-up) per run, $(nproc) cores, $(date -u +%F)${ring:+, ring $ring s}"
echo "# ddp_sim flags: --steps $steps ${extra[*]:-(defaults)}"
run_one() {  # ROUND RANKS MODE
  local round=$1 ranks=$2 mode=$3
  local tag=r$round-n$ranks-$mode
  local start end
  cut -d' ' -f1 /proc/loadavg >"$work/$tag.load"  # others' work on the machine shows here
  start=$(date +%s.%N)
  local profile=()
  [ "$mode" = on ] && profile=("$rankscope" run -o "$work/$tag.h5" --)
  [ "$mode" = ring ] && profile=("$rankscope" run -o "$work/$tag.h5" --ring "$ring" --)
  if ! mpirun -n "$ranks" "${profile[@]}" "$ddp_sim" --steps "$steps" --truth "$work/$tag.json" "${extra[@]}" \
    >"$work/$tag.log" 2>&1; then
    echo "run $tag failed:" >&2
    cat "$work/$tag.log" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }' >"$work/$tag.wall"
  if [ "$mode" != off ]; then
    "$rankscope" info --json "$work/$tag.h5" >"$work/$tag.info.json"
    rm -rf "$work/$tag.h5" "$work/$tag.h5.shards"
  fi
  printf '  round %d, %d ranks, agent %-3s: wall %6.2f s\n' "$round" "$ranks" "$mode" "$(cat "$work/$tag.wall")" >&2
}

for round in $(seq 1 "$rounds"); do
  for ranks in 4 8; do
    # Each round starts with the next configuration, so that none is always first.
    for k in $(seq 0 $((${#modes[@]} - 1))); do
      run_one "$round" "$ranks" "${modes[$(((round + k) % ${#modes[@]}))]}"
    done
  done
done

python3 - "$work" "$rounds" "$steps" "${modes[@]}" <<'EOF'
import json, statistics, sys
work, rounds, steps, modes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]

def pct(values, p):
    s = sorted(values)
    k = (len(s) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)

print()
print("| ranks | agent | median step ms | p25–p75 step ms | per-run medians ms (min–max) | overhead of the median | paired overhead, median (min–max) | job wall s (median) | events/step/rank written | writer CPU ms/rank |")
print("|---|---|---|---|---|---|---|---|---|---|")
for ranks in (4, 8):
    steps_of, run_medians, walls, events_per_step, writer_ms = {}, {}, {}, {}, {}
    for mode in modes:
        steps_of[mode], run_medians[mode], walls[mode], events_per_step[mode], writer_ms[mode] = [], [], [], [], []
        for r in range(1, rounds + 1):
            tag = f"{work}/r{r}-n{ranks}-{mode}"
            truth = json.load(open(tag + ".json"))
            steps_of[mode] += truth["step_times_ms"]
            run_medians[mode].append(statistics.median(truth["step_times_ms"]))
            walls[mode].append(float(open(tag + ".wall").read()))
            if mode != "off":
                info = json.load(open(tag + ".info.json"))
                total_steps = truth["steps"] + truth["warmup_steps"]
                events_per_step[mode].append(info["events"] / info["world_size"] / total_steps)
                writer_ms[mode].append(statistics.median(
                    rank["counters"].get("agent_cost_flusher_cpu_ns", 0) / 1e6 for rank in info["ranks"]))
    med = {m: statistics.median(steps_of[m]) for m in steps_of}
    for mode in modes:
        paired = [on / off - 1 for on, off in zip(run_medians[mode], run_medians["off"])]
        over = f"{100 * (med[mode] / med['off'] - 1):+.1f} %" if mode != "off" else ""
        pair = (f"{100 * statistics.median(paired):+.1f} % ({100 * min(paired):+.1f} to {100 * max(paired):+.1f} %)"
                if mode != "off" else "")
        eps = f"{statistics.median(events_per_step[mode]):.0f}" if mode != "off" else ""
        cpu = f"{statistics.median(writer_ms[mode]):.1f}" if mode != "off" else ""
        print(f"| {ranks} | {mode} | {med[mode]:.1f} | {pct(steps_of[mode], .25):.1f}–{pct(steps_of[mode], .75):.1f} "
              f"| {min(run_medians[mode]):.1f}–{max(run_medians[mode]):.1f} | {over} | {pair} "
              f"| {statistics.median(walls[mode]):.2f} | {eps} | {cpu} |")
print()
loads = [float(open(f"{work}/r{r}-n{n}-{m}.load").read()) for r in range(1, rounds + 1) for n in (4, 8) for m in modes]
print(f"1-minute load average at the start of each run: median {statistics.median(loads):.2f}, "
      f"{min(loads):.2f}–{max(loads):.2f}")
for ranks in (4, 8):
    for mode in modes:
        meds = []
        for r in range(1, rounds + 1):
            meds.append(statistics.median(json.load(open(f"{work}/r{r}-n{ranks}-{mode}.json"))["step_times_ms"]))
        print(f"per-run median step ms, {ranks} ranks, agent {mode}: " + ", ".join(f"{m:.1f}" for m in meds))
EOF
