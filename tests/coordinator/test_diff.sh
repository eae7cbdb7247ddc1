#!/usr/bin/env bash
# `rankscope diff` on ddp_sim runs of known difference:
# - two healthy runs of one configuration: no significant change, exit 0
#   with --fail-on default;
# - a rank slowed 30 %: the job's step time a significant regression, then
#   the slowed rank's compute, exit 1 with --fail-on default; a rank slowed
#   10 %, more layers, smaller buckets, a slow data loader: each named
#   first after the step;
# - a saved baseline compares as its timeline does;
# - a rules file gates on its thresholds, and names its mistakes by line;
# - other world sizes compare the job only and say so;
# - the same file twice, a baseline as the new run, a damaged or newer
#   baseline, a file of another kind: exit 2 naming the file.
# Usage: test_diff.sh RANKSCOPE DDP_SIM MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

profile() {  # NAME RANKS [ddp_sim flags...]; LAYERS: the model's layers (8)
  local name=$1 ranks=$2
  shift 2
  "$mpiexec" --bind-to none -n "$ranks" "$rankscope" run -o "$name.h5" -- "$ddp_sim" --compute sleep --layers "${LAYERS:-8}" \
    --layer-mb 0.25 --forward-us 3000 --optimizer-us 4000 --steps 30 --warmup-steps 2 "$@" >"$name.log" 2>&1 ||
    { cat "$name.log"; fail "$name: the run failed"; }
}

profile healthy-a 4
profile healthy-b 4
profile slow 4 --slow-rank 2 --slowdown 1.3
profile slow10 4 --slow-rank 1 --slowdown 1.1
profile loader 4 --data-loading-us 15000
LAYERS=10 profile layers 4
profile buckets 4 --bucket-mb 0.25
profile two 2

expect_status() {  # STATUS COMMAND...
  local want=$1 got=0
  shift
  "$@" >out.txt 2>err.txt || got=$?
  [ "$got" -eq "$want" ] || { cat out.txt err.txt >&2; fail "$* exited $got, not $want"; }
}

# Healthy against healthy: nothing significant. Two runs differ by more
# than their steps vary when the machine's load changes between them (CI
# runs other tests beside this one): a pair that differs gets a second,
# fresh run before it counts as a failure (bench/diff_bench.sh measures the
# false alarms of quiet runs: 0 in 20 pairs).
if ! "$rankscope" diff healthy-a.h5 healthy-b.h5 --fail-on default >out.txt 2>err.txt ||
   ! grep -q "no significant change" out.txt; then
  cat out.txt
  echo "retrying the healthy pair once"
  rm -f healthy-a.h5 healthy-b.h5
  profile healthy-a 4
  profile healthy-b 4
  expect_status 0 "$rankscope" diff healthy-a.h5 healthy-b.h5 --fail-on default
  grep -q "no significant change" out.txt || { cat out.txt >&2; fail "healthy runs: a significant change was found (above)"; }
fi

# The slowed rank.
expect_status 1 "$rankscope" diff healthy-a.h5 slow.h5 --fail-on default
grep -q "rule broken: step_ns <= 1 baseline (default): step_ns: " err.txt ||
  { cat err.txt >&2; fail "slow: the step time's regression is not named"; }
"$rankscope" diff healthy-a.h5 slow.h5 --format json -o slow.json
python3 - slow.json <<'PY'
import json, sys
diff = json.load(open(sys.argv[1]))
significant = [c for c in diff["changes"] if c["significant"]]
assert significant, "slow: nothing significant"
step = next(c for c in significant if c["metric"] == "step_ns" and c["scope"] == "job")
assert step["regression"] and 1.1 < step["ratio"] < 1.5, step
# The headline, then the slowed rank, ahead of the others' longer waits for it.
assert significant[0] is step, significant[0]
first_rank = next(c for c in significant if c["scope"] == "rank")
assert first_rank["rank"] == 2 and first_rank["metric"] in ("compute_ns", "backward_ns", "forward_ns"), first_rank
print("slow:", [(c["metric"], c["rank"], round(c["ratio"], 3)) for c in significant[:5]])
PY

# Each injected change named first after the step: a rank slowed 10 %,
# more layers, smaller buckets.
first_change() {  # BASE NEW EXPECTED_PYTHON_CONDITION
  "$rankscope" diff "$1" "$2" --format json -o first.json --overwrite
  python3 - first.json "$3" <<'PY'
import json, sys
diff = json.load(open(sys.argv[1]))
significant = [c for c in diff["changes"] if c["significant"]]
named = [c for c in significant if not (c["metric"] == "step_ns" and c["scope"] == "job")]
assert named, f"{sys.argv[2]}: nothing significant but the step"
c = named[0]
assert eval(sys.argv[2]), f"the first change is {c['metric']} of {c['scope']} {c['rank']}, not {sys.argv[2]}"
print(f"first change: {c['metric']} ({c['scope']} {c['rank']}) x{c['ratio']:.3f}")
PY
}
first_change healthy-a.h5 slow10.h5 'c["rank"] == 1 and c["metric"] in ("compute_ns", "forward_ns", "backward_ns", "optimizer_ns")'
first_change healthy-a.h5 layers.h5 'c["scope"] == "job" and c["metric"] in ("forward_ns", "backward_ns", "compute_ns")'
# A bucket's size is exact: its change is significant as it is. Its effect
# on the communication in flight is too close to the runs' noise to name it
# first every time; where it is named first it is its own effect: how much
# of the communication backward hides (overlap), or what stays exposed.
first_change healthy-a.h5 buckets.h5 \
  'c["metric"].startswith("bucket.bytes:") or c["metric"] in ("exposed_wait_ns", "exposed_transfer_ns", "overlap_ns")'

# The page: the same changes, self-contained.
"$rankscope" diff healthy-a.h5 slow.h5 --format html -o slow.html
grep -q "<title>rankscope diff: slow.h5 against healthy-a.h5</title>" slow.html || fail "the HTML page's title"
grep -q 'id="change-bars"' slow.html || fail "the HTML page has no bars of the changes"
if grep -qE '<(script|link)|src="http' slow.html; then fail "the HTML page fetches something"; fi

# The slow data loader.
"$rankscope" diff healthy-a.h5 loader.h5 --format json -o loader.json
python3 - loader.json <<'PY'
import json, sys
diff = json.load(open(sys.argv[1]))
loading = [c for c in diff["changes"] if c["metric"] == "data_loading_ns" and c["scope"] == "job"]
assert loading and loading[0]["significant"] and loading[0]["regression"], loading
job = [c for c in diff["changes"] if c["significant"] and c["scope"] == "job" and c["metric"] != "step_ns"]
assert job and job[0]["metric"] == "data_loading_ns", [c["metric"] for c in job[:3]]
print("loader: data loading", round(loading[0]["base"] / 1e6, 2), "->", round(loading[0]["new"] / 1e6, 2), "ms")
PY

# A baseline of the healthy run judges the slow run as the timeline does.
"$rankscope" report healthy-a.h5 --save-baseline healthy.baseline >/dev/null
expect_status 1 "$rankscope" diff healthy.baseline slow.h5 --fail-on default
"$rankscope" diff healthy.baseline slow.h5 --format json -o slow-from-baseline.json
python3 - slow.json slow-from-baseline.json <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda d: sorted((c["metric"], -1 if c["rank"] is None else c["rank"], c["significant"]) for c in d["changes"])
assert key(a) == key(b), "a baseline judges otherwise than its timeline"
PY

# A rules file: the slow rank's step stays within its 1.5, the slow loader
# breaks its data loading's 1.2.
printf '# the CI gate\nstep_ns <= 1.5 baseline\ndata_loading_ns <= 1.2 baseline\n' >gate.rules
expect_status 0 "$rankscope" diff healthy.baseline slow.h5 --fail-on gate.rules
grep -q "rules (gate.rules): 2 figures kept them, 0 broken" out.txt || { cat out.txt >&2; fail "gate: the slow rank"; }
expect_status 1 "$rankscope" diff healthy.baseline loader.h5 --fail-on gate.rules --format json
grep -q "rule broken: data_loading_ns <= 1.2 baseline (gate.rules:3): data_loading_ns: " err.txt ||
  { cat err.txt >&2; fail "gate: the slow loader's rule is not named"; }
python3 - out.txt <<'PY'
import json, sys
rules = json.load(open(sys.argv[1]))["rules"]
assert rules["source"] == "gate.rules" and rules["broken"], rules
assert [v["metric"] for v in rules["verdicts"] if v["outcome"] == "broken"] == ["data_loading_ns"], rules
PY
printf 'step_ns <= 1.5 baseline\nstep_time <= 2 baseline\n' >bad.rules
expect_status 2 "$rankscope" diff healthy.baseline loader.h5 --fail-on bad.rules
grep -q "bad.rules:2: no figure of diff's is named 'step_time'" err.txt || fail "a bad rule: $(cat err.txt)"

# Other world sizes: the job only.
expect_status 0 "$rankscope" diff healthy-a.h5 two.h5
grep -q "note: the runs have 4 and 2 ranks: only the job's figures are compared" out.txt || { cat out.txt >&2; fail "world sizes"; }

# Refusals, each naming its file.
expect_status 2 "$rankscope" diff healthy-a.h5 healthy-a.h5
grep -q "compared with itself" err.txt || fail "the same file twice: $(cat err.txt)"
expect_status 2 "$rankscope" diff healthy-a.h5 healthy.baseline
grep -q "healthy.baseline is a baseline: the new run must be a timeline" err.txt || fail "baseline as new: $(cat err.txt)"
sed '3s/.*/world_size many/' healthy.baseline >damaged.baseline
expect_status 2 "$rankscope" diff damaged.baseline slow.h5
grep -q "damaged.baseline:3: world_size is not a positive number" err.txt || fail "damaged baseline: $(cat err.txt)"
sed '1s/.*/rankscope-baseline 99/' healthy.baseline >newer.baseline
expect_status 2 "$rankscope" diff newer.baseline slow.h5
grep -q "newer.baseline:1: baseline format 99 is newer" err.txt || fail "newer baseline: $(cat err.txt)"
echo "not a timeline" >notes.txt
expect_status 2 "$rankscope" diff notes.txt slow.h5
grep -q "notes.txt" err.txt || fail "a file of another kind is not named: $(cat err.txt)"
# A baseline is written over nothing but an earlier baseline.
expect_status 1 "$rankscope" report healthy-a.h5 --save-baseline notes.txt --overwrite
grep -q "notes.txt" err.txt || fail "--save-baseline over another file: $(cat err.txt)"
[ "$(cat notes.txt)" = "not a timeline" ] || fail "--save-baseline wrote over notes.txt"
# Reading never changes a file.
sum=$(md5sum healthy.baseline)
"$rankscope" diff healthy.baseline slow.h5 >/dev/null
[ "$sum" = "$(md5sum healthy.baseline)" ] || fail "diff changed the baseline"
echo "diff: healthy runs alike, the slow rank and the slow loader found, baselines and refusals as they should be"
