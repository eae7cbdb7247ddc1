#!/usr/bin/env bash
# `rankscope run` in-process, what it promises an application: its argv
# byte for byte and its exit status; nothing of rankscope's own dependencies
# preloaded into it; the MPI calls beyond messages and collectives (probes,
# matched probes, persistent requests, MPI-IO and one-sided with bytes);
# MPI_Abort shown as such, a rank MPI itself ends on a fatal error, and a
# rank killed outright (SIGKILL) named so by its rankscope run; a program
# that closes its shard's descriptor and opens a file of its own in its
# place loses nothing, and its file gets nothing of the agent's;
# and a line for what is not captured.
# Usage: test_mpi_calls.sh RANKSCOPE TIMELINE_SUMMARY MPIEXEC MPI_CALLS
set -euo pipefail
rankscope=$1 summary=$2 mpiexec=$3 mpi_calls=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
# Windows need an osc component that works without single-copy shared memory,
# which the test environment turns off.
export OMPI_MCA_osc=pt2pt
lib=$(dirname "$(readlink -f "$rankscope")")/../rank_agent

echo "== the preloaded libraries need only the C/C++ runtimes, libmpi and each other"
for so in librankscope_mpi.so librankscope_capture.so librankscope_sidecar_guard.so; do
  needed=$(readelf -d "$lib/$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for n in $needed; do
    case $n in
      libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|ld-linux*|libpthread.so.*|libdl.so.*|libmpi.so.*|librankscope_capture.so) ;;
      # A sanitizer build's runtimes (docs/testing.md); rankscope run preloads them first.
      libasan.so.*|libubsan.so.*|libtsan.so.*) [ -n "${RANKSCOPE_TEST_SANITIZER_RUNTIME:-}" ] ||
        fail "$so needs $n, and this is no sanitizer build" ;;
      *) fail "$so needs $n, which would enter the application's process" ;;
    esac
  done
  echo "$so: $(echo $needed)"
done

echo "== argv arrives byte for byte; options go before --"
"$mpiexec" -n 1 "$rankscope" run -o t.h5 -- /usr/bin/test 1 -eq 1 2>err.log || { cat err.log; fail "test 1 -eq 1 failed under rankscope run"; }
printf '%s\0' a "b c" -- --bogus "" "*" >expected.args
"$mpiexec" -n 1 "$rankscope" run --mode inprocess -o a.h5 -- /bin/sh -c 'printf "%s\0" "$@" >got.args' sh a "b c" -- --bogus "" "*" 2>/dev/null
cmp expected.args got.args || fail "the application's arguments changed"
set +e
"$rankscope" run --bogus -o b.h5 -- /bin/true 2>bogus.log
status=$?
set -e
[ $status -eq 2 ] || fail "an unknown option before -- gave exit status $status, not 2"
grep -q -- "--bogus" bogus.log || fail "the usage error does not name the option: $(cat bogus.log)"
set +e
"$mpiexec" -n 1 "$rankscope" run -o s.h5 -- /bin/sh -c 'exit 3' 2>/dev/null
status=$?
set -e
[ $status -eq 3 ] || fail "the application's exit status 3 came back as $status"

echo "== auto mode looks at a program's libraries without running it (a static one included)"
printf '#include <stdio.h>\nint main(void) { FILE* f = fopen("runs.txt", "a"); fputs("ran\\n", f); return 0; }\n' >marker.c
cc -static -o marker marker.c
"$mpiexec" -n 1 "$rankscope" run -o m.h5 -- ./marker 2>marker.log || { cat marker.log; fail "the static program failed"; }
[ "$(wc -l <runs.txt)" -eq 1 ] || fail "the static program ran $(wc -l <runs.txt) times, not once: auto mode ran it to look at it"

echo "== a program that never calls MPI_Finalize: its shards are kept, with the command that merges them"
"$mpiexec" -n 1 "$rankscope" run --mode inprocess -o nf.h5 -- /bin/true 2>nf.log
grep -q "without calling MPI_Finalize.*merge them with: .*rankscope merge $work/nf.h5.shards -o nf.h5" nf.log ||
  { cat nf.log; fail "no line with the merge command"; }
[ -s nf.h5.shards/rank-00000.shard ] || fail "the shard was not kept"
"$rankscope" merge nf.h5.shards -o nf.h5 >merge.log 2>&1 || { cat merge.log; fail "merging the kept shards failed"; }
grep -q "rank 0 captured nothing" merge.log || { cat merge.log; fail "no warning that rank 0 captured nothing"; }
"$rankscope" info nf.h5 | grep -q "nothing_captured = 1" || fail "rankscope info does not count the empty rank"

echo "== probes, persistent requests, MPI-IO, one-sided"
# A program that names libmpi itself is recognised from its own ELF: ldd is
# not asked (an ldd that only leaves a mark is first on the PATH).
mkdir -p fakebin
printf '#!/bin/sh\necho "$@" >>"%s/ldd-asked"\nexit 1\n' "$work" >fakebin/ldd
chmod +x fakebin/ldd
PATH="$work/fakebin:$PATH" "$mpiexec" -n 2 "$rankscope" run -o calls.h5 -- "$mpi_calls" "$work/io.dat" >calls.log 2>&1 ||
  { cat calls.log; fail "mpi_calls failed"; }
grep -Eq "in-process mode \(.* loads libmpi\.so\.[0-9]+\)" calls.log || { cat calls.log; fail "auto mode did not find libmpi in the program"; }
[ ! -e ldd-asked ] || fail "auto mode asked ldd about a program that names libmpi itself: $(cat ldd-asked)"
"$summary" calls.h5 >calls.json
python3 - <<'PY'
import json, re
s = json.load(open("calls.json"))
# What each rank says it polled (mpi_calls.c, POLL).
made = {int(m[1]): int(m[2]) for m in re.finditer(r"rank (\d+) made (\d+) polls", open("calls.log").read())}
assert sorted(made) == [0, 1], made
for r in s["ranks"]:
    c, b = r["counts"], r["bytes"]
    rank = r["rank"]
    assert r["status"] == "complete", r
    def n(name): return c.get(name, 0)
    if rank == 1:
        assert n("mpi_call MPI_Mprobe") == 1 and n("mpi_call MPI_Improbe") >= 1, c
        assert n("mpi_p2p MPI_Mrecv") == 1 and b["mpi_p2p MPI_Mrecv"] == 64 * 8, (c, b)
        assert n("mpi_call MPI_Imrecv") == 1 and n("mpi_p2p MPI_Imrecv") == 1 and b["mpi_p2p MPI_Imrecv"] == 32 * 8, (c, b)
    assert n("mpi_call MPI_Probe") == 1 and n("mpi_call MPI_Iprobe") >= 1, c
    assert n("mpi_call MPI_Send_init") == 1 and n("mpi_call MPI_Recv_init") == 1, c
    assert n("mpi_call MPI_Startall") == 3 and n("mpi_call MPI_Start") == 2 and n("mpi_call MPI_Request_free") == 3, c
    assert n("mpi_p2p MPI_Isend") == 1 and b["mpi_p2p MPI_Isend"] == 32, (c, b)  # the forgotten send
    # Every start is a message: 4 sends and 4 receives of 16 doubles.
    assert n("mpi_p2p MPI_Send_init") == 4 and b["mpi_p2p MPI_Send_init"] == 4 * 128, (c, b)
    assert n("mpi_p2p MPI_Recv_init") == 4 and b["mpi_p2p MPI_Recv_init"] == 4 * 128, (c, b)
    assert n("mpi_call MPI_File_open") == 1 and n("mpi_call MPI_File_close") == 1, c
    for name, nbytes in [("File_write_at_all", 512), ("File_write_at", 256), ("File_read_at_all", 512), ("File_read_at", 128),
                         ("Put", 512), ("Get", 64), ("Accumulate", 32)]:
        assert n("mpi_call MPI_" + name) == 1 and b["mpi_call MPI_" + name] == nbytes, (name, c, b)
    assert n("mpi_call MPI_Win_fence") == 3 and n("mpi_call MPI_Win_lock") == 1 and n("mpi_call MPI_Win_unlock") == 1, c
    # MPI-IO's own collectives inside File_open/close and the _all calls are not the application's.
    assert n("mpi_collective MPI_Allreduce") == 0 and n("mpi_collective MPI_Bcast") == 0, c
    assert r["counters"].get("mpi_requests_untracked", 0) == 0, r["counters"]
    # 100 polls of a tag nobody sends, beside the Iprobe loop that finds its message:
    # each poll is either recorded (timed at 10 us or more) or counted; one in 256 per
    # thread is timed, and the time of the counted ones is estimated from those.
    counters = r["counters"]
    polls, poll_ns = counters.get("mpi_polls_unrecorded", 0), counters.get("mpi_poll_ns_unrecorded", 0)
    timed = counters.get("mpi_polls_timed", 0)
    assert polls + n("mpi_call MPI_Iprobe") >= 101, (polls, c)
    assert (polls == 0) == (poll_ns == 0), counters
    recorded_polls = sum(n("mpi_call MPI_" + name) for name in ("Iprobe", "Improbe", "Test", "Testall", "Testany", "Testsome"))
    assert polls == 0 or 1 <= timed <= (polls + recorded_polls) // 256 + 1, counters
    # Every poll is recorded or counted, the quick ones too (mpi_shim.h, "quick polls").
    assert polls + recorded_polls == made[rank], (polls, recorded_polls, made, c)
    # The Test family's receives (mpi_calls.c): each completed by a poll, quick or not.
    assert n("mpi_p2p MPI_Irecv") == 6 and b["mpi_p2p MPI_Irecv"] == 6 * 8, (c, b)
assert s["p2p"]["sends"] == s["p2p"]["matched"] == s["p2p"]["receives"], s["p2p"]
print("calls ok:", s["p2p"])
PY

echo "== MPI passed through (--capture nvtx): the program runs as bare, nothing of MPI recorded"
# The polls' wrappers jump to MPI's own when MPI is not captured (mpi_shim.h, pass_through_or).
"$mpiexec" -n 2 "$rankscope" run --capture nvtx -o through.h5 -- "$mpi_calls" "$work/through.dat" >through.log 2>&1 ||
  { cat through.log; fail "mpi_calls failed with MPI passed through"; }
"$summary" through.h5 >through.json
python3 - <<'PY'
import json
s = json.load(open("through.json"))
assert len(s["ranks"]) == 2, s["ranks"]
for r in s["ranks"]:
    assert r["status"] == "complete", r
    # MPI_Init and MPI_Finalize mark where the rank's MPI began and ended, captured or not.
    lifecycle = {"mpi_call MPI_Init", "mpi_call MPI_Finalize"}
    recorded = {name: n for name, n in r["counts"].items() if name.startswith("mpi_") and name not in lifecycle}
    assert not recorded, recorded
    assert r["counters"].get("mpi_polls_unrecorded", 0) == 0 and r["counters"].get("mpi_polls_timed", 0) == 0, r["counters"]
print("passed through ok")
PY

# Runs mpi_calls on 2 ranks ending as MODE says, which fails the job, and
# merges its shards into MODE.h5, described in MODE.info and MODE.info.json.
failing_job() {
  local mode=$1 status=0
  "$mpiexec" -n 2 "$rankscope" run -o "$mode.h5" -- "$mpi_calls" "$work/$mode.dat" "$mode" >"$mode.log" 2>&1 || status=$?
  [ $status -ne 0 ] || fail "the $mode job exited 0"
  grep -q "merge them with" "$mode.log" || { cat "$mode.log"; fail "no line with the merge command after the $mode job"; }
  "$rankscope" merge "$mode.h5.shards" -o "$mode.h5" >/dev/null 2>&1 || fail "merging the $mode job's shards failed"
  "$rankscope" info "$mode.h5" >"$mode.info"
  "$rankscope" info --json "$mode.h5" >"$mode.info.json"
}

# aborted MODE: rank 1 is among the aborted ranks (rank 0 may be too: its
# MPI may end it on the lost peer before mpirun's SIGTERM comes).
aborted() {
  python3 -c 'import json, sys; sys.exit(1 not in json.load(open(sys.argv[1]))["aborted_ranks"])' "$1.info.json" ||
    { cat "$1.info"; fail "rank 1 is not shown as aborted after the $1 job"; }
}

echo "== MPI_Abort: the rank shows as aborted with its code"
failing_job abort
aborted abort
grep -q "rank 1: mpi_abort_code = 7" abort.info || { cat abort.info; fail "the abort code is not shown"; }

echo "== a fatal MPI error: MPI ends the rank with _exit, its shard closed first"
failing_job fatal
aborted fatal
grep -q "rank 1: ended_by_exit_call = 1" fatal.info || { cat fatal.info; fail "the _exit is not counted"; }
grep -Eq "rank 1: exit_status = [1-9]" fatal.info || { cat fatal.info; fail "the exit status is not shown"; }
"$rankscope" report fatal.h5 --format json -o fatal.json
python3 - <<'PY'
import json
hangs = json.load(open("fatal.json"))["hangs"]
assert len(hangs) == 1 and hangs[0]["missing_ranks"] == [1], hangs
m = hangs[0]["missing"][0]
assert m["status"] == "aborted" and m["wrote_state"], m
assert m["inside"] == "MPI_Send to a rank not in the communicator, tag 0", m
# What rank 1 captured before MPI ended it is kept, to its last call: the barrier before the send.
assert m["last_call"] == "MPI_Barrier", m
# And what the shim counted instead of recording, added as the shard closed.
[rank1] = [r for r in json.load(open("fatal.info.json"))["ranks"] if r["rank"] == 1]
assert "mpi_polls_unrecorded" in rank1["counters"] and "mpi_requests_untracked" in rank1["counters"], rank1["counters"]
print("fatal MPI error shown:", m["inside"])
PY
echo "== exit() without MPI_Finalize: the rank is exited, with its status, never complete"
failing_job exit
python3 - <<'PY' || { cat exit.info; fail "a rank that exited without MPI_Finalize is not shown so"; }
import json
info = json.load(open("exit.info.json"))
assert 1 in info["exited_ranks"], info
# Rank 0 exits alike, unless mpirun's SIGTERM for rank 1's exit reached it first.
[rank0] = [r for r in info["ranks"] if r["rank"] == 0]
assert rank0["status"] in ("exited", "terminated"), rank0["status"]
[rank1] = [r for r in info["ranks"] if r["rank"] == 1]
assert rank1["status"] == "exited", rank1["status"]
assert rank1["counters"]["mpi_not_finalized"] == 1 and rank1["counters"]["exit_status"] == 5, rank1["counters"]
PY
grep -q "^  rank 1: exited with status 5 (exit, a return from main or _exit) without calling MPI_Finalize" exit.info ||
  { cat exit.info; fail "info does not say how rank 1 ended"; }
"$rankscope" report exit.h5 >exit.report
grep -q "^EXITED: rank 1 exited with status 5" exit.report || { cat exit.report; fail "the report does not say rank 1 exited"; }

echo "== killed outright: rank 1's rankscope run sees it killed by SIGKILL and says so in its shard"
failing_job kill
grep -q "rankscope run: rank 1: the application was killed by SIGKILL (signal 9) before its shard was closed" kill.log || { cat kill.log; fail "rank 1's rankscope run said nothing"; }
python3 - <<'PY'
import json
info = json.load(open("kill.info.json"))
assert info["dead_ranks"] == [1], info["dead_ranks"]
[rank1] = [r for r in info["ranks"] if r["rank"] == 1]
assert rank1["counters"].get("killed_by_signal") == 9, rank1["counters"]
# Killed before its first flush: what it captured was lost with it, which is not capturing nothing.
assert rank1["counters"].get("nothing_captured") == 0, rank1["counters"]
PY
grep -q "^  rank 1: killed by SIGKILL (signal 9) before its shard was closed" kill.info || { cat kill.info; fail "info does not name the kill"; }
echo "== a program that closes its shard's descriptor and opens a file of its own in its place"
"$mpiexec" -n 2 "$rankscope" run -o closed.h5 -- "$mpi_calls" "$work/closed.dat" close-shard >closed.log 2>&1 ||
  { cat closed.log; fail "the job that closed its shard's descriptor failed"; }
grep -q "rank 1: closed 1 shard descriptors, then 30 allreduces" closed.log || { cat closed.log; fail "mpi_calls closed no shard"; }
for rank in 0 1; do
  # The program's file holds its 30 lines and nothing of the agent's.
  [ "$(cat "closed.dat.own-$rank")" = "$(seq -f 'line %g' 0 29)" ] || { od -c "closed.dat.own-$rank" | head; fail "rank $rank's own file was written into"; }
done
"$rankscope" info --json closed.h5 >closed.info.json
python3 - <<'PY' || fail "the shard closed by the program lost its events or its end"
import json
info = json.load(open("closed.info.json"))
for rank in info["ranks"]:
    assert rank["status"] == "complete", rank["status"]
    assert rank["counters"].get("shard_reopened", 0) >= 1, rank["counters"]
    assert rank["counters"].get("shard_write_errors", 0) == 0, rank["counters"]
assert info["events_by_kind"]["mpi_collective"] >= 2 * 30, info["events_by_kind"]
print("closed shard reopened:", [r["counters"]["shard_reopened"] for r in info["ranks"]], "times;",
      info["events_by_kind"]["mpi_collective"], "collectives kept")
PY
echo "all in-process checks passed"
