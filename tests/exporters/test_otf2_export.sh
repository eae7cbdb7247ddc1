#!/usr/bin/env bash
# `rankscope export --otf2` end to end: the hand-made job (export_fixture.h,
# every kind of track, overlapping and unfinished operations), ddp_sim on 3
# ranks (nonblocking allreduces) and mpi_calls on 2 (blocking, nonblocking
# and persistent messages), each exported in full and with --ranks, --time
# or --steps; every archive checked by check_otf2.py against the timeline
# (regions at the events' times, MPI records per rank, clock properties and
# the clock bound, otf2-print's counts) and its totals against `rankscope
# info`. Then the outputs refused: a non-empty folder without -f, a folder
# that is no earlier export even with -f, and (as root, exporting as nobody)
# a parent the user may not write.
# Usage: test_otf2_export.sh RANKSCOPE MAKE_EXPORT_FIXTURE CHECK_OTF2 DDP_SIM MPI_CALLS MPIEXEC
set -euo pipefail
rankscope=$1 make_fixture=$2 check_otf2=$3 ddp_sim=$4 mpi_calls=$5 mpiexec=$6
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v otf2-print >/dev/null && "$python" -c "import otf2, h5py" ||
  { echo "SKIP: needs otf2-print and python3-otf2 (scripts/setup-deps.sh --tests)"; exit 77; }

# export_and_check TIMELINE NAME [OPTIONS...]: exports NAME.otf2/ and checks it
# against the timeline; the array check_args says the selection to the checker.
export_and_check() {
  local timeline=$1 name=$2
  shift 2
  "$rankscope" export "$timeline" --otf2 "$name.otf2" "$@" >"$name.out" 2>"$name.err" ||
    { cat "$name.err" >&2; fail "$name: export failed"; }
  cat "$name.out"
  [ "$(ls "$name.otf2" | tr '\n' ' ')" = "traces traces.def traces.otf2 " ] ||
    fail "$name: the folder holds more than the archive: $(ls "$name.otf2")"
  "$python" "$check_otf2" "$timeline" "$name.otf2" "$name.out" "${check_args[@]}" >"$name.check" ||
    fail "$name: the archive does not match the timeline"
  cat "$name.check"
}

# The job's totals from `rankscope info --json`: events other than counters
# must each be one region of the full export, of the paradigm of its kind.
compare_with_info() {
  local timeline=$1 name=$2
  "$rankscope" info --json "$timeline" >"$name.info.json"
  "$python" - "$name.info.json" "$name.check" "$name.out" <<'PY'
import json, re, sys
info, check, out = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), open(sys.argv[3]).read()
kinds = info["events_by_kind"]
regions = sum(v for k, v in kinds.items() if k != "counter")
assert check["slices"] + check["instants"] == regions, (check, kinds)
assert check["processes"] == sum(1 for r in info["ranks"] if r["events"] > 0), check
mpi = {"mpi_call", "mpi_collective", "mpi_p2p"}
cuda = {"cuda_api", "gpu_kernel", "gpu_memcpy", "gpu_memset", "gpu_sync", "nccl_coll_enqueue", "nccl_coll_gpu",
        "nccl_p2p_enqueue", "nccl_p2p_gpu"}
by_paradigm = {"MPI": sum(v for k, v in kinds.items() if k in mpi), "CUDA": sum(v for k, v in kinds.items() if k in cuda)}
by_paradigm["USER"] = regions - by_paradigm["MPI"] - by_paradigm["CUDA"]
assert {k: v for k, v in by_paradigm.items() if v} == check["paradigms"], (by_paradigm, check["paradigms"])
written = int(re.search(r"(\d+) events in", out).group(1))
assert written == regions, (written, regions)
print(f"{sys.argv[1]}: {regions} events of info's are {check['slices']} slices and {check['instants']} instants, "
      f"by paradigm {check['paradigms']}")
PY
}

# --- the hand-made job
"$make_fixture" fixture
"$rankscope" merge fixture -o fixture.h5 >/dev/null
check_args=()
export_and_check fixture.h5 full
compare_with_info fixture.h5 full
# The bindings name OTF2_LOCATION_TYPE_ACCELERATOR_STREAM by its older name, GPU.
grep -qE '"(ACCELERATOR_STREAM|GPU)": [1-9]' full.check || fail "fixture: CUDA streams must be accelerator locations"
grep -q '"RANKSCOPE::OVERLAP_LANES": "[1-9]' full.check || fail "fixture: its overlapping events need extra lanes"
grep -q '"RANKSCOPE::INCOMPLETE_EVENTS": "[1-9]' full.check || fail "fixture: its unfinished events must be counted"

check_args=(--ranks 0,2)
export_and_check fixture.h5 ranks --ranks 0,2
grep -q '"ranks": \[0, 2\]' ranks.check || fail "--ranks 0,2 wrote other ranks"

read -r first last < <("$python" -c '
import h5py, sys
r = h5py.File(sys.argv[1], "r")["ranks"][:]
print(min(r["first_ns"]), max(r["last_ns"]))' fixture.h5)
begin=$((first + (last - first) / 3)) end=$((first + (last - first) / 2))
check_args=(--begin "$begin" --end "$end")
export_and_check fixture.h5 window --time "$begin:$end"

# --- real jobs: collectives (ddp_sim) and messages (mpi_calls)
"$mpiexec" -n 3 "$rankscope" run -o ddp.h5 -- "$ddp_sim" --steps 6 --compute sleep >ddp.log 2>&1 ||
  { cat ddp.log; fail "ddp_sim failed"; }
check_args=()
export_and_check ddp.h5 ddp
compare_with_info ddp.h5 ddp
"$python" -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(c["collectives"] == 0)' ddp.check ||
  fail "ddp_sim: its allreduces must be MPI collective records"
check_args=(--ranks 1)
export_and_check ddp.h5 ddp_rank1 --ranks 1
# --steps: the checker takes the window the exporter resolved and printed.
"$rankscope" export ddp.h5 --otf2 ddp_steps.otf2 --steps 2:3 >ddp_steps.out || fail "ddp_sim: --steps 2:3 failed"
read -r begin end < <(sed -nE 's/.*window ([0-9]+) to ([0-9]+) ns.*/\1 \2/p' ddp_steps.out)
[ -n "$begin" ] || { cat ddp_steps.out; fail "ddp_sim: --steps 2:3 printed no window"; }
"$python" "$check_otf2" ddp.h5 ddp_steps.otf2 ddp_steps.out --begin "$begin" --end "$end" >ddp_steps.check ||
  fail "ddp_steps: the archive does not match the timeline"
cat ddp_steps.check

# Its one-sided calls fail in Open MPI's default window component on some
# hosts (MPI_ERR_WIN from MPI_Win_create in containers); pt2pt's works everywhere.
OMPI_MCA_osc=pt2pt "$mpiexec" -n 2 "$rankscope" run -o calls.h5 -- "$mpi_calls" "$work/io.dat" >calls.log 2>&1 ||
  { cat calls.log; fail "mpi_calls failed"; }
check_args=()
export_and_check calls.h5 calls
compare_with_info calls.h5 calls
"$python" - calls.h5 calls.check <<'PY' || fail "mpi_calls: every message must be a send and a receive record"
import h5py, json, sys
f, check = h5py.File(sys.argv[1], "r"), json.load(open(sys.argv[2]))
events = f["events"][:]
p2p = events[(events["kind"] == 5) & (events["flags"] & 4 == 0)]
sends, receives = int((p2p["op"] == 12).sum()), int((p2p["op"] == 13).sum())
print(f"mpi_calls: {sends} sends and {receives} receives in the timeline, "
      f"{check['sends']} and {check['receives']} in the archive")
sys.exit(not (sends > 0 and check["sends"] == sends and check["receives"] == receives))
PY
check_args=(--ranks 0)
export_and_check calls.h5 calls_rank0 --ranks 0
grep -q '"sends": 0, "receives": 0' calls_rank0.check || fail "a message with one side selected must be left out"

# --- outputs refused: each says which folder, leaves no .partial, changes nothing
refused() {  # refused NAME PATTERN COMMAND...: the command fails saying PATTERN
  local name=$1 pattern=$2
  shift 2
  ! "$@" >"$name.out" 2>"$name.err" || fail "$name: the export did not fail"
  grep -q -- "$pattern" "$name.err" || { cat "$name.err"; fail "$name: the message does not say $pattern"; }
}
mkdir other && echo keep >other/notes.txt
before=$(find full.otf2 -type f -exec md5sum {} + | sort)
refused exists "full.otf2 (--otf2) exists and is an OTF2 archive written by rankscope: give --overwrite" \
  "$rankscope" export calls.h5 --otf2 full.otf2
[ "$(find full.otf2 -type f -exec md5sum {} + | sort)" = "$before" ] || fail "an earlier export was changed without -f"
refused foreign "other (--otf2) exists and is a folder that holds files other than" \
  "$rankscope" export fixture.h5 --otf2 other -f
[ "$(cat other/notes.txt)" = keep ] && [ "$(ls other)" = notes.txt ] || fail "a foreign folder was touched"
"$rankscope" export fixture.h5 --otf2 full.otf2 -f >/dev/null || fail "an earlier export is replaced with -f"
ls -d ./*.partial 2>/dev/null && fail "a .partial folder was left behind"
echo "refused: a non-empty folder without -f, a foreign folder with -f"
# Permissions bind only a user that is not root: as root, the export runs as nobody.
if [ "$(id -u)" = 0 ]; then
  chmod 711 "$work"
  mkdir locked && chmod 555 locked
  refused unwritable "cannot make the folder locked/job.otf2.partial: Permission denied" \
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$rankscope" export fixture.h5 --otf2 locked/job.otf2
  [ -z "$(ls -A locked)" ] || fail "an unwritable parent was written into"
  echo "refused: a parent folder the user may not write"
else
  echo "not root: the unwritable parent is not tried (run as root to take another user)"
fi
echo "otf2 export: every archive matches its timeline"
