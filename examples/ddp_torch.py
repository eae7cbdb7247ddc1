#!/usr/bin/env python3
"""ddp_torch: PyTorch DistributedDataParallel training on GPUs, for rankscope's
sidecar mode (docs/examples.md).

A stack of bias-free linear layers with ReLU, trained with DDP on the nccl or
gloo backend. Every step is an NVTX range named ProfilerStep#N, as
torch.profiler names its steps, so a profile of it has steps without
torch.profiler. Deterministic: the same seed, shapes and cuBLAS settings give
the same kernels in every run, so one step can be captured by rankscope in
one run and by torch.profiler in another and the two compared.

    rankscope run -o job.h5 --capture nvtx,cuda,nccl -- python3 ddp_torch.py --truth truth-%r.json
    python3 ddp_torch.py --torch-profile traces/ --profile-step 5   # torch.profiler instead

It reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, which
rankscope's sidecar mode (or torchrun) sets; alone it runs as a world of one.
"""
import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    parser.add_argument("--layers", type=int, default=8, help="linear layers (default 8)")
    parser.add_argument("--dim", type=int, default=2048, help="features per layer (default 2048)")
    parser.add_argument("--batch", type=int, default=4096, help="rows per batch (default 4096)")
    parser.add_argument("--bucket-mb", type=float, default=25, help="DDP's bucket_cap_mb (default 25)")
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--truth", help="write the rank's DDP buckets and step times to this JSON file (%%r: the rank)")
    parser.add_argument("--torch-profile", metavar="FOLDER",
                        help="record --profile-step with torch.profiler, one Chrome trace per rank in FOLDER")
    parser.add_argument("--profile-step", type=int, default=5, help="the step torch.profiler records (default 5)")
    arguments = parser.parse_args()
    if arguments.torch_profile and not 1 <= arguments.profile_step < arguments.steps:
        parser.error("--profile-step must lie in 1 .. --steps - 1")
    return arguments


def bucket_sizes(logging_data):
    """DDP's bucket sizes in bytes, as rebuilt after the first step when it rebuilt them."""
    for key in ("rebuilt_bucket_sizes", "bucket_sizes"):
        text = str(logging_data.get(key, "")).strip()
        if text:
            return key, [int(size) for size in text.replace(" ", "").split(",") if size]
    return None, []


def main():
    arguments = parse_arguments()
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(arguments.backend, rank=rank, world_size=world_size)

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    layers = []
    for _ in range(arguments.layers):
        layers += [nn.Linear(arguments.dim, arguments.dim, bias=False), nn.ReLU()]
    model = DistributedDataParallel(nn.Sequential(*layers).to(device), device_ids=[device.index],
                                    bucket_cap_mb=arguments.bucket_mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch = torch.rand(arguments.batch, arguments.dim, pin_memory=True)

    profiler = None
    if arguments.torch_profile:
        os.makedirs(arguments.torch_profile, exist_ok=True)
        trace = os.path.join(arguments.torch_profile, f"rank{rank}.pt.trace.json")
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=torch.profiler.schedule(wait=arguments.profile_step - 1, warmup=1, active=1, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(trace))
        profiler.start()

    step_ms = []
    for step in range(arguments.steps):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        torch.cuda.nvtx.range_push(f"ProfilerStep#{step}")
        inputs = batch.to(device, non_blocking=True)
        loss = model(inputs).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        loss_value = loss.item()
        torch.cuda.nvtx.range_pop()
        step_ms.append((time.perf_counter() - begin) * 1e3)
        if profiler is not None:
            profiler.step()
    if profiler is not None:
        profiler.stop()

    if arguments.truth:
        logging_data = model._get_ddp_logging_data()
        source, sizes = bucket_sizes(logging_data)
        with open(arguments.truth.replace("%r", str(rank)), "w") as out:
            json.dump({"program": "ddp_torch", "rank": rank, "world_size": world_size, "backend": arguments.backend,
                       "steps": arguments.steps, "bucket_bytes": sizes, "bucket_bytes_from": source,
                       "parameter_bytes": [p.numel() * p.element_size() for p in model.parameters()],
                       "ddp_logging_data": {k: str(v) for k, v in logging_data.items()},
                       "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
                       "torch_version": torch.__version__, "step_ms": step_ms, "final_loss": loss_value}, out, indent=1)
    if rank == 0:
        ordered = sorted(step_ms[2:] or step_ms)
        print(f"ddp_torch: {world_size} ranks, {arguments.backend}, {arguments.steps} steps, "
              f"median step {ordered[len(ordered) // 2]:.3f} ms (steps 2 on)", flush=True)
    # Nothing may hold the process group when it ends: a gloo worker thread
    # can otherwise free its last work after Python is gone and abort.
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
