#!/usr/bin/env bash
# `rankscope info --json` and `rankscope report --format json` on two fixed
# timelines, byte for byte against tests/coordinator/golden/: a GPU-like job
# of four steps with NCCL and MPI collectives (the export fixture), and a
# synthetic job with point-to-point messages and a dead rank. A change that
# moves any figure or key shows here; when it is meant, rerun with
# --update and review the diff of the golden files. Each report is written
# again by MPIEXEC -n 3 (the processes share the ranks' reading), in every
# format and with --hta-compat: byte for byte what one process writes.
# Usage: test_golden.sh RANKSCOPE MAKE_EXPORT_FIXTURE MAKE_SYNTHETIC_SHARDS GOLDEN_DIR MPIEXEC [--update]
set -euo pipefail
rankscope=$1 make_fixture=$2 make_shards=$3 golden=$4 mpiexec=$5 update=${6:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # the outputs name the timeline as given: job.h5, wherever the test runs

"$make_fixture" fixture
"$make_shards" synthetic 4 300 --seed 7 --shared-collectives 1 --messages 1 --dead 3
status=0
for job in fixture synthetic; do
  "$rankscope" merge "$job" -o job.h5 >/dev/null
  "$rankscope" info --json job.h5 >"$job.info.json"
  "$rankscope" report --format json job.h5 >"$job.report.json"
  for format in json text html; do
    "$rankscope" report -f --format "$format" job.h5 -o "alone.$format"
    "$mpiexec" -n 3 "$rankscope" report -f --format "$format" job.h5 -o "shared.$format"
    cmp "alone.$format" "shared.$format" ||
      { echo "FAIL: $job: the $format report of 3 processes differs from one process's" >&2; status=1; }
  done
  # HTA's window comes from the first pass, which the processes share too.
  "$rankscope" report -f --hta-compat --format json job.h5 -o alone.hta.json
  "$mpiexec" -n 3 "$rankscope" report -f --hta-compat --format json job.h5 -o shared.hta.json
  cmp alone.hta.json shared.hta.json ||
    { echo "FAIL: $job: the --hta-compat report of 3 processes differs from one process's" >&2; status=1; }
  rm job.h5
  for output in "$job.info.json" "$job.report.json"; do
    # One key per line, so that a difference names the figure that moved.
    python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), indent=1))' "$output" >"$output.pretty"
    if [ "$update" = --update ]; then
      cp "$output.pretty" "$golden/$output"
    elif ! diff -u "$golden/$output" "$output.pretty"; then
      echo "FAIL: $output differs from $golden/$output (above; rerun with --update if the change is meant)" >&2
      status=1
    fi
  done
done
[ $status -ne 0 ] || echo "info and report JSON match the golden files"
exit $status
