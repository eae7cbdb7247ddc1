"""What train_ddp.py and train_fsdp.py share: their options, the synthetic
data set behind a deliberately slow DataLoader, the straggler's extra compute,
the optional torch.profiler set-up and the ground-truth record each rank
writes. Nothing here talks to the profiler under test."""
import argparse
import contextlib
import functools
import gc
import json
import os
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

FEATURES = 640
CLASSES = 16
BATCH = 32
SEED = 0


def parse_args(description, extra=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=8, help="training iterations")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    parser.add_argument("--collate-ms", type=float, default=40.0,
                        help="milliseconds collate_fn sleeps per batch (slow data loading)")
    parser.add_argument("--slow-rank", type=int, default=-1,
                        help="rank whose forward does extra compute (-1: none)")
    parser.add_argument("--slow-ms", type=float, default=100.0,
                        help="milliseconds of extra matmuls per forward on --slow-rank")
    parser.add_argument("--profile-dir", help="run under torch.profiler, traces to DIR/rank{RANK}.json")
    parser.add_argument("--record-shapes", action="store_true", help="torch.profiler's record_shapes=True")
    parser.add_argument("--truth", help="ground-truth JSON path, '{rank}' replaced by the rank")
    if extra:
        extra(parser)
    return parser.parse_args()


class SyntheticClassification(Dataset):
    """Fixed random features labelled by a fixed random linear map: a
    learnable task, and the same samples in every run."""

    def __init__(self, size):
        g = torch.Generator().manual_seed(SEED)
        self.x = torch.randn(size, FEATURES, generator=g)
        self.y = (self.x @ torch.randn(FEATURES, CLASSES, generator=g)).argmax(dim=1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def slow_collate(samples, delay_s):
    # Stands in for decoding/augmentation: time in the loader, not in compute.
    time.sleep(delay_s)
    xs, ys = zip(*samples)
    return torch.stack(xs), torch.stack(ys)


def make_loader(args, rank, world_size):
    # Exactly --steps batches per rank, each rank its own shard, as DistributedSampler gives.
    dataset = SyntheticClassification(args.steps * BATCH * world_size)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
    sampler.set_epoch(0)
    return DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=args.workers,
                      collate_fn=functools.partial(slow_collate, delay_s=args.collate_ms / 1000))


class Straggler:
    """Extra matmuls (real compute, not a sleep) run inside a model's forward
    on the slow rank. Their result is thrown away, so losses do not change.
    Calibrated once, when built; seconds_per_forward records what each
    forward actually spent on them."""

    SIZE = 256

    def __init__(self, target_ms):
        g = torch.Generator().manual_seed(SEED)
        self.a = torch.randn(self.SIZE, self.SIZE, generator=g)
        self.b = torch.randn(self.SIZE, self.SIZE, generator=g)
        self.out = torch.empty(self.SIZE, self.SIZE)
        self._matmuls(5)  # warm-up: the first calls allocate and pick kernels
        trial = 50
        t0 = time.perf_counter()
        self._matmuls(trial)
        per_matmul_ms = (time.perf_counter() - t0) * 1000 / trial
        self.matmuls = max(1, round(target_ms / per_matmul_ms))
        self.seconds_per_forward = []

    def _matmuls(self, count):
        with torch.no_grad():
            for _ in range(count):
                torch.mm(self.a, self.b, out=self.out)

    def burn(self):
        t0 = time.perf_counter()
        self._matmuls(self.matmuls)
        self.seconds_per_forward.append(time.perf_counter() - t0)


def profiler(args, rank):
    """torch.profiler as its documentation shows it, or nothing at all."""
    if not args.profile_dir:
        return contextlib.nullcontext()
    os.makedirs(args.profile_dir, exist_ok=True)
    path = os.path.join(args.profile_dir, f"rank{rank}.json")
    active = max(1, args.steps - 2)
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=active, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(path),
        record_shapes=args.record_shapes,
    )


def train(args, rank, model, optimizer, loss_fn, loader):
    """The training loop as the PyTorch tutorials write it, timed step by
    step: when the loop asked for a batch, got it, and finished the step."""
    steps = []
    with profiler(args, rank) as prof:
        begin = time.perf_counter()
        for x, y in loader:
            got_batch = time.perf_counter()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            # The mean loss over the ranks, for the log: a synchronous allreduce every step.
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            steps.append({"begin": begin, "end": time.perf_counter(), "data_loading_s": got_batch - begin,
                          "loss": loss.item(), "mean_loss": mean_loss.item() / dist.get_world_size()})
            if prof:
                prof.step()
            begin = time.perf_counter()
    losses = [s["loss"] for s in steps]
    # One write, so that lines of ranks sharing a pipe do not interleave.
    print(f"rank {rank} losses: {losses}\n", end="", flush=True)
    return steps


def destroy_process_group():
    """Ends the job's process group once nothing holds it. A DDP or FSDP
    model keeps the group alive: left to the interpreter's exit, gloo's
    worker thread can free its last work after Python is gone and abort
    the process (torch 2.15, often under load). The caller deletes its
    models and optimizers first; the collection frees their cycles."""
    gc.collect()
    dist.destroy_process_group()


def write_truth(args, rank, world_size, steps, straggler, start, extra):
    """The record a test compares the profiler's figures with, written to
    --truth. Times are time.perf_counter() seconds (CLOCK_MONOTONIC on Linux)."""
    measured = steps[1:]  # step 0 includes warm-up (first batch, DDP/FSDP lazy init)
    loading = sum(s["data_loading_s"] for s in measured)
    duration = sum(s["end"] - s["begin"] for s in measured)
    truth = {
        "rank": rank,
        "world_size": world_size,
        "backend": "gloo",
        "steps": steps,
        "data_loading_share": loading / duration if duration else 0.0,
        "losses": [s["loss"] for s in steps],
        **extra,
        "slow_rank": args.slow_rank,
        "slow_ms": args.slow_ms,
        "slow_matmuls": straggler.matmuls if straggler else 0,
        "slow_forward_s": straggler.seconds_per_forward if straggler else [],
        "unix_minus_perf_counter_s": time.time() - time.perf_counter(),
        "wall_s": time.perf_counter() - start,
    }
    with open(args.truth.replace("{rank}", str(rank)), "w") as f:
        json.dump(truth, f, indent=1)
