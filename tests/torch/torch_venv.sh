#!/usr/bin/env bash
# torch_venv.sh VENV: the virtual environment the torch tests run their
# scripts in, with torch from PyPI (its CUDA wheels too: about 5 GB and two
# minutes), made once and kept outside the source tree (VENV/ready marks it
# whole). Exit status 77 (CTest's skip) when PyPI cannot be reached.
set -uo pipefail
venv=$1
torch_version="2.15.*"
[ -f "$venv/ready" ] && exit 0
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv" || { echo "FAIL: cannot make $venv: install Debian's python3-venv"; exit 1; }
echo "installing torch==$torch_version from PyPI into $venv"
if ! "$venv/bin/pip" install --retries 2 --timeout 60 "torch==$torch_version" numpy >"$venv.pip.log" 2>&1; then
  if grep -qiE 'NewConnectionError|ConnectTimeout|ReadTimeout|Max retries exceeded|Temporary failure in name resolution|Name or service not known|Network is unreachable|ProxyError' "$venv.pip.log"; then
    echo "SKIP: pip cannot reach PyPI to install torch ($venv.pip.log)"
    rm -rf "$venv"
    exit 77
  fi
  echo "FAIL: pip install torch failed ($venv.pip.log):"
  tail -n 15 "$venv.pip.log"
  rm -rf "$venv"
  exit 1
fi
"$venv/bin/python" -c 'import torch, torch.distributed as dist; assert dist.is_gloo_available(); print("torch", torch.__version__)' ||
  { echo "FAIL: torch in $venv does not import with gloo"; exit 1; }
touch "$venv/ready"
