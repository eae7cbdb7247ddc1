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
# scripts/test.sh builds the tree twice, with and without CUDA capture: where
# ccache is installed, the second build takes the first's objects of every
# file the choice leaves alone. Paths under the tree are hashed relative to
# it and the build folder is not hashed, so that both builds (and clones
# elsewhere) share them.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
fi
if [ ! -f "$build/Makefile" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@"
fi
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
