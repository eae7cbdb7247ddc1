#!/usr/bin/env bash
# scripts/git-hooks/commit-msg on messages it must take and messages it must
# refuse, each refusal saying why; and as git runs it, in a scratch repository.
# Usage: test_commit_msg.sh HOOK
set -euo pipefail
hook=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
long_word=$(printf 'https://example.org/%080d' 0)
body72=$(printf '%-71sx' 'a body line of exactly seventy-two characters')

takes() {  # NAME MESSAGE
  printf '%s' "$2" >"$work/msg"
  "$hook" "$work/msg" 2>"$work/err" || fail "$1: refused: $(cat "$work/err")"
}
refuses() {  # NAME WHY MESSAGE
  printf '%s' "$3" >"$work/msg"
  if "$hook" "$work/msg" 2>"$work/err"; then fail "$1: taken"; fi
  grep -q "$2" "$work/err" || fail "$1: refused without saying '$2': $(cat "$work/err")"
}

takes "a subject alone" $'report: share the ranks among MPI processes\n'
takes "subject and body" $'timeline: keep the lowest rows\n\nWhy, in a body.\n'"$body72"$'\n'
takes "a long URL alone on its line" $'docs: cite the source\n\nSee:\n'"$long_word"$'\n'
takes "git's comments and trailing blank lines" $'bench: figures\n\nbody\n\n# Please enter the commit message\n# ' \
  $'\n\n'
takes "a fixup" $'fixup! report: share the ranks among MPI processes\n'
takes "a merge" $'Merge branch \'topic\' into main, whatever its length may be beyond seventy-two characters\n'
refuses "no component" "is not 'component: summary'" $'Share the ranks among MPI processes\n'
refuses "a capital component" "is not 'component: summary'" $'Report: share the ranks\n'
refuses "a long subject" "more than 72" "$(printf 'report: %070d' 0)"$'\n'
refuses "no blank second line" "second line is not blank" $'report: share\nthe ranks\n'
refuses "a long body line" "line 3 has 73 characters" $'report: share\n\n'"${body72}y"$'\n'

# As git runs it: a commit with a paragraph for a subject is refused, one
# as the hook wants is made.
git init -q "$work/repo"
cd "$work/repo"
mkdir -p hooks
cp "$hook" hooks/commit-msg
git config core.hooksPath hooks
git config user.email test@example.org
git config user.name test
echo a >file
git add file
if git commit -q -m "$(printf 'A subject that runs on and on, past seventy-two characters, as a paragraph would')" 2>"$work/err"; then
  fail "git committed a paragraph for a subject"
fi
grep -q "commit-msg:" "$work/err" || fail "git's refusal does not come from the hook: $(cat "$work/err")"
git commit -q -m "tests: a subject as the hook wants" -m "A body." || fail "git refused a good message"
echo "commit-msg: every message judged as expected"
