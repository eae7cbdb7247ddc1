#!/usr/bin/env bash
# tests/rank_agent/test_environment_doc.sh RANKSCOPE DOC: the table of the
# variables the rank agent reads in DOC (its section "The environment it
# uses") is the table `rankscope info --environment` prints, line for line.
set -euo pipefail
rankscope=$1 doc=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
printed=$("$rankscope" info --environment) || fail "rankscope info --environment exited with $?"
[ -n "$printed" ] || fail "rankscope info --environment printed nothing"
documented=$(awk '/^## The environment it uses/ {in_section = 1; next}
                  in_section && /^## / {exit}
                  in_section && /^\|/ {in_table = 1; print; next}
                  in_table {exit}' "$doc")
[ -n "$documented" ] || fail "$doc: no table under '## The environment it uses'"
if [ "$printed" != "$documented" ]; then
  diff <(echo "$documented") <(echo "$printed") >&2 || true
  fail "$doc: the environment table differs from rankscope info --environment (< the document, > the program)"
fi
# Every variable the agent's headers name is in the table.
root=$(cd "$(dirname "$0")/../.." && pwd)
for variable in $(grep -ho '"RANKSCOPE_[A-Z0-9_]*"' "$root"/rank_agent/include/rankscope/rank_agent/*.h | tr -d '"' | sort -u); do
  grep -q "\`$variable\`" <<<"$printed" || fail "$variable is named in rank_agent's headers but not in the table"
done
echo "PASS: $(grep -c '^| `' <<<"$printed") variables, documented as printed"
