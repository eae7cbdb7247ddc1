"""A small gloo job of three steps in one file (no helper module), for the
ways a Python program can be started: python -I, its own sitecustomize,
DataLoader workers made by spawn, torchrun restarting it. Prints its losses.
--break-hook makes rankscope's hook fail inside (when it is there): the job
must not notice. --fail-first-run: the ranks of torchelastic's first run
fail as they start, for torchrun --max-restarts to run the job again. --compile:
the DDP module under torch.compile (backend eager). --switch-optimizer: a
new optimizer from the second step on."""
import gc
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset


def main():
    if "--break-hook" in sys.argv:
        try:
            import rankscope_hook._torch as hook

            hook._Job._called = lambda *args: 1 / 0
        except ImportError:  # a bare run: no hook to break
            pass
    spawn = "--spawn" in sys.argv
    # Every rank, before the process group: torchelastic keeps its store
    # across restarts, and a rank of the next run can read the address a
    # rank of this one published there and fail to connect.
    if "--fail-first-run" in sys.argv and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
        sys.exit("rank %s fails its first run on purpose" % os.environ.get("RANK"))
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(torch.nn.Linear(64, 4))
    if "--compile" in sys.argv:
        model = torch.compile(model, backend="eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(48, 64), torch.randint(0, 4, (48,)))
    loader = DataLoader(data, batch_size=16, num_workers=1 if spawn else 0,
                        multiprocessing_context="spawn" if spawn else None)
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        if "--switch-optimizer" in sys.argv and len(losses) == 1:
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    print("rank %d losses: %s" % (dist.get_rank(), losses), flush=True)
    # Nothing may hold the process group when it ends: gloo's worker thread
    # can otherwise free its last work after Python is gone and abort.
    del model, optimizer, loader
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
