#!/usr/bin/env python3
"""Stock PyTorch jobs (gloo on the CPU) under `rankscope run`, checked against
what each script says of itself (its truth file) and against a bare run.

    test_torch_jobs.py SCENARIO RANKSCOPE VENV MPIEXEC WORK

SCENARIO: ddp, ddp4, fsdp, torchrun, kineto or edges (below). VENV is the virtual
environment with torch (torch_venv.sh makes it); MPIEXEC Open MPI's mpirun;
WORK a folder of its own, made anew.
Exit status 0: every check passed; 1: one failed (each failure is said).
"""

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
scenario, rankscope, venv, mpiexec, work = sys.argv[1:6]
python = os.path.join(venv, "bin", "python")
failures = []

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONUNBUFFERED="1")


def fail(message):
    failures.append(message)
    print("FAIL: " + message)


def check(condition, message):
    if not condition:
        fail(message)
    return condition


def run(command, quiet=False, **kwargs):
    print("$ " + " ".join(command), flush=True)
    done = subprocess.run(command, env=kwargs.pop("env", ENV), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=kwargs.pop("timeout", 300), **kwargs)
    if not quiet:
        sys.stdout.write(done.stdout[-3000:])
    sys.stdout.write(done.stderr[-3000:])
    return done


def losses_lines(output):
    return sorted(line for line in output.splitlines() if " losses: " in line)


def truths(pattern, ranks):
    return [json.load(open(pattern.replace("{rank}", str(r)))) for r in range(ranks)]


def bare(script, ranks, args, name):
    truth = os.path.join(work, name + "-bare-{rank}.json")
    done = run([python, os.path.join(HERE, "launch_bare.py"), "--nproc", str(ranks), "--",
                os.path.join(HERE, script)] + args + ["--truth", truth])
    check(done.returncode == 0, "%s: the bare run failed (status %d)" % (name, done.returncode))
    return done, truth


def profiled(script, ranks, args, name, options=()):
    timeline = os.path.join(work, name + ".h5")
    truth = os.path.join(work, name + "-{rank}.json")
    done = run([mpiexec, "-n", str(ranks), "--oversubscribe", rankscope, "run", "-o", timeline] + list(options) +
               ["--", python, os.path.join(HERE, script)] + args + ["--truth", truth])
    check(done.returncode == 0, "%s: the profiled run failed (status %d)" % (name, done.returncode))
    return done, truth, timeline


def report(timeline):
    done = run([rankscope, "report", timeline, "--format", "json"], quiet=True)
    if not check(done.returncode == 0, "report of %s failed" % timeline):
        return None
    return json.loads(done.stdout)


def same_as_bare(name, bare_run, bare_truth, run_, run_truth, ranks):
    check(losses_lines(run_.stdout) == losses_lines(bare_run.stdout) and losses_lines(run_.stdout),
          "%s: the losses printed differ from the bare run's" % name)
    for bare_rank, rank in zip(truths(bare_truth, ranks), truths(run_truth, ranks)):
        check(bare_rank["losses"] == rank["losses"], "%s: rank %d's losses differ from the bare run's: %s vs %s"
              % (name, rank["rank"], rank["losses"], bare_rank["losses"]))


def check_steps(name, result, steps):
    numbers = result["steps"]["numbers"]
    check(numbers == list(range(steps)), "%s: steps %s, not 0..%d" % (name, numbers, steps - 1))
    for rank in result["ranks"]:
        ran = [s["step"] for s in rank["steps"]]
        check(ran == list(range(steps)), "%s: rank %d ran steps %s" % (name, rank["rank"], ran))


def check_data_loading(name, result, truth_pattern, ranks):
    """The report's data-loading share within 5 points of the script's own, over the same steps (not step 0)."""
    check(len(result["breakdown"]) == ranks, "%s: a breakdown of %d ranks" % (name, len(result["breakdown"])))
    for truth, entry in zip(truths(truth_pattern, ranks), result["breakdown"]):
        steps = [s for s in entry["steps"] if s["step"] != 0]
        loading = sum(s["ns"]["data_loading"] for s in steps)
        total = sum(s["step_ns"] for s in steps)
        share = 100.0 * loading / total
        expected = 100.0 * truth["data_loading_share"]
        print("%s: rank %d data loading %.1f %% (script: %.1f %%)" % (name, truth["rank"], share, expected))
        check(abs(share - expected) <= 5, "%s: rank %d's data loading is %.1f %% of its steps, the script says "
              "%.1f %%" % (name, truth["rank"], share, expected))


def check_verdict_data_loading(name, result, truth_pattern, ranks):
    """A slow collate is what is slowest but the injected straggler (extra
    matmuls, more than the collate's sleep): data loading first in
    the verdict once the straggler is set aside, costing what the script
    measured on the rank it cost most, within 10 % (the report's cost is a
    mean over every step, as here)."""
    found = result["bottlenecks"]
    print("%s: verdict %s" % (name, [(b["class"], round(b["cost_ns_per_step"] / 1e6, 1)) for b in found]))
    first = next((b for b in found if b["class"] != "straggler"), {})
    check(first.get("class") == "data_loading", "%s: the first bottleneck is %s, not data loading" % (name, first or "none"))
    per_rank = [sum(s["data_loading_s"] for s in t["steps"]) / len(t["steps"]) * 1e9 for t in truths(truth_pattern, ranks)]
    expected = max(per_rank)
    cost = first.get("cost_ns_per_step", 0)
    check(abs(cost - expected) <= 0.10 * expected, "%s: data loading costs %.1f ms a step, the script measured %.1f ms"
          % (name, cost / 1e6, expected / 1e6))


def check_straggler(name, result, slow_rank):
    stragglers = result["stragglers"] or []
    first = stragglers[0] if stragglers else {}
    check(first.get("rank") == slow_rank and first.get("cause") == "slow compute",
          "%s: the first straggler is %s, not rank %d with slow compute" % (name, first or "none", slow_rank))


def check_hook_cost(name, result):
    check(result["capture_cost"], "%s: no rank states its capture cost" % name)
    for cost in result["capture_cost"]:
        check(cost["python_hook_ns"] > 0, "%s: rank %d states no Python hook cost" % (name, cost["rank"]))


# ------------------------------------------------------------- scenarios ---

def job(script, ranks, args, name, steps):
    """The script bare and profiled: the same losses, steps found on every
    rank, each rank's data loading as the script measured it. Its truth
    files and report, or None after a failure."""
    bare_run, bare_truth = bare(script, ranks, args, name)
    run_, truth, timeline = profiled(script, ranks, args, name)
    if failures:
        return None, None
    same_as_bare(name, bare_run, bare_truth, run_, truth, ranks)
    result = report(timeline)
    check_steps(name, result, steps)
    check_data_loading(name, result, truth, ranks)
    check_hook_cost(name, result)
    return truth, result


def ddp(ranks=2, slow_rank=1, steps=20, extra_args=()):
    name = "ddp%d" % ranks
    truth, result = job("train_ddp.py", ranks, ["--steps", str(steps), "--slow-rank", str(slow_rank)] +
                        list(extra_args), name, steps)
    if result is None:
        return
    check_straggler(name, result, slow_rank)
    check_verdict_data_loading(name, result, truth, ranks)
    expected = truths(truth, ranks)[0]["ddp"]["rebuilt_bucket_sizes"]
    buckets = [b["bytes"] for b in result["buckets"]["buckets"]]
    check(buckets == expected, "%s: buckets %s, DDP's %s" % (name, buckets, expected))
    allreduces = [g for g in result["collectives_summary"]["groups"]
                  if g["source"] == "c10d" and g["op"] == "AllReduce"]
    # Step 0 reduces all gradients at once, before DDP rebuilds its buckets; each step the loss once more.
    check(allreduces and allreduces[0]["count"] >= (steps - 1) * len(expected) + 1 + steps,
          "%s: gradient allreduces not matched across ranks: %s" % (name, allreduces))
    check(len(result["breakdown"]) == ranks, "%s: a breakdown of %d ranks" % (name, len(result["breakdown"])))
    for entry in result["breakdown"]:
        for category in ("forward", "backward", "optimizer", "communication"):
            check(entry["categories"][category]["ns"] is not None,
                  "%s: rank %d's %s is not measured" % (name, entry["rank"], category))


def fsdp(ranks=2, steps=10):
    name = "fsdp%d" % ranks
    # DataLoader workers forked from each rank: the agent stops in them; the hook never runs there.
    truth, result = job("train_fsdp.py", ranks, ["--steps", str(steps), "--workers", "2"], name, steps)
    if result is None:
        return
    units = truths(truth, ranks)[0]["fsdp"]["units"]
    check(result["buckets"]["fsdp"] and len(result["buckets"]["units"]) == units,
          "%s: %d FSDP units found, the script has %d" % (name, len(result["buckets"]["units"]), units))


def torchrun():
    """mpirun starts one rankscope per node, which starts torchrun; its workers are the ranks."""
    ranks, steps, slow_rank = 2, 20, 1
    torchrun_command = [os.path.join(venv, "bin", "torchrun"), "--nproc-per-node", str(ranks)]
    args = ["--steps", str(steps), "--slow-rank", str(slow_rank)]
    bare_run, bare_truth = bare("train_ddp.py", ranks, args, "torchrun")
    timeline = os.path.join(work, "torchrun.h5")
    truth = os.path.join(work, "torchrun-{rank}.json")
    done = run([mpiexec, "-n", "1", rankscope, "run", "-o", timeline, "--"] + torchrun_command +
               [os.path.join(HERE, "train_ddp.py")] + args + ["--truth", truth])
    if not check(done.returncode == 0, "torchrun: the profiled run failed (status %d)" % done.returncode):
        return
    same_as_bare("torchrun", bare_run, bare_truth, done, truth, ranks)
    result = report(timeline)
    check(result["world_size"] == ranks, "torchrun: %d ranks, torchrun started %d" % (result["world_size"], ranks))
    check_steps("torchrun", result, steps)
    check_straggler("torchrun", result, slow_rank)
    check_data_loading("torchrun", result, truth, ranks)
    expected = truths(truth, ranks)[0]["ddp"]["rebuilt_bucket_sizes"]
    buckets = [b["bytes"] for b in result["buckets"]["buckets"]]
    check(buckets == expected, "torchrun: buckets %s, DDP's %s" % (buckets, expected))

    # torchelastic restarts the workers after their first run fails: the
    # timeline holds the last run, the earlier one's shards are kept.
    timeline = os.path.join(work, "restarted.h5")
    done = run([mpiexec, "-n", "1", rankscope, "run", "-o", timeline, "--"] + torchrun_command +
               ["--max-restarts", "1", os.path.join(HERE, "tiny_job.py"), "--fail-first-run"])
    kept = glob.glob(timeline + ".shards/restart-0/rank-*.shard")
    check(len(kept) == ranks, "torchrun restarted: the first run's shards kept: %s" % kept)
    check("the timeline holds their last run, and an earlier one's shards are kept in" in done.stderr,
          "torchrun restarted: the run does not say where the earlier run is")
    result = report(timeline)
    for rank in result["ranks"]:
        check([s["step"] for s in rank["steps"]] == [0, 1, 2], "torchrun restarted: rank %d ran steps %s"
              % (rank["rank"], [s["step"] for s in rank["steps"]]))
    for rank in info(timeline)["ranks"]:
        check(rank["counters"].get("torchelastic_restarts") == 1, "torchrun restarted: rank %d counts %s restarts"
              % (rank["rank"], rank["counters"].get("torchelastic_restarts")))
    earlier = os.path.join(work, "earlier.h5")
    done = run([rankscope, "merge", timeline + ".shards/restart-0", "-o", earlier])
    check(done.returncode == 0 and info(earlier)["world_size"] == ranks, "torchrun restarted: the earlier run "
          "does not merge")


def kineto():
    """The same job's torch.profiler traces, imported: ranks of one host on one clock, gloo's collectives
    matched, the straggler, data loading; the buckets' sizes where record_shapes recorded them, n/a where not."""
    # The profiler records steps − 2 of them (wait 1, warmup 1). With 2 ranks the lateness test needs 14 of 14
    # steps late at 14; 24 leaves room for steps a loaded machine stalls the other rank in.
    ranks, steps, slow_rank = 2, 24, 1
    for shapes in (True, False):
        name = "kineto" + ("-shapes" if shapes else "")
        traces = os.path.join(work, name)
        bare_run, truth = bare("train_ddp.py", ranks, ["--steps", str(steps), "--slow-rank", str(slow_rank),
                                                       "--profile-dir", traces] +
                               (["--record-shapes"] if shapes else []), name)
        timeline = os.path.join(work, name + ".h5")
        done = run([rankscope, "import-kineto"] + sorted(glob.glob(os.path.join(traces, "rank*.json"))) +
                   ["-o", timeline])
        if not check(done.returncode == 0, "%s: import-kineto failed" % name):
            return
        result = report(timeline)
        check(result["clock"]["corrected"] and all(c["bound_ns"] == 0 for c in result["clock"]["ranks"]),
              "%s: the ranks of one host are not on one clock: %s" % (name, result["clock"]))
        check(len(result["steps"]["numbers"]) == steps - 2, "%s: %s steps" % (name, result["steps"]["numbers"]))
        check_straggler(name, result, slow_rank)
        expected = truths(truth, ranks)[0]["ddp"]["rebuilt_bucket_sizes"]
        buckets = result["buckets"]["buckets"]
        check(len(buckets) == len(expected), "%s: %d buckets, DDP has %d" % (name, len(buckets), len(expected)))
        if shapes:
            check([b["bytes"] for b in buckets] == expected, "%s: buckets %s, DDP's %s"
                  % (name, [b["bytes"] for b in buckets], expected))
        else:
            check(all(b["bytes"] is None and "record_shapes" in b["bytes_reason"] for b in buckets),
                  "%s: buckets without sizes in the trace are not n/a: %s" % (name, buckets))
        for entry in result["breakdown"]:
            check(entry["categories"]["data_loading"]["ns"], "%s: rank %d has no data loading"
                  % (name, entry["rank"]))
        kineto_round_trip(name, timeline, result)
    kineto_diff(ranks, steps, slow_rank)


def kineto_round_trip(name, timeline, result):
    """export --kineto of the imported job, imported again: the same report, gloo's collectives, their sizes
    and the inferred waits made again from what was written (docs/export.md, "torch.profiler traces")."""
    exported = os.path.join(work, name + ".kineto")
    again = os.path.join(work, name + ".again.h5")
    done = run([rankscope, "export", timeline, "--kineto", exported])
    if not check(done.returncode == 0, "%s: export --kineto failed" % name):
        return
    done = run([rankscope, "import-kineto", exported, "-o", again])
    if not check(done.returncode == 0, "%s: import-kineto of the export failed" % name):
        return
    second = report(again)
    for key in sorted(set(result) | set(second or {})):
        check(key == "file" or (second or {}).get(key) == result.get(key),
              "%s: the report's %s changed in the round trip through export --kineto" % (name, key))


def kineto_diff(ranks, steps, slow_rank):
    """Two imported torch.profiler runs with a known change, the slow rank's extra compute doubled: `diff` names
    the step first, then that rank's compute, by about what the script says it added."""
    traces = os.path.join(work, "kineto-slower")
    _, truth = bare("train_ddp.py", ranks, ["--steps", str(steps), "--slow-rank", str(slow_rank), "--slow-ms", "200",
                                            "--profile-dir", traces], "kineto-slower")
    slower = os.path.join(work, "kineto-slower.h5")
    done = run([rankscope, "import-kineto"] + sorted(glob.glob(os.path.join(traces, "rank*.json"))) + ["-o", slower])
    if not check(done.returncode == 0, "kineto-slower: import-kineto failed"):
        return
    done = run([rankscope, "diff", os.path.join(work, "kineto.h5"), slower, "--format", "json", "--fail-on", "default"],
               quiet=True)
    check(done.returncode == 1, "kineto diff: --fail-on default exited %d, not 1" % done.returncode)
    significant = [c for c in json.loads(done.stdout)["changes"] if c["significant"]]
    print("kineto diff:", [(c["metric"], c["rank"], round(c["ratio"], 3)) for c in significant[:5]])
    if not check(significant, "kineto diff: nothing significant"):
        return
    first = significant[0]
    check(first["metric"] == "step_ns" and first["scope"] == "job" and first["regression"],
          "kineto diff: the first change is %s of %s, not the job's step" % (first["metric"], first["scope"]))
    ranks_changed = [c for c in significant if c["scope"] == "rank"]
    if not check(ranks_changed, "kineto diff: no rank's figure changed significantly"):
        return
    top = ranks_changed[0]
    check(top["rank"] == slow_rank and top["metric"] in ("compute_ns", "forward_ns"),
          "kineto diff: the first rank's change is %s of rank %s, not rank %d's compute" % (top["metric"], top["rank"],
                                                                                           slow_rank))
    base_truth = truths(os.path.join(work, "kineto-bare-{rank}.json"), ranks)[slow_rank]
    added_s = (statistics.median(truths(truth, ranks)[slow_rank]["slow_forward_s"]) -
               statistics.median(base_truth["slow_forward_s"]))
    measured_s = (top["new"] - top["base"]) / 1e9
    print("kineto diff: rank %d's %s grew %.1f ms, the script added %.1f ms" % (slow_rank, top["metric"],
                                                                            measured_s * 1e3, added_s * 1e3))
    check(abs(measured_s - added_s) <= 0.3 * added_s, "kineto diff: rank %d's %s grew %.1f ms, the script added %.1f ms"
          % (slow_rank, top["metric"], measured_s * 1e3, added_s * 1e3))


def info(timeline):
    done = run([rankscope, "info", "--json", timeline], quiet=True)
    return json.loads(done.stdout) if check(done.returncode == 0, "info of %s failed" % timeline) else None


def rankscope_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("rankscope agent:")]


def one_rank(name, command, env=None):
    """`command` bare and under `rankscope run` (one rank): the same status and output."""
    bare_run = run(command, env=env or ENV)
    timeline = os.path.join(work, name + ".h5")
    profiled_run = run([mpiexec, "-n", "1", rankscope, "run", "-o", timeline, "--"] + command, env=env or ENV)
    check(profiled_run.returncode == bare_run.returncode, "%s: status %d under rankscope, %d bare"
          % (name, profiled_run.returncode, bare_run.returncode))
    check(profiled_run.stdout == bare_run.stdout, "%s: the output differs from the bare run's" % name)
    return profiled_run, timeline


def edges():
    """Python programs of every kind run under the hook as they run bare, with one line for what was not captured."""
    tiny = os.path.join(HERE, "tiny_job.py")
    rendezvous = dict(ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT="29581", RANK="0", WORLD_SIZE="1")

    # A Python program without torch: its status and output, one line.
    plain = os.path.join(work, "plain.py")
    with open(plain, "w") as f:
        f.write("import sys\nprint('arguments', sys.argv[1:])\nsys.exit(3)\n")
    done, _ = one_rank("plain", [python, plain, "two words", "--", "-o"])
    lines = rankscope_lines(done.stderr)
    check(len(lines) == 1 and "never imported torch" in lines[0], "plain: rankscope said %s" % lines)
    check("captured nothing (capture: mpi,nvtx,python mode=sidecar buffer_mb=64): its Python program never imported "
          "torch" in done.stderr, "plain: the run's warning does not name the cause")

    # python -I ignores PYTHONPATH: the job runs as bare; one line says the hook did not run.
    done, timeline = one_rank("isolated", [python, "-I", tiny], rendezvous)
    lines = rankscope_lines(done.stderr)
    check(len(lines) == 1 and "did not run" in lines[0], "isolated: rankscope said %s" % lines)
    check("its Python interpreter ignored PYTHONPATH" in done.stderr, "isolated: the run's warning does not name "
          "the cause")
    counters = info(timeline)["ranks"][0]["counters"]
    check(counters.get("python_hook_not_run") == 1, "isolated: python_hook_not_run is %s"
          % counters.get("python_hook_not_run"))

    # The program's own sitecustomize still runs, and the hook with it.
    own = os.path.join(work, "own-site")
    os.makedirs(own)
    with open(os.path.join(own, "sitecustomize.py"), "w") as f:
        f.write("print('the program\\'s own sitecustomize ran')\n")
    done, timeline = one_rank("sitecustomize", [python, tiny], dict(rendezvous, PYTHONPATH=own))
    check("own sitecustomize ran" in done.stdout, "sitecustomize: the program's own did not run")
    check(report(timeline)["steps"]["numbers"] == [0, 1, 2], "sitecustomize: the hook found no steps")

    # DataLoader workers started by spawn run the sitecustomize again: it stays out of their way.
    done, timeline = one_rank("spawn", [python, tiny, "--spawn"], rendezvous)
    check(report(timeline)["steps"]["numbers"] == [0, 1, 2], "spawn: the hook found no steps")

    # torch.compile traces the DDP module with the hook's forward hooks on it: they step aside, nothing breaks.
    done, timeline = one_rank("compile", [python, tiny, "--compile"], rendezvous)
    check(not rankscope_lines(done.stderr), "compile: rankscope said %s" % rankscope_lines(done.stderr))
    check(report(timeline)["steps"]["numbers"] == [0, 1, 2], "compile: the hook found no steps")

    # A job that moves on to another optimizer (the first one let go) keeps its steps.
    done, timeline = one_rank("switch", [python, tiny, "--switch-optimizer"], rendezvous)
    check(report(timeline)["steps"]["numbers"] == [0, 1, 2], "switch: steps %s, not 0 to 2"
          % report(timeline)["steps"]["numbers"])

    # A failure inside the hook never reaches the program: counted, said once.
    done, timeline = one_rank("broken", [python, tiny, "--break-hook"], rendezvous)
    lines = rankscope_lines(done.stderr)
    check(len(lines) == 1 and "ZeroDivisionError" in lines[0], "broken: rankscope said %s" % lines)
    counters = info(timeline)["ranks"][0]["counters"]
    check(counters.get("python_hook_errors", 0) > 0, "broken: python_hook_errors is %s"
          % counters.get("python_hook_errors"))

    # A torch older than the hooks' APIs: the program runs; one line names what is not captured.
    old = os.path.join(work, "old-torch", "torch")
    os.makedirs(old)
    with open(os.path.join(old, "__init__.py"), "w") as f:
        f.write("__version__ = '1.13.1'\n")
    script = os.path.join(work, "old.py")
    with open(script, "w") as f:
        f.write("import torch\nprint('torch', torch.__version__)\n")
    done, _ = one_rank("old-torch", [python, script], dict(ENV, PYTHONPATH=os.path.dirname(old)))
    lines = rankscope_lines(done.stderr)
    check(len(lines) == 1 and "torch 1.13.1: the Python hook does not capture steps" in lines[0],
          "old-torch: rankscope said %s" % lines)


# Four ranks on two cores transfer gloo's gradients in about 50 ms a step,
# more than the default 40 ms collate: the collate and the straggler grow
# so that data loading is still the largest cost but the straggler.
SCENARIOS = {"ddp": ddp,
             "ddp4": lambda: ddp(ranks=4, slow_rank=2, steps=12,
                                 extra_args=["--collate-ms", "100", "--slow-ms", "200"]),
             "fsdp": fsdp, "kineto": kineto, "edges": edges, "torchrun": torchrun}

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
SCENARIOS[scenario]()
print("%s: %s" % (scenario, "%d checks failed" % len(failures) if failures else "passed"))
sys.exit(1 if failures else 0)
