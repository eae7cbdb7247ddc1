#!/usr/bin/env python3
"""A slowed rank's critical path and what-if against a run with no rank slowed
(report.critical_path_ddp, report.critical_path_pipeline): the slowed rank's
compute is the largest on the path (above --min-compute-share), no other rank
is above its fair share (and it is, with --named), and the what-if of the
median step, that rank at the others' median, replays the step as recorded
within 1 % and predicts the unslowed run's median step within --max-error
(and at most --max-predicted of the recorded step, where given). EVEN_JSON
may list several unslowed runs, comma-separated: their median steps vary
from run to run on shared cores, and the prediction is held against the
nearest.

Usage: critical_path_check.py EVEN_JSON[,EVEN_JSON...] SLOW_JSON RANK --max-error E
       [--min-compute-share PCT] [--named] [--max-predicted FRACTION]"""
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("even")
parser.add_argument("slowed")
parser.add_argument("rank", type=int)
parser.add_argument("--max-error", type=float, required=True)
parser.add_argument("--min-compute-share", type=float, default=0)
parser.add_argument("--named", action="store_true")
parser.add_argument("--max-predicted", type=float)
args = parser.parse_args()
slow = args.rank
evens = [json.load(open(name))["critical_path"] for name in args.even.split(",")]
path = json.load(open(args.slowed))["critical_path"]
assert all(even is not None for even in evens) and path is not None, "no critical path"
by_compute = sorted(path["ranks"], key=lambda r: r["compute_share_pct"], reverse=True)
ranks = [(r["rank"], round(r["share_pct"], 1), round(r["compute_share_pct"], 1)) for r in path["ranks"]]
above = [r["rank"] for r in path["ranks"] if r["above_fair_share"]]
largest = by_compute[0]["rank"] == slow and (
    len(by_compute) == 1 or by_compute[0]["compute_share_pct"] > by_compute[1]["compute_share_pct"])
ok = largest and by_compute[0]["compute_share_pct"] > args.min_compute_share
ok = ok and (above == [slow] if args.named else above in ([slow], []))
measured_runs = [next(s["end_ns"] - s["begin_ns"] for s in even["steps"] if "median" in s["which"]) for even in evens]
median_step = next(s["step"] for s in path["steps"] if "median" in s["which"])
what_if = [w for w in path["what_if"] if w["step"] == median_step and w["rank"] == slow]
line = f"slowed rank {slow}: path by rank {ranks}, above its fair share: {above}"
if what_if:
    w = what_if[0]
    measured = min(measured_runs, key=lambda ns: abs(w["predicted_ns"] - ns))
    error = abs(w["predicted_ns"] - measured) / measured
    replay_error = abs(w["replayed_ns"] - w["recorded_ns"]) / w["recorded_ns"]
    ok = ok and error <= args.max_error and replay_error <= 0.01
    if args.max_predicted is not None:
        ok = ok and w["predicted_ns"] <= args.max_predicted * w["recorded_ns"]
    line += (f"; what-if x{w['factor']:.2f}: predicted {w['predicted_ns']} ns (recorded {w['recorded_ns']}, "
             f"replayed {w['replayed_ns']}), measured with none slowed {measured} ns (of {measured_runs}): "
             f"{100 * error:.1f} % off")
else:
    ok = False
    line += f"; no what-if for rank {slow}: {path['what_if']} {path.get('what_if_reason')}"
print(line, "ok" if ok else "FAIL")
raise SystemExit(0 if ok else 1)
