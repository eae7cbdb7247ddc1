#!/usr/bin/env bash
# The disk fills while a job of two ranks is captured (its -o on a 300 KiB
# tmpfs): each rank says its shard could not be written, keeps what it wrote,
# and still ends the shard with its counters (the writer keeps room for
# them), so the ranks are `complete`, not `dead`; events_unwritten says what
# was lost and the report leads with INCOMPLETE. The run says the timeline
# could not be written, for want of room, not that the ranks skipped
# MPI_Finalize. Then, as an unprivileged user, the shard folder made
# read-only mid-run: the ranks still end complete, the timeline is written,
# and the run says the shards could not be removed. As root, where tmpfs
# can be mounted and another user taken; exit 77 (skipped) elsewhere.
# Usage: test_disk_full.sh RANKSCOPE RING_APP MPIEXEC
set -euo pipefail
rankscope=$1 ring_app=$2 mpiexec=$3
. "$(dirname "$0")/../support/job_script.sh"

mkdir small
if ! mount -t tmpfs -o size=300k tmpfs small 2>/dev/null; then
  echo "SKIP: cannot mount a small tmpfs here (run as root)"
  exit 77
fi
trap 'umount "$work/small" 2>/dev/null; cleanup' EXIT

"$mpiexec" -n 2 "$rankscope" run -o "$work/small/job.h5" -- "$ring_app" 6 2 >run.log 2>&1 ||
  { cat run.log; fail "the job failed (its own status is 0)"; }
[ "$(grep -c "writing the shard failed: .*No space left on device" run.log)" -eq 2 ] ||
  { cat run.log; fail "not every rank said its shard could not be written"; }
grep -q "rankscope merge: error: cannot write the timeline .*: it needs .* but only .* are free there" run.log ||
  { cat run.log; fail "the run did not say the timeline lacked room"; }
! grep -q "without calling MPI_Finalize" run.log || { cat run.log; fail "the ranks were said to skip MPI_Finalize"; }
"$rankscope" merge small/job.h5.shards -o job.h5 >/dev/null
"$rankscope" info --json job.h5 >info.json
/usr/bin/python3 - <<'PY'
import json
info = json.load(open("info.json"))
assert info["dead_ranks"] == [], info["dead_ranks"]
for rank in info["ranks"]:
    assert rank["status"] == "complete", (rank["rank"], rank["status"])
    assert rank["counters"]["events_unwritten"] > 0 and rank["counters"]["shard_write_errors"] >= 1, rank["counters"]
    assert rank["events"] > 0, rank  # what was written before the disk filled is kept
PY
"$rankscope" report job.h5 >report.txt
grep -q "^INCOMPLETE: [0-9]* events captured are not in the timeline (rank 0: [0-9]* events_unwritten" report.txt ||
  { head -5 report.txt; fail "the report does not lead with what the full disk lost"; }
echo "a full disk: every rank complete, its losses counted"

# The folder's permissions bind only a user that is not root.
chmod 711 "$work"
mkdir shared && chmod 777 shared
cat >shared/run.sh <<SCRIPT
cd "$work/shared"
export HOME="$work/shared"
"$mpiexec" -n 2 "$rankscope" run -o "$work/shared/ro.h5" -- "$ring_app" 3 20 >run.log 2>&1 &
sleep 1.5
chmod 555 "$work/shared/ro.h5.shards"
wait
SCRIPT
setpriv --reuid=nobody --regid=nogroup --clear-groups bash shared/run.sh || { cat shared/run.log; fail "the job failed"; }
grep -q "rankscope run: the timeline is whole, but its shards stay in .*/ro.h5.shards: they cannot be removed (Permission denied)" \
  shared/run.log || { cat shared/run.log; fail "the shards left in a read-only folder went unsaid"; }
! grep -q "without calling MPI_Finalize" shared/run.log || { cat shared/run.log; fail "the ranks were said to skip MPI_Finalize"; }
"$rankscope" info --json shared/ro.h5 >ro.json
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["ranks"]; sys.exit(any(x["status"] != "complete" for x in r))' ro.json ||
  fail "a rank of the job whose shard folder became read-only is not complete"
chmod 755 shared/ro.h5.shards
echo "a shard folder made read-only: every rank complete, the timeline written, the shards left said"
