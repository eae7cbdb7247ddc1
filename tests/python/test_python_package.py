"""test_python_package.py RANKSCOPE MAKE_EXPORT_FIXTURE MAKE_SYNTHETIC_SHARDS DDP_SIM MPIEXEC WORK

The rankscope Python package (python/, installed into the test's virtual
environment by the python_venv fixture) against what else knows the same
facts: h5py reading the tables by hand (docs/format.md's recipe), rankscope's
own report and info, and ddp_sim's printed truth. Run by the venv's Python.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd

import rankscope

RANKSCOPE, FIXTURE, SYNTHETIC, DDP_SIM, MPIEXEC, WORK = sys.argv[1:7]
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def run(*command, **options):
    done = subprocess.run(command, capture_output=True, text=True, **options)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} (status {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def by_hand(path):
    """Events per rank and kind, counters and strings, read with h5py alone."""
    with h5py.File(path, "r") as f:
        b, o = f["strings/bytes"][:].tobytes(), f["strings/offsets"][:]
        name = lambda i: b[o[i]:o[i + 1]].decode()  # noqa: E731
        counts = f["event_counts"][:]
        counters = {(int(c["rank"]), name(c["name_id"])): int(c["value"]) for c in f["counters"][:]}
        events = []
        for r in f["ranks"][:]:
            rows = f["events"][r["event_offset"]:r["event_offset"] + r["event_count"]]
            events.append(rows)
    return counts, counters, events, name


def test_against_h5py(path, label):
    before = digest(path)
    t = rankscope.open(path)
    counts, counters, raw, name = by_hand(path)
    events = t.events()
    got = events.groupby(["rank", "kind"], observed=True).size()
    same = all(got.get((r, kind), 0) == counts[r][k]
               for r in range(t.world_size) for k, kind in enumerate(rankscope.timeline._schema.KINDS))
    check(same and len(events) == counts.sum(), f"{label}: events per rank and kind equal /event_counts by hand "
          f"({len(events)} events)")
    for r in range(t.world_size):
        mine = events[events["rank"] == r]
        check(np.array_equal(mine["begin_ns"].to_numpy(), raw[r]["begin_ns"]) and
              np.array_equal(mine["end_ns"].to_numpy(), raw[r]["end_ns"]) and
              list(mine["name"].astype(str)[:50]) == [name(i) for i in raw[r]["name_id"][:50]],
              f"{label}: rank {r}'s times and names equal the rows by hand")
    frame = t.counters()
    check({(int(r), str(n)): int(v) for r, n, v in frame[["rank", "name", "value"]].itertuples(index=False)} ==
          counters, f"{label}: counters equal /counters by hand ({len(counters)})")
    t.close()
    check(digest(path) == before, f"{label}: reading left the file byte for byte as it was")
    return events


def test_fixture():
    folder = os.path.join(WORK, "fixture")
    run(FIXTURE, folder)
    path = os.path.join(WORK, "fixture.h5")
    run(RANKSCOPE, "merge", "-f", "-o", path, folder)
    test_against_h5py(path, "fixture")
    report = json.loads(run(RANKSCOPE, "report", path, "--format", "json"))
    with rankscope.open(path) as t:
        collectives = t.collectives()
        check(collectives["instance"].nunique() == report["collectives_summary"]["instances"],
              f"fixture: {collectives['instance'].nunique()} collectives, as many as the report matched")
        steps = t.steps()
        check(sorted(int(s) for s in steps["step"].unique()) == report["steps"]["numbers"],
              f"fixture: steps {report['steps']['numbers']} are the report's")
        kernels = t.kernels()
        check(len(kernels) > 0 and kernels["stream"].notna().all(),
              f"fixture: {len(kernels)} kernels, each with its stream")
        everything = t.events()
        begin, end = 1_100_000, 1_200_000
        window = t.events(time=(begin, end))
        expected = everything[(everything["end_ns"] >= begin) & (everything["begin_ns"] < end)]
        check(len(window) == len(expected) and len(window) < len(everything),
              f"fixture: time=({begin}, {end}) selects the {len(expected)} events that overlap it")
        one = t.events(kinds=["gpu_kernel", "mpi_collective"], ranks=[1])
        check(len(one) == ((everything["rank"] == 1) & everything["kind"].isin(["gpu_kernel", "mpi_collective"])).sum()
              and set(one["rank"]) == {1}, f"fixture: kinds and ranks select {len(one)} events")
    return path


def test_chunks():
    folder = os.path.join(WORK, "synthetic")
    shutil.rmtree(folder, ignore_errors=True)
    run(SYNTHETIC, folder, "3", "40000", "--messages", "1", "--gpu-kernel-names", "50")
    path = os.path.join(WORK, "synthetic.h5")
    run(RANKSCOPE, "merge", "-f", "-o", path, folder)
    events = test_against_h5py(path, "synthetic (3 checksum blocks a rank)")
    with rankscope.open(path) as t:
        chunks = list(t.iter_events(chunk_rows=16384))
        check(len(chunks) >= 9 and max(len(c) for c in chunks) <= 16384 and
              pd.concat(chunks, ignore_index=True).equals(events),
              f"synthetic: {len(chunks)} chunks of at most 16,384 events equal the whole frame")
    return path


def test_ddp_sim():
    path = os.path.join(WORK, "ddp.h5")
    truth = os.path.join(WORK, "truth.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    run(MPIEXEC, "-n", "2", RANKSCOPE, "run", "-f", "-o", path, "--", DDP_SIM, "--steps", "6", "--layers", "6",
        "--layer-mb", "1", "--truth", truth, env=env)
    test_against_h5py(path, "ddp_sim")
    truth = json.load(open(truth))
    with rankscope.open(path) as t:
        steps = t.steps(ranks=[0]).sort_values("step")
        counted = steps["duration_ns"].to_numpy()[truth["warmup_steps"]:] / 1e6
        check(len(counted) == truth["steps"] and np.allclose(counted, truth["step_times_ms"], atol=0.05),
              f"ddp_sim: rank 0's steps {np.round(counted, 3).tolist()} ms are the ones it printed "
              f"{truth['step_times_ms']}")
        collectives = t.collectives()
        allreduces = collectives[collectives["op"] == "AllReduce"]
        per_step = allreduces["instance"].nunique() / (truth["steps"] + truth["warmup_steps"])
        check(per_step == len(truth["buckets"]), f"ddp_sim: {per_step:g} allreduces a step, one per bucket "
              f"({len(truth['buckets'])})")
        exposed = allreduces.groupby("rank")["exposed_wait_ns"].sum()
        check(len(exposed) == 2 and exposed.notna().all(), "ddp_sim: each rank's exposed wait is known")
        ranks = t.ranks()
        check(list(ranks["status"]) == ["complete", "complete"] and ranks["clock_synced"].all(),
              "ddp_sim: both ranks complete, clocks synchronised")
    report = rankscope.report(path, rankscope=RANKSCOPE)
    check(report["breakdown.steps"]["rank"].nunique() == 2 and "ns.backward" in report["breakdown.steps"],
          f"ddp_sim: the report as frames ({len(report.frames)} of them, breakdown.steps per rank)")
    saved = os.path.join(WORK, "ddp-report.json")
    with open(saved, "w") as file:
        json.dump(report.data, file)
    check(rankscope.report(saved)["ranks"].equals(report["ranks"]), "ddp_sim: a saved JSON report reads the same")


def expect_error(kind, words, action, what):
    try:
        action()
    except kind as error:
        check(all(w in str(error) for w in words), f"{what}: {error}")
        return
    except Exception as error:  # noqa: BLE001 - the wrong kind is the failure reported
        check(False, f"{what}: {type(error).__name__} instead of {kind.__name__}: {error}")
        return
    check(False, f"{what}: no error")


def damaged_copy(path, name):
    copy = os.path.join(WORK, name)
    shutil.copyfile(path, copy)
    return copy


def test_damage(path):
    # A byte of rank 1's events flipped: its block's checksum no longer matches.
    copy = damaged_copy(path, "flipped.h5")
    with h5py.File(copy, "r") as f:
        offset = f["events"].id.get_offset()
        row = int(f["ranks"][1]["event_offset"]) + 20000
    with open(copy, "r+b") as file:
        file.seek(offset + row * 64 + 3)
        byte = file.read(1)
        file.seek(offset + row * 64 + 3)
        file.write(bytes([byte[0] ^ 0x10]))
    with rankscope.open(copy) as t:
        expect_error(rankscope.DamagedTimelineError, [copy, "/events row", "CRC-32C", "rank 1"],
                     lambda: t.events(ranks=[1]), "a flipped event byte is named by dataset and rows")
        check(len(t.events(ranks=[0])) > 0, "the other ranks' events still read")
    # A value no event has, where no checksum guards it (as in timelines
    # written before the checksums).
    copy = damaged_copy(path, "values.h5")
    with h5py.File(copy, "r+") as f:
        del f["event_checksums"]
        events = f["events"]
        record = events[5]
        record["kind"] = 77
        events[5] = record
    with rankscope.open(copy) as t:
        expect_error(rankscope.DamagedTimelineError, ["/events row 5", "kind 77", "is not an event kind"],
                     lambda: t.events(), "an impossible kind is named by row and field")
    # A chunked table whose HDF5 checksum fails.
    copy = damaged_copy(path, "counters.h5")
    with h5py.File(copy, "r") as f:
        offset, size = f["counters"].id.get_chunk_info(0).byte_offset, f["counters"].id.get_chunk_info(0).size
    with open(copy, "r+b") as file:
        file.seek(offset + size // 2)
        byte = file.read(1)
        file.seek(offset + size // 2)
        file.write(bytes([byte[0] ^ 0xFF]))
    with rankscope.open(copy) as t:
        expect_error(rankscope.DamagedTimelineError, ["/counters", "unreadable"], t.counters,
                     "a counters chunk that fails HDF5's checksum is named")
    copy = damaged_copy(path, "newer.h5")
    with h5py.File(copy, "r+") as f:
        f.attrs["format_version"] = np.int32(2)
    expect_error(rankscope.UnsupportedVersionError, [copy, "version 2", "newer"], lambda: rankscope.open(copy),
                 "a newer format is refused by name")
    plain = os.path.join(WORK, "plain.h5")
    with h5py.File(plain, "w") as f:
        f["x"] = [1]
    expect_error(rankscope.NotATimelineError, [plain, "not a rankscope timeline"], lambda: rankscope.open(plain),
                 "an HDF5 file of another program is refused")
    text = os.path.join(WORK, "text.h5")
    with open(text, "w") as file:
        file.write("not HDF5\n")
    expect_error(rankscope.NotATimelineError, [text], lambda: rankscope.open(text), "a file that is not HDF5")
    with rankscope.open(path) as t:
        expect_error(ValueError, ["gpu_kernels", "gpu_kernel"], lambda: t.events(kinds=["gpu_kernels"]),
                     "an unknown kind names the kinds")
        expect_error(ValueError, ["rank 9"], lambda: t.events(ranks=[9]), "a rank outside the job")


def main():
    os.makedirs(WORK, exist_ok=True)
    test_fixture()
    synthetic = test_chunks()
    test_ddp_sim()
    test_damage(synthetic)
    if failures:
        sys.exit(f"{len(failures)} failed:\n  " + "\n  ".join(failures))
    print("all passed")


main()
