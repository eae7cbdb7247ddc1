#!/usr/bin/env bash
# bench/import_names.sh [RANKSCOPE] [NAMES]: what distinct names cost import-kineto.
#
# Writes two one-rank Kineto traces of NAMES + 1 CPU ops each (default 1,000,000), alike
# but for their names: in one every op has a name of its own (43 bytes: a job whose
# kernels or ranges are named per instance), in the other all share one. Imports each,
# one after the other, with /usr/bin/time -v, and prints wall seconds and peak RSS of
# both and their ratios: the cost of a job's string table, which the timeline keeps whole.
set -euo pipefail
rankscope=${1:-build/coordinator/rankscope}
names=${2:-1000000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/distinct" "$work/same"
python3 - "$work" "$names" <<'PY'
import sys
work, n = sys.argv[1], int(sys.argv[2])
for kind in ("distinct", "same"):
    with open(f"{work}/{kind}/rank-0.json", "w") as f:
        f.write('{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":1},'
                '"baseTimeNanoseconds":1711964646000000000,"traceEvents":[\n')
        for i in range(n):
            name = i if kind == "distinct" else 0
            f.write('{"ph":"X","cat":"cpu_op","name":"aten::op_with_a_long_enough_name_%07d","pid":1,"tid":1,'
                    '"ts":%d.000,"dur":1.0},\n' % (name, 2 * i))
        f.write('{"ph":"X","cat":"cpu_op","name":"last","pid":1,"tid":1,"ts":%d.0,"dur":1.0}]}\n' % (2 * n + 2))
PY
declare -A seconds rss
for kind in distinct same; do
  /usr/bin/time -v "$rankscope" import-kineto "$work/$kind/rank-0.json" -o "$work/$kind.h5" >"$work/$kind.log" 2>&1
  seconds[$kind]=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): \(.*\)/\1/p' "$work/$kind.log" |
                   awk -F: '{print ($1 * 60 + $2)}')
  rss[$kind]=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/$kind.log")
  printf '%-8s %8.2f s  %8.1f MiB\n' "$kind" "${seconds[$kind]}" "$(echo "${rss[$kind]} / 1024" | bc -l)"
done
printf 'distinct / same: %.2fx the time, %.2fx the memory (%d names, %s)\n' \
  "$(echo "${seconds[distinct]} / ${seconds[same]}" | bc -l)" "$(echo "${rss[distinct]} / ${rss[same]}" | bc -l)" \
  "$names" "$(date -u +%F)"
