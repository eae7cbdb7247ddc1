#!/usr/bin/env bash
# A rank that crashes (a fault, abort(), a stack overflow) closes its shard
# before the crash ends it: its events up to the crash are kept, even those
# no routine flush had written (--flush-ms 60000 here), it is named
# `crashed` with the signal, the kernel's reason, the address and the
# thread, and the crash reaches what the program had without rankscope: Open
# MPI's backtrace (with no frame of rankscope's), Python's faulthandler, the
# same exit status. A program's own handler that recovers from faults is
# left alone. Usage: test_crash.sh RANKSCOPE CRASH_APP MPIEXEC
set -euo pipefail
rankscope=$1 crash_app=$2 mpiexec=$3
. "$(dirname "$0")/../support/job_script.sh"

# crash_job MODE [FLUSH_MS]: crash_app on 2 ranks under rankscope run
# (--flush-ms 60000: nothing flushed before the crash), its timeline merged
# into MODE.h5 and described in MODE.info and MODE.info.json; the job's exit
# status in MODE.status, which must be the crash's without rankscope.
crash_job() {
  local mode=$1 flush_ms=${2:-60000} status=0 plain_status=0
  # term, mended: 300,000 unflushed events, so that the other thread acts while the shard closes.
  local count=20
  case $mode in term* | mended) count=300000 ;; esac
  # Without rankscope, what another thread does once the crash came (a SIGTERM, a mended page, exit)
  # races Open MPI's own handler, and may end the job before the crash does: the status to match is
  # that of the same crash with nothing racing it.
  local plain_mode=$mode
  case $mode in term* | mended) plain_mode=segv ;; exit | _exit) plain_mode=thread ;; esac
  echo "$count" >"$mode.count"
  "$mpiexec" -n 2 "$rankscope" run --flush-ms "$flush_ms" -o "$mode.h5" -- "$crash_app" "$mode" "$count" >"$mode.log" 2>&1 ||
    status=$?
  echo "$status" >"$mode.status"
  [ "$status" -ne 0 ] || { cat "$mode.log"; fail "the $mode job exited 0"; }
  "$mpiexec" -n 2 "$crash_app" "$plain_mode" "$count" >"$mode.plain.log" 2>&1 || plain_status=$?
  [ "$status" -eq "$plain_status" ] ||
    { cat "$mode.log"; fail "the $mode job's status is $status under rankscope, $plain_status for $plain_mode without"; }
  "$rankscope" merge "$mode.h5.shards" -o "$mode.h5" >/dev/null 2>&1 || fail "merging the $mode job's shards failed"
  "$rankscope" info "$mode.h5" >"$mode.info"
  "$rankscope" info --json "$mode.h5" >"$mode.info.json"
  "$rankscope" report --format json "$mode.h5" -o "$mode.report.json"
}

# crashed MODE SIGNAL CODE: rank 1 crashed with SIGNAL (si_code CODE), and
# kept every event it made: its allreduces (MODE.count), though nothing was flushed.
crashed() {
  python3 - "$@" <<'PY'
import json, sys
mode, signal, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
info = json.load(open(f"{mode}.info.json"))
ranks = {r["rank"]: r for r in info["ranks"]}
assert info["crashed_ranks"] == [1] and info["dead_ranks"] == [], (info["crashed_ranks"], info["dead_ranks"])
assert ranks[1]["status"] == "crashed", ranks[1]["status"]
counters = ranks[1]["counters"]
assert counters.get("crash_signal") == signal, counters
assert counters.get("crash_signal_code", 0) == code, counters
assert counters.get("crash_thread", 0) > 0, counters
assert counters.get("process_peak_rss_bytes", 0) > 0, counters
assert "killed_by_signal" not in counters, counters
# Rank 0, ended by mpirun's SIGTERM (or by its MPI, on the lost peer), closed its shard too.
assert ranks[0]["status"] in ("terminated", "aborted"), ranks[0]["status"]
report = {r["rank"]: r for r in json.load(open(f"{mode}.report.json"))["ranks"]}
crash = report[1]["crashed"]
assert crash["signal"] == signal and crash["code"] == code and crash["thread"] == counters["crash_thread"], crash
assert report[1]["killed"] is None and report[0]["crashed"] is None, report
print(f"{mode}: rank 1 {crash['text']}")
PY
  "$rankscope" info --check "$1.h5" >/dev/null || fail "the $1 timeline does not check"
  "$rankscope" export "$1.h5" --ranks 1 --chrome "$1.json" >/dev/null
  local allreduces
  allreduces=$(python3 -c 'import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
print(sum(e.get("name") == "MPI_Allreduce" and e.get("ph") == "X" for e in events))' "$1.json")
  [ "$allreduces" -eq "$(cat "$1.count")" ] || fail "rank 1 kept $allreduces of its $(cat "$1.count") allreduces after the $1 crash"
  # The crash itself: an instant on the crashing thread's track, after the last allreduce.
  python3 - "$1" <<'PY'
import json, sys
mode = sys.argv[1]
events = json.load(open(f"{mode}.json"))
events = events["traceEvents"] if isinstance(events, dict) else events
crashes = [e for e in events if e.get("name", "").startswith("crash: ")]
assert len(crashes) == 1, crashes
crash = crashes[0]
thread = json.load(open(f"{mode}.info.json"))["ranks"][1]["counters"]["crash_thread"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
assert names[(crash["pid"], crash["tid"])].endswith(f" {thread}"), (crash, names)
last = max(e["ts"] + e["dur"] for e in events if e.get("name") == "MPI_Allreduce")
assert crash["ts"] >= last, (crash, last)
print(f"{mode}: the instant {crash['name']!r} on {names[(crash['pid'], crash['tid'])]!r}")
PY
}

echo "== a null-pointer write: Open MPI's backtrace as without rankscope, the events kept"
crash_job segv
crashed segv 11 1
grep -Eq "^  rank 1: crashed with SIGSEGV \(signal 11: address not mapped\) at 0x0 in crash_app\+0x[0-9a-f]+ on thread [0-9]+; its shard was closed first" segv.info ||
  { cat segv.info; fail "info does not describe the crash"; }
grep -q "rankscope run: rank 1: the application crashed with SIGSEGV (signal 11: address not mapped) at 0x0" segv.log ||
  { cat segv.log; fail "rank 1's rankscope run did not say it crashed"; }
grep -q "Signal: Segmentation fault (11)" segv.log && grep -q "Failing at address: (nil)" segv.log ||
  { cat segv.log; fail "Open MPI's backtrace of the crash is gone"; }
! grep -q "librankscope" segv.log || { cat segv.log; fail "the backtrace names rankscope's library"; }
python3 - <<'PY'
import json
ranks = {r["rank"]: r for r in json.load(open("segv.info.json"))["ranks"]}
# The main thread's id is the process's.
assert ranks[1]["counters"]["crash_thread"] == ranks[1]["pid"], ranks[1]
PY
"$rankscope" report segv.h5 >segv.report
grep -q "^CRASHED: rank 1 crashed with SIGSEGV" segv.report || { cat segv.report; fail "the report does not name the crash"; }
grep -q "rank 1 (crashed with SIGSEGV.*wrote its state)" segv.report || { cat segv.report; fail "the hang does not name the crashed rank"; }
"$rankscope" report --format html segv.h5 -o segv.html
grep -q 'id="killed-section"' segv.html && grep -q "rank 1 crashed with SIGSEGV" segv.html ||
  fail "the HTML report does not name the crash"

echo "== a crash in a library's constructor, inside dlopen and the loader's lock: the shard closed, the library named"
crash_job constructor
crashed constructor 11 1
grep -Eq "^  rank 1: crashed with SIGSEGV \(signal 11: address not mapped\) at 0x0 in libcrash_constructor.so\+0x[0-9a-f]+ \(crash_while_loaded\+0x0\) on thread" \
  constructor.info || { cat constructor.info; fail "info does not name the library whose constructor crashed"; }

echo "== a crash on a thread of the program's: that thread named"
crash_job thread
crashed thread 11 1
python3 - <<'PY'
import json
ranks = {r["rank"]: r for r in json.load(open("thread.info.json"))["ranks"]}
assert ranks[1]["counters"]["crash_thread"] != ranks[1]["pid"], ranks[1]
PY

echo "== mpirun's SIGTERM during the crash's close: the crash still ends the process"
crash_job term
crashed term 11 1
grep -q "exited on signal 11" term.log || { cat term.log; fail "the SIGTERM, not the crash, ended rank 1"; }
grep -q "Signal: Segmentation fault (11)" term.log || { cat term.log; fail "Open MPI's backtrace of the crash is gone"; }

echo "== the same, with no other thread of the program's to take the SIGTERM: it waits for the crash"
crash_job term_held
crashed term_held 11 1
grep -q "exited on signal 11" term_held.log || { cat term_held.log; fail "the SIGTERM, not the crash, ended rank 1"; }
grep -q "Signal: Segmentation fault (11)" term_held.log || { cat term_held.log; fail "Open MPI's backtrace of the crash is gone"; }

echo "== a fault that would not come again (another thread made the page writable during the close): the crash still ends the process"
crash_job mended
crashed mended 11 2
grep -q "exited on signal 11" mended.log || { cat mended.log; fail "the mended fault did not end rank 1"; }

echo "== exit(0) on another thread during the crash's close: the crash still ends the process"
crash_job exit
crashed exit 11 1
grep -q "exited on signal 11" exit.log || { cat exit.log; fail "exit(0), not the crash, ended rank 1"; }
crash_job _exit
crashed _exit 11 1
grep -q "exited on signal 11" _exit.log || { cat _exit.log; fail "_exit(0), not the crash, ended rank 1"; }

echo "== MPI_Init after the agent's handlers went in: they step aside for it, and Open MPI's backtrace is still shown"
crash_job late_init 100
crashed late_init 11 1
grep -q "Signal: Segmentation fault (11)" late_init.log && grep -q "Failing at address: (nil)" late_init.log ||
  { cat late_init.log; fail "Open MPI's backtrace of the crash is gone"; }

echo "== abort(): sent by the process itself, Open MPI's handler still shown"
crash_job abort
crashed abort 6 0
grep -q "crashed with SIGABRT (signal 6: abort(), from an assert, std::terminate or the program itself)" abort.info ||
  { cat abort.info; fail "info does not describe the abort"; }
grep -q "Signal: Aborted (6)" abort.log || { cat abort.log; fail "Open MPI's report of the abort is gone"; }

echo "== a stack overflow: the handler runs on the alternate stack rankscope gives the main thread"
crash_job overflow
code=$(python3 -c 'import json; print(json.load(open("overflow.info.json"))["ranks"][1]["counters"].get("crash_signal_code", 0))')
case $code in 1|2) ;; *) fail "the overflow's si_code is $code, not SEGV_MAPERR or SEGV_ACCERR" ;; esac
crashed overflow 11 "$code"
grep -Eq "crashed with SIGSEGV \(signal 11: (address not mapped|no permission for the address)\)" overflow.info ||
  { cat overflow.info; fail "info does not describe the overflow"; }

echo "== an integer divided by zero"
crash_job fpe
crashed fpe 8 1
grep -Eq "crashed with SIGFPE \(signal 8: integer divide by zero\) in crash_app\+0x[0-9a-f]+ on thread" fpe.info ||
  { cat fpe.info; fail "info does not describe the division"; }

echo "== the program's own handler recovers from a fault: rankscope leaves it alone"
"$mpiexec" -n 2 "$rankscope" run -o recover.h5 -- "$crash_app" recover >recover.log 2>&1 ||
  { cat recover.log; fail "the job whose handler recovers failed"; }
"$rankscope" info --json recover.h5 >recover.info.json
python3 - <<'PY'
import json
info = json.load(open("recover.info.json"))
assert [r["status"] for r in info["ranks"]] == ["complete", "complete"], info["ranks"]
assert all("crash_signal" not in r["counters"] for r in info["ranks"]), info["ranks"]
PY

echo "== a handler of the program's own, set after rankscope's, that passes faults on to it (as a JVM's does)"
crash_job chain
crashed chain 11 1
grep -q "crash_app: a fault not ours: passing it on" chain.log || { cat chain.log; fail "the program's handler did not run"; }
[ "$(grep -c "Process received signal" chain.log)" -eq 1 ] || { cat chain.log; fail "Open MPI's backtrace is not there once"; }

echo "== a crash after MPI_Finalize, past the capture: the timeline is whole, and the crash is said"
status=0
"$mpiexec" -n 2 "$rankscope" run -o finalized.h5 -- "$crash_app" finalized >finalized.log 2>&1 || status=$?
[ "$status" -ne 0 ] || { cat finalized.log; fail "the job whose rank crashed after MPI_Finalize exited 0"; }
grep -q "rankscope run: rank 1: the application ended by SIGSEGV (signal 11) after its shard was closed: the capture is whole" finalized.log ||
  { cat finalized.log; fail "rank 1's rankscope run did not say it crashed after its shard was closed"; }
[ -f finalized.h5 ] || { cat finalized.log; fail "no timeline for a job whose ranks all finalized"; }
"$rankscope" info --json finalized.h5 >finalized.info.json
python3 -c 'import json; ranks = json.load(open("finalized.info.json"))["ranks"]; assert [r["status"] for r in ranks] == ["complete"] * 2, ranks'

# python MODE CODE: CODE under rankscope run in sidecar mode, which crashes.
python_job() {
  local mode=$1 status=0
  shift
  "$mpiexec" -n 1 "$rankscope" run --mode sidecar -o "$work/$mode.h5" -- /usr/bin/python3 "$@" >"$mode.log" 2>&1 || status=$?
  [ "$status" -ne 0 ] || { cat "$mode.log"; fail "the crashing Python job $mode exited 0"; }
  [ -f "$mode.h5" ] || { cat "$mode.log"; fail "the sidecar wrote no timeline for $mode"; }
  "$rankscope" info "$mode.h5" >"$mode.info"
}

echo "== sidecar mode: a Python program crashing in C (ctypes), once rankscope's handlers are in place"
python_job python_plain -c 'import ctypes, time; time.sleep(1); ctypes.string_at(0)'
grep -q "^crashed ranks: 0 " python_plain.info &&
  grep -Eq "^  rank 0: crashed with SIGSEGV \(signal 11: address not mapped\) at 0x0 in libc.so.6\+0x[0-9a-f]+" python_plain.info ||
  { cat python_plain.info; fail "info does not name the Python crash"; }

echo "== faulthandler enabled later: it reports, then raises the crash again, which rankscope records as raised"
python_job python_late -c 'import ctypes, faulthandler, time; time.sleep(1); faulthandler.enable(); ctypes.string_at(0)'
grep -q "Fatal Python error: Segmentation fault" python_late.log || { cat python_late.log; fail "faulthandler's report is gone"; }
grep -q "^  rank 0: crashed with SIGSEGV (signal 11: raised by the process itself, by raise() or a handler passing a fault on" python_late.info ||
  { cat python_late.info; fail "info does not say the crash was raised again"; }

echo "== faulthandler from the start (-X faulthandler): rankscope leaves SIGSEGV to it; run still sees a crash"
python_job python_early -X faulthandler -c 'import ctypes, time; time.sleep(1); ctypes.string_at(0)'
grep -q "Fatal Python error: Segmentation fault" python_early.log || { cat python_early.log; fail "faulthandler's report is gone"; }
uncaught="crashed with SIGSEGV (signal 11) before its shard was closed, where its capture could not catch the crash"
grep -q "rankscope run: rank 0: the application $uncaught; peak memory" python_early.log ||
  { cat python_early.log; fail "run does not name the crash its capture could not catch"; }
grep -q "^  rank 0: $uncaught" python_early.info && grep -q "^dead ranks: 0 " python_early.info ||
  { cat python_early.info; fail "info does not name the crash as a dead rank's"; }
"$rankscope" report python_early.h5 >python_early.report
grep -q "^CRASHED: rank 0 $uncaught" python_early.report || { cat python_early.report; fail "the report calls the crash a kill"; }
echo "all crash checks passed"
