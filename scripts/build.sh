#!/usr/bin/env bash
# scripts/build.sh [--target T]... [BUILD_DIR] [extra cmake arguments...]:
# configure (until a configure has succeeded there) and build everything, or
# only the targets named (and what they need).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
targets=()
while [ "${1:-}" = --target ]; do
  targets+=(--target "$2")
  shift 2
done
build=${1:-$root/build}
shift || true
if [ ! -f "$build/Makefile" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
