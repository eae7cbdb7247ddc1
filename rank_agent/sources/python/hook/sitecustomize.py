"""rankscope's way into a Python program it profiles (docs/pytorch.md).

`rankscope run` puts this folder first on PYTHONPATH, so the interpreter
imports this module at start-up, as it imports any sitecustomize. In a
process the rank agent captures (the one rankscope started, or a worker of
the torchrun it started: the agent decides) it starts the hook
(rankscope_hook), which waits for torch to be imported; in every other Python
process of the job (a DataLoader worker started by spawn, a subprocess,
torchrun itself) the agent says no, for about 2 ms. Either way the
sitecustomize this one shadows on sys.path (a distribution's, a virtual
environment's, the user's) runs after it, as it would without rankscope.
"""

import os
import sys


def _start_hook():
    if not os.environ.get("RANKSCOPE_SHARD_DIR"):  # not a job of rankscope's
        return
    try:
        import rankscope_hook

        rankscope_hook.start()
    except Exception as error:  # the program runs on, as it would bare
        sys.stderr.write("rankscope agent: the Python hook could not start (%s: %s); the program runs on "
                         "without it\n" % (type(error).__name__, error))


def _is_here(entry, here):
    try:
        return os.path.samefile(entry or os.curdir, here)
    except OSError:  # an entry that is no folder (a zip file, one gone)
        return False


def _run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    # Out of the program's sys.path, as bare; its children still find it through PYTHONPATH.
    sys.path[:] = [entry for entry in sys.path if not _is_here(entry, here)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    # It is the sitecustomize the program knows: its own, under its own name.
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_start_hook()
_run_shadowed_sitecustomize()
