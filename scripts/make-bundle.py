#!/usr/bin/env python3
"""Makes a relocatable rankscope bundle: an installed rankscope with Open MPI's
runtime (mpirun, its plugins, PMIx) and every library they need from this
Debian system, glibc and the C++ runtime excepted, so that it runs from any
folder on a machine that has neither Open MPI nor HDF5 (a GPU machine with a
Python stack, say). Each program and library in it finds the others through
a RUNPATH relative to itself; env.sh sets what Open MPI needs to find its
plugins and help files under the bundle's folder.

    scripts/make-bundle.py STAGE OUTPUT.tar.xz

STAGE is a `cmake --install` prefix. The archive unpacks into rankscope/;
source rankscope/env.sh before use. Called by scripts/make-bundle.sh.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

MULTIARCH = "usr/lib/x86_64-linux-gnu"
OPENMPI_LIB = f"{MULTIARCH}/openmpi/lib"
PMIX_ROOT = f"{MULTIARCH}/pmix2"
# The C library and the C++ runtime come from the host: a newer host's copies
# serve older programs, and a process (Python with PyTorch) must not get two.
HOST_LIBRARIES = re.compile(r"^(ld-linux.*|linux-vdso.*|libc|libm|libpthread|libdl|librt|libresolv|libutil|"
                            r"libstdc\+\+|libgcc_s)\.so")
# Loaded by rankscope at run time (dlopen), so that no ldd of it names them:
# OpenBLAS, for `accept`'s compute check.
RUNTIME_LOADED = ("libopenblas.so.0",)
# Open MPI plugins for fabrics a single GPU machine does not have; leaving
# them out keeps UCX, libfabric, PSM and verbs (and Java) out of the bundle.
SKIPPED_PLUGIN_DEPENDENCIES = re.compile(r"^lib(ucp|uct|ucs|ucm|fabric|psm|psm2|ibverbs|rdmacm|jvm|nl-)")


def ldd(path):
    """The libraries a program or library loads, as {soname: resolved path}."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True)
    found = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\S+) => (\S+)", line)
        if match and match.group(2) != "not":
            found[match.group(1)] = match.group(2)
        elif "not found" in line:
            raise SystemExit(f"make-bundle: {path} needs {line.split()[0]}, which is not installed")
    return found


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def copy_tree_files(source, destination, keep=lambda path: True):
    for folder, _, files in os.walk(source):
        for name in files:
            path = os.path.join(folder, name)
            if not keep(path):
                continue
            target = os.path.join(destination, os.path.relpath(path, source))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target, follow_symlinks=False)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    stage, output = sys.argv[1], os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="rankscope-bundle-")
    root = os.path.join(work, "rankscope")
    usr = os.path.join(root, "usr")
    copy_tree_files(stage, usr)

    # Open MPI: the launcher, its libraries and plugins, help files; PMIx likewise.
    for program in ("orterun", "orted", "ompi_info"):
        os.makedirs(os.path.join(usr, "bin"), exist_ok=True)
        shutil.copy2(f"/usr/bin/{program}", os.path.join(usr, "bin", program))
    for alias in ("mpirun", "mpiexec"):
        os.symlink("orterun", os.path.join(usr, "bin", alias))

    def plugin_wanted(path):
        is_plugin = path.endswith(".so") and ("/openmpi3/" in path or "/pmix/" in path)
        if not is_plugin:
            return True
        return not any(SKIPPED_PLUGIN_DEPENDENCIES.match(name) for name in ldd(path))

    copy_tree_files(f"/{OPENMPI_LIB}", os.path.join(root, OPENMPI_LIB),
                    keep=lambda p: "/include/" not in p and "java" not in p and plugin_wanted(p))
    copy_tree_files(f"/{PMIX_ROOT}", os.path.join(root, PMIX_ROOT),
                    keep=lambda p: "/include/" not in p and plugin_wanted(p))
    copy_tree_files("/usr/share/openmpi", os.path.join(usr, "share/openmpi"),
                    keep=lambda p: p.endswith((".txt", ".conf")) or "help" in p)
    copy_tree_files("/usr/share/pmix", os.path.join(usr, "share/pmix"))

    # Every library those need, flat in usr/lib/x86_64-linux-gnu, and each ELF
    # given a RUNPATH from its own folder to the bundle's library folders.
    library_dirs = [os.path.join(root, d) for d in (MULTIARCH, OPENMPI_LIB, f"{PMIX_ROOT}/lib", "usr/lib/rankscope")]
    os.makedirs(library_dirs[0], exist_ok=True)
    bundled = {name for d in library_dirs if os.path.isdir(d) for name in os.listdir(d)}
    for soname in RUNTIME_LOADED:
        shutil.copy2(os.path.realpath(f"/{MULTIARCH}/{soname}"), os.path.join(library_dirs[0], soname))
        bundled.add(soname)
    pending = [os.path.join(folder, name) for folder, _, files in os.walk(root) for name in files]
    elves = []
    while pending:
        path = pending.pop()
        if os.path.islink(path) or not is_elf(path):
            continue
        elves.append(path)
        for soname, resolved in ldd(path).items():
            if HOST_LIBRARIES.match(soname) or soname in bundled:
                continue
            if soname.startswith(("libcublas", "libnccl", "libcudart", "libcuda.")):
                continue  # the GPU machine's own CUDA libraries serve the examples
            target = os.path.join(library_dirs[0], soname)
            shutil.copy2(os.path.realpath(resolved), target)
            bundled.add(soname)
            pending.append(target)
    for path in elves:
        folder = os.path.dirname(path)
        runpath = ":".join("$ORIGIN/" + os.path.relpath(d, folder) for d in library_dirs)
        subprocess.run(["strip", "--strip-unneeded", path], capture_output=True)
        subprocess.run(["patchelf", "--set-rpath", runpath, path], check=True)

    shutil.copy2(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundle-env.sh"), os.path.join(root, "env.sh"))
    with tarfile.open(output, "w:xz") as archive:
        archive.add(root, arcname="rankscope")
    shutil.rmtree(work)
    print(f"make-bundle: {output} ({os.path.getsize(output) / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
