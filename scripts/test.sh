#!/usr/bin/env bash
# Installs what is missing, builds with CUDA capture (when the toolkit is there)
# and without it, and runs the whole test suite on both builds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh" --tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
for variant in "build:AUTO" "build-nocuda:OFF"; do
  dir=$root/${variant%%:*}
  echo "=== ${variant%%:*} (RANKSCOPE_WITH_CUDA=${variant##*:})"
  "$root/scripts/build.sh" "$dir" -DRANKSCOPE_WITH_CUDA="${variant##*:}"
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" "$@") || status=1
done
exit $status
