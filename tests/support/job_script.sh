# Sourced by the test scripts that run a job in the background: a work
# folder of their own (the current folder), removed at exit with the job
# (its pid in $job) killed if still running; fail MESSAGE ends the test.
set -euo pipefail
work=$(mktemp -d)
job=
cleanup() { [ -n "$job" ] && kill -9 "$job" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
