#!/usr/bin/env bash
# The rank agent's cost per captured event (Google Benchmark; the sources are
# bench/bench_agent.cpp and bench/bench_agent_mpi.cpp). Four runs:
#   1. bench_agent with the capture library capturing, as `rankscope run`
#      starts a rank: RANKSCOPE_SHARD_DIR, RANKSCOPE_CAPTURE=mpi,nvtx,
#      NVTX_INJECTION64_PATH=<the capture library> and RANKSCOPE_AGENT_PID set
#      to the benchmark's own pid (sh -c '... $$; exec'), so that its library
#      constructor starts capturing;
#   2. bench_agent's NVTX and clock benchmarks with none of that: NVTX calls
#      with no profiler injected, the baseline;
#   3. bench_agent_mpi, an MPI singleton, plain;
#   4. bench_agent_mpi under `rankscope run --mode inprocess`, which preloads
#      the PMPI shim and the capture library.
# Then a table: ns per captured event = (captured - baseline) CPU time, medians
# over the repetitions, and events dropped (from the shard, in runs 1 and 4).
#
# Usage: bench/agent_bench.sh [REPETITIONS=3]
# About 4 minutes on a 2-core machine; writes some GB of shards under a
# temporary folder in /tmp (removed at the end). RANKSCOPE_BUFFER_MB and
# RANKSCOPE_FLUSH_MS are passed on when set (agent defaults: 64 and 200).
# RANKSCOPE_BUILD_DIR picks another build folder (default build/);
# RANKSCOPE_BENCH_NO_BUILD=1 uses its binaries as they are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-3}
build=${RANKSCOPE_BUILD_DIR:-$root/build}
if [ -z "${RANKSCOPE_BENCH_NO_BUILD:-}" ]; then
  "$root/scripts/build.sh" "$build" >/dev/null
fi
capture=$(readlink -f "$build/rank_agent/librankscope_capture.so")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Nothing inherited may start (or stop) an agent in the baseline runs.
unset RANKSCOPE_SHARD_DIR RANKSCOPE_AGENT_PID RANKSCOPE_CAPTURE NVTX_INJECTION64_PATH
work=$(mktemp -d /tmp/agent-bench.XXXXXX)
# RANKSCOPE_BENCH_KEEP=1 keeps the Google Benchmark JSON files (not the shards).
trap '[ -n "${RANKSCOPE_BENCH_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT
gb=(--benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true --benchmark_out_format=json)

echo "# rank agent hot path: $reps repetitions, $(nproc) cores, $(date -u +%F), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## 1. bench_agent, the agent capturing (NVTX injected)"
RANKSCOPE_SHARD_DIR=$work/shards RANKSCOPE_CAPTURE=mpi,nvtx RANKSCOPE_RANK=0 NVTX_INJECTION64_PATH=$capture \
  sh -c 'RANKSCOPE_AGENT_PID=$$ exec "$0" "$@"' "$build/bench/bench_agent" "${gb[@]}" \
  --benchmark_out="$work/capture.json"
rm -rf "$work/shards"
echo
echo "## 2. bench_agent, no agent, no NVTX injection (baseline)"
"$build/bench/bench_agent" --benchmark_filter='Nvtx|Clock|Now|Rdtsc' "${gb[@]}" --benchmark_out="$work/plain.json"
echo
echo "## 3. bench_agent_mpi, plain MPI singleton (baseline)"
"$build/bench/bench_agent_mpi" "${gb[@]}" --benchmark_out="$work/mpi_plain.json"
echo
echo "## 4. bench_agent_mpi under rankscope run --mode inprocess (shim and capture library preloaded)"
"$build/coordinator/rankscope" run --mode inprocess -o "$work/mpi.h5" -- \
  "$build/bench/bench_agent_mpi" "${gb[@]}" --benchmark_out="$work/mpi_capture.json"
rm -rf "$work/mpi.h5" "$work/mpi.h5.shards"

python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]

def runs(name):
    """Each benchmark's repetitions (run_type iteration), by run name."""
    out = {}
    for b in json.load(open(f"{work}/{name}.json"))["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration" and "error_occurred" not in b:
            out.setdefault(b["run_name"], []).append(b)
    return out

def median(values):
    s = sorted(values)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2

def medians(name):
    """run name -> (median CPU ns, "min–max" CPU ns, median shard MB/s, one of the runs)"""
    out = {}
    for run_name, bs in runs(name).items():
        scale = {"ns": 1, "us": 1e3, "ms": 1e6}[bs[0]["time_unit"]]
        cpus = [b["cpu_time"] * scale for b in bs]
        mbps = median([b.get("shard_MB/s", 0) for b in bs])
        out[run_name] = (median(cpus), f"{min(cpus):.1f}–{max(cpus):.1f}", mbps, bs[0])
    return out

cap, plain = medians("capture"), medians("plain")
mpi_cap, mpi_plain = medians("mpi_capture"), medians("mpi_plain")
print()
print("| what | events per iteration | CPU ns per iteration, captured: median (min–max) | baseline | ns per captured event | shard MB/s |")
print("|---|---|---|---|---|---|")
for run_name, (cpu, rng, mbps, b) in cap.items():
    if run_name.startswith("BM_Record"):
        what = ("rankscope_agent_record, " + ("paced (no drops)" if "paced:1" in run_name else "flat out (pool full, drops)")
                + f", {b['threads']} thread" + ("s" if b["threads"] > 1 else ""))
        print(f"| {what} | 1 | {cpu:.1f} ({rng}) | – | {cpu:.1f} | {mbps:.0f} |")
for run_name, (cpu, rng, mbps, b) in cap.items():
    if "Nvtx" in run_name:
        base = plain[run_name][0] if run_name in plain else float("nan")
        print(f"| {run_name.split('/iterations')[0]} (one range) | 1 | {cpu:.1f} ({rng}) | {base:.1f} | {cpu - base:.1f} | {mbps:.0f} |")
events = {"BM_MpiBarrierSelf": 1, "BM_MpiBarrierWorld": 1, "BM_MpiAllreduceSelf": 1, "BM_MpiIallreduceWaitSelf": 3,
          "BM_MpiTestallPending": 0}
for run_name, (cpu, rng, mbps, b) in mpi_cap.items():
    base = mpi_plain[run_name][0]
    n = events.get(run_name, 1)
    per = f"{(cpu - base) / n:.1f}" if n else f"{cpu - base:.1f} per call, no event"
    print(f"| {run_name} | {n} | {cpu:.1f} ({rng}) | {base:.1f} | {per} | {mbps:.0f} |")
for run_name in ("BM_AgentNow", "BM_ClockGettime/4", "BM_ClockGettime/1", "BM_Rdtsc", "BM_AgentIntern/4", "BM_AgentIntern/31"):
    if run_name in cap:
        cpu, rng, _, b = cap[run_name]
        label = f" ({b['label']})" if b.get("label") else ""
        print(f"| {run_name}{label}, for reference | – | {cpu:.1f} ({rng}) | – | – | – |")
EOF
