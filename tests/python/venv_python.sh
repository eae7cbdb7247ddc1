#!/bin/sh
# venv_python.sh PYTHON SCRIPT [ARGS...]: runs SCRIPT with the test venv's
# PYTHON, or skips (status 77, CTest's skip) where the venv could not be made:
# CTest still runs the tests of a fixture that skipped.
python=$1
shift
[ -x "$python" ] || { echo "SKIP: no $python (the python.venv fixture could not make it)"; exit 77; }
exec "$python" "$@"
