#!/usr/bin/env bash
# Another MPI than rankscope's (Open MPI), or a launcher Open MPI cannot
# join: MPICH's mpiexec (hydra) and NetPIPE built for MPICH (Debian's mpich
# and netpipe-mpich2); the environments Slurm's srun without PMIx and
# torchrun give their processes. rankscope cannot capture such a job, and
# must say so before anything runs: the program of another MPI would fail in
# MPI_Init with the shim preloaded, and rankscope's own processes, each alone
# in an Open MPI world of one, would write over one another's shards and
# outputs.
# Usage: test_other_mpi.sh RANKSCOPE MPIEXEC
set -euo pipefail
rankscope=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

hydra=/usr/bin/mpiexec.mpich netpipe=/usr/bin/NPmpich2
for program in "$hydra" "$netpipe"; do
  [ -x "$program" ] || fail "$program is missing (scripts/setup-deps.sh --tests installs mpich and netpipe-mpich2)"
done
# Nothing may be left of a refused run.
nothing_left() {
  [ ! -e "$1" ] || fail "$2: $1 was written"
  [ ! -e "$1.shards" ] || fail "$2: $1.shards was left: $(ls -A "$1.shards")"
}

echo "== NetPIPE for MPICH runs under MPICH's mpiexec"
"$hydra" -n 2 "$netpipe" -u 1024 -o plain.out >plain.log 2>&1 || { cat plain.log; fail "NetPIPE failed without rankscope"; }
[ -s plain.out ] || fail "NetPIPE wrote no results without rankscope"

echo "== under rankscope run: refused before it runs, naming the program and both MPI libraries"
status=0
"$hydra" -n 2 "$rankscope" run -o np.h5 -- "$netpipe" -u 1024 -o np.out >np.log 2>&1 || status=$?
cat np.log
[ "$status" -eq 2 ] || fail "the job's status is $status, not 2 (rankscope run's own errors)"
grep -q "in-process mode ($netpipe loads libmpich.so.12)" np.log || fail "auto mode did not name the program's MPI library"
grep -Eq "error: $netpipe loads libmpich\.so\.12, another MPI than rankscope's \(libmpi\.so\.[0-9]+, Open MPI v" np.log ||
  fail "no error naming the program, its MPI library and rankscope's"
[ ! -e np.out ] || fail "NetPIPE ran, with the capture that breaks it"
nothing_left np.h5 "in-process"
# The same when the mode is given: in-process mode always preloads the shim.
status=0
"$hydra" -n 2 "$rankscope" run --mode inprocess -o np.h5 -- "$netpipe" -u 1024 -o np.out >np-inprocess.log 2>&1 ||
  status=$?
[ "$status" -eq 2 ] && grep -q "loads libmpich.so.12, another MPI than rankscope's" np-inprocess.log ||
  { cat np-inprocess.log; fail "--mode inprocess was not refused (status $status)"; }
nothing_left np.h5 "--mode inprocess"

echo "== sidecar mode under MPICH's mpiexec: every rank refuses, the program is not started"
status=0
"$hydra" -n 2 "$rankscope" run --mode sidecar -o side.h5 -- touch "$work/ran" >side.log 2>&1 || status=$?
cat side.log
[ "$status" -eq 2 ] || fail "the sidecar job's status is $status, not 2"
for rank in 0 1; do
  grep -q "error: this process is rank $rank of 2 to its launcher (PMI_RANK, PMI_SIZE: MPICH's or Intel MPI's mpiexec" \
    side.log || fail "rank $rank did not say that Open MPI cannot join MPICH's mpiexec"
done
grep -q "Open MPI's mpirun, or srun --mpi=pmix" side.log || fail "no way to start the job named"
[ ! -e ran ] || fail "the program was started"
nothing_left side.h5 "sidecar"

echo "== merge under MPICH's mpiexec: rank 1 refuses, rank 0 (alone in its world) merges the job alone"
# Shards to merge: a job whose program never calls MPI_Finalize keeps them.
"$mpiexec" -n 2 "$rankscope" run --mode inprocess -o kept.h5 -- /bin/true >kept.log 2>&1 || true
[ -s kept.h5.shards/rank-00001.shard ] || { cat kept.log; fail "the reference job under Open MPI kept no shards"; }
status=0
"$hydra" -n 2 "$rankscope" merge kept.h5.shards -o merged.h5 >merge.log 2>&1 || status=$?
cat merge.log
[ "$status" -ne 0 ] || fail "merge under MPICH's mpiexec ended well though rank 1 refused"
grep -q "rankscope merge: error: this process is rank 1 of 2 to its launcher" merge.log || fail "rank 1 did not refuse"
[ "$(grep -c "error:" merge.log)" -eq 1 ] || fail "rank 0 refused too: its one process can merge the job"
"$rankscope" info merged.h5 >merged.info 2>&1 && grep -q "2 ranks" merged.info ||
  { cat merged.info; fail "rank 0 did not merge both ranks' shards"; }

echo "== accept under MPICH's mpiexec: every rank refuses, rank 0 too (one node is not the nodes asked for)"
status=0
"$hydra" -n 2 "$rankscope" accept --level quick -o accept.html >accept.log 2>&1 || status=$?
[ "$status" -ne 0 ] && [ "$(grep -c "rankscope accept: error: this process is rank [01] of 2" accept.log)" -eq 2 ] ||
  { cat accept.log; fail "accept under MPICH's mpiexec was not refused on both ranks (status $status)"; }
[ ! -e accept.html ] || fail "accept wrote a report of one node"

echo "== in-process under Open MPI's mpirun inside a Slurm allocation: rank 0's merge is no member of either job"
"$mpiexec" -n 2 -x SLURM_JOB_ID=7 -x SLURM_PROCID=1 -x SLURM_NTASKS=2 "$rankscope" run -o in-slurm.h5 -- \
  /usr/bin/NPopenmpi -n 2 -u 64 -o in-slurm.out >in-slurm.log 2>&1 || { cat in-slurm.log; fail "NetPIPE failed"; }
[ -s in-slurm.h5 ] || { cat in-slurm.log; fail "the timeline was not written: the merge took Slurm's task for its own"; }

echo "== a refusal on one rank stops every rank, and leaves nothing behind"
status=0
"$mpiexec" -n 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then out=/proc/refused.h5; else out=refused.h5; fi
  exec "$0" run --mode sidecar -o "$out" -- touch "$PWD/refused-ran"' "$rankscope" >refused.log 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "cannot write the shards to /proc/refused.h5.shards" refused.log ||
  { cat refused.log; fail "a rank that cannot write its shards did not stop the job (status $status)"; }
[ ! -e refused-ran ] || fail "a program was started though a rank refused"
nothing_left refused.h5 "the rank that could write its shards"

echo "== Slurm's environment without PMIx: a task other than 0 refuses; a batch script's one process goes on"
status=0
env SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 \
  "$rankscope" run --mode sidecar -o task1.h5 -- touch "$work/task1-ran" >task1.log 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "rank 1 of 2 to its launcher (SLURM_PROCID, SLURM_NTASKS: srun without --mpi=pmix)" task1.log ||
  { cat task1.log; fail "task 1 of a Slurm job that Open MPI did not join was not refused (status $status)"; }
[ ! -e task1-ran ] || fail "task 1's program was started"
nothing_left task1.h5 "Slurm task 1"
env SLURM_JOB_ID=4242 SLURM_PROCID=0 SLURM_NTASKS=4 \
  "$rankscope" run --mode sidecar -o batch.h5 -- touch "$work/batch-ran" >batch.log 2>&1 ||
  { cat batch.log; fail "a batch script's one process was refused"; }
[ -e batch-ran ] && [ -s batch.h5 ] || { cat batch.log; fail "a batch script's one process left no timeline"; }
echo "== torchrun's environment: every rank refuses, and says to start the job with mpirun instead"
pids=()
for rank in 0 1; do
  # As `srun -n 1 torchrun --nproc-per-node 2` starts them: Slurm's task 0 of 1 is torchrun, not its workers.
  env SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank \
    LOCAL_WORLD_SIZE=2 TORCHELASTIC_RUN_ID=none MASTER_ADDR=127.0.0.1 MASTER_PORT=29400 \
    "$rankscope" run -o torch.h5 -- touch "$work/torch-ran-$rank" >torch-$rank.log 2>&1 &
  pids+=($!)
done
for rank in 0 1; do
  status=0
  wait "${pids[$rank]}" || status=$?
  [ "$status" -eq 2 ] && grep -q "rank $rank of 2 to its launcher (RANK, WORLD_SIZE: torchrun)" torch-$rank.log &&
    grep -q "Put rankscope between mpirun and torchrun, one per node" torch-$rank.log ||
    { cat torch-$rank.log; fail "torchrun's rank $rank was not refused (status $status)"; }
  [ ! -e torch-ran-$rank ] || fail "torchrun's rank $rank started its program"
done
nothing_left torch.h5 "torchrun"
# A merge that a training script's rank 0 runs by itself, under torchrun's environment.
env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 TORCHELASTIC_RUN_ID=none \
  "$rankscope" merge kept.h5.shards -o from-rank-0.h5 >from-rank-0.log 2>&1 ||
  { cat from-rank-0.log; fail "a merge by torchrun's rank 0 alone was refused"; }
# RANK alone (a script's own variable, sidecar mode's child) names no launcher.
env RANK=1 WORLD_SIZE=2 "$rankscope" run -o rank-only.h5 -- true >rank-only.log 2>&1 ||
  { cat rank-only.log; fail "RANK and WORLD_SIZE without torchrun's TORCHELASTIC_RUN_ID were taken for a launcher"; }
echo "PASS"
