#!/usr/bin/env bash
# needs_shared.sh SHARED_DIR PATH... -- COMMAND [ARGS...]: runs COMMAND when
# every PATH (relative to SHARED_DIR, the project's outside material beside
# the clone: docs/testing.md, "Outside material") is there. Without the
# folder, as in a clone alone, the test is skipped (CTest's skip code 77)
# with a line that names what is missing and where it was looked for. With
# the folder but without one of the paths, as would be a CI machine that
# lost a file, the test fails: a skip there would hide it.
set -euo pipefail
shared=$1
shift
needed=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  needed+=("$1")
  shift
done
[ "${1:-}" = -- ] || { echo "usage: needs_shared.sh SHARED_DIR PATH... -- COMMAND [ARGS...]" >&2; exit 2; }
shift
if [ ! -d "$shared" ]; then
  echo "SKIP: this test needs ${needed[*]} from the shared/ folder beside the project, not found at $shared" \
    "(a clone alone runs every other test; docs/testing.md, \"Outside material\")"
  exit 77
fi
for path in "${needed[@]}"; do
  [ -e "$shared/$path" ] || { echo "FAIL: $shared/$path is missing (the shared/ folder is there)" >&2; exit 1; }
done
exec "$@"
