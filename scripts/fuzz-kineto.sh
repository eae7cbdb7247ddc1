#!/usr/bin/env bash
# scripts/fuzz-kineto.sh [SECONDS] [WORK_DIR]: fuzzes the Kineto importer
# (reader, translation, matching) with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, starting from the real traces' first events and
# the replay corpus. Inputs that crash are left in WORK_DIR as crash-*; copy
# each, once fixed, into tests/merge/kineto_corpus/ so the replay test keeps it.
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
# The configured build's generated headers (version.h) are needed.
[ -f "$root/build/model/include/rankscope/version.h" ] || cmake -S "$root" -B "$root/build" >/dev/null
mkdir -p "$work/corpus"
cp "$root"/tests/merge/kineto_corpus/* "$work/corpus/" 2>/dev/null || true
# Seeds: the head of each real trace, closed so that it parses.
data=$root/../shared/data/kineto
for trace in "$data"/*/*.json.gz; do
  [ -f "$trace" ] || continue
  seed="$work/corpus/seed-$(basename "$trace" .json.gz).json"
  [ -f "$seed" ] || { zcat "$trace" | head -c 6000 | sed '$d'; echo '{"ph": "i", "ts": 1}]}'; } >"$seed" || true
done
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/model/include" -I"$root/merge/include" -I"$root/build/model/include" \
  "$root/tests/merge/fuzz_kineto.cpp" "$root"/merge/src/kineto_{reader,trace,align}.cpp "$root"/model/src/*.cpp \
  -lsimdjson -lz -o "$work/fuzz_kineto"
cd "$work"
start=$(date +%s)
status=0
./fuzz_kineto -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 corpus \
  2>fuzz.log || status=$?
end=$(date +%s)
grep -E '^stat::|^#[0-9]+.*DONE|SUMMARY|ERROR' fuzz.log | tail -12 || true
echo "fuzzed for $((end - start)) s of CPU on one core, corpus $(ls corpus | wc -l) inputs; crashes: $(ls crash-* 2>/dev/null | wc -l)"
exit $status
