#!/usr/bin/env bash
# scripts/fuzz.sh TARGET [SECONDS] [WORK_DIR]: fuzzes one reader with libFuzzer
# under AddressSanitizer and UndefinedBehaviorSanitizer:
#   kineto    the Kineto importer (reader, translation, matching), from the real
#             traces' first events and its replay corpus;
#   timeline  the timeline reader and every command that reads a timeline (info's
#             checks, report in every format, export in both), from whole files and
#             from edits of a real timeline made behind its checksums;
#   shard     the shard reader (scan and every chunk), from real shards.
# Inputs that crash are left in WORK_DIR as crash-*; copy each, once fixed, into
# the target's replay corpus (tests/importers/kineto_corpus, tests/timeline/timeline_corpus,
# tests/model/shard_corpus) so the replay test keeps it.
# Needs clang and its runtime (Debian: clang, libclang-rt-dev); installs them as root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=${1:?usage: scripts/fuzz.sh kineto|timeline|shard [SECONDS] [WORK_DIR]}
seconds=${2:-60}
work=${3:-$root/build-fuzz}
case $target in
  kineto) corpus_source=$root/tests/importers/kineto_corpus ;;
  timeline) corpus_source=$root/tests/timeline/timeline_corpus ;;
  shard) corpus_source=$root/tests/model/shard_corpus ;;
  *) echo "scripts/fuzz.sh: unknown target $target (kineto, timeline or shard)" >&2; exit 2 ;;
esac
missing=()
for p in clang libclang-rt-dev libsimdjson-dev zlib1g-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "fuzzing needs: sudo apt-get install ${missing[*]}" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The target as its CMake target builds it, with clang, AddressSanitizer,
# UndefinedBehaviorSanitizer and libFuzzer's coverage.
CC=clang CXX=clang++ cmake -S "$root" -B "$work/build" -DRANKSCOPE_SANITIZE="address;undefined" -DRANKSCOPE_FUZZ=ON \
  -DRANKSCOPE_WITH_CUDA=OFF -DRANKSCOPE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/build" --target "fuzz_$target" -j"$(nproc)" >/dev/null
cp "$work/build/tests/fuzz_$target" "$work/fuzz_$target"
corpus=$work/corpus-$target
mkdir -p "$corpus"
cp "$corpus_source"/* "$corpus/" 2>/dev/null || true
max_len=65536
if [ "$target" = kineto ]; then
  # Seeds: the head of each real trace, closed so that it parses.
  for trace in "$root"/../shared/data/kineto/*/*.json.gz; do
    [ -f "$trace" ] || continue
    seed="$corpus/seed-$(basename "$trace" .json.gz).json"
    [ -f "$seed" ] || { zcat "$trace" | head -c 6000 | sed '$d'; echo '{"ph": "i", "ts": 1}]}'; } >"$seed" || true
  done
fi
[ "$target" = timeline ] && export RANKSCOPE_FUZZ_SEED_TIMELINE=$root/tests/timeline/fuzz_seed.h5
# The sanitizers' leak check would report Open MPI's and HDF5's own allocations.
export LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0
cd "$work"
start=$(date +%s)
status=0
"./fuzz_$target" -max_total_time="$seconds" -max_len=$max_len -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  "$corpus" 2>"fuzz-$target.log" || status=$?
end=$(date +%s)
grep -E '^stat::|^#[0-9]+.*DONE|SUMMARY|ERROR' "fuzz-$target.log" | tail -12 || true
echo "fuzzed $target for $((end - start)) s of CPU on one core, corpus $(ls "$corpus" | wc -l) inputs; crashes: $(ls crash-* 2>/dev/null | wc -l)"
exit $status
