"""rankscope's hook in the Python interpreter of a profiled rank.

It records, as events on the rank's timeline, what a stock PyTorch training
job does without any change to its script: its steps (the optimizer's),
data loading, forward, backward and optimizer phases, and every
torch.distributed collective of any backend with its completion and the
waits for it. It reaches the rank's agent (the preloaded capture library)
through ctypes; what it records and how: docs/pytorch.md.

Nothing here may break the program: every hook catches its own exceptions,
counts them (python_hook_errors) and says the first, and a torch without
the APIs a part needs leaves that part out, with one line saying so.
"""

from . import _agent
from . import _imports


def start():
    """Connects to the agent and waits for torch; nothing when this process does not capture."""
    agent = _agent.connect()
    if agent is None:
        return

    def hook_torch(torch):
        from . import _torch

        _torch.install(agent, torch)

    def hook_fsdp(fsdp):
        from . import _torch

        _torch.install_fsdp(agent, fsdp)

    _imports.when_imported("torch", agent.timed(hook_torch))
    _imports.when_imported("torch.distributed.fsdp", agent.timed(hook_fsdp))
