"""A small gloo job of three steps in one file (no helper module), for the
ways a Python program can be started: python -I, its own sitecustomize,
DataLoader workers made by spawn, torchrun restarting it. Prints its losses.
--break-hook makes rankscope's hook fail inside (when it is there): the job
must not notice. --fail-first-run: rank 1 of torchelastic's first run fails
as it starts, for torchrun --max-restarts to run the job again."""
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
    # Before the process group: gloo's connections of a failed run can refuse the next run's.
    if "--fail-first-run" in sys.argv and os.environ.get("RANK") == "1" and \
            os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
        sys.exit("rank 1 fails its first run on purpose")
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(torch.nn.Linear(64, 4))
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
    print("rank %d losses: %s" % (dist.get_rank(), losses), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
