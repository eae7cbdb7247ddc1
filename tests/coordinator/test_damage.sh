#!/usr/bin/env bash
# Commands on damaged timelines: values changed behind HDF5's checksums
# (found by the reader's checks) and bytes flipped on disk (found by the
# checksums). Every command finishes, says what it left out, naming dataset,
# row and field, and prints no figure built on a damaged row; `info --check`
# fails on damage. Timelines written before checksums still read.
# Usage: test_damage.sh RANKSCOPE MAKE_EXPORT_FIXTURE MAKE_SYNTHETIC_SHARDS DAMAGE_TIMELINE PYTHON CHECK_PERFETTO
set -euo pipefail
rankscope=$1 make_fixture=$2 make_shards=$3 damage=$4 python=$5 check_perfetto=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$make_fixture" shards
"$rankscope" merge shards -o sound.h5 >/dev/null
json_value() { "$python" -c 'import json, sys; d = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d = d[int(k)] if k.isdigit() else d[k]
print(d)' "$@"; }
"$rankscope" report --format json sound.h5 >sound.report.json
sound_step=$(json_value sound.report.json steps.mean_step_ns)
"$rankscope" export sound.h5 --perfetto sound.pftrace >sound.export
sound_events=$(sed -nE 's/.*; ([0-9]+) events in .*/\1/p' sound.export)
"$rankscope" info --check sound.h5 >sound.info || fail "info --check fails on a sound timeline"
grep -q "checksummed (CRC-32C per 16,384 events of a rank, Fletcher32 per chunk elsewhere, HDF5's on its metadata); every row read and valid" sound.info || fail "sound.info: $(tail -2 sound.info)"

# fresh NAME: a copy of the sound timeline to damage.
fresh() { cp sound.h5 "$1.h5"; }

# Export with a damaged event: all but that event, a valid trace, a warning that names it.
for case in "op 65" "op 129" "name_id 1090519092" "name_id 553648180" "kind 0"; do
  set -- $case
  name="$1-$2"
  fresh "$name"
  "$damage" "$name.h5" set /events 40 "$1" "$2"
  timeout 60 "$rankscope" export "$name.h5" --perfetto "$name.pftrace" --chrome "$name.json" >"$name.out" 2>"$name.err" ||
    { cat "$name.err" >&2; fail "$name: export failed (status $?)"; }
  grep -q "/events row 40 $1: value $2" "$name.err" || { cat "$name.err" >&2; fail "$name: the warning does not name the row"; }
  written=$(sed -nE 's/.*; ([0-9]+) events in .*/\1/p' "$name.out" | head -1)
  [ "$written" -eq $((sound_events - 1)) ] || fail "$name: $written events exported, not $((sound_events - 1))"
  [ "$(stat -c %s "$name.json")" -lt 10000000 ] || fail "$name: the Chrome JSON is $(stat -c %s "$name.json") bytes"
  "$python" "$check_perfetto" "$name.pftrace" >/dev/null || fail "$name: the Perfetto trace is not valid"
  ! ls ./*.partial 2>/dev/null || fail "$name: partial files left"
done

# A step's end moved far away: the report leaves the event out and says so.
fresh moved
"$damage" moved.h5 set /events 0 end_ns 207907749630000000
"$rankscope" report moved.h5 >moved.txt 2>moved.err
grep -q "^DAMAGED: 1 rows of /events" moved.txt || fail "moved: the report does not say it is damaged: $(head -3 moved.txt)"
grep -q "/events row 0 end_ns" moved.err || fail "moved: no warning naming the row: $(cat moved.err)"
"$rankscope" report --format json moved.h5 >moved.json 2>/dev/null
moved_step=$(json_value moved.json steps.mean_step_ns)
[ "$moved_step" -le $((sound_step * 2)) ] || fail "moved: mean step $moved_step ns, against $sound_step ns when sound"
[ "$(json_value moved.json damage.findings.0.field)" = end_ns ] || fail "moved: report JSON has no damage finding"

# A GPU collective begun long before the job: no absurd exposed transfer.
fresh early
row=$("$damage" early.h5 find /events kind 12)
"$damage" early.h5 set /events "$row" begin_ns -415968838323813000
"$rankscope" report --format json early.h5 >early.json 2>/dev/null
"$python" - early.json <<'PY' || fail "early: a figure exceeds the job's span"
import json, sys
report = json.load(open(sys.argv[1]))
def numbers(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items(): yield from numbers(v, path + "." + k)
    elif isinstance(node, list):
        for i, v in enumerate(node): yield from numbers(v, path + f".{i}")
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and path.endswith("_ns"):
        yield path, node
bad = [(p, v) for p, v in numbers(report) if abs(v) > 10**12 and "wall" not in p]
if bad: sys.exit(f"figures beyond 1000 s: {bad[:5]}")
PY

# info reads the tables only; --check reads every event and fails on damage.
fresh info
"$damage" info.h5 set /events 7 op 65
"$rankscope" info info.h5 >info.txt || fail "info fails without --check"
grep -q "events not read (\`rankscope info --check\` reads them all)" info.txt || fail "info claims more than it read"
status=0; "$rankscope" info --check info.h5 >check.txt 2>check.err || status=$?
[ $status -eq 1 ] || fail "info --check exits $status on a damaged timeline"
grep -q "DAMAGED: 1 rows of /events" check.txt && grep -q "/events row 7 op: value 65 is not an operation" check.txt ||
  fail "info --check does not name the damage: $(tail -3 check.txt)"
status=0; "$rankscope" info --check --json info.h5 >check.json 2>/dev/null || status=$?
[ $status -eq 1 ] && [ "$(json_value check.json integrity.sound)" = False ] || fail "info --check --json: not unsound"

# Bytes flipped on disk: the checksum finds the block (all of rank 0's events here).
fresh flipped
"$damage" flipped.h5 flip /events 3 8
status=0; "$rankscope" info --check flipped.h5 >flipped.txt 2>/dev/null || status=$?
[ $status -eq 1 ] && grep -q "/events row 0-[0-9]*: checksum mismatch" flipped.txt ||
  fail "flipped /events: $(tail -3 flipped.txt)"
# What was read is told apart from what is stored: all of rank 0's events are left out.
rank0_events=$("$rankscope" info --json sound.h5 |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["ranks"][0]["events"])')
head -1 flipped.txt | grep -q "events ($rank0_events of them damaged and left out)" &&
  grep -qE "^ +0 .* 0 of $rank0_events +0 +complete" flipped.txt || fail "flipped: info --check counts: $(head -6 flipped.txt)"
"$rankscope" info --check --json flipped.h5 >flipped.info.json 2>/dev/null || true
[ "$(json_value flipped.info.json ranks.0.events_readable)" = 0 ] &&
  [ "$(json_value flipped.info.json ranks.1.events_readable)" = "$(json_value flipped.info.json ranks.1.events)" ] ||
  fail "flipped: events_readable in info --json"
# Events by kind are those read: rank 1's alone, not every row stored.
"$python" - flipped.info.json <<'PY' || fail "flipped: events_by_kind in info --check --json counts rows left out"
import json, sys
info = json.load(open(sys.argv[1]))
assert sum(info["events_by_kind"].values()) == info["events_readable"] < info["events"], info
PY
"$rankscope" export flipped.h5 --perfetto flipped.pftrace >flipped.out 2>flipped.err ||
  fail "export of a timeline with rank 0's events unreadable failed: $(cat flipped.err)"
grep -q "damaged and left out" flipped.err || fail "export of flipped /events gave no warning"
# The report shows the rank whose every event was left out as unmeasured, not as zeros.
"$rankscope" report flipped.h5 >flipped.report 2>/dev/null || fail "report of flipped /events failed"
grep -qE "^  rank 0 +n/a: every event of the rank lies in damaged rows" flipped.report &&
  grep -qE "^  rank 1 +overlap " flipped.report || fail "flipped: rank 0 is not shown unmeasured: $(cat flipped.report)"
"$rankscope" report --format json flipped.h5 >flipped.json 2>/dev/null
"$python" - flipped.json <<'PY' || fail "flipped: the JSON gives rank 0 figures"
import json, sys
overlap = json.load(open(sys.argv[1]))["overlap"]
assert overlap[0]["compute_ns"] is None and "damaged rows" in overlap[0]["compute_ns_reason"], overlap[0]
assert overlap[1]["compute_ns"] is not None, overlap[1]
PY
# A rank of several blocks loses only the damaged one.
"$make_shards" synthetic 2 20000
"$rankscope" merge synthetic -o synthetic.h5 >/dev/null
"$rankscope" export synthetic.h5 --perfetto synthetic.pftrace >synthetic.out
"$damage" synthetic.h5 flip /events 100 40
"$rankscope" export synthetic.h5 --perfetto flipped-synthetic.pftrace >flipped-synthetic.out 2>flipped-synthetic.err ||
  fail "export of a timeline with one damaged block failed: $(cat flipped-synthetic.err)"
before=$(sed -nE 's/.*; ([0-9]+) events in .*/\1/p' synthetic.out)
after=$(sed -nE 's/.*; ([0-9]+) events in .*/\1/p' flipped-synthetic.out)
[ $((before - after)) -eq 16384 ] || fail "one damaged block cost $((before - after)) events, not its 16384 rows"
grep -q "16384 rows of /events damaged and left out" flipped-synthetic.err || fail "no warning: $(cat flipped-synthetic.err)"

fresh ranks
"$damage" ranks.h5 flip /ranks 1 16
"$rankscope" info ranks.h5 >ranks.txt 2>/dev/null
grep -qE "^ +1 .* missing" ranks.txt && grep -q "DAMAGED: 1 rows of /ranks" ranks.txt ||
  fail "flipped /ranks row 1: $(cat ranks.txt)"
"$rankscope" report ranks.h5 >/dev/null 2>&1 || fail "report on a damaged /ranks failed"

# Inflated event counts are not shown.
fresh counts
"$damage" counts.h5 set /event_counts 0 14 553648128
"$rankscope" info counts.h5 >counts.txt 2>/dev/null
! grep -q 553648128 counts.txt || fail "info shows the damaged event count"
grep -q "/event_counts row 0: adds up to" counts.txt || fail "info does not name the damaged event counts"

# A timeline without checksums (as written before them) still reads, and its values are still checked.
cp sound.h5 old-with-checksums.h5
"$damage" old-with-checksums.h5 unlink /event_checksums
h5repack -l CONTI -f NONE old-with-checksums.h5 old.h5
"$rankscope" info --check old.h5 >old.txt || fail "info --check fails on a sound timeline without checksums"
grep -q "no checksums" old.txt || fail "old: $(tail -1 old.txt)"
"$damage" old.h5 set /events 3 op 65
status=0; "$rankscope" info --check old.h5 >/dev/null 2>&1 || status=$?
[ $status -eq 1 ] || fail "old: a damaged value passes info --check"
echo "damaged timelines: every command finished and named the damage"
