#!/usr/bin/env bash
# scripts/gpu-check.sh BUNDLE.tar.xz OUT_DIR: proves rankscope's CUDA and NCCL
# capture on the GPU of this machine, from a bundle made elsewhere by
# scripts/make-bundle.sh (this machine needs no Open MPI, HDF5 or build tree;
# it needs a GPU, Python with PyTorch and h5py, and cuBLAS and NCCL, which
# PyTorch's wheels carry).
#
# It profiles examples/gpu_train (cuBLAS, NCCL, NVTX; two ranks on one GPU,
# and four ranks sharing it through MPI; within capture windows; hung) and examples/ddp_torch.py (PyTorch DDP
# in sidecar mode, NCCL and gloo), once with torch.profiler instead and once
# with both, times the examples with and without rankscope in interleaved
# runs, and then checks every timeline against the examples' truth files
# (scripts/gpu_check.py). OUT_DIR gets the timelines, truth files, reports,
# logs and summary.json. Exit status: 0 when every check passed.
#
# Without a GPU (a rehearsal) every step still runs: each GPU program fails
# with its message and the summary says which checks could not pass.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUNDLE.tar.xz OUT_DIR" >&2; exit 2; }
bundle=$(realpath "$1")
out=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/logs" "$out/overhead"
# A rerun of chosen steps (GPU_CHECK_ONLY) adds its lines to the earlier run's: the last line of a step counts.
[ -n "${GPU_CHECK_ONLY:-}" ] || : >"$out/steps.tsv"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
tar -xJf "$bundle" -C "$prefix" || { echo "gpu-check: cannot unpack $bundle" >&2; exit 2; }
# shellcheck source=bundle-env.sh
source "$prefix/rankscope/env.sh"
examples="$prefix/rankscope/usr/lib/rankscope/examples"
python=${PYTHON:-python3}
steps=${GPU_CHECK_STEPS:-20}
pairs=${GPU_CHECK_PAIRS:-3}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One machine: shared memory between ranks, no fabric probing, no CMA (containers may forbid it).
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# NCCL across ranks on one GPU: each rank claims a host of its own (NCCL_HOSTID,
# set per rank below), so NCCL connects them through its socket transport on
# the loopback instead of refusing two ranks on one device.
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
per_rank_host='export NCCL_HOSTID=gpu-check-host-$OMPI_COMM_WORLD_RANK; exec "$@"'

# cuBLAS, NCCL and CUPTI: PyTorch's wheels first, then the CUDA toolkit.
search_dirs=$("$python" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
find_library() {
  find $search_dirs /usr/local/cuda/ /usr/lib/x86_64-linux-gnu -name "$1" 2>/dev/null | head -1
}
nccl=$(find_library libnccl.so.2)
cublas=$(find_library libcublas.so.13)
cublaslt=$(find_library libcublasLt.so.13)
cupti=$(find_library libcupti.so.13)
cuda_libraries=""
for library in "$nccl" "$cublas" "$cublaslt" "$cupti"; do
  [ -n "$library" ] && cuda_libraries="$cuda_libraries:$(dirname "$library")"
done
export LD_LIBRARY_PATH="${cuda_libraries#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# One CUPTI per process: the one PyTorch loads.
[ -n "$cupti" ] && export RANKSCOPE_CUPTI_PATH="$cupti"

"$python" - "$out/environment.json" "$nccl" "$cublas" "$cupti" <<'EOF'
import json, subprocess, sys
def run(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as error:  # a missing tool is a fact to record, not a failure
        return f"unavailable: {error}"
facts = {"nvidia_smi": run(["nvidia-smi", "--query-gpu=name,driver_version,uuid,memory.total", "--format=csv,noheader"]),
         "cuda_driver": run(["bash", "-c", "nvidia-smi | grep -o 'CUDA Version: [0-9.]*'"]),
         "kernel": run(["uname", "-r"]), "cpus": run(["nproc"]),
         "libnccl": sys.argv[2], "libcublas": sys.argv[3], "libcupti": sys.argv[4]}
try:
    import torch
    facts.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                 torch_nccl=".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None)
except Exception as error:
    facts["torch"] = f"unavailable: {error}"
json.dump(facts, open(sys.argv[1], "w"), indent=1)
print(json.dumps(facts))
EOF

# A hung step (a deadlock on real hardware) must not take the lease: each
# step ends after step_limit seconds (timeout signals its whole process
# group: mpirun and its ranks), and no step starts after budget seconds,
# so that the checks still run on what was done.
budget=${GPU_CHECK_SECONDS:-420}
step_limit=${GPU_CHECK_STEP_SECONDS:-150}
only=${GPU_CHECK_ONLY:-}
step() {  # step NAME COMMAND...: runs one step, its output in logs/NAME.log
  local name=$1
  shift
  if [ -n "$only" ] && ! [[ $name =~ $only ]]; then
    return 0
  fi
  if [ "$SECONDS" -ge "$budget" ]; then
    echo "gpu-check: $name: skipped, past GPU_CHECK_SECONDS=$budget"
    printf '%s\tskipped\t0\n' "$name" >>"$out/steps.tsv"
    return 0
  fi
  local begin=$SECONDS
  timeout -k 10 "$step_limit" bash -c '"$@"' _ "$@" >"$out/logs/$name.log" 2>&1
  local status=$?
  echo "gpu-check: $name: exit $status, $((SECONDS - begin)) s"
  printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - begin))" >>"$out/steps.tsv"
  return 0
}

# gpu_train_nccl TIMING OUTPUT TRUTH [run options...] -- [gpu_train arguments...]: two ranks, one GPU, NCCL
gpu_train_nccl() {
  local timing=$1 output=$2 truth=$3 run_options=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    run_options+=("$1")
    shift
  done
  shift
  RANKSCOPE_NCCL_GPU_TIME=$timing mpirun -n 2 bash -c "$per_rank_host" _ \
    rankscope run --overwrite -o "$output" --capture mpi,nvtx,cuda,nccl "${run_options[@]}" -- \
    "$examples/gpu_train" --truth "$truth" "$@"
}
# For the bash that step() runs each command in.
export -f gpu_train_nccl
export per_rank_host examples

step nccl-kernelch gpu_train_nccl kernelch "$out/nccl-kernelch.h5" "$out/truth-nccl-kernelch-%r.json" -- --steps "$steps"
step export rankscope export --overwrite "$out/nccl-kernelch.h5" --perfetto "$out/nccl-kernelch.pftrace"
step nccl-both gpu_train_nccl both "$out/nccl-both.h5" "$out/truth-nccl-both-%r.json" -- --steps "$steps"
step nccl-cupti gpu_train_nccl cupti "$out/nccl-cupti.h5" "$out/truth-nccl-cupti-%r.json" -- --steps "$steps"
step mpi-shared-gpu mpirun -n 4 rankscope run --overwrite -o "$out/mpi-shared-gpu.h5" --capture mpi,nvtx,cuda -- \
  "$examples/gpu_train" --comm mpi --dim 1024 --batch 4096 --layers 6 --steps 10 --truth "$out/truth-mpi-%r.json"

torch_env() { env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29400 + RANDOM % 500)) "$@"; }
export -f torch_env
ddp_torch="$examples/ddp_torch.py"
step torch-nccl1 mpirun -n 1 rankscope run --overwrite --mode sidecar -o "$out/torch-nccl1.h5" --capture nvtx,cuda,nccl -- \
  "$python" "$ddp_torch" --steps 10 --truth "$out/truth-torch-nccl1-%r.json"
step torch-profiler torch_env "$python" "$ddp_torch" --steps 10 --torch-profile "$out/kineto" --profile-step 5
step torch-profiler-import rankscope import-kineto --overwrite "$out/kineto" -o "$out/torch-profiler.h5"
step torch-nccl2 mpirun -n 2 bash -c "$per_rank_host" _ rankscope run --overwrite --mode sidecar -o "$out/torch-nccl2.h5" \
  --capture nvtx,cuda,nccl -- "$python" "$ddp_torch" --steps 10 --truth "$out/truth-torch-nccl2-%r.json"
step torch-nccl2-report rankscope report --overwrite "$out/torch-nccl2.h5" --format json -o "$out/torch-nccl2-report.json"
step torch-gloo2 mpirun -n 2 rankscope run --overwrite --mode sidecar -o "$out/torch-gloo2.h5" --capture nvtx,cuda -- \
  "$python" "$ddp_torch" --backend gloo --steps 6
step coexistence mpirun -n 1 rankscope run --overwrite --mode sidecar -o "$out/coexistence.h5" --capture nvtx,cuda,nccl -- \
  "$python" "$ddp_torch" --steps 10 --torch-profile "$out/coexistence-kineto" --profile-step 5

# Overhead: interleaved runs, the examples' own median step time.
for pair in $(seq 1 "$pairs"); do
  step "overhead-gpu_train-bare-$pair" mpirun -n 2 bash -c "$per_rank_host" _ "$examples/gpu_train" --steps 40 \
    --truth "$out/overhead/gpu_train-bare-p$pair-r%r.json"
  for timing in kernelch cupti; do
    step "overhead-gpu_train-$timing-$pair" gpu_train_nccl "$timing" "$out/overhead/gpu_train-$timing.h5" \
      "$out/overhead/gpu_train-$timing-p$pair-r%r.json" -- --steps 40
  done
  # One rank, no NCCL: the GPU's own pace, which a shared socket transport does not blur.
  step "overhead-gpu_train_solo-bare-$pair" mpirun -n 1 "$examples/gpu_train" --comm mpi --steps 100 \
    --truth "$out/overhead/gpu_train_solo-bare-p$pair-r%r.json"
  step "overhead-gpu_train_solo-cupti-$pair" mpirun -n 1 rankscope run --overwrite -o "$out/overhead/gpu_train_solo.h5" \
    --capture mpi,nvtx,cuda -- "$examples/gpu_train" --comm mpi --steps 100 \
    --truth "$out/overhead/gpu_train_solo-cupti-p$pair-r%r.json"
  step "overhead-torch-bare-$pair" torch_env "$python" "$ddp_torch" --steps 40 \
    --truth "$out/overhead/torch-bare-p$pair-r%r.json"
  step "overhead-torch-rankscope-$pair" mpirun -n 1 rankscope run --overwrite --mode sidecar -o "$out/overhead/torch.h5" \
    --capture nvtx,cuda,nccl -- "$python" "$ddp_torch" --steps 40 --truth "$out/overhead/torch-rankscope-p$pair-r%r.json"
done

# What the issue's proof does not hang on comes last: the budget skips it first.
# Capture windows (docs/windows-and-hangs.md): between the program's cudaProfilerStart and
# cudaProfilerStop, and steered by its ProfilerStep ranges; steps 4-6 of 10 each.
step window-profiler-api gpu_train_nccl kernelch "$out/window-profiler-api.h5" "$out/truth-window-profiler-api-%r.json" \
  --capture-range cudaProfilerApi -- --steps 10 --profile-steps 4 6
step window-steps gpu_train_nccl kernelch "$out/window-steps.h5" "$out/truth-window-steps-%r.json" --steps 4:6 -- --steps 10
# A hang: rank 1 sleeps 60 s before step 5, rank 0 waits inside its all-reduce on the GPU.
step nccl-hang gpu_train_nccl kernelch "$out/nccl-hang.h5" "$out/truth-nccl-hang-%r.json" \
  --hang-timeout 5 --hang-action abort -- --steps 8 --stall 1 5 60
[ -f "$out/nccl-hang.h5" ] || step nccl-hang-merge rankscope merge "$out/nccl-hang.h5.shards" -o "$out/nccl-hang.h5"
step nccl-hang-report rankscope report --overwrite "$out/nccl-hang.h5" --format json -o "$out/nccl-hang-report.json"
# Cluster acceptance on this one node: its GPUs' cuBLAS GEMM, device-memory triad and held GEMM, and NCCL's collectives, beside the CPU checks.
step accept mpirun -n 1 rankscope accept --level quick --format json -o "$out/accept.json" --timeline "$out/accept.h5"

for timeline in "$out"/*.h5; do
  rankscope info "$timeline" --json >"$out/info-$(basename "$timeline" .h5).json" 2>>"$out/logs/info.log"
done
"$python" "$here/gpu_check.py" "$out"
