#!/usr/bin/env bash
# ddp_sim under mpiexec with 4 ranks: DDP's buckets in the truth file, a slow
# rank slowing every step, FSDP with and without prefetch, and bad flags
# refused with exit status 2.
# Usage: test_ddp_sim.sh DDP_SIM MPIEXEC
set -euo pipefail
ddp_sim=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_usage_error MESSAGE COMMAND...: COMMAND exits 2 and says MESSAGE on stderr.
expect_usage_error() {
  local message=$1 status=0
  shift
  "$@" >/dev/null 2>"$work/stderr" || status=$?
  [ "$status" -eq 2 ] || fail "exit status $status, not 2, from: $*"
  grep -qF -- "$message" "$work/stderr" || fail "no '$message' from: $*; stderr: $(cat "$work/stderr")"
}

help=$("$ddp_sim" --help) || fail "--help did not exit 0"
grep -q -- "--slowdown" <<<"$help" || fail "--help does not list --slowdown: $help"

# 4 layers of 256 KiB; a first bucket cap of 256 KiB and then 512 KiB make
# buckets {3}, {2, 1}, {0}. Compute per step on a healthy rank:
# 4 × 8 ms forward + 4 × 16 ms backward + 4 ms optimizer = 100 ms, long beside
# what 4 ranks on 2 shared cores lose when a deadline passes off a core.
ddp=(--layers 4 --layer-mb 0.25 --forward-us 8000 --optimizer-us 4000 --steps 4 --warmup-steps 1
     --first-bucket-mb 0.25 --bucket-mb 0.5)

out=$("$mpiexec" -n 4 "$ddp_sim" "${ddp[@]}" --truth "$work/healthy.json") || fail "healthy run failed"
echo "$out"
grep -q "^ddp_sim: 4 ranks, DDP, 4 layers of 0.25 MiB, 3 buckets (0.25, 0.5, 0.25 MiB), no slow rank" <<<"$out" ||
  fail "healthy run's summary: $out"

out=$("$mpiexec" -n 4 "$ddp_sim" "${ddp[@]}" --slow-rank 3 --slowdown 2 --truth "$work/slow.json") ||
  fail "slow run failed"
echo "$out"
grep -q "rank 3 slowed 2x" <<<"$out" || fail "slow run's summary: $out"

python3 - "$work/healthy.json" "$work/slow.json" <<'PY'
import json, sys
healthy, slow = (json.load(open(path)) for path in sys.argv[1:3])
for truth in (healthy, slow):
    assert truth["program"] == "ddp_sim" and truth["mode"] == "ddp", truth
    assert truth["world_size"] == 4 and truth["layers"] == 4 and truth["layer_bytes"] == 262144
    assert (truth["forward_us"], truth["backward_us"], truth["optimizer_us"]) == (8000, 16000, 4000)
    assert truth["first_bucket_cap_bytes"] == 262144 and truth["bucket_cap_bytes"] == 524288
    assert truth["buckets"] == [
        {"index": 0, "layers": [3], "bytes": 262144},
        {"index": 1, "layers": [2, 1], "bytes": 524288},
        {"index": 2, "layers": [0], "bytes": 262144},
    ], truth["buckets"]
    assert truth["units"] == []
    assert truth["steps"] == 4 and len(truth["step_times_ms"]) == 4
    assert truth["warmup_steps"] == 1 and len(truth["warmup_step_times_ms"]) == 1
    times = sorted(truth["step_times_ms"])
    assert abs(truth["mean_step_ms"] - sum(times) / 4) < 0.01
    assert abs(truth["median_step_ms"] - (times[1] + times[2]) / 2) < 0.01
assert healthy["slow_rank"] is None and healthy["slowdown"] == 1 and healthy["jitter"] == 0
assert slow["slow_rank"] == 3 and slow["slowdown"] == 2
# Rank 0 computes for 100 ms in each of its steps, so no step can be shorter.
# Rank 3, slowed, computes for 200 ms a step, and rank 0 waits for its buckets
# every step (less what rank 0's first counted step may gain on it).
assert min(healthy["step_times_ms"]) >= 100, healthy["step_times_ms"]
assert slow["mean_step_ms"] >= 0.9 * 200, slow["step_times_ms"]
ratio = slow["mean_step_ms"] / healthy["mean_step_ms"]
print(f"mean step: healthy {healthy['mean_step_ms']:.1f} ms, "
      f"rank 3 slowed 2x {slow['mean_step_ms']:.1f} ms, ratio {ratio:.2f}")
# About 2 on an idle machine; other load on the cores lengthens the healthy
# steps more than the slow ones, which wait for rank 3 anyway.
assert 1.5 <= ratio <= 2.5, f"rank 3 slowed 2x, yet steps {ratio:.2f}x as long"
PY

# FSDP: layers of 26 floats in units of 3 layers, so both units' shards are
# padded (78 → 4 × 20 floats, 26 → 4 × 7 floats). 4 × 2 ms + 4 × 4 ms + 2 ms
# = 26 ms of compute per step.
fsdp=(--fsdp --unit-layers 3 --layers 4 --layer-mb 0.0001 --forward-us 2000 --optimizer-us 2000 --steps 4
      --warmup-steps 1)
out=$("$mpiexec" -n 4 "$ddp_sim" "${fsdp[@]}" --truth "$work/fsdp.json") || fail "FSDP run failed"
echo "$out"
grep -q "^ddp_sim: 4 ranks, FSDP, .* 2 units .* prefetch on" <<<"$out" || fail "FSDP summary: $out"
out=$("$mpiexec" -n 4 "$ddp_sim" "${fsdp[@]}" --no-prefetch --jitter 0.2 --seed 7 \
        --truth "$work/fsdp_no_prefetch.json") || fail "FSDP run without prefetch failed"
echo "$out"
grep -q "prefetch off, no slow rank, jitter 0.2;" <<<"$out" || fail "FSDP summary without prefetch: $out"

python3 - "$work/fsdp.json" "$work/fsdp_no_prefetch.json" <<'PY'
import json, sys
prefetch, no_prefetch = (json.load(open(path)) for path in sys.argv[1:3])
for truth in (prefetch, no_prefetch):
    assert truth["mode"] == "fsdp" and truth["world_size"] == 4 and truth["unit_layers"] == 3
    assert truth["layer_bytes"] == 104, truth["layer_bytes"]
    assert truth["buckets"] == []
    assert truth["units"] == [
        {"index": 0, "layers": [0, 1, 2], "bytes": 312, "shard_bytes": 80},
        {"index": 1, "layers": [3], "bytes": 104, "shard_bytes": 28},
    ], truth["units"]
    assert len(truth["step_times_ms"]) == 4 and min(truth["step_times_ms"]) >= 26, truth["step_times_ms"]
assert prefetch["prefetch"] is True and no_prefetch["prefetch"] is False
assert no_prefetch["jitter"] == 0.2 and no_prefetch["seed"] == 7
print("fsdp ok")
PY

expect_usage_error "--slow-rank: 4 is not a rank of this 4-rank job" "$mpiexec" -n 4 "$ddp_sim" --slow-rank 4
expect_usage_error "--layers: must be at least 1, got 0" "$ddp_sim" --layers 0
expect_usage_error "--unit-layers requires --fsdp" "$ddp_sim" --unit-layers 2
expect_usage_error "--truth: cannot write" "$ddp_sim" --truth "$work/no/such/folder/truth.json"
echo "ok"
