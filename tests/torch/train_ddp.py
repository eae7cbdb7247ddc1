"""A stock DistributedDataParallel job on CPU/gloo: a ~3.8 M-parameter MLP,
a DataLoader with a slow collate_fn, optionally a straggler rank and
torch.profiler. Started by torchrun or any launcher that sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT. See README.md for the options and
the --truth record."""
import time

START = time.perf_counter()  # before importing torch: wall_s covers the whole script

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import workload


class MLP(nn.Module):
    def __init__(self, straggler=None, hidden=1024, depth=3):
        super().__init__()
        layers = [nn.Linear(workload.FEATURES, hidden), nn.ReLU()]
        for _ in range(depth):
            layers += [nn.Linear(hidden, hidden), nn.ReLU()]
        layers.append(nn.Linear(hidden, workload.CLASSES))
        self.net = nn.Sequential(*layers)
        # A plain attribute, not a submodule or buffer: DDP must not broadcast it.
        self.straggler = straggler

    def forward(self, x):
        if self.straggler:
            self.straggler.burn()
        return self.net(x)


def bucket_sizes(text):
    """DDP's logging data lists bucket sizes in bytes as '123, 456'."""
    return [int(size) for size in text.split(",") if size.strip()]


def main():
    args = workload.parse_args(
        __doc__,
        lambda p: p.add_argument("--bucket-cap-mb", type=float, default=2.0, help="DDP bucket_cap_mb"))
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # the ranks share two cores
    torch.manual_seed(workload.SEED)

    straggler = workload.Straggler(args.slow_ms) if rank == args.slow_rank else None
    dist.barrier()  # the other ranks wait idle while the straggler calibrates
    model = DDP(MLP(straggler), bucket_cap_mb=args.bucket_cap_mb)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    loader = workload.make_loader(args, rank, world_size)

    steps = workload.train(args, rank, model, optimizer, loss_fn, loader)
    logging_data = model._get_ddp_logging_data()
    ddp = {
        "rebuilt_bucket_sizes": bucket_sizes(logging_data.get("rebuilt_bucket_sizes", "")),
        "bucket_sizes": bucket_sizes(logging_data["bucket_sizes"]),
        "bucket_cap_bytes": int(logging_data["bucket_cap_bytes"]),
    }
    parameters = sum(p.numel() for p in model.parameters())
    del model, optimizer, loader
    workload.destroy_process_group()
    if args.truth:
        workload.write_truth(args, rank, world_size, steps, straggler, START, {
            "ddp": ddp,
            "parameters": parameters,
        })


if __name__ == "__main__":
    main()
