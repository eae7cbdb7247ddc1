#!/usr/bin/env bash
# A rank asking for `cuda,nvtx` capture. Where CUDA capture cannot run, it
# prints exactly one line saying that CUDA capture is off and why, captures
# NVTX, and exits 0: no CUPTI, no NVIDIA driver (only checked on a host
# without one), an old driver, another CUPTI client. With a fake libcupti and
# libcuda (fake_cuda.cpp) it captures, and prints nothing; a tool that
# subscribes to CUPTI later gets it, with one line.
# Usage: test_cuda_capture.sh TEST_BINARY CAPTURE_LIBRARY FAKE_CUDA_LIBRARY
set -euo pipefail
binary=$1 library=$2 fake=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export RANKSCOPE_CAPTURE=cuda,nvtx RANKSCOPE_RANK=0
export NVTX_INJECTION64_PATH=$library CUDA_INJECTION64_PATH=$library

# The capture library loads where there is no CUDA: CUPTI and the driver are opened at run time.
if objdump -p "$library" | grep NEEDED | grep -Eqi 'cupti|libcuda|nccl'; then
  fail "the capture library depends on a CUDA library"
fi

# The fake driver is found as libcuda.so.1 before any real one; the fake
# CUPTI goes by CUPTI's name, by which a tool's subscription finds it where
# it lies in a local scope only (as a Python extension's dependency does).
mkdir "$work/driver"
ln -s "$fake" "$work/driver/libcuda.so.1"
ln -s "$fake" "$work/driver/libcupti.so.13"
with_fake() { LD_LIBRARY_PATH=$work/driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} RANKSCOPE_CUPTI_PATH=$work/driver/libcupti.so.13 "$@"; }

# `sh -c 'exec'` keeps the pid the agent is told is its own.
as_rank() { RANKSCOPE_SHARD_DIR=$work/$1 sh -c 'RANKSCOPE_AGENT_PID=$$ exec "$0"' "$binary"; }

# check CASE EXPECTED_STDERR: the run passes, and stderr is that one line (or nothing).
check() {
  local name=$1 expected=$2 status=0
  as_rank "$name" >"$work/$name.out" 2>"$work/$name.err" || status=$?
  if [ "$status" -ne 0 ]; then cat "$work/$name.out" "$work/$name.err"; fail "$name: exit status $status"; fi
  grep -q "PASSED.*1 test" "$work/$name.out" || { cat "$work/$name.out"; fail "$name: the test for this case did not run"; }
  if [ -z "$expected" ]; then
    [ ! -s "$work/$name.err" ] || { cat "$work/$name.err"; fail "$name: something on stderr"; }
  elif [ "$(wc -l <"$work/$name.err")" -ne 1 ] || ! grep -qF "$expected" "$work/$name.err"; then
    cat "$work/$name.err"
    fail "$name: stderr is not the one line '$expected'"
  fi
  if [ -n "$expected" ]; then echo "$name: $(cat "$work/$name.err")"; else echo "$name: captured, nothing on stderr"; fi
}

off="rankscope agent: rank 0: CUDA capture is off:"
RANKSCOPE_CUPTI_PATH=$work/no/libcupti.so.13 check no_cupti "$off CUPTI cannot be loaded from RANKSCOPE_CUPTI_PATH"
if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  echo "no_driver: skipped, this host has an NVIDIA driver"
else
  check no_driver "$off no NVIDIA driver on this host (libcuda.so.1 cannot be loaded)"
fi
FAKE_CUDA_DRIVER_VERSION=12040 with_fake check old_driver \
  "$off the NVIDIA driver supports CUDA 12.4 only; CUPTI 13 needs a driver for CUDA 13.0 or newer"
FAKE_CUPTI_HOLDER="Nsight Systems" with_fake check other_subscriber \
  "$off another CUPTI client traces this process (CUPTI for Nsight Systems); rankscope leaves CUPTI to it"
TEST_CUDA_EXPECT=capture with_fake check capture ""
TEST_CUDA_EXPECT=other_client_later with_fake check other_client_later \
  "$off another CUPTI client subscribed (called from $(basename "$binary")); rankscope leaves CUPTI to it, with the GPU work recorded until now"
TEST_CUDA_EXPECT=profiler_api RANKSCOPE_CAPTURE_RANGE=cudaProfilerApi with_fake check profiler_api \
  "rankscope agent: rank 0: --capture-range cudaProfilerApi: 2 capture windows recorded, "
