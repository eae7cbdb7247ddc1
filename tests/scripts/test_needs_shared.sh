#!/usr/bin/env bash
# tests/support/needs_shared.sh: without the shared folder a test is
# skipped (77) with a line naming what it misses; with the folder but not
# the file it fails; with both it runs the test, passing its status on.
set -euo pipefail
wrapper=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
status=0
out=$("$wrapper" "$work/absent" tools/checker.py -- true) || status=$?
[ "$status" -eq 77 ] || fail "an absent folder gave status $status, not 77"
grep -q "needs tools/checker.py from the shared/ folder beside the project, not found at $work/absent" <<<"$out" ||
  fail "the skip does not say what is missing and where: $out"
mkdir -p "$work/shared/tools"
status=0
"$wrapper" "$work/shared" tools/checker.py -- true 2>"$work/err" || status=$?
[ "$status" -eq 1 ] || fail "a folder without the file gave status $status, not 1"
grep -q "$work/shared/tools/checker.py is missing" "$work/err" || fail "the failure does not name the file: $(cat "$work/err")"
touch "$work/shared/tools/checker.py"
status=0
"$wrapper" "$work/shared" tools/checker.py -- sh -c 'exit 3' || status=$?
[ "$status" -eq 3 ] || fail "the test's own status 3 came back as $status"
echo "needs_shared.sh: skips, fails and runs as it should"
