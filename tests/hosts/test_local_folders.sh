#!/usr/bin/env bash
# Nodes without a shared file system: each test host sees its own folder at
# the output path. `rankscope run` (both modes) finds that rank 0 cannot see
# the other host's shards, writes no partial timeline, keeps every shard, and
# says what to do; gathered from the hosts (as over ssh) and merged, they
# make the whole job's timeline.
# Usage: test_local_folders.sh RANKSCOPE DDP_SIM
. "$(dirname "$0")/common.sh" 205
rankscope=$1 ddp_sim=$2
local_dir=/tmp/rankscope-testhosts-local-205
hosts up 2 --slots 2 --local-dir "$local_dir" >/dev/null

for mode in inprocess sidecar; do
  echo "== $mode"
  if [ $mode = inprocess ]; then program=("$ddp_sim" --steps 3 --layers 4 --layer-mb 1)
  else program=(/usr/bin/python3 "$here/rendezvous.py" "$work/rendezvous.txt"); fi
  hosts mpirun -n 4 "$rankscope" run --mode $mode -o "$local_dir/$mode.h5" -- "${program[@]}" >$mode.log 2>&1 ||
    { cat $mode.log; fail "the $mode run failed"; }
  grep "rankscope run:" $mode.log
  grep -q "is not one folder shared by every node: 2 of 4 ranks wrote their shards" $mode.log ||
    fail "the $mode run did not say that the output folder is not shared"
  mkdir -p gathered/$mode
  for host in 1 2; do
    hosts exec $host sh -c "test ! -e $local_dir/$mode.h5" || fail "a partial timeline was written on host$host"
    # What a user does with ssh: every node's shard folder copied to one place.
    mkdir gathered/$mode/host$host
    hosts exec $host tar -C "$local_dir" -cf - $mode.h5.shards | tar -xf - -C gathered/$mode/host$host
  done
  ls gathered/$mode/host1/$mode.h5.shards gathered/$mode/host2/$mode.h5.shards
  [ "$(ls gathered/$mode/host1/$mode.h5.shards/*.shard | wc -l)" -eq 2 ] || fail "host1 does not hold ranks 0 and 1's shards"
  [ "$(ls gathered/$mode/host2/$mode.h5.shards/*.shard | wc -l)" -eq 2 ] || fail "host2 does not hold ranks 2 and 3's shards"
  "$rankscope" merge gathered/$mode/host1/$mode.h5.shards gathered/$mode/host2/$mode.h5.shards -o $mode.h5
  "$rankscope" info --json $mode.h5 >$mode.json
  /usr/bin/python3 - $mode.json <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
got = [(r["rank"], r["host"], r["status"]) for r in info["ranks"]]
assert got == [(0, "host1", "complete"), (1, "host1", "complete"), (2, "host2", "complete"), (3, "host2", "complete")], got
assert info["clock"]["corrected"] and all(r["synced"] for r in info["clock"]["ranks"]), info["clock"]
PY
done
echo "local output folders ok"
