#!/usr/bin/env bash
# No mistake on the command line destroys data: no command writes over one
# of its inputs, over a file that is not its own kind of output, or over an
# earlier output without --overwrite; two outputs never share a file; FIFOs
# are refused, not waited on; usage errors exit 2 naming the command; and
# nothing a command makes for itself (.partial files, the shards of an
# import, a run's shard folder) is left behind, a signal that ends it
# included.
# Usage: test_outputs.sh RANKSCOPE MAKE_SYNTHETIC_SHARDS MPIEXEC PYTHON MAKE_KINETO_TRACE
set -euo pipefail
rankscope=$1 make_shards=$2 mpiexec=$3 python=$4 make_trace=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect STATUS TEXT COMMAND...: COMMAND exits with STATUS, saying TEXT (a
# grep pattern) on stderr; within 20 s, so a command that waits forever fails.
expect() {
  local status=$1 text=$2
  shift 2
  local actual=0
  timeout 20 "$@" >out.txt 2>err.txt || actual=$?
  [ "$actual" -eq "$status" ] || { cat out.txt err.txt >&2; fail "$* exited $actual, not $status"; }
  grep -q -- "$text" err.txt || { cat err.txt >&2; fail "$*: no message like: $text"; }
}
# kept FILE remembers FILE as it is; unchanged FILE checks that it still is.
kept() { cp -a "$1" "$1.kept"; }
unchanged() { cmp -s "$1" "$1.kept" || fail "$1 was changed"; }

"$make_shards" shards 2 500 >/dev/null
"$rankscope" merge shards -o job.h5 >/dev/null
kept job.h5
kept shards/rank-00000.shard

echo "== an existing timeline is replaced only with --overwrite"
expect 1 "job.h5 (-o) exists and is a rankscope timeline: give --overwrite (-f) to replace it" \
  "$rankscope" merge shards -o job.h5
unchanged job.h5
# Under mpiexec every process refuses alike: one message, none left waiting.
expect 1 "job.h5 (-o) exists" "$mpiexec" -n 2 "$rankscope" merge shards -o job.h5
[ "$(grep -c "exists" err.txt)" -eq 1 ] || fail "the refusal was printed $(grep -c exists err.txt) times"
unchanged job.h5
"$rankscope" merge shards -o job.h5 --overwrite >/dev/null
"$rankscope" merge shards -o job.h5 -f >/dev/null
"$rankscope" info job.h5 >/dev/null
kept job.h5

echo "== inputs are never outputs"
expect 1 "shards/rank-00000.shard (-o) is an input of this command: it is not written over" \
  "$rankscope" merge shards -o shards/rank-00000.shard --overwrite
unchanged shards/rank-00000.shard
ln -s shards/rank-00000.shard link.h5
expect 1 "link.h5 (-o) is the input shards/rank-00000.shard of this command" "$rankscope" merge shards -o link.h5 -f
unchanged shards/rank-00000.shard
expect 1 "job.h5 (-o) is an input of this command" "$rankscope" report job.h5 -o job.h5 --overwrite
unchanged job.h5
expect 1 "job.h5 (--perfetto) is an input of this command" "$rankscope" export job.h5 --perfetto job.h5 -f
unchanged job.h5
expect 1 "./job.h5 (--chrome) is the input job.h5 of this command" "$rankscope" export job.h5 --chrome ./job.h5 -f
unchanged job.h5

echo "== files that are not rankscope's own kind of output are never replaced"
echo "my notes" >notes.txt
kept notes.txt
expect 1 "notes.txt (-o) exists and is not a rankscope timeline: it is not replaced" \
  "$rankscope" merge shards -o notes.txt --overwrite
expect 1 "notes.txt (-o) exists and is not a rankscope text report" "$rankscope" report job.h5 -o notes.txt -f
expect 1 "notes.txt (--chrome) exists and is not a Chrome JSON trace" "$rankscope" export job.h5 --chrome notes.txt -f
expect 2 "rankscope run: error: notes.txt (-o) exists and is not a rankscope timeline" \
  "$rankscope" run -o notes.txt -f -- true
unchanged notes.txt
mkdir folder
expect 1 "folder (-o) exists and is a folder, not a rankscope timeline" "$rankscope" merge shards -o folder -f
# An empty file holds nothing to lose.
: >empty.json
expect 1 "empty.json (-o) exists and is empty: give --overwrite" "$rankscope" report job.h5 --format json -o empty.json
"$rankscope" report job.h5 --format json -o empty.json -f 2>/dev/null
"$python" -c 'import json, sys; json.load(open("empty.json"))'

echo "== each output of rankscope is recognised, and only as its own kind"
for format in text:text json:JSON html:HTML; do
  name=${format#*:} format=${format%:*}
  "$rankscope" report job.h5 --format "$format" -o "report.$format" 2>/dev/null
  expect 1 "report.$format (-o) exists and is a rankscope $name report" \
    "$rankscope" report job.h5 --format "$format" -o "report.$format"
  "$rankscope" report job.h5 --format "$format" -o "report.$format" -f 2>/dev/null
done
expect 1 "report.text (-o) exists and is not a rankscope JSON report" \
  "$rankscope" report job.h5 --format json -o report.text -f
"$rankscope" export job.h5 --perfetto job.pftrace --chrome job.json >/dev/null
kept job.pftrace
expect 1 "job.pftrace (--perfetto) exists and is a Perfetto trace written by rankscope: give --overwrite" \
  "$rankscope" export job.h5 --perfetto job.pftrace
expect 1 "job.json (--perfetto) exists and is not a Perfetto trace" "$rankscope" export job.h5 --perfetto job.json -f
expect 1 "job.pftrace (--chrome) exists and is not a Chrome JSON trace" "$rankscope" export job.h5 --chrome job.pftrace -f
expect 1 "job.pftrace (-o) exists and is not a rankscope timeline" "$rankscope" merge shards -o job.pftrace -f
unchanged job.pftrace
"$rankscope" export job.h5 --perfetto job.pftrace --chrome job.json -f >/dev/null

echo "== two outputs never share a file"
expect 1 "\-\-perfetto and --chrome both name ./both: each output needs a file of its own" \
  "$rankscope" export job.h5 --perfetto both --chrome ./both
[ ! -e both ] || fail "export wrote one output over the other"

echo "== accept: every output and input is checked before anything is measured"
# Refused at once (a measurement would take minutes, and its verdict would be
# lost or the timeline replaced by the summary).
expect 1 "\-o and --timeline both name acc.out: each output needs a file of its own" \
  "$rankscope" accept --level quick -o acc.out --timeline acc.out
expect 1 "\-o and --save-baseline both name acc.out: each output needs a file of its own" \
  "$rankscope" accept --level quick -o acc.out --save-baseline acc.out -f
[ ! -e acc.out ] || fail "accept wrote acc.out"
printf 'rankscope-accept-baseline 1\nlevel quick\ncompute_gflops 3\n' >acc.baseline
kept acc.baseline
expect 1 "acc.baseline (--save-baseline) is an input of this command: it is not written over" \
  "$rankscope" accept --level quick --baseline acc.baseline --save-baseline acc.baseline -f
expect 1 "acc.baseline (--timeline) is an input of this command" \
  "$rankscope" accept --level quick --baseline acc.baseline --timeline acc.baseline -f
unchanged acc.baseline

echo "== imports: traces are inputs, side folders are the import's own"
"$python" "$make_trace" traces --ranks 2 --events-per-rank 2000 >/dev/null
kept traces/rank-0.json
expect 1 "traces/rank-0.json (-o) is an input of this command" \
  "$rankscope" import-kineto traces -o traces/rank-0.json --overwrite
unchanged traces/rank-0.json
mkdir job2.h5.import job2.h5.import-keep
echo "someone's" >job2.h5.import/data
"$rankscope" import-kineto traces -o job2.h5 >/dev/null
expect 1 "job2.h5 (-o) exists and is a rankscope timeline" "$rankscope" import-kineto traces -o job2.h5
"$rankscope" import-kineto traces -o job2.h5 -f >/dev/null
[ -f job2.h5.import/data ] && [ -d job2.h5.import-keep ] || fail "the import removed a folder it did not make"
[ "$(ls -d job2.h5.import* | wc -l)" -eq 2 ] || fail "the import left a folder: $(ls -d job2.h5.import*)"

echo "== reading commands leave their input byte for byte; writing ones leave /collectives"
# The matched collectives are written where the timeline is made (merge,
# import-kineto, run), before it takes its name: a report of a timeline that
# the user may not (or must not) write is complete.
rows() { h5ls "$1/collectives/$2" | sed -n 's/.*Dataset {\([0-9]*\)}.*/\1/p'; }
[ -n "$(rows job.h5 instances)" ] || fail "the merged job.h5 has no /collectives table"
[ "$(rows job2.h5 instances)" -gt 0 ] || fail "the imported job2.h5 has no matched collectives"
[ "$(rows job2.h5 participants)" -gt 0 ] || fail "the imported job2.h5 has no collective participants"
for timeline in job.h5 job2.h5; do
  kept "$timeline"
  "$rankscope" report "$timeline" >/dev/null
  "$rankscope" report "$timeline" --format json --hta-compat >/dev/null
  "$rankscope" report "$timeline" --format html -o "read.$timeline.html" --save-baseline "read.$timeline.baseline"
  "$rankscope" info "$timeline" --check >/dev/null
  "$rankscope" export "$timeline" --perfetto "read.$timeline.pftrace" >/dev/null
  "$rankscope" diff "$timeline" "$timeline" >/dev/null || true
  unchanged "$timeline"
done

echo "== FIFOs, devices and folders are refused as inputs, not waited on"
mkfifo fifo.h5 fifo.shard fifo.json
expect 1 "cannot read fifo.h5: it is a FIFO (named pipe), not a regular file" "$rankscope" info fifo.h5
expect 1 "cannot read fifo.h5: it is a FIFO" "$rankscope" report fifo.h5
expect 1 "cannot read fifo.h5: it is a FIFO" "$rankscope" export fifo.h5 --chrome x.json
expect 1 "cannot read fifo.shard: it is a FIFO" "$rankscope" merge fifo.shard -o x.h5
expect 1 "cannot read fifo.json: it is a FIFO" "$rankscope" import-kineto fifo.json -o x.h5
expect 1 "cannot read /dev/zero: it is a character device" "$rankscope" merge /dev/zero -o x.h5
expect 1 "cannot read folder: it is a folder" "$rankscope" info folder
[ ! -e x.h5 ] && [ ! -e x.json ] || fail "a refused command wrote its output"

echo "== outputs that cannot be written are refused before any work"
ln -s /nonexistent/folder/x.h5 dangling.h5
expect 1 "dangling.h5 (-o) is a symbolic link to /nonexistent/folder/x.h5, which does not exist" \
  "$rankscope" merge shards -o dangling.h5
long=$(printf 'l%.0s' $(seq 250)).h5
expect 1 "a name of 253 bytes in a path of 253 is too long once rankscope adds 14 bytes" "$rankscope" merge shards -o "$long"
# A run finds it before starting the application (which would print "started"); its own errors exit 2.
expect 2 "is too long once rankscope adds" "$rankscope" run -o "$long" -- sh -c 'echo started'
! grep -q started out.txt || fail "the application ran before a too-long -o was refused"
# Event buffers the kernel will not map (here under ulimit -v) would leave every rank capturing nothing.
expect 2 "\-\-buffer-mb 4096: this node will not map that much for one rank" \
  bash -c 'ulimit -v 3000000 && exec "$0" run --buffer-mb 4096 -o buffers.h5 -- sh -c "echo started"' "$rankscope"
! grep -q started out.txt || fail "the application ran with event buffers that cannot be mapped"
[ ! -e buffers.h5.shards ] || fail "a refused run made a shard folder"

echo "== commands at once on one host do not trip over each other's MPI files"
# Lone processes share one Open MPI session folder name, where MPI-IO's
# shared file pointers kept a file named after the output: four merges into
# same.h5 in four folders printed "unable to open file for mmap".
for i in 1 2 3 4; do mkdir -p "at-once-$i"; "$rankscope" merge shards -o "at-once-$i/same.h5" >"at-once-$i/log" 2>&1 & done
wait
for i in 1 2 3 4; do
  [ -f "at-once-$i/same.h5" ] && ! grep -q "mmap\|sharedfp" "at-once-$i/log" || { cat "at-once-$i/log"; fail "merge $i of four at once"; }
done

echo "== a shard folder no running job writes: a trigger says so"
mkdir left.h5.shards
cp shards/rank-00000.shard left.h5.shards/
expect 1 "no running job writes left.h5.shards: no process holds any of its shards" "$rankscope" trigger left.h5 start
[ ! -e left.h5.shards/control ] || fail "a trigger for no running job was written"

echo "== usage errors: status 2, named after their command"
expect 2 "rankscope: unknown command 'bogus' (commands: merge, import-kineto, info, report, diff, export, run, accept, trigger)" \
  "$rankscope" bogus
expect 2 "rankscope report: --format: bogus not in {text,json,html}" "$rankscope" report job.h5 --format bogus
expect 2 "rankscope export: --time: 'nan:inf' is not START:END" "$rankscope" export job.h5 --perfetto x.pftrace --time nan:inf
expect 2 "rankscope run: no application given" "$rankscope" run -o x.h5 --
expect 2 "rankscope run: no application given" "$rankscope" run -o x.h5
expect 2 "rankscope run: --output: an empty path names no file" "$rankscope" run -o '' -- true
[ ! -e .shards ] || fail "run -o '' made a shard folder"
expect 2 "rankscope report: --output: an empty path names no file" "$rankscope" report job.h5 -o ''
expect 2 "rankscope merge: shards: an empty path names no file" "$rankscope" merge '' -o x.h5
for interval in inf nan -1 0 0.01 1e9 ten; do
  expect 2 "rankscope run: --sync-interval: Value $interval not in range \[0.1 - 86400\]" \
    "$rankscope" run --sync-interval "$interval" -- true
done
for timeout in -1 nan 1e6 ten; do
  expect 2 "rankscope run: --hang-timeout: Value $timeout not in range \[0 - 86400\]" \
    "$rankscope" run --hang-timeout "$timeout" -- true
done
expect 2 "rankscope run: --hang-timeout: Value 0.5 is neither 0 (off) nor 1 s or more" \
  "$rankscope" run --hang-timeout 0.5 -- true
expect 2 "rankscope run: --hang-action: stop not in {report,abort}" "$rankscope" run --hang-action stop -- true
for size in -1 0 nan inf 65537; do
  expect 2 "rankscope run: --buffer-mb" "$rankscope" run --buffer-mb "$size" -- true
done
for blocks in -1 0 nan 1e3; do
  expect 2 "rankscope merge: --block-events" "$rankscope" merge shards -o x.h5 --block-events "$blocks"
done
expect 2 "rankscope merge: --check-memory-mb" "$rankscope" merge shards -o x.h5 --check-memory-mb -1
expect 2 "rankscope import-kineto: --threads" "$rankscope" import-kineto traces -o x.h5 --threads -1
expect 2 "rankscope import-kineto: --threads" "$rankscope" import-kineto traces -o x.h5 --threads 100000
expect 2 "rankscope export: --warn-size-mb" "$rankscope" export job.h5 --chrome x.json --warn-size-mb -1
expect 2 "rankscope export: --warn-size-mb" "$rankscope" export job.h5 --chrome x.json --warn-size-mb 1e300
expect 2 "rankscope run: --capture: names no capture source (known: mpi, nvtx, cuda, nccl, python)" \
  "$rankscope" run --capture '' -o x.h5 -- true
for ranks in '' 3-1 a 0-; do
  expect 2 "rankscope export: --ranks: '$ranks' is not a list of ranks like 0-3,8" \
    "$rankscope" export job.h5 --chrome x.json --ranks "$ranks"
done
expect 2 "rankscope import-kineto: --comm-kernel: \"\" is empty: it would match every kernel" \
  "$rankscope" import-kineto traces -o x.h5 --comm-kernel ''
expect 2 "rankscope import-kineto: --comm-kernel: \"(\" is not a regular expression" \
  "$rankscope" import-kineto traces -o x.h5 --comm-kernel '('
[ ! -e x.h5 ] && [ ! -e x.json ] && [ ! -e x.h5.shards ] || fail "a usage error left an output"
"$rankscope" --version >/dev/null || fail "--version failed"
"$rankscope" run --help >/dev/null || fail "run --help failed"

echo "== a run never writes over what an earlier job kept, nor over an -o that appeared meanwhile"
# Shards an earlier job left (it ended without MPI_Finalize): written by no
# rank of this job, with no mark of it, or with another job's.
"$make_shards" kept.h5.shards 2 10 >/dev/null
kept kept.h5.shards/rank-00001.shard
expect 2 "cannot write the shards to $work/kept.h5.shards: it holds the shards of an earlier job, its only record; merge them with \`rankscope merge $work/kept.h5.shards -o FILE\`" \
  "$rankscope" run -o kept.h5 -- true
echo -n "openmpi:1" >kept.h5.shards/job
expect 2 "it holds the shards of an earlier job (openmpi:1)" "$mpiexec" -n 2 "$rankscope" run -o kept.h5 -- true
unchanged kept.h5.shards/rank-00001.shard
[ ! -e kept.h5 ] || fail "a refused run wrote its timeline"
# The program's status stays its own (0) when its timeline is not written.
expect 0 "appeared.h5 appeared while it was written, and is not replaced" \
  "$rankscope" run --mode sidecar -o appeared.h5 -- sh -c 'echo mine >appeared.h5'
[ "$(cat appeared.h5)" = mine ] || fail "sidecar: the file made while the job ran was written over"
[ -e appeared.h5.shards/rank-00000.shard ] || fail "sidecar: the shards were not kept for merge"
rm -rf appeared.h5 appeared.h5.shards
expect 0 "appeared.h5 (-o) exists and is not a rankscope timeline: it is not replaced" "$rankscope" run --mode inprocess -o appeared.h5 -- \
  /usr/bin/python3 -c "from mpi4py import MPI; open('appeared.h5', 'w').write('mine')"
[ "$(cat appeared.h5)" = mine ] || fail "inprocess: the file made while the job ran was written over"
[ -e appeared.h5.shards/rank-00000.shard ] || fail "inprocess: the shards were not kept for merge"
rm -rf appeared.h5 appeared.h5.shards
expect 2 "newdir/ (-o) names a folder (it ends in /), not a file" "$rankscope" run -o newdir/ -- true
[ ! -e newdir ] || fail "run -o newdir/ made a folder"
# A timeline that could not be written is said, and the status stays the program's.
expect 3 "writing the timeline failed" "$rankscope" run --mode sidecar -o gone.h5 -- sh -c 'sleep 0.5; rm -r gone.h5.shards; exit 3'
expect 0 "the application ended without calling MPI_Finalize on every rank (exit status 0)" \
  "$rankscope" run --mode inprocess -o unfinished.h5 -- true
rm -rf unfinished.h5.shards

echo "== a run whose application cannot start says so once, and leaves no shard folder"
for mode in sidecar inprocess; do
  expect 127 "cannot run ./no-such-program" "$rankscope" run --mode "$mode" -o never.h5 -- ./no-such-program
  [ ! -e never.h5.shards ] || fail "$mode: the empty shard folder was left behind"
  [ "$(grep -vc "mode (as asked); timeline never.h5$" err.txt)" -eq 1 ] ||
    { cat err.txt >&2; fail "$mode: more was said than that the program cannot run"; }
done
expect 127 "cannot run ./no-such-program" "$mpiexec" -n 2 "$rankscope" run --mode sidecar -o never.h5 -- ./no-such-program
[ ! -e never.h5.shards ] || fail "2 sidecars: the empty shard folder was left behind"
! grep -q "clock measurements\|timeline failed\|wrote a shard" err.txt || { cat err.txt >&2; fail "2 sidecars: errors after cannot run"; }

echo "== a signal leaves no temporary file or folder behind"
# interrupted PATTERN COMMAND...: COMMAND is stopped once a path matching
# PATTERN exists, sent SIGTERM, and must end by it leaving no such path.
interrupted() {
  local pattern=$1
  shift
  "$@" >/dev/null 2>&1 &
  local pid=$! status=0
  until compgen -G "$pattern" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail "$*: ended before $pattern existed"
    sleep 0.002
  done
  kill -STOP "$pid"
  compgen -G "$pattern" >/dev/null || fail "$*: ended before it could be stopped (too little work)"
  kill -TERM "$pid"
  kill -CONT "$pid"
  wait "$pid" || status=$?
  [ "$status" -eq $((128 + 15)) ] || fail "$*: exited $status, not by SIGTERM"
  ! compgen -G "$pattern" >/dev/null || fail "$*: left $(compgen -G "$pattern")"
}
"$make_shards" big 2 500000 >/dev/null
interrupted "big.h5.partial" "$rankscope" merge big -o big.h5
"$rankscope" merge big -o big.h5 >/dev/null
rm -r big
interrupted "big.pftrace.partial" "$rankscope" export big.h5 --perfetto big.pftrace --warn-size-mb 100000
"$python" "$make_trace" bigtraces --ranks 2 --events-per-rank 100000 >/dev/null
interrupted "bigtraces.h5.import-*" "$rankscope" import-kineto bigtraces -o bigtraces.h5
[ ! -e bigtraces.h5.partial ] || fail "the interrupted import left its timeline's partial file"
echo "outputs ok"
