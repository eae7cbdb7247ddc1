#!/usr/bin/env bash
# kill -9 of one rank mid-run: the other ranks exit within a bounded time,
# `rankscope merge` recovers the dead rank's events up to its last flushed
# chunk, and `rankscope info` names it as the dead one, with when it was
# last heard from and the signal its `rankscope run` saw kill it. Usage: test_kill.sh RANKSCOPE DDP_SIM MPIEXEC
set -euo pipefail
rankscope=$1 ddp_sim=$2 mpiexec=$3
. "$(dirname "$0")/../support/job_script.sh"

# 3,000 steps (at least 7 s): few enough step names that the first flush's
# strings (some 60 KB) are written quickly, and a shard of 256 KB holds events.
"$mpiexec" -n 4 "$rankscope" run -o "$work/job.h5" --flush-ms 50 -- \
  "$ddp_sim" --steps 3000 --layers 8 --layer-mb 1 --forward-us 100 >run.log 2>&1 &
job=$!

# The victim: the process rank 2 runs in, once every rank has written events.
victim=$(rank_process ddp_sim 2 job.h5.shards 4 +256k)
[ -n "$victim" ] || { cat run.log; fail "rank 2 never started writing events"; }

killed_at=$(date +%s)
kill -9 "$victim"
status=0
timeout 60 tail --pid="$job" -f /dev/null || fail "the other ranks were still running 60 s after rank 2 was killed"
wait "$job" || status=$?
job=
echo "mpirun ended $(( $(date +%s) - killed_at )) s after the kill, status $status"
[ "$status" -ne 0 ] || fail "the job reported success"
[ ! -e job.h5 ] || fail "a timeline was written for a job that lost a rank"

"$rankscope" merge job.h5.shards -o job.h5
"$rankscope" info job.h5 | tee info.txt
grep -q "^dead ranks: 2 " info.txt || fail "info does not name rank 2 alone as dead"
grep -q "^  rank 2: killed by SIGKILL (signal 9) before its shard was closed; peak memory" info.txt ||
  fail "info does not say rank 2 was killed"
grep -q "rankscope run: rank 2: the application was killed by SIGKILL (signal 9) before its shard was closed; peak memory" run.log || fail "rank 2's rankscope run said nothing"
"$rankscope" info --json job.h5 >info.json
python3 - <<'PY'
import json
info = json.load(open("info.json"))
ranks = {r["rank"]: r for r in info["ranks"]}
assert info["dead_ranks"] == [2], info["dead_ranks"]
assert info["terminated_ranks"] == [0, 1, 3], info["terminated_ranks"]
assert ranks[2]["events"] > 0, "nothing of the dead rank was recovered"
assert all(ranks[r]["counters"].get("terminated_by_signal") == 15 for r in (0, 1, 3)), ranks
# rank 2's rankscope run saw it killed, and recorded what it used; the others' agents did.
assert ranks[2]["counters"].get("killed_by_signal") == 9, ranks[2]
assert "oom_kills" not in ranks[2]["counters"], ranks[2]
assert all(ranks[r]["counters"].get("process_peak_rss_bytes", 0) > 1 << 20 for r in range(4)), ranks
assert all(ranks[r]["counters"].get("process_user_cpu_ns", 0) > 0 for r in range(4)), ranks
assert all("killed_by_signal" not in ranks[r]["counters"] for r in (0, 1, 3)), ranks
assert 0 < ranks[2]["last_heard_ns"] < min(ranks[r]["last_heard_ns"] for r in (0, 1, 3)), "rank 2 was heard from last"
print("kill -9 test ok: rank 2 dead with", ranks[2]["events"], "events recovered")
PY
