#!/usr/bin/env bash
# bench/metadata_flips.sh [BUILD] [OLD_TIMELINE...]: flips every byte of HDF5
# metadata (one byte per copy, XOR with a random non-zero value) of three
# timelines written by this build (a GPU-like job, a synthetic job with a
# dead rank, an imported torch.profiler job), and of any OLD_TIMELINE given
# (written before timelines took HDF5's 1.10 format), and reads each copy as
# `info --check` and `report` do (tests/timeline/metadata_flips.cpp).
# Target: 0 crashes, 0 hangs, 0 silent changes on this build's timelines.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
shift || true
rankscope=$build/coordinator/rankscope
flips=$build/tests/metadata_flips
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# metadata flips: $(date -u +%F), $(nproc) cores, $(git -C "$root" rev-parse --short HEAD)"
"$(find "$build" -name make_export_fixture -type f | head -1)" fixture
"$build/tests/support/make_synthetic_shards" synthetic 4 300 --seed 7 --shared-collectives 1 --messages 1 --dead 3 >/dev/null
python3 "$root/bench/make_kineto_trace.py" traces --ranks 2 --events-per-rank 2000 >/dev/null
"$rankscope" merge fixture -o fixture.h5 >/dev/null
"$rankscope" merge synthetic -o synthetic.h5 >/dev/null
"$rankscope" import-kineto traces -o imported.h5 >/dev/null
status=0
for timeline in fixture.h5 synthetic.h5 imported.h5 "$@"; do
  start=$(date +%s)
  "$flips" "$timeline" || status=1
  echo "  ($(( $(date +%s) - start )) s)"
done
exit $status
