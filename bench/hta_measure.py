#!/usr/bin/env python3
"""Run Holistic Trace Analysis (HTA) on a folder of Kineto traces, report
its figures, wall time and memory as one JSON document.

usage: hta_measure.py FOLDER [-o OUT.json] [--include-last-profiler-step]
                             [--sample-interval S]

FOLDER holds one trace per rank (*.json or *.json.gz; HTA loads every such file
in it and takes each file's rank from "rank": N in its distributedInfo).
Runs TraceAnalysis(trace_dir=FOLDER), get_temporal_breakdown(visualize=False)
and get_comm_comp_overlap(visualize=False), exactly as HTA's defaults do.

Memory: HTA parses ranks in a fork()ed multiprocessing pool (up to
min(#ranks, #cores) workers), so three figures are given:
  self_maxrss_mib      getrusage(RUSAGE_SELF).ru_maxrss of this process
  children_maxrss_mib  getrusage(RUSAGE_CHILDREN).ru_maxrss: the largest single
                       reaped child (Linux does not sum children)
  tree_peak_pss_mib    peak over time of the summed PSS of this process and its
                       live descendants, sampled every --sample-interval s
                       (PSS splits pages shared after fork(), so the sum is
                       what the machine held); tree_peak_rss_mib is the same
                       with RSS (over-counts shared pages)
peak_mib is the largest of self_maxrss_mib and tree_peak_pss_mib.

Needs the HTA package (pip install holistictraceanalysis) and psutil (an HTA
dependency). HTA's own log lines are silenced; the JSON goes to stdout (and to
-o when given).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import sys
import threading
import time


def _mib_from_kib(k: int) -> float:
    return round(k / 1024.0, 1)


class TreeSampler(threading.Thread):
    """Samples the summed RSS and PSS of this process and its descendants."""

    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval = interval
        self.stop_ev = threading.Event()
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_procs = 1
        self.samples = 0
        try:
            import psutil  # noqa: F401
            self.ok = True
        except ImportError:
            self.ok = False

    def sample_once(self):
        import psutil
        me = psutil.Process()
        procs = [me]
        try:
            procs += me.children(recursive=True)
        except psutil.Error:
            pass
        rss = pss = 0
        for p in procs:
            try:
                mi = p.memory_full_info()
                rss += mi.rss
                pss += getattr(mi, "pss", mi.rss)
            except psutil.Error:
                try:
                    r = p.memory_info().rss
                    rss += r
                    pss += r
                except psutil.Error:
                    pass
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.peak_procs = max(self.peak_procs, len(procs))
        self.samples += 1

    def run(self):
        if not self.ok:
            return
        while not self.stop_ev.is_set():
            self.sample_once()
            self.stop_ev.wait(self.interval)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=5)
        if self.ok:
            self.sample_once()


def _num(x):
    """numpy/pandas scalar -> JSON-safe Python number (NaN -> None)."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f) or math.isinf(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def _pct(x):
    v = _num(x)
    return float(v) if isinstance(v, int) else v


def trace_files(folder: str) -> list[str]:
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.endswith(".json") or f.endswith(".gz"))


def uncompressed_bytes(path: str) -> int:
    """File size; for .gz the ISIZE trailer (uncompressed size mod 2**32, single member)."""
    if not path.endswith(".gz"):
        return os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="HTA figures, wall time and memory on a Kineto trace folder")
    ap.add_argument("folder")
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--include-last-profiler-step", action="store_true")
    ap.add_argument("--sample-interval", type=float, default=0.05)
    a = ap.parse_args(argv)

    folder = os.path.abspath(a.folder)
    files = trace_files(folder)
    if not files:
        print(f"hta_measure: no *.json / *.gz trace in {folder}", file=sys.stderr)
        return 2

    sampler = TreeSampler(a.sample_interval)
    sampler.start()
    t_import0 = time.perf_counter()
    # HTA logs every parse at WARNING level through its own logger; keep stdout for the JSON.
    logging.disable(logging.WARNING)
    import numpy as np
    from hta.trace_analysis import TraceAnalysis
    try:
        from hta.version import __version_tuple__ as hv
        hta_version = ".".join(str(x) for x in hv)
    except Exception:  # pragma: no cover
        hta_version = "unknown"
    np.seterr(all="ignore")  # 0/0 overlap when a rank has no communication kernel -> NaN, reported as null
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=folder, include_last_profiler_step=a.include_last_profiler_step)
    t1 = time.perf_counter()
    tb = ta.get_temporal_breakdown(visualize=False)
    t2 = time.perf_counter()
    ov = ta.get_comm_comp_overlap(visualize=False)
    t3 = time.perf_counter()
    sampler.stop()

    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_kids = resource.getrusage(resource.RUSAGE_CHILDREN)

    ranks = {}
    for _, row in tb.iterrows():
        r = int(row["rank"])
        ranks[r] = {
            "idle_time_us": _num(row["idle_time(us)"]),
            "compute_time_us": _num(row["compute_time(us)"]),
            "non_compute_time_us": _num(row["non_compute_time(us)"]),
            "kernel_time_us": _num(row["kernel_time(us)"]),
            "idle_time_pctg": _pct(row["idle_time_pctg"]),
            "compute_time_pctg": _pct(row["compute_time_pctg"]),
            "non_compute_time_pctg": _pct(row["non_compute_time_pctg"]),
        }
    for _, row in ov.iterrows():
        ranks.setdefault(int(row["rank"]), {})["comp_comm_overlap_pctg"] = _pct(row["comp_comm_overlap_pctg"])

    steps = {}
    for r, df in ta.t.traces.items():
        # ProfilerStep names left after HTA's window filter (CPU side)
        st = ta.t.symbol_table.get_sym_table()
        names = {st[i] for i in df["name"].unique() if "ProfilerStep" in st[i]}
        steps[r] = sorted(names, key=lambda s: int(s.split("#")[-1]) if s.split("#")[-1].isdigit() else -1)

    in_bytes = sum(uncompressed_bytes(f) for f in files)
    wall = t3 - t0
    tree_pss = _mib_from_kib(sampler.peak_pss // 1024) if sampler.ok else None
    result = {
        "tool": "hta",
        "hta_version": hta_version,
        "folder": folder,
        "files": [os.path.basename(f) for f in files],
        "ranks": sorted(ranks),
        "input_bytes_uncompressed": in_bytes,
        "wall_s": round(wall, 3),
        "wall_s_load": round(t1 - t0, 3),
        "wall_s_temporal_breakdown": round(t2 - t1, 3),
        "wall_s_comm_comp_overlap": round(t3 - t2, 3),
        "wall_s_import_hta": round(t0 - t_import0, 3),
        "mb_per_s": round(in_bytes / 1e6 / wall, 2) if wall > 0 else None,
        "self_maxrss_mib": _mib_from_kib(ru_self.ru_maxrss),
        "children_maxrss_mib": _mib_from_kib(ru_kids.ru_maxrss),
        "tree_peak_pss_mib": tree_pss,
        "tree_peak_rss_mib": _mib_from_kib(sampler.peak_rss // 1024) if sampler.ok else None,
        "tree_peak_processes": sampler.peak_procs,
        "tree_samples": sampler.samples,
        "peak_mib": max(_mib_from_kib(ru_self.ru_maxrss), tree_pss or 0.0),
        "cpu_s_self": round(ru_self.ru_utime + ru_self.ru_stime, 2),
        "cpu_s_children": round(ru_kids.ru_utime + ru_kids.ru_stime, 2),
        "include_last_profiler_step": a.include_last_profiler_step,
        "profiler_steps_in_window": {str(r): v for r, v in sorted(steps.items())},
        "per_rank": {str(r): v for r, v in sorted(ranks.items())},
    }
    text = json.dumps(result, indent=2)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
