#!/usr/bin/env bash
# scripts/setup-deps.sh [--tests | --bundle | --bench]: installs the Debian packages
# rankscope needs (and with --tests, those its test suite needs too; with
# --bench, the programs bench/program_cost.sh profiles), when run as root;
# otherwise names the missing ones. Safe to run again: it installs only what
# is missing.
set -euo pipefail
packages=(build-essential cmake pkg-config python3 openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
          libcli11-dev libgtest-dev libbenchmark-dev libsimdjson-dev zlib1g-dev libopenblas-dev
          libopen-trace-format2-dev)
bundle_packages=(patchelf binutils xz-utils python3-h5py python3-numpy)
if [ "${1:-}" = --bundle ]; then
  # scripts/make-bundle.sh: RUNPATHs rewritten, binaries stripped, the archive
  # compressed; scripts/gpu_check.py reads timelines with h5py.
  packages+=("${bundle_packages[@]}")
elif [ "${1:-}" = --bench ]; then
  packages+=(hpcc lammps meep-openmpi)
elif [ "${1:-}" = --tests ]; then
  # Real MPI programs profiled unchanged, a program and launcher of another
  # MPI (MPICH's, refused by name), the browser that renders the HTML
  # report, the bundle's test (tests/scripts/test_bundle.sh), the test
  # hosts' network (ip, tc), and OTF2's reader and Python bindings, which
  # check export --otf2's archives, and ccache, which hands the second of
  # scripts/test.sh's two builds the first's objects. MPICH's alternatives
  # rank below Open MPI's, so mpirun and mpicc stay Open MPI's.
  packages+=(ccache python3-mpi4py netpipe-openmpi mpich netpipe-mpich2 chromium "${bundle_packages[@]}"
             gfortran libhdf5-dev python3-venv lammps meep-openmpi iproute2 otf2-tools python3-otf2)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "rankscope needs these Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
