#!/usr/bin/env bash
# One test host's processes killed mid-run (a node lost): the job ends in
# bounded time, and `rankscope merge` of the shards names that host's ranks
# as dead, with what they wrote before, while nothing captured on the other
# hosts is lost (each ends terminated by mpirun, or aborted by its MPI on
# the lost peer, its shard whole either way). Now and then a rank of host1
# ended dead, last heard from as host3 was lost, its shard without its end
# record: once in CI, and in 1 of 12 runs beside a build, before the agent
# closed shards at _exit (which Open MPI's abort calls). Its shard may
# also not be closed within the second mpirun gives before SIGKILL; so the
# check gets one re-run (common.sh, once_more_if_needed), and fails where
# it fails twice.
# Usage: test_lost_host.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 204
rankscope=$1 ddp_sim=$2
hosts up 3 --slots 2 >/dev/null
job=
stop_job() { if [ -n "$job" ]; then kill -9 "$job" 2>/dev/null || true; fi; cleanup; }
trap stop_job EXIT

# Runs the job, loses host3 mid-run, merges and checks what is left. Returns
# 1, saying why, where the merged timeline is not as expected.
lose_host3_once() {
  rm -rf job.h5 job.h5.shards info.json run.log
  hosts mpirun -n 6 "$rankscope" run -o "$work/job.h5" --flush-ms 100 -- \
    "$ddp_sim" --steps 100000 --layers 8 --layer-mb 1 --forward-us 200 >run.log 2>&1 &
  job=$!
  for _ in $(seq 300); do
    [ "$(find job.h5.shards -name 'rank-*.shard' -size +64k 2>/dev/null | wc -l)" -eq 6 ] && break
    sleep 0.1
  done
  [ "$(find job.h5.shards -name 'rank-*.shard' -size +64k | wc -l)" -eq 6 ] || { cat run.log; fail "not every rank wrote events"; }

  killed_at=$(date +%s)
  hosts kill 3
  timeout 60 tail --pid="$job" -f /dev/null || fail "the job was still running 60 s after host3 was lost"
  status=0
  wait "$job" || status=$?
  job=
  echo "mpirun ended $(($(date +%s) - killed_at)) s after host3 was lost, exit status $status"
  [ "$status" -ne 0 ] || fail "the job reported success"
  [ ! -e job.h5 ] || fail "a timeline was written for a job that lost a host"
  grep "rankscope" run.log || true

  "$rankscope" merge job.h5.shards -o job.h5
  "$rankscope" info job.h5 | sed -n '/rank  host/,/^$/p'
  "$rankscope" info --json job.h5 >info.json
  /usr/bin/python3 - info.json <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
ranks = {r["rank"]: r for r in info["ranks"]}
lost = sorted(r for r in ranks if ranks[r]["host"] == "host3")
kept = sorted(r for r in ranks if ranks[r]["host"] != "host3")
assert lost == [4, 5] and kept == [0, 1, 2, 3], ranks
assert info["dead_ranks"] == lost, ("dead", info["dead_ranks"])
# Each ended by mpirun's SIGTERM, or by its MPI on the lost peer (_exit): either way its shard closed.
assert sorted(info["terminated_ranks"] + info["aborted_ranks"]) == kept, (info["terminated_ranks"], info["aborted_ranks"])
assert all(ranks[r]["events"] > 0 for r in ranks), "a rank's events were lost"
# The other hosts' shards are whole: nothing of theirs damaged or cut.
for r in kept:
    counters = ranks[r]["counters"]
    for name in ("shard_events_lost", "shard_chunks_corrupt", "shard_truncated_bytes", "events_unwritten"):
        assert counters.get(name, 0) == 0, (r, name, counters.get(name))
assert max(ranks[r]["last_heard_ns"] for r in lost) < min(ranks[r]["last_heard_ns"] for r in kept), "host3 was heard from last"
print("lost host ok: ranks", lost, "dead with", [ranks[r]["events"] for r in lost], "events recovered; ended by MPI:",
      info["aborted_ranks"])
PY
}
once_more_if_needed lose_host3_once lost-host
