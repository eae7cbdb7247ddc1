#!/usr/bin/env bash
# bench/big_steps.sh [ROUNDS] [KERNELS_PER_STEP] [RANKS]: `import-kineto`
# and `rankscope report` on a GPU job whose steps hold hundreds of
# thousands of events each (a host that launches a step's kernels far
# ahead of its GPU). Generates the job once with bench/make_kineto_trace.py
# (DDP-shaped, --healthy, rank 1's kernels slowed 2x; default 2 ranks,
# 100,000 kernels a step, 6 steps: about 4.7 M events, 1.8 GB of JSON),
# then, interleaved, ROUNDS times (default 3), imports it and reports the
# timeline with this build and each of RANKSCOPE_BEFORE=OLD/rankscope
# (several, by spaces). Prints each build's median wall time of either and
# its peak memory, and where each build's JSON report differs from this one's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rankscope=${RANKSCOPE_BUILD_DIR:-$root/build}/coordinator/rankscope
work=${RANKSCOPE_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
rounds=${1:-3} kernels=${2:-100000} ranks=${3:-2}
echo "date: $(date -u +%F), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, commit $(git -C "$root" rev-parse --short HEAD)"
python3 "$root/bench/make_kineto_trace.py" "$work/job" --ranks "$ranks" --kernels-per-step "$kernels" --steps 6 \
  --healthy --inject slow_rank --inject-ranks 1 --slow-rank-factor 2 | tail -1
# shellcheck disable=SC2086
python3 - "$work" "$rankscope" ${RANKSCOPE_BEFORE:-} <<PY
import json, os, statistics, subprocess, sys, time
work, builds = sys.argv[1], sys.argv[2:]
times = {(b, c): [] for b in builds for c in ("import", "report")}
memory = {(b, c): 0 for b in builds for c in ("import", "report")}
def timed(b, command, args):
    start = time.perf_counter()
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", work + "/mem", b, *args],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    times[b, command].append(time.perf_counter() - start)
    memory[b, command] = max(memory[b, command], int(open(work + "/mem").read().split()[-1]))
for _ in range($rounds):
    for k, b in enumerate(builds):
        timeline = f"{work}/job.h5"
        if os.path.exists(timeline):
            os.remove(timeline)
        timed(b, "import", ["import-kineto", work + "/job", "-o", timeline])
        timed(b, "report", ["report", "-f", timeline, "--format", "json", "-o", f"{work}/report{k}.json"])
for b in builds:
    print(b + ": " + ", ".join(f"{c} median {statistics.median(times[b, c]):.2f} s "
                               f"(least {min(times[b, c]):.2f}, most {max(times[b, c]):.2f}), "
                               f"peak {memory[b, c] / 1024:.1f} MiB" for c in ("import", "report")))
first = json.load(open(f"{work}/report0.json"))
for k in range(1, len(builds)):
    other = json.load(open(f"{work}/report{k}.json"))
    differ = [f"{key}.{part}" if isinstance(first[key], dict) else key
              for key in first if first[key] != other.get(key)
              for part in ([p for p in first[key] if first[key][p] != (other.get(key) or {}).get(p)]
                           if isinstance(first[key], dict) else [None])]
    print(f"{builds[k]}'s JSON report against this build's: " + ("the same" if not differ else "differs in " + ", ".join(differ)))
PY
