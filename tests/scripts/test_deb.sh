#!/usr/bin/env bash
# The Debian package (`cpack -G DEB`): its dependencies are Debian's packages,
# and the installed tree works from wherever it lies, never reaching into the
# build folder: the package is unpacked into an empty folder and a 2-rank job
# runs from it with the build folder hidden (a mount namespace binds an empty
# folder over it). What the application is given to preload must come from
# the unpacked tree.
# Usage: test_deb.sh BUILD_DIR MPIEXEC   (as root: it needs mount namespaces)
set -euo pipefail
build_dir=$1 mpiexec=$2
[ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null || { echo "SKIP: needs root and mount namespaces"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build_dir" && cpack -G DEB -B "$work/package" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack failed"; }
deb=$(ls "$work"/package/rankscope_*.deb)
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for package in openmpi-bin libopenmpi3 libhdf5-openmpi-103-1 libc6; do
  grep -q "$package" <<<"$depends" || fail "the package does not depend on $package"
done
dpkg-deb -c "$deb" >"$work/contents.txt"
grep -q "usr/share/doc/rankscope/run.md" "$work/contents.txt" || fail "the documentation is not in the package"

dpkg -x "$deb" "$work/root"
mkdir -p "$work/empty" "$work/job"
cat >"$work/job.sh" <<EOF
set -euo pipefail
mount --bind "$work/empty" "$build_dir"
cd "$work/job"
prefix="$work/root/usr"
"$mpiexec" -n 1 "\$prefix/bin/rankscope" run --mode inprocess -o env.h5 -- /bin/sh -c 'echo "\$LD_PRELOAD"' >preload.txt 2>/dev/null
"$mpiexec" -n 2 "\$prefix/bin/rankscope" run -o job.h5 -- "\$prefix/lib/rankscope/examples/ddp_sim" --steps 2 >run.log 2>&1
"\$prefix/bin/rankscope" info job.h5 >info.txt
EOF
unshare -m bash "$work/job.sh" || { cat "$work/job/run.log" 2>/dev/null; fail "the job from the unpacked package failed"; }
for library in $(cat "$work/job/preload.txt"); do
  case $library in
    "$work/root/usr/lib/rankscope/"*) ;;
    # A sanitizer build's runtime (docs/testing.md), from a package this one depends on.
    *) [ "$library" = "${RANKSCOPE_TEST_SANITIZER_RUNTIME:-}" ] ||
         fail "the application was given $library to preload, from outside the package" ;;
  esac
done
grep -q "librankscope_mpi.so" "$work/job/preload.txt" || fail "nothing of the package was preloaded: $(cat "$work/job/preload.txt")"
grep -q "job.h5: 2 ranks" "$work/job/info.txt" || { cat "$work/job/info.txt"; fail "no 2-rank timeline"; }
[ "$(grep -c " complete " "$work/job/info.txt")" -eq 2 ] || { cat "$work/job/info.txt"; fail "not every rank is complete"; }
grep -q "mpi_collective" "$work/job/info.txt" || { cat "$work/job/info.txt"; fail "no MPI collective captured"; }
echo "package ok: $(basename "$deb"), $(stat -c %s "$deb") bytes"
