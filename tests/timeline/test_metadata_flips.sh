#!/usr/bin/env bash
# One flipped byte of a new timeline's HDF5 metadata is refused or reported
# as damage by every reading command, never trusted: no crash, no hang, no
# figure changed in silence (tests/timeline/metadata_flips.cpp). A sample of
# the metadata bytes of two timelines; bench/metadata_flips.sh flips all.
# Usage: test_metadata_flips.sh RANKSCOPE MAKE_EXPORT_FIXTURE MAKE_SYNTHETIC_SHARDS METADATA_FLIPS
set -euo pipefail
rankscope=$1 make_fixture=$2 make_shards=$3 metadata_flips=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$make_fixture" fixture
"$make_shards" synthetic 4 300 --seed 7 --shared-collectives 1 --messages 1 --dead 3
for job in fixture synthetic; do
  "$rankscope" merge "$job" -o "$job.h5" >/dev/null
  "$metadata_flips" "$job.h5" --count 1000 --seed 11
done
