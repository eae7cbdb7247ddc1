#!/usr/bin/env bash
# scripts/make-bundle.sh [OUTPUT.tar.xz]: builds rankscope (with CUDA capture
# when the toolkit is here), installs it into a staging folder and packs it with
# Open MPI's runtime into one relocatable archive (scripts/make-bundle.py), for a
# machine without Open MPI or HDF5. Default output: build/rankscope-bundle.tar.xz.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
output=$(realpath -m "${1:-$root/build/rankscope-bundle.tar.xz}")
"$root/scripts/setup-deps.sh" --bundle
"$root/scripts/build.sh"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cmake --install "$root/build" --prefix "$stage" --strip >/dev/null
mkdir -p "$(dirname "$output")"
python3 "$root/scripts/make-bundle.py" "$stage" "$output"
