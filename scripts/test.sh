#!/usr/bin/env bash
# Installs what is missing, builds with CUDA capture (when the toolkit is there)
# and without it, and runs the whole test suite on the first build and all
# but the `hosts` and `torch` labels on the second: those run the same
# capture as the agent.* tests that both builds run, for minutes more (CI
# has 90 minutes for both builds and both runs). Ends with what was skipped
# and why. Tests of the outside material in ../shared/ (label
# `shared`) are skipped in a clone alone; where ../shared/ is there, as in
# CI, a skip of one of them fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh" --tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
summary=""
for variant in "build:AUTO" "build-nocuda:OFF"; do
  dir=$root/${variant%%:*}
  leave_out=()
  # By name, not by -LE: a caller's own -LE would be ANDed with it.
  [ "$variant" = "build-nocuda:OFF" ] && leave_out=(-E '^(hosts|torch)\.')
  echo "=== ${variant%%:*} (RANKSCOPE_WITH_CUDA=${variant##*:}) ${leave_out[*]}"
  "$root/scripts/build.sh" "$dir" -DRANKSCOPE_WITH_CUDA="${variant##*:}"
  (cd "$dir" && ctest --output-on-failure -j"$(nproc)" "${leave_out[@]}" "$@") | tee "$dir/ctest.log" || status=1
  # CTest lists them as "  123 - name (Skipped)" after "did not run".
  skipped=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$dir/ctest.log")
  shared_tests=$(cd "$dir" && ctest -N -L '^shared$' | sed -n 's/^ *Test *#[0-9]*: //p')
  summary+="${variant%%:*}: $(printf '%s' "$skipped" | grep -c . || true) skipped"
  for test in $skipped; do
    summary+=$'\n'"  $test"
    if [ -d "$root/../shared" ] && grep -qx "$test" <<<"$shared_tests"; then
      summary+=" (uses ../shared/, which is there: a failure)"
      status=1
    fi
  done
  summary+=$'\n'
done
echo "=== skipped tests (each says why in its output above)"
printf '%s' "$summary"
exit $status
