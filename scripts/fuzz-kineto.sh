#!/usr/bin/env bash
# scripts/fuzz-kineto.sh [SECONDS] [WORK_DIR]: fuzzes the Kineto importer
# (reader, translation, matching) with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, starting from the real traces' first events and
# the replay corpus. Inputs that crash are left in WORK_DIR as crash-*; copy
# each, once fixed, into tests/importers/kineto_corpus/ so the replay test keeps it.
# Needs clang and its runtime (Debian: clang, libclang-rt-dev); installs them as root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
work=${2:-$root/build-fuzz}
missing=()
for p in clang libclang-rt-dev libsimdjson-dev zlib1g-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "fuzzing needs: sudo apt-get install ${missing[*]}" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The importer's core as its CMake target builds it, with clang, AddressSanitizer,
# UndefinedBehaviorSanitizer and libFuzzer's coverage.
CC=clang CXX=clang++ cmake -S "$root" -B "$work/build" -DRANKSCOPE_SANITIZE="address;undefined" -DRANKSCOPE_FUZZ=ON \
  -DRANKSCOPE_WITH_CUDA=OFF -DRANKSCOPE_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/build" --target fuzz_kineto -j"$(nproc)" >/dev/null
cp "$work/build/tests/fuzz_kineto" "$work/fuzz_kineto"
mkdir -p "$work/corpus"
cp "$root"/tests/importers/kineto_corpus/* "$work/corpus/" 2>/dev/null || true
# Seeds: the head of each real trace, closed so that it parses.
data=$root/../shared/data/kineto
for trace in "$data"/*/*.json.gz; do
  [ -f "$trace" ] || continue
  seed="$work/corpus/seed-$(basename "$trace" .json.gz).json"
  [ -f "$seed" ] || { zcat "$trace" | head -c 6000 | sed '$d'; echo '{"ph": "i", "ts": 1}]}'; } >"$seed" || true
done
cd "$work"
start=$(date +%s)
status=0
./fuzz_kineto -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 corpus \
  2>fuzz.log || status=$?
end=$(date +%s)
grep -E '^stat::|^#[0-9]+.*DONE|SUMMARY|ERROR' fuzz.log | tail -12 || true
echo "fuzzed for $((end - start)) s of CPU on one core, corpus $(ls corpus | wc -l) inputs; crashes: $(ls crash-* 2>/dev/null | wc -l)"
exit $status
