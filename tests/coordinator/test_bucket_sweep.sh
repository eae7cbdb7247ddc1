#!/usr/bin/env bash
# The bucket analysis end to end: ddp_sim profiled by `rankscope run` with 4
# ranks at several --bucket-mb values, and under FSDP with and without
# prefetch; `rankscope report --format json` must find the buckets and units
# that ddp_sim's truth file lists, predict the step for the current buckets
# and the candidate sizes by replaying the walked steps with the buckets
# regrouped on the critical path's graph, and recommend one of them or say
# why not. Each run's predictions for the other runs' sizes and their
# measured steps are printed for a human to compare, like each run's own. The
# measured step of each run is printed beside the predictions for a human to
# compare: on 2 shared cores they are too noisy to assert on. ddp_sim must
# have been built with NVTX: without its ProfilerStep ranges there are no steps.
# Usage: test_bucket_sweep.sh RANKSCOPE DDP_SIM MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 8 layers of 1 MiB; 2 ms forward and 4 ms backward per layer, so that
# compute, not the 2 cores' copying, sets the pace of a step.
model=(--layers 8 --layer-mb 1 --forward-us 2000 --optimizer-us 2000 --steps 6 --warmup-steps 1)

# profile NAME DDP_SIM_FLAGS...: NAME.h5, NAME.truth.json and NAME.report.json in $work.
profile() {
  local name=$1
  shift
  "$mpiexec" -n 4 "$rankscope" run -o "$work/$name.h5" -- "$ddp_sim" "${model[@]}" "$@" \
    --truth "$work/$name.truth.json" >"$work/$name.out" 2>&1 || fail "$name: run failed: $(cat "$work/$name.out")"
  "$rankscope" report "$work/$name.h5" --format json >"$work/$name.report.json" 2>"$work/$name.err" ||
    fail "$name: report failed: $(cat "$work/$name.err")"
  "$rankscope" report "$work/$name.h5" >"$work/$name.report.txt" 2>"$work/$name.err" ||
    fail "$name: text report failed: $(cat "$work/$name.err")"
}

# Bucket caps 1, 2, 4 and 8 MiB: buckets (1 × 8), (1, 2, 2, 2, 1), (1, 4, 3), (1, 7) MiB.
for cap in 1 2 4 8; do profile "ddp$cap" --first-bucket-mb 1 --bucket-mb "$cap"; done
profile fsdp --fsdp --unit-layers 2
profile fsdp_no_prefetch --fsdp --unit-layers 2 --no-prefetch

python3 - "$work" <<'PY'
import json, os, sys

work = sys.argv[1]
MiB = 1 << 20

def load(name):
    with open(os.path.join(work, name + ".truth.json")) as f:
        truth = json.load(f)
    with open(os.path.join(work, name + ".report.json")) as f:
        report = json.load(f)
    return truth, report["buckets"], report

print("cap   buckets (MiB)          measured median step   predicted for current   recommendation")
for cap in (1, 2, 4, 8):
    name = "ddp%d" % cap
    truth, buckets, report = load(name)
    assert buckets["ddp"] and not buckets["fsdp"], (name, buckets["ddp"], buckets["fsdp"])
    truth_sizes = [b["bytes"] for b in truth["buckets"]]
    found_sizes = [b["bytes"] for b in buckets["buckets"]]
    assert found_sizes == truth_sizes, (name, found_sizes, truth_sizes)
    assert [b["index"] for b in buckets["buckets"]] == list(range(len(truth_sizes))), name
    for b in buckets["buckets"]:
        assert b["transfer_ns"] > 0 and b["bus_bandwidth_gbps"] > 0, (name, b)
        assert b["exposed_ns"] >= 0, (name, b)
    median_step_ns = report["steps"]["median_step_ns"]
    assert 0 <= buckets["exposed_tail_ns"] < median_step_ns, (name, buckets["exposed_tail_ns"], median_step_ns)
    # Every bucket of every step is a sample, and the broadcast before step 0.
    counted_steps = truth["steps"] + truth["warmup_steps"]
    assert buckets["fit"]["samples"] >= len(truth_sizes) * counted_steps, (name, buckets["fit"])

    predictions = buckets["predictions"]
    sizes = [p["bucket_bytes"] for p in predictions]
    assert sizes == sorted(set(sizes)), (name, sizes)
    assert all(p["step_ns"] > 0 for p in predictions), (name, predictions)
    current = max(truth_sizes)
    assert current in sizes, (name, current, sizes)
    assert sizes[0] == MiB, (name, sizes)
    recommended, sentence = buckets["recommended_bucket_bytes"], buckets["recommendation"]
    # The critical path's graph replays the buckets regrouped on the walked
    # steps; its predictions stand in for the backward model's.
    assert buckets["predicted_by"] == "replay", (name, buckets["predicted_by"], buckets["replay_reason"])
    assert buckets["replay_reason"] is None and buckets["replayed_steps"] > 0, (name, buckets)
    with open(os.path.join(work, name + ".report.txt")) as f:
        said = "(predicted by replaying %d walked steps with the buckets regrouped)" % buckets["replayed_steps"]
        assert said in f.read(), (name, said)
    if recommended == 0:
        assert sentence.startswith("No recommendation: replayed on"), (name, sentence)
    else:
        assert recommended in sizes, (name, recommended, sizes)
        assert sentence.startswith("Keep the current" if recommended == current else "Buckets of"), (name, sentence)
    predicted_current = next(p["step_ns"] for p in predictions if p["bucket_bytes"] == current)
    print("%-5d %-22s %14.1f ms %18.1f ms       %s" % (
        cap, ", ".join("%g" % (s / MiB) for s in truth_sizes), median_step_ns / 1e6, predicted_current / 1e6, sentence))

# Each run's predictions for the other runs' caps, beside their measured steps.
measured = {}
for cap in (1, 2, 4, 8):
    truth, buckets, report = load("ddp%d" % cap)
    measured[max(b["bytes"] for b in truth["buckets"])] = report["steps"]["median_step_ns"]
print("predicted (measured) step in ms for each largest bucket, from each run")
for cap in (1, 2, 4, 8):
    truth, buckets, report = load("ddp%d" % cap)
    cells = ["%g MiB %.1f (%.1f)" % (p["bucket_bytes"] / MiB, p["step_ns"] / 1e6, measured[p["bucket_bytes"]] / 1e6)
             for p in buckets["predictions"] if p["bucket_bytes"] in measured]
    print("  from %d MiB: %s" % (cap, "; ".join(cells)))

for name, prefetch in (("fsdp", True), ("fsdp_no_prefetch", False)):
    truth, buckets, report = load(name)
    assert buckets["fsdp"] and not buckets["ddp"], (name, buckets["ddp"], buckets["fsdp"])
    units = buckets["units"]
    assert [u["index"] for u in units] == [u["index"] for u in truth["units"]], (name, units)
    for unit, expected in zip(units, truth["units"]):
        # The whole gathered buffer: one rank's padded shard × ranks.
        assert unit["allgather_bytes"] == expected["shard_bytes"] * truth["world_size"], (name, unit, expected)
        assert unit["reduce_scatter_bytes"] == unit["allgather_bytes"], (name, unit)
        assert unit["allgather_exposed_ns"] >= 0 and unit["reduce_scatter_exposed_ns"] >= 0, (name, unit)
    note = buckets["prefetch_note"]
    if not prefetch:
        assert note.startswith("All-gathers do not overlap"), (name, note)
    print("%s: %d units; %s" % (name, len(units), note))
PY
echo "PASS"
