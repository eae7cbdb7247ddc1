#!/usr/bin/env python3
"""What the Python hook costs a stock PyTorch job (bench/results/python.md).

    bench/torch_hook_cost.py [--rounds N] [--steps S] [--collate-ms MS] [--script ddp|fsdp]

tests/torch/train_ddp.py (or train_fsdp.py), 2 ranks on gloo, a step of
about 100 ms (the DataLoader's collate sleeps --collate-ms of it), run in
three ways per round, their order rotated from round to round:

- bare: `mpirun -n 2` starting the script itself (RANK and the rest from
  Open MPI's variables), so that the ranks are placed and bound to cores as
  under rankscope;
- without the hook: `mpirun -n 2 rankscope run --capture mpi,nvtx`;
- with the hook: `mpirun -n 2 rankscope run` (the default capture).

Each run's median step time comes from the script's own truth file (steps
1.., step 0 is warm-up), its wall time from here. Printed: every run, then
per round the ratios hook/bare, hook/no hook and no hook/bare, their
medians; the hook's own measured CPU time per step (the report's
capture_cost.python_hook_ns over the steps) as a share of the step; and
the ranks' whole CPU time (user and system, getrusage) with the hook
minus without it, per rank and step: what the hook costs beyond its own
code (torch calling into Python for it, the caches it cools).
Needs the build in build/ and the torch virtual environment of the tests
(RANKSCOPE_TORCH_VENV, default ~/.cache/rankscope/torch-venv).
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_TESTS = os.path.join(ROOT, "tests", "torch")
RANKSCOPE = os.path.join(ROOT, "build", "coordinator", "rankscope")
VENV = os.environ.get("RANKSCOPE_TORCH_VENV", os.path.expanduser("~/.cache/rankscope/torch-venv"))
PYTHON = os.path.join(VENV, "bin", "python")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
CONFIGS = ("bare", "no hook", "hook")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(config, script, args, work, name):
    truth = os.path.join(work, name + "-{rank}.json")
    timeline = os.path.join(work, name + ".h5")
    job = [PYTHON, os.path.join(TORCH_TESTS, script)] + args + ["--truth", truth]
    if config == "bare":
        rendezvous = ("export RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE "
                      "LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK MASTER_ADDR=127.0.0.1 MASTER_PORT=%d; exec \"$@\""
                      % free_port())
        command = ["mpirun", "-n", "2", "--oversubscribe", "/bin/sh", "-c", rendezvous, "sh"] + job
    else:
        capture = ["--capture", "mpi,nvtx"] if config == "no hook" else []
        command = ["mpirun", "-n", "2", "--oversubscribe", RANKSCOPE, "run", "-o", timeline] + capture + ["--"] + job
    began = time.perf_counter()
    subprocess.run(command, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    steps = []
    for rank in (0, 1):
        record = json.load(open(truth.replace("{rank}", str(rank))))
        steps += [s["end"] - s["begin"] for s in record["steps"][1:]]
    hook_ns = cpu_ns = None
    if config != "bare":
        report = json.loads(subprocess.run([RANKSCOPE, "report", timeline, "--format", "json"], check=True,
                                           stdout=subprocess.PIPE, text=True).stdout)
        hook_ns = [c["python_hook_ns"] for c in report["capture_cost"]]
        # The ranks' whole CPU time, user and system, as the kernel counted it.
        cpu_ns = sum(r["process"]["user_cpu_ns"] + r["process"]["system_cpu_ns"] for r in report["ranks"])
    return {"step": statistics.median(steps), "wall": wall, "hook_ns": hook_ns if config == "hook" else None,
            "cpu_ns": cpu_ns}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--collate-ms", type=float, default=60)
    parser.add_argument("--script", choices=("ddp", "fsdp"), default="ddp")
    parser.add_argument("--no-bare", action="store_true", help="only the two rankscope runs: twice the rounds an hour")
    options = parser.parse_args()
    script = "train_%s.py" % options.script
    args = ["--steps", str(options.steps), "--collate-ms", str(options.collate_ms)]
    work = tempfile.mkdtemp(prefix="torch-hook-cost-")
    rounds = []
    configs = CONFIGS[1:] if options.no_bare else CONFIGS
    for r in range(options.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        results = {}
        for config in order:
            results[config] = run(config, script, args, work, "%d-%s" % (r, config.replace(" ", "-")))
            print("round %d %-8s median step %.2f ms, wall %.2f s%s" % (
                r, config, 1e3 * results[config]["step"], results[config]["wall"],
                "" if results[config]["hook_ns"] is None else
                ", hook %s ms" % [round(ns / 1e6, 2) for ns in results[config]["hook_ns"]]), flush=True)
        rounds.append(results)

    def ratios(a, b, key):
        return [x[a][key] / x[b][key] for x in rounds]

    print("\n%s, 2 ranks, %d steps of each run, %d rounds" % (script, options.steps, options.rounds))
    pairs = (("hook", "no hook"),) if options.no_bare else (("hook", "bare"), ("hook", "no hook"), ("no hook", "bare"))
    for key, label in (("step", "median step"), ("wall", "wall time")):
        for a, b in pairs:
            values = ratios(a, b, key)
            print("%-11s %-7s / %-7s median %.4f  (%s)" % (label, a, b, statistics.median(values),
                                                           ", ".join("%.3f" % v for v in values)))
    shares = [100 * statistics.median(x["hook"]["hook_ns"]) / (options.steps + 1) / 1e9 / x["hook"]["step"]
              for x in rounds]
    per_step = [statistics.median(x["hook"]["hook_ns"]) / (options.steps + 1) / 1e3 for x in rounds]
    print("hook's own CPU time per step: median %.0f µs (%s), %.3f %% of the median step (%s)" % (
        statistics.median(per_step), ", ".join("%.0f" % v for v in per_step), statistics.median(shares),
        ", ".join("%.3f" % v for v in shares)))
    extra = [(x["hook"]["cpu_ns"] - x["no hook"]["cpu_ns"]) / 2 / (options.steps + 1) / 1e3 for x in rounds]
    print("ranks' CPU time, hook minus no hook, per rank and step: median %.0f µs (%s)" % (
        statistics.median(extra), ", ".join("%.0f" % v for v in extra)))
    print("median step, %s: %.2f ms" % (configs[0], 1e3 * statistics.median(x[configs[0]]["step"] for x in rounds)))


if __name__ == "__main__":
    main()
