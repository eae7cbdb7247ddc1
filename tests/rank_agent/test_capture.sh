#!/usr/bin/env bash
# Runs test_capture as `rankscope run` would start a rank (the capture
# library's environment, this very process named as the one that captures),
# then against a full disk, then with a shard folder it cannot create, then
# with no agent environment. Usage: test_capture.sh TEST_BINARY CAPTURE_LIBRARY
set -euo pipefail
binary=$1 library=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export NVTX_INJECTION64_PATH=$library RANKSCOPE_CAPTURE=nvtx RANKSCOPE_RANK=0

# The capture library must load anywhere: no libmpi among its dependencies.
if objdump -p "$library" | grep NEEDED | grep -qi mpi; then fail "the capture library depends on MPI"; fi

# `sh -c 'exec'` keeps the pid the agent is told is its own.
as_rank() { RANKSCOPE_SHARD_DIR=$1 TEST_CAPTURE_EXPECT=$2 sh -c 'RANKSCOPE_AGENT_PID=$$ exec "$0"' "$binary"; }

as_rank "$work/shards" capture

# A file size limit stands in for a full disk (the write fails with EFBIG
# instead of ENOSPC; SIGXFSZ is ignored so that it fails rather than kills).
(trap '' XFSZ; ulimit -f 1024; as_rank "$work/full" "full disk") 2>full.log || { cat full.log; fail "full disk case"; }
cat full.log
[ "$(grep -c "writing the shard failed" full.log)" -eq 1 ] || fail "not exactly one line about the failed write"

as_rank /proc/no/such/folder off 2>unwritable.log || { cat unwritable.log; fail "an unwritable shard folder stopped the program"; }
grep -q "capture disabled: cannot create the shard folder /proc/no/such/folder" unwritable.log ||
  { cat unwritable.log; fail "no clear line for an unwritable shard folder"; }

env -u RANKSCOPE_CAPTURE TEST_CAPTURE_EXPECT=off "$binary"
