#!/usr/bin/env bash
# The relocatable bundle (scripts/make-bundle.py) and the GPU check's
# rehearsal: the installed build and Open MPI's runtime packed, unpacked into
# an empty folder and run with this system's Open MPI, PMIx and HDF5 and the
# build tree hidden (a mount namespace binds empty folders over them), so
# only what the bundle carries can be found. Then scripts/gpu-check.sh runs
# end to end from it: without a GPU every GPU program must fail with its own
# message, the agent must say why CUDA capture is off, and the checker must
# still write its summary.
# Usage: test_bundle.sh SOURCE_DIR BUILD_DIR   (as root: it needs mount namespaces)
set -euo pipefail
source_dir=$1 build_dir=$2
[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null || { echo "SKIP: needs root and mount namespaces"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build_dir" --prefix "$work/stage" --strip >/dev/null
python3 "$source_dir/scripts/make-bundle.py" "$work/stage" "$work/bundle.tar.xz"
size=$(stat -c %s "$work/bundle.tar.xz")
[ "$size" -lt $((64 << 20)) ] || fail "the bundle is $((size >> 20)) MiB, over the 64 MiB a GPU machine is sent"

mkdir -p "$work/empty"
cat >"$work/hidden.sh" <<EOF
set -euo pipefail
for folder in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/hdf5 \
              /usr/share/openmpi /etc/openmpi "$build_dir"; do
  [ -d "\$folder" ] && mount --bind "$work/empty" "\$folder"
done
cd "$work"
mkdir unpacked
tar -xJf bundle.tar.xz -C unpacked
source unpacked/rankscope/env.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
[ "\$(command -v rankscope)" = "$work/unpacked/rankscope/usr/bin/rankscope" ] || { echo "rankscope is not the bundle's"; exit 1; }
for program in unpacked/rankscope/usr/bin/* unpacked/rankscope/usr/lib/rankscope/*.so; do
  ! ldd "\$program" | grep "not found" || { echo "\$program misses a library"; exit 1; }
done
examples=unpacked/rankscope/usr/lib/rankscope/examples
mpirun -n 2 rankscope run -o job.h5 -- \$examples/ddp_sim --steps 2 --warmup-steps 1 --layers 4 --forward-us 100 \
  --optimizer-us 100 >run.log 2>&1 || { cat run.log; exit 1; }
rankscope info job.h5 --json >info.json
# accept loads OpenBLAS at run time: the bundle's, not this system's (which Python's numpy needs, so stays visible).
LD_DEBUG=libs mpirun -n 1 -x LD_DEBUG rankscope accept --level quick -o accept.txt >accept.log 2>&1 ||
  { tail -20 accept.log; exit 1; }
grep -q "calling init: $work/unpacked/rankscope/usr/bin/\\.\\./lib/x86_64-linux-gnu/libopenblas.so.0" accept.log ||
  { grep openblas accept.log; echo "accept did not load the bundle's OpenBLAS"; exit 1; }
if [ -x \$examples/gpu_train ]; then
  status=0
  mpirun -n 1 rankscope run -o gpu.h5 --capture mpi,nvtx,cuda,nccl -- \$examples/gpu_train --steps 2 >gpu.log 2>&1 || status=\$?
  [ "\$status" -ne 0 ] || { echo "gpu_train succeeded without a GPU"; exit 1; }
  PYTHON=/usr/bin/python3 GPU_CHECK_PAIRS=1 bash "$source_dir/scripts/gpu-check.sh" bundle.tar.xz gpu-check >gpu-check.log 2>&1 || true
  # Out of time: a step past its limit is ended (a limit shorter than mpirun takes to start, even where
  # gpu_train fails at once for want of a GPU); none starts past the budget; the checks still run.
  PYTHON=/usr/bin/python3 GPU_CHECK_STEP_SECONDS=0.05 \
    bash "$source_dir/scripts/gpu-check.sh" bundle.tar.xz gpu-check-late >gpu-check-late.log 2>&1 || true
  PYTHON=/usr/bin/python3 GPU_CHECK_SECONDS=0 \
    bash "$source_dir/scripts/gpu-check.sh" bundle.tar.xz gpu-check-spent >gpu-check-spent.log 2>&1 || true
fi
EOF
unshare -m bash "$work/hidden.sh" || fail "the bundle did not run with the system's Open MPI and HDF5 hidden"

python3 - "$work" <<'EOF'
import json, os, sys
work = sys.argv[1]
info = json.load(open(os.path.join(work, "info.json")))
ranks = info["ranks"]
assert len(ranks) == 2 and all(r["status"] == "complete" for r in ranks), f"ranks: {ranks}"
assert info["events"] > 0, info
if os.path.exists(os.path.join(work, "gpu.log")):
    log = open(os.path.join(work, "gpu.log")).read()
    assert "gpu_train: no CUDA device" in log, log
    assert "CUDA capture is off: no NVIDIA driver on this host" in log, log
    summary = json.load(open(os.path.join(work, "gpu-check", "summary.json")))
    checks = {c["check"]: c for c in summary["checks"]}
    assert not checks["nccl-kernelch.h5 was written"]["passed"], checks
    assert summary["environment"]["cpus"], summary["environment"]
    assert [c for c in summary["checks"] if c["check"].startswith("NCCL hang") and not c["passed"]], checks
    steps = [line.split("\t") for line in open(os.path.join(work, "gpu-check-late", "steps.tsv")) if line.strip()]
    assert steps[0][:2] == ["nccl-kernelch", "124"] and int(steps[0][2]) <= 12, steps[0]
    assert os.path.exists(os.path.join(work, "gpu-check-late", "summary.json"))
    spent = [line.split("\t") for line in open(os.path.join(work, "gpu-check-spent", "steps.tsv")) if line.strip()]
    assert len(spent) == len(steps) and all(s[1] == "skipped" for s in spent), spent
    assert os.path.exists(os.path.join(work, "gpu-check-spent", "summary.json"))
    # accept runs from the bundle alone (its OpenBLAS too) and finds no GPU here.
    accepted = json.load(open(os.path.join(work, "gpu-check", "accept.json")))
    assert accepted["verdict"] == "pass", accepted["verdict"]
    [node] = accepted["nodes"]
    assert node["inventory"]["gpus"] == 0 and node["inventory"]["gpu_unavailable"].startswith("no GPU"), node["inventory"]
    assert len(node["gemm_gflops"]) == 9 and min(node["gemm_gflops"]) > 0, node["gemm_gflops"]
    assert not [c for c in accepted["collectives"] if c["transport"] == "nccl"], "NCCL swept with no GPU"
    for name in ("nccl-kernelch", "mpi-shared-gpu", "window-profiler-api", "window-steps", "nccl-hang"):
        text = open(os.path.join(work, "gpu-check", "logs", name + ".log")).read()
        assert "gpu_train: no CUDA device" in text, (name, text)
EOF
echo "PASS: the bundle runs with nothing of this system's Open MPI, HDF5 or build tree"
