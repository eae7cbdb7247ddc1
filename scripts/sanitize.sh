#!/usr/bin/env bash
# scripts/sanitize.sh [asan|tsan|all]: the sanitizer builds (docs/testing.md).
#   asan: everything built with AddressSanitizer and UndefinedBehaviorSanitizer
#         in build-asan/, then the unit tests (ctest -L unit) and the rest of
#         the suite (ctest -LE unit).
#   tsan: the agent's in-process tests (the recorder, the flusher, CUDA and
#         NCCL capture) built with ThreadSanitizer in build-tsan/ and run.
#   all (the default): both.
# Prints how long each phase took; exits non-zero when any phase failed.
# Needs what scripts/test.sh needs; GCC's sanitizer runtimes come with it.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
which=${1:-all}
case $which in
  asan | tsan | all) ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
timings=() failed=()

# phase NAME COMMAND...: runs COMMAND, timed; false when it failed.
phase() {
  local name=$1 start=$SECONDS status=0
  shift
  echo "=== $name: $*"
  "$@" || status=$?
  local result=ok
  [ $status -eq 0 ] || { result="FAILED (exit status $status)"; failed+=("$name"); }
  timings+=("$(printf '%-18s %6d s  %s' "$name" $((SECONDS - start)) "$result")")
  return $status
}

# sanitized NAME SANITIZERS BUILD_TARGET CTEST_ARGS...: configure, build, test.
sanitized() {
  local name=$1 sanitizers=$2 target=$3 dir=$root/build-$1
  shift 3
  phase "$name configure" cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRANKSCOPE_SANITIZE="$sanitizers" -DRANKSCOPE_BUILD_BENCH=OFF || return
  phase "$name build" cmake --build "$dir" -j"$jobs" --target "$target" || return
  while [ $# -gt 0 ]; do  # one ctest run per argument, its words split
    # shellcheck disable=SC2086
    phase "$name ctest $1" ctest --test-dir "$dir" --output-on-failure -j"$jobs" $1
    shift
  done
}

if [ "$which" != tsan ]; then
  sanitized asan "address;undefined" all "-L unit" "-LE unit"
fi
if [ "$which" != asan ]; then
  sanitized tsan thread agent_unit_tests "-L unit -R ^agent\."
fi

echo "=== sanitizer builds, $(date -u +%Y-%m-%d), $(nproc) cores:"
printf '%s\n' "${timings[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
