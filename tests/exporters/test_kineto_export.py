"""rankscope export --kineto DIR, read by Holistic Trace Analysis 0.5.0.

usage: test_kineto_export.py RANKSCOPE KINETO_DATA MPIEXEC [DDP_SIM]

- real torch.profiler traces (KINETO_DATA, shared/data/kineto) imported,
  exported and loaded by HTA: its comm/comp overlap and temporal breakdown
  equal `rankscope report --hta-compat` on the timeline, and the export
  imported again gives the same report, figure by figure;
- a synthetic job whose ranks' clocks were 2.5 s, -730.5 µs and 42 ns apart:
  the same, but for what the aligned clock cannot keep (the offsets, and
  --hta-compat's rounding on each rank's own clock);
- the selection (--ranks, --steps): the files and steps written;
- a job the agent captured (ddp_sim under MPI): HTA finds its ranks and
  iterations, and the files hold as many events of each kind per rank as the
  timeline;
- refusals: a non-empty folder without -f, a folder that is not an earlier
  export even with -f, a parent the user cannot write to; each named, with
  no DIR.partial left and the folder untouched.

Tolerances: HTA rounds each event to whole µs (begin up, end down) on the
clock of the file it reads and gives percentages to 2 decimals. On the
re-imported export, rankscope rounds the very timestamps HTA read, so the
figures are equal. On the original timeline rankscope rounds on each rank's
own clock, before the alignment: a rank whose offset is not whole µs may
round each edge one µs apart, so the kernel time may differ by 2 µs and a
percentage by what that moves it (at most 0.02 points on these traces).
"""

import atexit
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from hta.trace_analysis import TraceAnalysis

rankscope, data, mpiexec = sys.argv[1], sys.argv[2], sys.argv[3]
ddp_sim = sys.argv[4] if len(sys.argv) > 4 else ""
work = tempfile.mkdtemp()
atexit.register(shutil.rmtree, work, True)


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(*args, ok=True, **kwargs):
    done = subprocess.run(list(args), capture_output=True, text=True, **kwargs)
    if ok and done.returncode != 0:
        fail(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def report(timeline):
    out = f"{timeline}.report.json"
    run(rankscope, "report", timeline, "--hta-compat", "--format", "json", "-o", out)
    with open(out) as f:
        return json.load(f)


def hta_load(folder):
    logging.disable(logging.WARNING)  # HTA's lines about every file it parses
    np.seterr(all="ignore")  # 0/0 overlap of a rank without communication: NaN, as HTA gives it
    return TraceAnalysis(trace_dir=folder)


def hta_figures(folder):
    """HTA 0.5.0's figures per rank, as bench/hta_measure.py takes them."""
    analysis = hta_load(folder)
    figures = {}
    for _, row in analysis.get_temporal_breakdown(visualize=False).iterrows():
        figures[int(row["rank"])] = {
            "idle_pct": float(row["idle_time_pctg"]),
            "compute_pct": float(row["compute_time_pctg"]),
            "non_compute_pct": float(row["non_compute_time_pctg"]),
            "kernel_time_us": int(row["kernel_time(us)"]),
        }
    for _, row in analysis.get_comm_comp_overlap(visualize=False).iterrows():
        value = float(row["comp_comm_overlap_pctg"])
        figures[int(row["rank"])]["comm_comp_overlap_pct"] = None if math.isnan(value) else value
    return figures


def rankscope_figures(report_json):
    rows = {}
    for entry in report_json["overlap"]:
        hta = entry.get("hta")
        if not hta:
            continue
        rows[entry["rank"]] = {
            "idle_pct": hta["idle_pct"],
            "compute_pct": hta["compute_pct"],
            "non_compute_pct": hta["non_compute_pct"],
            "kernel_time_us": hta["kernel_time_ns"] // 1000,
            "comm_comp_overlap_pct": hta["comm_comp_overlap_pct"],
        }
    return rows


def compare_figures(name, hta, ours, pct_tolerance, us_tolerance):
    if sorted(hta) != sorted(ours):
        fail(f"{name}: HTA found ranks {sorted(hta)}, rankscope {sorted(ours)}")
    for rank, want in sorted(hta.items()):
        got = ours[rank]
        for key, value in want.items():
            other = got[key]
            if value is None or other is None:
                same = value is None and other is None
            else:
                tolerance = us_tolerance if key == "kernel_time_us" else pct_tolerance
                same = abs(value - other) <= tolerance + 1e-9
            if not same:
                fail(f"{name} rank {rank}: {key}: HTA {value}, rankscope {other}")


# What the report says of the file, not of the job it holds; and the
# identity of a communicator, a hash of its name, which the timeline does not
# keep: the export names it by the hash, which the import hashes again.
NOT_FIGURES = {"file", "comm_hash"}


def differences(a, b, where=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key in NOT_FIGURES:
                continue
            if key not in a or key not in b:
                out.append(f"{where}.{key}: only in {'the original' if key in a else 'the round trip'}")
            else:
                out += differences(a[key], b[key], f"{where}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if all(isinstance(x, dict) and "stream" in x for x in a + b):
            # Streams come in the order the import met them: by stream here.
            a, b = (sorted(side, key=lambda x: x["stream"]) for side in (a, b))
        if len(a) != len(b):
            return [f"{where}: {len(a)} entries, {len(b)} after the round trip"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} became {b!r}"]


def shifted_ranks(report_json):
    return {r["rank"] for r in report_json["clock"]["ranks"] if r.get("offset_ns")}


def may_change(difference, shifted):
    """What the export cannot keep of a timeline whose ranks' clocks were
    aligned: their offsets (the files are on the aligned clock, so the import
    finds none), and HTA's figures of those ranks, which --hta-compat rounds
    on the rank's own clock (docs/export.md)."""
    if difference.startswith(".clock.ranks[") and ".offset_ns:" in difference:
        return True
    return any(difference.startswith(f".overlap[{rank}].hta.") for rank in shifted)


def kineto_round_trip(folder, name):
    original = os.path.join(work, f"{name}.h5")
    exported = os.path.join(work, f"{name}.kineto")
    again = os.path.join(work, f"{name}.again.h5")
    run(rankscope, "import-kineto", folder, "-o", original)
    run(rankscope, "export", original, "--kineto", exported)
    files = sorted(os.listdir(exported))
    with open(os.path.join(exported, files[0]), "rb") as f:
        prefix = b'{"schemaVersion":1,"rankscopeTimeline":"' + json.dumps(original)[1:-1].encode()
        if not f.read(len(prefix)) == prefix:
            fail(f"{name}: {files[0]} does not begin with the export's marker")
    hta = hta_figures(exported)
    run(rankscope, "import-kineto", exported, "-o", again)
    first, second = report(original), report(again)
    # The very timestamps HTA read: equal to its rounding.
    compare_figures(f"{name} (export imported again)", hta, rankscope_figures(second), 0.0, 0)
    compare_figures(f"{name} (original timeline)", hta, rankscope_figures(first), 0.02, 2)
    for rank, figures in sorted(hta.items()):
        print(f"{name} rank {rank}: HTA {figures}; rankscope {rankscope_figures(first)[rank]}")
    check_counts(name, original, exported)
    shifted = shifted_ranks(first)
    changed = [d for d in differences(first, second) if not may_change(d, shifted)]
    if changed:
        fail(f"{name}: the report changed in the round trip:\n  " + "\n  ".join(changed[:40]))
    if shifted_ranks(second):
        fail(f"{name}: the export's ranks needed clock offsets again: {second['clock']['ranks']}")
    print(f"{name}: the report is the same after export --kineto and import-kineto"
          + (f" but for the clock offsets of ranks {sorted(shifted)}" if shifted else ""))
    return original


# ------------------------------------------------ a job the agent captured ---
P2P = {"send", "recv", "sendrecv"}


def kind_of(event):
    """The timeline's kind of an exported event (rankscope info's names)."""
    args = event.get("args", {})
    if "rankscope_kind" in args:
        return args["rankscope_kind"]
    if event["ph"] == "C" or event.get("cat") == "cpu_instant_event":
        return "counter"
    if event["ph"] == "i":
        return "instant"
    if event.get("cat") == "kernel" and "Collective name" in args:
        return "nccl_p2p_gpu" if args["Collective name"] in P2P else "nccl_coll_gpu"
    return {
        "kernel": "gpu_kernel",
        "gpu_memcpy": "gpu_memcpy",
        "gpu_memset": "gpu_memset",
        "cuda_sync": "gpu_sync",
        "cuda_runtime": "cuda_api",
        "cuda_driver": "cuda_api",
    }.get(event.get("cat"), "nvtx_range")


def check_counts(name, timeline, exported):
    """Every event of the timeline is in the files, of its kind, on its rank."""
    info = json.loads(run(rankscope, "info", "--json", timeline).stdout)
    want = {kind: count for kind, count in info["events_by_kind"].items() if count}
    got = {}
    for entry in info["ranks"]:
        if entry["status"] == "missing":
            continue
        rank = entry["rank"]
        in_file = 0
        with open(os.path.join(exported, f"rank-{rank}.pt.trace.json")) as f:
            for event in json.load(f)["traceEvents"]:
                if event["ph"] in ("X", "i", "C"):
                    kind = kind_of(event)
                    got[kind] = got.get(kind, 0) + 1
                    in_file += 1
        if in_file != entry["events"]:
            fail(f"{name} rank {rank}: {in_file} events in the file, {entry['events']} in the timeline")
    if got != want:
        fail(f"{name}: the export holds {got}, the timeline {want}")
    print(f"{name}: {got}, as in the timeline")


for folder in ("nccl_parser_config", "df_index_resolver", "trace_filter"):
    kineto_round_trip(os.path.join(data, folder), folder)
# Four ranks on clocks 2.5 s, -730.5 µs and 42 ns apart (bench/make_kineto_trace.py).
generator = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "make_kineto_trace.py")
synthetic = os.path.join(work, "synthetic")
run(sys.executable, generator, synthetic, "--ranks", "4", "--events-per-rank", "6000",
    "--clock-offset-us", "0,2500000,-730.5,0.042")
job = kineto_round_trip(synthetic, "synthetic")

# The selection: ranks, and steps as HTA sees them.
selected = os.path.join(work, "selected.kineto")
run(rankscope, "export", job, "--kineto", selected, "--ranks", "1,3", "--steps", "4:5")
if sorted(os.listdir(selected)) != ["rank-1.pt.trace.json", "rank-3.pt.trace.json"]:
    fail(f"--ranks 1,3 wrote {sorted(os.listdir(selected))}")
for rank in (1, 3):
    with open(os.path.join(selected, f"rank-{rank}.pt.trace.json")) as f:
        steps = sorted({e["name"] for e in json.load(f)["traceEvents"] if e["name"].startswith("ProfilerStep#")})
    if steps != ["ProfilerStep#4", "ProfilerStep#5"]:
        fail(f"--steps 4:5 wrote steps {steps} for rank {rank}")
print("--ranks 1,3 --steps 4:5: rank-1 and rank-3, steps 4 and 5")


if ddp_sim:
    job = os.path.join(work, "ddp.h5")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    run(mpiexec, "-n", "2", rankscope, "run", "-o", job, "--", ddp_sim, "--steps", "6", env=env, cwd=work)
    exported = os.path.join(work, "ddp.kineto")
    run(rankscope, "export", job, "--kineto", exported)
    check_counts("ddp_sim", job, exported)
    # A job without GPU work has no temporal breakdown in HTA (it indexes the first kernel): loaded only.
    analysis = hta_load(exported)
    if sorted(analysis.t.traces) != [0, 1]:
        fail(f"ddp_sim: HTA found ranks {sorted(analysis.t.traces)}")
    for rank in (0, 1):
        iterations = sorted(int(i) for i in analysis.t.traces[rank]["iteration"].unique() if i >= 0)
        if len(iterations) < 5:
            fail(f"ddp_sim rank {rank}: HTA found iterations {iterations}, not the job's steps")
        print(f"ddp_sim rank {rank}: HTA finds iterations {iterations}")


# --------------------------------------------------------------- refusals ---
timeline = os.path.join(work, "nccl_parser_config.h5")


def refused(args, folder, why, user_cwd=None, as_nobody=False):
    before = sorted(os.listdir(folder)) if os.path.isdir(folder) else None
    command = [rankscope, "export", timeline, "--kineto", folder] + args
    if as_nobody and os.geteuid() == 0:  # root writes anywhere: the refusal is nobody's
        command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + command
    done = run(*command, ok=False)
    if done.returncode == 0:
        fail(f"export --kineto {folder} {args} should fail: {why}")
    if folder not in done.stderr:
        fail(f"the refusal does not name {folder}: {done.stderr}")
    if os.path.exists(folder + ".partial"):
        fail(f"{folder}.partial was left behind")
    after = sorted(os.listdir(folder)) if os.path.isdir(folder) else None
    if after != before:
        fail(f"{folder} was changed: {before} -> {after}")
    print(f"refused ({why}): {done.stderr.strip().splitlines()[-1]}")


other = os.path.join(work, "other")
os.makedirs(other)
with open(os.path.join(other, "notes.txt"), "w") as f:
    f.write("mine\n")
refused([], other, "not empty, without -f")
refused(["-f"], other, "not an earlier export, even with -f")
earlier = os.path.join(work, "nccl_parser_config.kineto")
refused([], earlier, "an earlier export, without -f")
run(rankscope, "export", timeline, "--kineto", earlier, "-f")
locked = os.path.join(work, "locked")
os.makedirs(locked)
run(rankscope, "export", timeline, "--kineto", os.path.join(locked, "earlier"))
os.chmod(work, 0o755)
os.chmod(timeline, 0o644)
os.chmod(locked, 0o555)
refused([], os.path.join(locked, "out"), "a parent nobody may write to", as_nobody=True)
refused(["-f"], os.path.join(locked, "earlier"), "an earlier export in a parent nobody may write to", as_nobody=True)

print("PASS")
