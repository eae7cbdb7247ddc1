#!/usr/bin/env bash
# bench/critical_path_cost.sh [ROUNDS] [STEPS]: what the critical path adds
# to `rankscope report` on a job with many steps. Profiles ddp_sim, 8
# ranks, STEPS steps (default 1500: about 600,000 events), once; then
# times `rankscope report` of it, interleaved, ROUNDS times (default 15),
# with this build and, with RANKSCOPE_BEFORE=OLD/rankscope (several, by
# spaces), those builds. Prints each build's median, least and most wall
# time and its peak memory.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RANKSCOPE_BUILD_DIR:-$root/build}
rankscope=$build/coordinator/rankscope
work=${RANKSCOPE_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rounds=${1:-15} steps=${2:-1500}
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, commit $(git -C "$root" rev-parse --short HEAD)"
mpirun -n 8 "$rankscope" run -o "$work/job.h5" --overwrite -- "$build/examples/ddp_sim" --steps "$steps" --layers 8 \
  --layer-mb 1 --forward-us 200 >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
"$rankscope" info "$work/job.h5" 2>/dev/null | sed -n 1p
# shellcheck disable=SC2086
python3 - "$work" "$rankscope" ${RANKSCOPE_BEFORE:-} <<PY
import statistics, subprocess, sys, time
work, builds = sys.argv[1], sys.argv[2:]
times = {b: [] for b in builds}
memory = {b: 0 for b in builds}
for _ in range($rounds):
    for b in builds:
        start = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-f", "%M", "-o", work + "/mem", b, "report", "-f", work + "/job.h5",
                        "-o", work + "/report.txt"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times[b].append(time.perf_counter() - start)
        memory[b] = max(memory[b], int(open(work + "/mem").read().split()[-1]))
for b in builds:
    t = times[b]
    print(f"{b}: median {1000 * statistics.median(t):.1f} ms (least {1000 * min(t):.1f}, most {1000 * max(t):.1f}), "
          f"peak {memory[b] / 1024:.1f} MiB")
PY
