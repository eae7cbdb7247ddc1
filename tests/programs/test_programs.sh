#!/usr/bin/env bash
# Real MPI programs, unchanged, under `rankscope run` on 2 ranks: an mpi4py
# script using h5py from PyPI, a script on mpi4py's own wheel from PyPI, a C program on Debian's serial HDF5, Fortran
# programs (`use mpi`, `use mpi_f08`, `include 'mpif.h'`), NetPIPE, LAMMPS and
# Meep. Each runs three times:
#   bare:     mpiexec -n 2 PROGRAM ARGS
#   profiled: mpiexec -n 2 rankscope run -o TIMELINE -- PROGRAM ARGS
#   counted:  mpiexec -n 2 -x LD_PRELOAD=libmpicount.so PROGRAM ARGS
# The profiled run must end as the bare run does and leave the same outputs,
# and its timeline must hold, per rank, the MPI calls the counted run counted
# (shared/tools/mpicount.c, an independent PMPI counter). Open MPI's Fortran
# bindings call PMPI_ directly, out of any PMPI counter's sight, so the
# Fortran programs count their own calls instead.
#
# Usage: test_programs.sh RANKSCOPE TIMELINE_SUMMARY MPIEXEC MPICOUNT_C CACHE_DIR
#   CACHE_DIR (in the build tree) keeps the virtual environments from PyPI between
#   runs, and the last run's files, one folder per program.
#   RANKSCOPE_PROGRAMS="lammps meep" runs only those programs.
# Exit status: 0 when every program passed, 1 when any failed, 77 when all
# passed but a program from PyPI was skipped because PyPI could not be reached.
set -uo pipefail
rankscope=$(realpath "$1") summary=$(realpath "$2") mpiexec=$3 mpicount_c=$(realpath "$4") cache=$5
here=$(cd "$(dirname "$0")" && pwd)
ranks=2
# Each program runs in a few seconds alone; a run that takes longer than this
# has hung (a rank waiting for a peer that died, say).
limit_s=40
all_programs="h5py mpi4py_wheel hdf5_serial fortran_mpi fortran_f08 fortran_mpifh netpipe lammps meep"
selected=${RANKSCOPE_PROGRAMS:-$all_programs}

mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$cache/last-run
rm -rf "$work"
mkdir -p "$work/bin"

failed=() skipped=() left_out=()
program=setup
fail() { echo "FAIL: $program: $*" >&2; failed+=("$program"); }
failed_now() { [ ${#failed[@]} -gt 0 ] && [ "${failed[-1]}" = "$program" ]; }
need() {  # need COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null || { fail "$1 not found: install Debian's $2 (scripts/setup-deps.sh --tests)"; return 1; }
}

mpicc -shared -fPIC -O2 -o "$work/bin/libmpicount.so" "$mpicount_c" || { echo "FAIL: cannot build $mpicount_c" >&2; exit 1; }

# ---------------------------------------------------------------- running ---

# run_three [INPUT...]: the bare, profiled and counted runs of "${command[@]}",
# each in a folder of its own holding copies of the INPUTs and nothing else,
# so that the program's arguments (relative names) are the same in all three
# and what it writes can be compared. Standard output and error, and the exit
# status, are kept beside each run's folder.
run_three() {
  local dir=$work/$program kind
  for kind in bare profiled counted; do
    mkdir -p "$dir/$kind"
    [ $# -eq 0 ] || cp "$@" "$dir/$kind/"
  done
  mkdir -p "$dir/mpicount"
  launch "$dir" bare
  launch "$dir" profiled "$rankscope" run -o "$dir/timeline.h5" --
  launch "$dir" counted -x LD_PRELOAD="$work/bin/libmpicount.so" -x MPICOUNT_DIR="$dir/mpicount"
}

launch() {  # launch DIR KIND [WORD...]: the WORDs go between "mpiexec -n 2" and the program
  local dir=$1 kind=$2
  shift 2
  (cd "$dir/$kind" && timeout -k 10 "$limit_s" "$mpiexec" -n "$ranks" "$@" "${command[@]}" \
     >"$dir/$kind.out" 2>"$dir/$kind.err")
  echo $? >"$dir/$kind.status"
}

# The profiled run must end as the bare run did, and the bare and counted
# runs must succeed. Returns 1 when any did not: the outputs and timeline of
# a run that failed say nothing more.
check_status() {
  local dir=$work/$program bare profiled counted
  bare=$(cat "$dir/bare.status") profiled=$(cat "$dir/profiled.status") counted=$(cat "$dir/counted.status")
  if [ "$bare" != 0 ]; then
    fail "the bare run failed (exit status $bare); the end of its output:"
    tail -n 20 "$dir/bare.out" "$dir/bare.err" >&2
    return 1
  fi
  if [ "$counted" != 0 ]; then
    fail "the counted run (mpicount preloaded) failed with exit status $counted; the end of its output:"
    tail -n 20 "$dir/counted.out" "$dir/counted.err" >&2
  fi
  if [ "$profiled" != "$bare" ]; then
    if [ "$profiled" = 124 ] || [ "$profiled" = 137 ]; then
      fail "under rankscope run it did not finish in $limit_s s (the bare run did); the end of its output:"
    else
      fail "under rankscope run it ended with exit status $profiled, the bare run with $bare; the end of its output:"
    fi
    tail -n 25 "$dir/profiled.out" "$dir/profiled.err" >&2
    return 1
  fi
  [ "$counted" = 0 ]
}

# compare_outputs FUNCTION: FUNCTION KIND compares what the run KIND left
# (standard output, files) with what the bare run left. The counted run goes
# first, as a control: it runs without rankscope too, so a difference there
# means this test's idea of what repeats from run to run is wrong, and the
# profiled run is not judged by it.
compare_outputs() {
  local before=${#failed[@]}
  "$1" counted
  if [ ${#failed[@]} -ne "$before" ]; then
    fail "outputs differ between two runs without rankscope (bare, counted): the test's masks are wrong, not rankscope"
    return 1
  fi
  "$1" profiled
}

# same_stdout KIND MASK: standard output of the bare run and the run KIND
# through the function MASK, which hides what differs from run to run
# (timings, rates), compared as sorted lines since the ranks' lines interleave
# in any order. Standard error is not compared: rankscope writes there.
same_stdout() {
  local dir=$work/$program kind=$1
  "$2" <"$dir/bare.out" | LC_ALL=C sort >"$dir/bare.masked"
  "$2" <"$dir/$kind.out" | LC_ALL=C sort >"$dir/$kind.masked"
  if ! diff -u "$dir/bare.masked" "$dir/$kind.masked" >"$dir/$kind.stdout.diff"; then
    fail "the $kind run's standard output differs from the bare run's (masked, sorted; - bare, + $kind):"
    tail -n +3 "$dir/$kind.stdout.diff" | grep -E '^[-+]' | head -30 >&2
  fi
}
unmasked() { cat; }

# same_files KIND PATTERN...: the files the program wrote, byte for byte.
same_files() {
  local dir=$work/$program kind=$1 pattern file name found
  shift
  for pattern in "$@"; do
    found=0
    for file in "$dir"/bare/$pattern; do
      [ -e "$file" ] || continue
      found=1 name=${file##*/}
      if [ ! -e "$dir/$kind/$name" ]; then
        fail "the $kind run did not write $name"
      elif ! cmp -s "$file" "$dir/$kind/$name"; then
        fail "$name from the $kind run differs from the bare run's ($(cmp "$file" "$dir/$kind/$name" 2>&1 | head -1))"
      fi
    done
    [ $found = 1 ] || fail "the bare run wrote no $pattern"
  done
}

# check_argv ARG...: our own programs print, on rank 0, argc=N and then
# argv[i]=<...> for what reached them; under rankscope run it must be exactly
# the ARGs given.
check_argv() {
  local expected="argc=$#" i=1 arg got
  for arg in "$@"; do expected+=$'\n'"argv[$i]=<$arg>"; i=$((i + 1)); done
  got=$(grep -E '^(argc=|argv\[)' "$work/$program/profiled.out")
  [ -z "$got" ] && return  # it never got that far: check_status says why
  [ "$got" = "$expected" ] ||
    fail "its arguments under rankscope run are not the ones given; it saw:"$'\n'"$got"$'\n'"instead of:"$'\n'"$expected"
}

# check_counts COUNTS_DIR: the timeline's calls, per rank, against a count.
check_counts() {
  local dir=$work/$program
  if [ ! -f "$dir/timeline.h5" ]; then
    fail "rankscope run wrote no timeline ($dir/timeline.h5)"
    return
  fi
  "$summary" "$dir/timeline.h5" >"$dir/summary.json" || { fail "timeline_summary cannot read the timeline"; return; }
  python3 "$here/compare_counts.py" "$program" "$dir/summary.json" "$1" "$ranks" || failed+=("$program")
}

# --------------------------------------------------------------- programs ---

# pypi_venv VENV [--system-site-packages] PIP_ARGUMENT...: a virtual
# environment in the cache with packages from PyPI, made once: the caller
# checks it and touches VENV/ready. Returns 1, the program marked skipped
# (PyPI out of reach) or failed, when it cannot be made.
pypi_venv() {
  local venv=$1 options=()
  shift
  [ "$1" = --system-site-packages ] && { options=("$1"); shift; }
  [ -f "$venv/ready" ] && return 0
  rm -rf "$venv"
  /usr/bin/python3 -m venv "${options[@]}" "$venv" ||
    { fail "cannot make a virtual environment: install Debian's python3-venv"; return 1; }
  echo "installing $* from PyPI into $venv"
  "$venv/bin/pip" install --retries 2 --timeout 30 "$@" >"$venv.pip.log" 2>&1 && return 0
  if grep -qiE 'NewConnectionError|ConnectTimeout|ReadTimeout|Max retries exceeded|Temporary failure in name resolution|Name or service not known|Network is unreachable|ProxyError|Could not fetch URL' "$venv.pip.log"; then
    echo "SKIP: $program: pip cannot reach PyPI to install $*: $(grep -m1 -iE 'retrying|error' "$venv.pip.log")"
    skipped+=("$program")
    return 1
  fi
  fail "pip install $* failed ($venv.pip.log):"
  tail -n 15 "$venv.pip.log" >&2
  return 1
}

# python_script VENV SCRIPT OUTPUTS: one of our scripts under VENV's Python,
# run three times with arguments it echoes, its outputs compared by the
# function OUTPUTS, its calls counted.
python_script() {
  local args=("two words" -o x.h5 -- last)
  command=("$1/bin/python" "$here/$2" "${args[@]}")
  run_three
  check_argv "${args[@]}"
  check_status || return
  compare_outputs "$3"
  check_counts "$work/$program/mpicount"
}

# mpi4py with h5py from PyPI. The wheel bundles its own HDF5, newer than
# Debian's, and the program must keep using it while the agent, linked to
# Debian's parallel HDF5, is preloaded. Debian's mpi4py (Open MPI) comes in
# through --system-site-packages; --ignore-installed keeps pip from settling
# for Debian's own h5py, which is there too.
program_h5py() {
  local venv=$cache/h5py-venv
  /usr/bin/python3 -c "import mpi4py" || { fail "Debian's python3-mpi4py is not installed"; return; }
  if [ ! -f "$venv/ready" ]; then
    pypi_venv "$venv" --system-site-packages --ignore-installed h5py || return
    "$venv/bin/python" - "$venv" <<'PY' || { fail "the virtual environment is not as intended"; return; }
import sys, h5py, mpi4py
assert h5py.__file__.startswith(sys.argv[1]), f"h5py comes from {h5py.__file__}, not from PyPI's wheel"
assert mpi4py.__file__.startswith("/usr/lib/python3/"), f"mpi4py comes from {mpi4py.__file__}, not from Debian"
PY
    touch "$venv/ready"
  fi
  python_script "$venv" h5py_roundtrip.py hdf5_outputs
}
# The program's own lines, and its rank-N.h5 files, written without times so
# that they are the same bytes in every run.
hdf5_outputs() { same_stdout "$1" unmasked; same_files "$1" "rank-*.h5"; }

# mpi4py's own wheel from PyPI (4.1 and later), which carries one extension
# per MPI ABI and picks the one whose library it finds at import: with the
# shim preloaded, Open MPI's must still be picked, and every call captured.
program_mpi4py_wheel() {
  local venv=$cache/mpi4py-venv
  if [ ! -f "$venv/ready" ]; then
    pypi_venv "$venv" "mpi4py>=4.1" || return
    "$venv/bin/python" - "$venv" <<'PY' || { fail "the virtual environment is not as intended"; return; }
import sys, mpi4py
assert mpi4py.__file__.startswith(sys.argv[1]), f"mpi4py comes from {mpi4py.__file__}, not from PyPI's wheel"
PY
    touch "$venv/ready"
  fi
  python_script "$venv" mpi4py_calls.py mpi4py_outputs || return
  grep -q "^MPI library: Open MPI" "$work/$program/profiled.out" ||
    fail "under rankscope run the wheel did not pick its Open MPI extension: $(grep '^MPI library' "$work/$program/profiled.out")"
}
mpi4py_outputs() { same_stdout "$1" unmasked; }

# C, linked to Debian's serial HDF5 (libhdf5_serial), whose symbols have the
# same names as those of the parallel HDF5 the agent brings in.
program_hdf5_serial() {
  # With AddressSanitizer's runtime preloaded (a sanitizer build, docs/testing.md)
  # any program on Debian's serial HDF5 that writes a file hangs in exit, rankscope
  # or not: libp11-kit's destructor waits on glibc's locale lock.
  if [[ ${RANKSCOPE_TEST_SANITIZER_RUNTIME:-} == *libasan* ]]; then
    echo "left out: a program on serial HDF5 hangs in exit with AddressSanitizer's runtime preloaded"
    left_out+=("$program")
    return
  fi
  pkg-config --exists hdf5-serial || { fail "no hdf5-serial.pc: install Debian's libhdf5-dev"; return; }
  mpicc -O1 -o "$work/bin/hdf5_serial" "$here/hdf5_serial.c" $(pkg-config --cflags --libs hdf5-serial) ||
    { fail "cannot build hdf5_serial.c"; return; }
  local args=("two words" -o x.h5 -- last)
  command=("$work/bin/hdf5_serial" "${args[@]}")
  run_three
  check_argv "${args[@]}"
  check_status || return
  compare_outputs hdf5_outputs
  check_counts "$work/$program/mpicount"
}

# One source, three ways into MPI from Fortran. The program writes its own
# counts to the folder its first argument names; the counted run only serves
# as a control for the outputs.
fortran() {  # fortran DEFINE
  need mpif90 "libopenmpi-dev and gfortran" || return
  mpif90 -O1 -D"$1" -o "$work/bin/$program" "$here/calls.F90" || { fail "cannot build calls.F90 with -D$1"; return; }
  local args=(counts "two words" -o x.h5 -- last)
  command=("$work/bin/$program" "${args[@]}")
  mkdir -p "$work/$program/"{bare,profiled,counted}/counts
  run_three
  check_argv "${args[@]}"
  check_status || return
  compare_outputs fortran_outputs
  check_counts "$work/$program/profiled/counts"
  # Started in sidecar mode, it must stop at once with rankscope's one line:
  # Open MPI's Fortran MPI_Init calls PMPI_Init, which the guard holds too.
  local sidecar=$work/$program/sidecar status=0
  mkdir -p "$sidecar/counts"
  (cd "$sidecar" && timeout "$limit_s" "$mpiexec" -n "$ranks" "$rankscope" run --mode sidecar -o "$sidecar/t.h5" -- \
    "${command[@]}" >"$sidecar.log" 2>&1) || status=$?
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    fail "in sidecar mode it $([ "$status" -eq 0 ] && echo "ran to the end" || echo "hung"), instead of stopping at MPI_Init"
  elif ! grep -q "profile it with \`rankscope run --mode inprocess\`" "$sidecar.log"; then
    fail "in sidecar mode it stopped without rankscope's one-line message ($sidecar.log)"
  elif ! grep -q "captured nothing .*: its program calls MPI_Init, so sidecar mode stopped it there" "$sidecar.log"; then
    fail "in sidecar mode the run's warning does not say why its ranks captured nothing ($sidecar.log)"
  elif ! "$rankscope" info "$sidecar/t.h5" 2>&1 | grep -q "rank 0: stopped at MPI_Init with status 1"; then
    fail "rankscope info does not say that sidecar mode stopped its ranks at MPI_Init ($sidecar/t.h5)"
  fi
}
fortran_outputs() { same_stdout "$1" unmasked; }  # checksums of what the calls computed
program_fortran_mpi() { fortran USE_MPI; }
program_fortran_f08() { fortran USE_F08; }
program_fortran_mpifh() { fortran USE_MPIFH; }

# NetPIPE's ping-pong between two ranks, a fixed 20 repeats per size.
program_netpipe() {
  need NPopenmpi netpipe-openmpi || return
  command=(NPopenmpi -n 20 -p 0 -a -u 4096 -o np.out)
  run_three
  check_status || return
  compare_outputs netpipe_outputs
  check_counts "$work/$program/mpicount"
}
netpipe_mask() { sed -E 's/-->.*/--> (rate)/'; }
netpipe_outputs() {
  same_stdout "$1" netpipe_mask
  # np.out has a line per message size: size, rate, time. The sizes must agree.
  local dir=$work/$program
  cmp -s <(awk '{print $1}' "$dir/bare/np.out") <(awk '{print $1}' "$dir/$1/np.out" 2>/dev/null) ||
    fail "the message sizes in the $1 run's np.out differ from the bare run's"
}

# LAMMPS: a small Lennard-Jones melt; its thermodynamic output, trajectory and
# final state are exact from run to run, its timings are not.
program_lammps() {
  need lmp lammps || return
  command=(lmp -in lj.in -log none -var seed 87287)
  run_three "$here/lj.in"
  check_status || return
  compare_outputs lammps_outputs
  check_counts "$work/$program/mpicount"
  # Debian's LAMMPS loads libpython (liblammps embeds Python) but is no
  # Python interpreter: there is nothing to say of rankscope's Python hook.
  local dir=$work/$program info
  ldd "$(command -v lmp)" | grep -q libpython ||
    echo "note: lammps: this lmp loads no libpython; the check below is of a program without Python"
  if grep -q "Python hook" "$dir/profiled.err"; then
    fail "rankscope spoke of its Python hook to a program that is not Python: $(grep -m1 "Python hook" "$dir/profiled.err")"
  fi
  if ! info=$("$rankscope" info "$dir/timeline.h5" 2>&1); then
    fail "rankscope info cannot read its timeline: $info"
  elif grep -q python_hook_not_run <<<"$info"; then
    fail "its timeline counts python_hook_not_run, but it is no Python interpreter"
  fi
}
lammps_mask() {
  sed -E '/^(Loop time of|Performance:|Total wall time:|MPI task timing breakdown:|Section +\||-{20,}$)/d
          /^(Pair|Neigh|Comm|Output|Modify|Other) +\|/d; /% CPU use with/d; /CPU = [0-9.e+-]+ seconds/d'
}
lammps_outputs() { same_stdout "$1" lammps_mask; same_files "$1" lj.dump lj.data; }

# Meep: an FDTD run on two chunks, one per rank, whose fields go to HDF5
# through Debian's parallel HDF5, the agent's own.
program_meep() {
  need meep meep-openmpi || return
  need h5diff hdf5-tools || return
  command=(meep waveguide.ctl)
  run_three "$here/waveguide.ctl"
  check_status || return
  compare_outputs meep_outputs
  check_counts "$work/$program/mpicount"
}
# Meep reports its progress every few seconds of wall time: how many lines depends on the machine's load.
meep_mask() { sed -E 's/^(time for [a-z_]+ = ).*/\1(time)/; s/^(Elapsed run time = ).*/\1(time)/; /^on time step /d; /^Meep progress: /d'; }
meep_outputs() {
  same_stdout "$1" meep_mask
  # Meep's files carry creation times, so their contents are compared, not their bytes.
  local dir=$work/$program file n=0
  for file in "$dir"/bare/*.h5; do
    [ -e "$file" ] || continue
    n=$((n + 1))
    h5diff -q "$file" "$dir/$1/${file##*/}" >/dev/null 2>&1 ||
      fail "${file##*/} from the $1 run differs from the bare run's, or is missing (h5diff $file $dir/$1/${file##*/})"
  done
  [ $n = 2 ] || fail "the bare run wrote $n HDF5 files, not 2"
}

# ------------------------------------------------------------------ main ---

started=$SECONDS
for program in $selected; do
  declare -F "program_$program" >/dev/null || { fail "no such program (known: $all_programs)"; continue; }
  echo "== $program"
  t=$SECONDS
  command=()
  "program_$program"
  if [[ " ${skipped[*]} " = *" $program "* ]]; then
    status=skipped
  elif [[ " ${left_out[*]} " = *" $program "* ]]; then
    status="left out"
  elif failed_now; then
    status="FAILED (its files: $work/$program)"
  else
    status=ok
  fi
  echo "== $program: $status, $((SECONDS - t)) s"
done
program=summary
echo "== all in $((SECONDS - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: $(printf '%s\n' "${failed[@]}" | uniq | tr '\n' ' ')" >&2
  exit 1
fi
if [ ${#skipped[@]} -gt 0 ]; then
  echo "SKIPPED: ${skipped[*]} (every other program passed)"
  exit 77
fi
echo "every program passed: $selected"
