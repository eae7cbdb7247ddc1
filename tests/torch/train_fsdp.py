"""A stock FSDP2 (fully_shard) job on CPU/gloo: a stem, four residual MLP
blocks and a head, each block its own FSDP unit and the root a unit for the
stem and head; a DataLoader with a slow collate_fn, optionally a straggler
rank and torch.profiler. Started by torchrun or any launcher that sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT. See README.md for the options and
the --truth record."""
import time

START = time.perf_counter()  # before importing torch: wall_s covers the whole script

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import workload

WIDTH = 512
FFN = 1024
BLOCKS = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, FFN)
        self.down = nn.Linear(FFN, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, straggler=None):
        super().__init__()
        self.stem = nn.Linear(workload.FEATURES, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, workload.CLASSES))
        # A plain attribute, not a submodule: FSDP must not shard it.
        self.straggler = straggler

    def forward(self, x):
        if self.straggler:
            self.straggler.burn()
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def param_bytes(params):
    return sum(p.numel() * p.element_size() for p in params)


def shard(model, mesh):
    """fully_shard each block, then the root (which keeps stem and head).
    Returns each unit's unsharded parameter bytes in the order the units
    all-gather in forward: the root's first, then the blocks'."""
    block_bytes = [param_bytes(block.parameters()) for block in model.blocks]
    root_bytes = param_bytes(model.parameters()) - sum(block_bytes)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return [root_bytes, *block_bytes]


def main():
    args = workload.parse_args(__doc__)
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # the ranks share two cores
    torch.manual_seed(workload.SEED)

    straggler = workload.Straggler(args.slow_ms) if rank == args.slow_rank else None
    dist.barrier()  # the other ranks wait idle while the straggler calibrates
    model = Model(straggler)
    parameters = sum(p.numel() for p in model.parameters())
    unit_param_bytes = shard(model, init_device_mesh("cpu", (world_size,)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
    loss_fn = nn.CrossEntropyLoss()
    loader = workload.make_loader(args, rank, world_size)

    steps = workload.train(args, rank, model, optimizer, loss_fn, loader)
    del model, optimizer, loader
    workload.destroy_process_group()
    if args.truth:
        workload.write_truth(args, rank, world_size, steps, straggler, START, {
            "fsdp": {"units": len(unit_param_bytes), "unit_param_bytes": unit_param_bytes},
            "parameters": parameters,
        })


if __name__ == "__main__":
    main()
