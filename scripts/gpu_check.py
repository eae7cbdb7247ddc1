#!/usr/bin/env python3
"""Checks rankscope's CUDA and NCCL capture against what the programs ran.

    scripts/gpu_check.py OUT_DIR

Reads what scripts/gpu-check.sh left in OUT_DIR (timelines, the examples'
truth files, reports, logs) and writes OUT_DIR/summary.json: one entry per
check with its figures and whether it passed, and prints a table. Timelines
are read with h5py alone (docs/format.md), not with rankscope's code, so the
check does not share rankscope's mistakes.
"""
import collections
import glob
import json
import os
import statistics
import sys

import h5py
import numpy as np

NVTX_RANGE, CUDA_API, GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_SYNC = 1, 6, 7, 8, 9, 10
NCCL_COLL_ENQUEUE, NCCL_COLL_GPU = 11, 12
FLAG_END_MISSING, FLAG_EXTERNAL_CORRELATION = 4, 8
OP_ALLREDUCE, DATATYPE_FLOAT32 = 1, 9
ALGORITHMS = ["none", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"]
PROTOCOLS = ["none", "LL", "LL128", "SIMPLE"]


class Timeline:
    def __init__(self, path):
        self.path = path
        with h5py.File(path, "r") as f:
            self.ranks = f["ranks"][:]
            self.events = f["events"][:]
            self.tracks = f["tracks"][:]
            raw, offsets = f["strings/bytes"][:].tobytes(), f["strings/offsets"][:]
            self.strings = [raw[offsets[i]:offsets[i + 1]].decode(errors="replace") for i in range(len(offsets) - 1)]
            self.counters = collections.Counter()
            for row in f["counters"][:]:
                self.counters[self.strings[row["name_id"]]] += int(row["value"])
        self.world_size = len(self.ranks)

    def rank_events(self, rank):
        r = self.ranks[rank]
        return self.events[int(r["event_offset"]):int(r["event_offset"]) + int(r["event_count"])]

    def name(self, event):
        return self.strings[int(event["name_id"])]


def steps_of(timeline, events):
    """{N: (begin, end)} of the ProfilerStep#N ranges."""
    steps = {}
    for e in events[events["kind"] == NVTX_RANGE]:
        name = timeline.name(e)
        if name.startswith("ProfilerStep#"):
            steps[int(name.split("#")[1])] = (int(e["begin_ns"]), int(e["end_ns"]))
    return steps


def step_of(steps, time_ns):
    for number, (begin, end) in steps.items():
        if begin <= time_ns <= end:
            return number
    return None


class RankGpuWork:
    """One rank's GPU operations with the host call that launched each."""

    def __init__(self, timeline, rank):
        self.events = timeline.rank_events(rank)
        self.timeline = timeline
        self.steps = steps_of(timeline, self.events)
        self.calls = {}
        for e in self.events[self.events["kind"] == CUDA_API]:
            self.calls.setdefault(int(e["correlation_id"]), e)
        self.enqueues = {}
        for e in self.events[self.events["kind"] == NCCL_COLL_ENQUEUE]:
            self.enqueues.setdefault(int(e["correlation_id"]), e)

    def launch_of(self, op):
        """The host event that launched a GPU operation: its CUDA call, or its NCCL enqueue."""
        table = self.enqueues if int(op["flags"]) & FLAG_EXTERNAL_CORRELATION else self.calls
        return table.get(int(op["correlation_id"]))

    def ops(self, kind):
        return self.events[self.events["kind"] == kind]

    def step_of_op(self, op):
        launch = self.launch_of(op)
        return step_of(self.steps, int(launch["begin_ns"] if launch is not None else op["begin_ns"]))

    def per_step(self, kind, key):
        counts = collections.defaultdict(collections.Counter)
        for op in self.ops(kind):
            counts[self.step_of_op(op)][key(op)] += 1
        return counts


def check(name, passed, **figures):
    return {"check": name, "passed": bool(passed), **figures}


def load_truths(pattern):
    return {t["rank"]: t for t in (json.load(open(p)) for p in sorted(glob.glob(pattern)))}


def is_nccl_kernel(name):
    return name.startswith(("ncclDevKernel", "ncclKernel"))


def kernel_checks(label, timeline, truths, steps=None):
    """Kernels, copies and memsets per step (every step, or those given) against the truth files; causality; host
    and GPU agreement."""
    results = []
    for rank, truth in truths.items():
        work = RankGpuWork(timeline, rank)
        per_step = truth["per_step"]
        expected_kernels = collections.Counter(per_step["kernels"])
        expected_copies = collections.Counter((c["kind"], c["bytes"]) for c in per_step["memcpy"])
        expected_memsets = collections.Counter(m["bytes"] for m in per_step["memset"])
        # What the program launches itself is in the graph's count (the libraries' work besides).
        own_ok = (all(expected_kernels[name] == count for name, count in per_step["own_kernels"].items())
                  and not collections.Counter((c["kind"], c["bytes"]) for c in per_step["own_memcpy"]) - expected_copies
                  and not collections.Counter(m["bytes"] for m in per_step["own_memset"]) - expected_memsets)
        nccl_per_step = sum(1 for c in per_step["collectives"] if c["api"] == "ncclAllReduce")
        kernels = work.per_step(GPU_KERNEL, work.timeline.name)
        copies = work.per_step(GPU_MEMCPY, lambda e: (work.timeline.name(e).replace("memcpy ", ""), int(e["bytes"])))
        memsets = work.per_step(GPU_MEMSET, lambda e: int(e["bytes"]))
        mismatched = []
        launched = captured = 0
        for step in steps if steps is not None else range(truth["steps"]):
            got = kernels.get(step, collections.Counter())
            nccl = sum(n for name, n in got.items() if is_nccl_kernel(name))
            compute = collections.Counter({k: n for k, n in got.items() if not is_nccl_kernel(k)})
            launched += sum(expected_kernels.values()) + nccl_per_step
            captured += sum(got.values())
            if compute != expected_kernels or nccl != nccl_per_step or copies.get(step) != expected_copies \
                    or memsets.get(step) != expected_memsets:
                missing = expected_kernels - compute
                extra = compute - expected_kernels
                mismatched.append({"step": step, "missing": dict(missing), "extra": dict(extra), "nccl_kernels": nccl,
                                   "copies": sorted(copies.get(step, {}).items()),
                                   "memsets": sorted(memsets.get(step, {}).items())})
        results.append(check(f"{label}: rank {rank}: kernels, copies and memsets per step equal the truth file",
                             not mismatched and own_ok, steps=len(steps) if steps is not None else truth["steps"], kernels_launched=launched,
                             kernels_captured_in_steps=captured, kernel_names=len(expected_kernels),
                             own_work_in_graph_count=own_ok, mismatched_steps=mismatched[:3]))

        # Causality: every GPU operation starts after the call that launched it began.
        lags, unlaunched = [], 0
        for kind in (GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET):
            for op in work.ops(kind):
                launch = work.launch_of(op)
                if launch is None:
                    unlaunched += 1
                    continue
                lags.append(int(op["begin_ns"]) - int(launch["begin_ns"]))
        lags = np.array(lags)
        results.append(check(f"{label}: rank {rank}: every GPU operation starts after its launch call began",
                             len(lags) > 0 and (lags >= 0).all(), operations=int(len(lags)),
                             without_launch_record=unlaunched, causal_fraction=float((lags >= 0).mean()) if len(lags) else 0,
                             min_launch_to_start_ns=int(lags.min()) if len(lags) else None,
                             median_launch_to_start_ns=int(np.median(lags)) if len(lags) else None))

        # Agreement: a stream synchronisation ends after all that its stream ran before it.
        track_stream = {int(t["id"]): int(t["os_id"]) for t in timeline.tracks if int(t["rank"]) == rank}
        by_stream = collections.defaultdict(list)
        for kind in (GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET):
            for op in work.ops(kind):
                launch = work.launch_of(op)
                if launch is not None:
                    by_stream[track_stream.get(int(op["track"]))].append((int(launch["begin_ns"]), int(op["end_ns"])))
        slack = []
        for sync in work.ops(GPU_SYNC):
            if work.timeline.name(sync) != "stream synchronize":
                continue
            stream = track_stream.get(int(sync["track"]))
            ends = [end for launched_at, end in by_stream.get(stream, []) if launched_at < int(sync["begin_ns"])]
            if ends:
                slack.append(int(sync["end_ns"]) - max(ends))
        slack = np.array(slack)
        results.append(check(f"{label}: rank {rank}: each stream synchronisation ends after its stream's last operation",
                             len(slack) > 0 and (slack >= 0).all(), synchronisations=int(len(slack)),
                             min_slack_ns=int(slack.min()) if len(slack) else None,
                             median_slack_ns=int(np.median(slack)) if len(slack) else None))
    return results


def nccl_checks(label, timeline, truths):
    results = []
    for rank, truth in truths.items():
        work = RankGpuWork(timeline, rank)
        expected = [c for c in truth["per_step"]["collectives"] if c["api"] == "ncclAllReduce"]
        enqueues = work.ops(NCCL_COLL_ENQUEUE)
        gpu = work.ops(NCCL_COLL_GPU)
        problems = []
        per_step = collections.defaultdict(list)
        for e in enqueues:
            per_step[step_of(work.steps, int(e["begin_ns"]))].append(e)
        for step in range(truth["steps"]):
            got = per_step.get(step, [])
            if [int(e["bytes"]) for e in got] != [c["bytes"] for c in expected]:
                problems.append(f"step {step}: bytes {[int(e['bytes']) for e in got]}")
        fields = [e for e in enqueues if int(e["comm_hash"]) == 0 or int(e["op"]) != OP_ALLREDUCE
                  or int(e["datatype"]) != DATATYPE_FLOAT32 or int(e["algorithm"]) == 0 or int(e["protocol"]) == 0]
        seqs = [int(e["seq"]) for e in enqueues]
        partial = int((gpu["flags"] & FLAG_END_MISSING).astype(bool).sum()) if len(gpu) else 0
        results.append(check(
            f"{label}: rank {rank}: every ncclAllReduce captured with communicator, sequence, bytes, datatype, algorithm, protocol",
            not problems and not fields and seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and len(gpu) == len(enqueues)
            and partial == 0,
            collectives_launched=len(expected) * truth["steps"], enqueues_captured=int(len(enqueues)),
            gpu_windows=int(len(gpu)), partial_gpu_windows=partial, with_bad_fields=len(fields),
            algorithms=dict(collections.Counter(ALGORITHMS[int(e["algorithm"])] for e in enqueues)),
            protocols=dict(collections.Counter(PROTOCOLS[int(e["protocol"])] for e in enqueues)),
            first_problems=problems[:3]))
    return results


def window_checks(label, timeline, truths, first, last):
    """A capture window of steps first..last: those steps whole, as the truth file has them, and nothing else."""
    results = kernel_checks(label, timeline, truths, steps=range(first, last + 1))
    for rank in truths:
        work = RankGpuWork(timeline, rank)
        in_window = lambda step: step is not None and first <= step <= last
        outside = {"kernels": sum(not in_window(work.step_of_op(op)) for op in work.ops(GPU_KERNEL)),
                   "copies": sum(not in_window(work.step_of_op(op)) for op in work.ops(GPU_MEMCPY)),
                   "collectives": sum(not in_window(step_of(work.steps, int(e["begin_ns"])))
                                      for e in work.ops(NCCL_COLL_ENQUEUE))}
        results.append(check(f"{label}: rank {rank}: the timeline holds steps {first}-{last} and nothing outside them",
                             sorted(work.steps) == list(range(first, last + 1)) and sum(outside.values()) == 0,
                             steps=sorted(work.steps), outside=outside,
                             events_outside_window=timeline.counters.get("events_outside_window", 0),
                             capture_windows=timeline.counters.get("capture_windows", 0)))
    return results


def hang_check(report_path, hung_rank, waiting_ranks):
    """The report of a job one of whose ranks never came to an all-reduce: that collective, who waited, who is missing."""
    hangs = json.load(open(report_path)).get("hangs", [])
    first = hangs[0] if hangs else {}
    entered = [e["rank"] for e in first.get("entered", [])]
    waited = [e["waited_ns"] for e in first.get("entered", [])]
    return [check("NCCL hang: the report names the all-reduce, the ranks inside and the rank missing",
                  len(hangs) == 1 and first.get("op") == "AllReduce" and entered == waiting_ranks
                  and first.get("missing_ranks") == [hung_rank] and all(w >= 4.5e9 for w in waited),
                  hangs=len(hangs), call=first.get("call"), seq=first.get("seq"), entered=entered,
                  waited_s=[round(w / 1e9, 2) for w in waited], missing_ranks=first.get("missing_ranks"),
                  missing=first.get("missing"))]


def busbw_check(label, timeline, truths):
    results = []
    for rank, truth in truths.items():
        work = RankGpuWork(timeline, rank)
        n = truth["world_size"]
        gpu = sorted(work.ops(NCCL_COLL_GPU), key=lambda e: int(e["begin_ns"]))
        nb = len(truth["buckets_bytes"])
        rows = []
        for b, size in enumerate(truth["buckets_bytes"]):
            windows = [int(e["end_ns"]) - int(e["begin_ns"]) for i, e in enumerate(gpu) if i % nb == b]
            measured = truth["allreduce_ms"][b] if b < len(truth["allreduce_ms"]) else []
            if not windows or not measured:
                continue
            factor = 2 * (n - 1) / n
            timeline_busbw = size / (statistics.median(windows) / 1e9) * factor / 1e9
            program_busbw = size / (statistics.median(measured) / 1e3) * factor / 1e9
            rows.append({"bucket": b, "bytes": size, "timeline_gbps": round(timeline_busbw, 3),
                         "program_gbps": round(program_busbw, 3), "ratio": round(timeline_busbw / program_busbw, 4)})
        results.append(check(f"{label}: rank {rank}: bus bandwidth from the timeline against the program's own",
                             rows and all(0.8 <= r["ratio"] <= 1.25 for r in rows), buckets=rows))
    return results


def gpu_window_comparison(label, timeline):
    """KernelCh's GPU window against the CUPTI record of the same collective's kernel (RANKSCOPE_NCCL_GPU_TIME=both)."""
    results = []
    for rank in range(timeline.world_size):
        work = RankGpuWork(timeline, rank)
        kch = sorted(work.ops(NCCL_COLL_GPU), key=lambda e: int(e["begin_ns"]))
        cupti = sorted((k for k in work.ops(GPU_KERNEL) if is_nccl_kernel(timeline.name(k))), key=lambda e: int(e["begin_ns"]))
        if not kch or len(kch) != len(cupti):
            results.append(check(f"{label}: rank {rank}: KernelCh and CUPTI windows pair up", False,
                                 kernelch=len(kch), cupti=len(cupti)))
            continue
        begin = np.array([int(a["begin_ns"]) - int(b["begin_ns"]) for a, b in zip(kch, cupti)])
        end = np.array([int(a["end_ns"]) - int(b["end_ns"]) for a, b in zip(kch, cupti)])
        duration = np.array([(int(a["end_ns"]) - int(a["begin_ns"])) / max(1, int(b["end_ns"]) - int(b["begin_ns"]))
                             for a, b in zip(kch, cupti)])
        percentile = lambda values, q: int(np.percentile(values, q))
        results.append(check(f"{label}: rank {rank}: KernelCh window against CUPTI's kernel record", True,
                             collectives=len(kch),
                             begin_diff_ns={"median": percentile(begin, 50), "p5": percentile(begin, 5),
                                            "p95": percentile(begin, 95)},
                             end_diff_ns={"median": percentile(end, 50), "p5": percentile(end, 5), "p95": percentile(end, 95)},
                             duration_ratio_median=round(float(np.median(duration)), 4)))
    return results


def accept_check(path):
    """`rankscope accept` on this node: every GPU measured, each repeat, and nothing failed."""
    result = json.load(open(path))
    [node] = result["nodes"]
    gpus = node["gpus"]
    figures = [{"index": g["index"], "model": g["model"], "uuid": g["uuid"],
                "gemm_tflops_median": round(statistics.median(g["gemm_tflops"]), 1) if g["gemm_tflops"] else None,
                "triad_gbps_median": round(statistics.median(g["triad_gbps"]), 1) if g["triad_gbps"] else None,
                "held_tflops_slices": [round(v, 1) for v in g["sustained_tflops"]],
                "clocks_held_back": g["clocks_held_back"],
                "repeats": [len(g["gemm_tflops"]), len(g["triad_gbps"])]} for g in gpus]
    # Far below any H100's or H200's (bf16 dense 756-989 TFLOP/s, HBM 2.0-4.8 TB/s): a figure under these
    # means the check measured something else.
    plausible = all(f["gemm_tflops_median"] and f["gemm_tflops_median"] >= 200 and f["triad_gbps_median"]
                    and f["triad_gbps_median"] >= 1000 and len(f["held_tflops_slices"]) >= 4
                    and min(f["held_tflops_slices"]) >= 200 for f in figures)
    not_passed = [c["name"] for c in node["checks"] if c["verdict"] != "pass"]
    # NCCL's sweeps over the node's GPUs: every collective, each size timed (with one GPU, busbw is 0 by
    # nccl-tests' factors, and algbw is what a copy on the GPU takes).
    nccl = [c for c in result["collectives"] if c.get("transport") == "nccl"]
    nccl_figures = {c["collective"]: {"ranks": c["ranks"], "sizes": len(c["points"]),
                                      "small_message_us": round(c["small_message_us"], 1),
                                      "largest_algbw_gbps": round(max(p["algbw_gbps"] for p in c["points"]), 1),
                                      "peak_busbw_gbps": round(c["peak_busbw_gbps"], 1)} for c in nccl}
    nccl_swept = (sorted(nccl_figures) == sorted(["allreduce", "allgather", "reduce_scatter", "alltoall"])
                  and all(c["ranks"] == len(gpus) and c["points"] and all(p["time_us"] > 0 for p in c["points"])
                          for c in nccl))
    return [check("accept: every GPU measured by cuBLAS GEMM, device-memory triad and the GEMM held, nothing failed",
                  result["verdict"] == "pass" and gpus and len(gpus) == node["inventory"]["gpus"]
                  and not node["gpu_error"] and plausible and not not_passed,
                  inventory={k: v for k, v in node["inventory"].items() if k.startswith(("gpu", "cuda", "nccl"))},
                  gpus=figures, gpu_error=node["gpu_error"], not_passed=not_passed),
            check("accept: every collective swept through NCCL over the node's GPUs", nccl_swept,
                  collectives=nccl_figures)]


def coexistence_check(out, timeline):
    """rankscope and torch.profiler in one process: rankscope leaves CUPTI to torch.profiler with its one line, the run
    succeeds, and torch.profiler's trace has the step's kernels, each after the call that launched it (its clock is
    CUPTI's own again)."""
    log = open(os.path.join(out, "logs", "coexistence.log")).read()
    status = dict(line.split("\t")[:2] for line in open(os.path.join(out, "steps.tsv")) if line.strip())
    lines = [line for line in log.splitlines() if line.startswith("rankscope agent:") and "CUDA capture" in line]
    kernels, launches = [], {}
    for path in glob.glob(os.path.join(out, "coexistence-kineto", "*.json")):
        for e in json.load(open(path)).get("traceEvents", []):
            correlation = (e.get("args") or {}).get("correlation")
            if e.get("cat") == "kernel":
                kernels.append((correlation, float(e["ts"])))
            elif e.get("cat") in ("cuda_runtime", "cuda_driver") and correlation is not None:
                launches[correlation] = float(e["ts"])
    lags = [ts - launches[c] for c, ts in kernels if c in launches]
    return [check("coexistence: torch.profiler started in a process rankscope captures gets CUPTI",
                  status.get("coexistence") == "0" and timeline is not None and len(lines) == 1
                  and "another CUPTI client subscribed" in lines[0] and kernels and len(lags) == len(kernels)
                  and min(lags) >= 0 and timeline.counters.get("cupti_left_to_other_client") == 1,
                  exit_status=status.get("coexistence"), rankscope_lines=lines, torch_profiler_kernels=len(kernels),
                  kernels_with_launch=len(lags), min_launch_to_start_us=round(min(lags), 3) if lags else None,
                  median_launch_to_start_us=round(statistics.median(lags), 3) if lags else None,
                  cupti_left_to_other_client=timeline.counters.get("cupti_left_to_other_client") if timeline else None)]


def counters_check(timelines):
    bad = {}
    for name, timeline in timelines.items():
        drops = {k: v for k, v in timeline.counters.items() if k in ("cupti_records_dropped", "events_dropped") and v}
        if drops:
            bad[name] = drops
    every = {name: dict(t.counters) for name, t in timelines.items()}
    return [check("no CUPTI records or events dropped at the default buffer sizes", not bad, dropped=bad, counters=every)]


def kernels_in_step(timeline, rank, step):
    work = RankGpuWork(timeline, rank)
    names = collections.Counter()
    for k in work.ops(GPU_KERNEL):
        if work.step_of_op(k) == step:
            names[timeline.name(k)] += 1
    return names


def torch_profiler_comparison(rankscope_timeline, kineto_timeline, step):
    ours = kernels_in_step(rankscope_timeline, 0, step)
    theirs = kernels_in_step(kineto_timeline, 0, step)
    if not theirs:  # a trace of the one active step may lack its ProfilerStep range on the host
        theirs = collections.Counter(kineto_timeline.name(k) for k in kineto_timeline.rank_events(0)
                                     if int(k["kind"]) == GPU_KERNEL)
    return [check(f"PyTorch: step {step}: rankscope and torch.profiler see the same kernels", ours == theirs and ours,
                  rankscope_kernels=sum(ours.values()), torch_profiler_kernels=sum(theirs.values()),
                  names=len(ours), only_rankscope=dict(ours - theirs), only_torch_profiler=dict(theirs - ours))]


def bucket_check(report_path, truth):
    report = json.load(open(report_path))
    buckets = report.get("buckets") or {}
    found = [int(b["bytes"]) for b in buckets.get("buckets", [])]
    expected = truth["bucket_bytes"]
    return [check("PyTorch DDP: the report's buckets equal DDP's bucket sizes",
                  found and (found == expected or sorted(found) == sorted(expected)),
                  report_buckets=found, ddp_buckets=expected, ddp_source=truth.get("bucket_bytes_from"))]


def overhead(out):
    """Step times of interleaved runs with and without rankscope (overhead/PROGRAM-MODE-pPAIR-r0.json)."""
    results = []
    runs = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(out, "overhead", "*-r0.json"))):
        program, mode, _ = os.path.basename(path).split("-", 2)
        truth = json.load(open(path))
        times = truth["step_ms"][3:]
        runs[(program, mode)].append(statistics.median(times))
    for program in sorted({p for p, _ in runs}):
        bare = runs.get((program, "bare"), [])
        for (p, mode), medians in sorted(runs.items()):
            if p != program or mode == "bare" or not bare:
                continue
            ratios = [m / b for m, b in zip(medians, bare)]
            results.append(check(f"overhead: {program} under rankscope ({mode}) against bare, median step time",
                                 statistics.median(ratios) <= 1.005, pairs=len(ratios),
                                 bare_ms=[round(b, 3) for b in bare], profiled_ms=[round(m, 3) for m in medians],
                                 ratio_median=round(statistics.median(ratios), 5),
                                 ratio_min=round(min(ratios), 5), ratio_max=round(max(ratios), 5)))
    return results


def main():
    out = sys.argv[1]
    results, timelines = [], {}

    def guarded(name, function, *arguments):
        """A check that cannot run (a file missing, say) fails with the reason, and the others go on."""
        try:
            results.extend(function(*arguments))
        except Exception as error:
            results.append(check(name, False, error=f"{type(error).__name__}: {error}"))

    def timeline(name):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            results.append(check(f"{name} was written", False))
            return None
        timelines[name] = Timeline(path)
        return timelines[name]

    def truths(pattern):
        found = load_truths(os.path.join(out, pattern))
        if not found:
            raise FileNotFoundError(f"no truth file {pattern}")
        return found

    path = lambda name: os.path.join(out, name)
    if (t := timeline("nccl-kernelch.h5")) is not None:
        label = "gpu_train NCCL (KernelCh timing)"
        guarded(label, lambda: kernel_checks(label, t, truths("truth-nccl-kernelch-*.json")))
        guarded(label, lambda: nccl_checks(label, t, truths("truth-nccl-kernelch-*.json")))
        guarded(label, lambda: busbw_check(label, t, truths("truth-nccl-kernelch-*.json")))
    if (t := timeline("nccl-both.h5")) is not None:
        guarded("KernelCh against CUPTI", gpu_window_comparison, "gpu_train NCCL (both timings)", t)
    if (t := timeline("nccl-cupti.h5")) is not None:
        label = "gpu_train NCCL (CUPTI timing)"
        guarded(label, lambda: kernel_checks(label, t, truths("truth-nccl-cupti-*.json")))
    for name in ("window-profiler-api", "window-steps"):
        if (t := timeline(f"{name}.h5")) is not None:
            label = f"gpu_train capture window ({name})"
            guarded(label, lambda: window_checks(label, t, truths(f"truth-{name}-*.json"), 4, 6))
    guarded("NCCL hang", hang_check, path("nccl-hang-report.json"), 1, [0])
    if (t := timeline("mpi-shared-gpu.h5")) is not None:
        label = "gpu_train MPI, ranks sharing one GPU"
        guarded(label, lambda: kernel_checks(label, t, truths("truth-mpi-*.json")))
    torch_rankscope, torch_kineto = timeline("torch-nccl1.h5"), timeline("torch-profiler.h5")
    if torch_rankscope is not None and torch_kineto is not None:
        guarded("PyTorch against torch.profiler", torch_profiler_comparison, torch_rankscope, torch_kineto, 5)
    if timeline("torch-nccl2.h5") is not None:
        guarded("PyTorch DDP buckets", lambda: bucket_check(path("torch-nccl2-report.json"),
                                                            truths("truth-torch-nccl2-*.json")[0]))
    timeline("torch-gloo2.h5")
    guarded("coexistence", coexistence_check, out, timeline("coexistence.h5"))
    guarded("accept", accept_check, path("accept.json"))
    guarded("counters", counters_check, timelines)
    guarded("overhead", overhead, out)

    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"environment": json.load(open(os.path.join(out, "environment.json")))
                   if os.path.exists(os.path.join(out, "environment.json")) else {}, "checks": results}, f, indent=1)
    for r in results:
        print(("PASS " if r["passed"] else "FAIL ") + r["check"])
    print(f"{sum(r['passed'] for r in results)} passed, {sum(not r['passed'] for r in results)} failed")
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
