#!/usr/bin/env bash
# python_venv.sh VENV PACKAGE: the virtual environment the python-labelled
# tests run in: what the rankscope package needs from PyPI (h5py, numpy,
# pandas) and Holistic Trace Analysis 0.5.0, which the Kineto export is
# checked against. Made once and kept outside the source tree (VENV/ready
# marks it whole); the package at PACKAGE (python/) is installed into it
# again on every run, as a user installs it, so the tests read this tree's
# code. Exit status 77 (CTest's skip) when PyPI cannot be reached.
set -uo pipefail
venv=$1
package=$2
if [ ! -f "$venv/ready" ]; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" || { echo "FAIL: cannot make $venv: install Debian's python3-venv"; exit 1; }
  echo "installing h5py, numpy, pandas, HolisticTraceAnalysis==0.5.0 and wheel from PyPI into $venv"
  if ! "$venv/bin/pip" install --retries 2 --timeout 60 h5py numpy pandas "HolisticTraceAnalysis==0.5.0" wheel \
      >"$venv.pip.log" 2>&1; then
    if grep -qiE 'NewConnectionError|ConnectTimeout|ReadTimeout|Max retries exceeded|Temporary failure in name resolution|Name or service not known|Network is unreachable|ProxyError' "$venv.pip.log"; then
      echo "SKIP: pip cannot reach PyPI ($venv.pip.log)"
      rm -rf "$venv"
      exit 77
    fi
    echo "FAIL: pip install failed ($venv.pip.log):"
    tail -n 15 "$venv.pip.log"
    rm -rf "$venv"
    exit 1
  fi
  touch "$venv/ready"
fi
# From a copy, as setuptools leaves build/ and *.egg-info beside the sources;
# without build isolation: the build needs only setuptools and wheel, which
# the venv has, and no index.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$package" "$copy/python"
"$venv/bin/pip" install --no-deps --no-build-isolation --force-reinstall -q "$copy/python" ||
  { echo "FAIL: pip install $package into $venv failed"; exit 1; }
"$venv/bin/python" -c 'import rankscope, hta; print("rankscope", rankscope.__version__, "from", rankscope.__file__)'
