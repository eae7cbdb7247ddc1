#!/usr/bin/env bash
# Every option of every subcommand, as `rankscope CMD --help` lists it, is
# named in docs/cli.md or in the command's own guide or reference.
# usage: test_options_reference.sh RANKSCOPE DOCS_DIR
set -euo pipefail
rankscope=$1 docs=$2
declare -A documents=(
  [run]="run.md agent-reference.md windows-and-hangs.md"
  [trigger]="windows-and-hangs.md"
  [merge]="clocksync.md"
  [import-kineto]="import.md"
  [info]=""
  [report]="report.md report-reference.md"
  [export]="export.md"
  [diff]="diff.md"
  [accept]="accept.md accept-reference.md"
)
commands=$("$rankscope" --help | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}')
[[ -n $commands ]] || { echo "no subcommands in rankscope --help"; exit 1; }
undocumented=0
for command in $commands; do
  [[ -v documents[$command] ]] || { echo "$command: no reference document is known for it"; undocumented=$((undocumented + 1)); continue; }
  files=("$docs/cli.md")
  for document in ${documents[$command]}; do files+=("$docs/$document"); done
  for option in $("$rankscope" "$command" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
    [[ $option == --help ]] && continue
    if ! grep -qF -- "$option" "${files[@]}"; then
      echo "$command: $option is in its --help but not in ${files[*]#$docs/}"
      undocumented=$((undocumented + 1))
    fi
  done
done
echo "$undocumented options undocumented"
[[ $undocumented -eq 0 ]]
