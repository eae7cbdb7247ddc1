"""The rank's agent as the hook sees it: the capture library's Python entry
points (rankscope/rank_agent/python_hook.h), reached through ctypes in the
process's global symbol scope, where `rankscope run` preloaded it.

Every hook runs inside `Agent.timed`, which keeps the CPU time the hook
spends in its own code (the capture cost the report states: its thread's CPU
time, which a core shared with the program's other threads does not inflate)
and turns an exception into a count and, the first time, one line: never into
the program.
"""

import ctypes
import os
import sys
import time
import traceback

_cpu_ns = time.thread_time_ns
_c_int64 = ctypes.c_int64
_c_uint64 = ctypes.c_uint64
_c_uint32 = ctypes.c_uint32
_c_int32 = ctypes.c_int32
_c_char_p = ctypes.c_char_p

# name: (result, arguments)
_ENTRY_POINTS = {
    "rankscope_python_attach": (ctypes.c_int, []),
    "rankscope_python_hooked": (None, [_c_uint32]),
    "rankscope_python_now": (_c_int64, []),
    "rankscope_python_name": (_c_uint32, [_c_char_p]),
    "rankscope_python_enum": (_c_uint32, [_c_char_p, _c_char_p]),
    "rankscope_python_begin": (_c_int32, [_c_uint32, _c_int64]),
    "rankscope_python_end": (_c_int64, [_c_int32]),
    "rankscope_python_group": (_c_uint32, [_c_char_p, _c_char_p, ctypes.POINTER(_c_uint64)]),
    "rankscope_python_collective": (None, [_c_uint32, _c_uint64, _c_uint32, _c_uint32, _c_uint64, _c_uint64,
                                           _c_uint32, _c_int32, _c_int64, ctypes.c_int]),
    "rankscope_python_enqueue": (None, [_c_uint64, _c_uint32, _c_uint32, _c_uint64, _c_uint64, _c_uint32,
                                        _c_int32, _c_int64]),
    "rankscope_python_wait": (None, [_c_uint32, _c_uint64, _c_uint32, _c_uint64, _c_int64]),
    "rankscope_python_count": (None, [_c_char_p, _c_uint64]),
    "rankscope_python_cost": (None, [_c_uint64]),
    "rankscope_python_say": (None, [_c_char_p]),
    "rankscope_agent_capturing": (ctypes.c_bool, [_c_uint32]),
}

# A begin time that means "now" to python_begin.
NOW = -1

# The capture sources' bits (rankscope/rank_agent/agent.h, CaptureBit).
CAPTURE_MPI = 1 << 0
CAPTURE_NCCL = 1 << 3

# What the hook hooked in torch (python_hook.h, PythonHooked).
HOOKED_STEPS = 1 << 0
HOOKED_DATA_LOADING = 1 << 1
HOOKED_PHASES = 1 << 2
HOOKED_COLLECTIVES = 1 << 3


class Agent:
    def __init__(self, library):
        for name, (result, arguments) in _ENTRY_POINTS.items():
            function = getattr(library, name)
            function.restype = result
            function.argtypes = arguments
            setattr(self, name[len("rankscope_"):], function)
        self.rank = int(os.environ.get("RANKSCOPE_RANK", "0") or 0)
        self._names = {}
        self._errors = 0
        self._hook_ns = 0

    # ---------------------------------------------------------------- names

    def name(self, text):
        """The string id of a name, asked of the agent once."""
        name_id = self._names.get(text)
        if name_id is None:
            name_id = self.python_name(text.encode("utf-8", "replace"))
            self._names[text] = name_id
        return name_id

    def op(self, name):
        return self._enum("op", name)

    def datatype(self, name):
        return self._enum("datatype", name)

    def _enum(self, kind, name):
        key = (kind, name)
        value = self._names.get(key)
        if value is None:
            value = self.python_enum(kind.encode(), name.encode())
            self._names[key] = value
        return value

    # -------------------------------------------------------- what is said

    def say(self, line):
        self.python_say(line.encode("utf-8", "replace"))

    def say_once_for_the_job(self, line):
        """A line every rank would say alike: rank 0 says it."""
        if self.rank == 0:
            self.say(line)

    def count(self, counter, value=1):
        self.python_count(counter.encode(), value)

    # ------------------------------------------------ the hooks' own time

    def timed(self, function):
        """`function` as a hook: its time counted as the hook's, its exceptions caught."""
        def hook(*args, **kwargs):
            began = _cpu_ns()
            try:
                return function(*args, **kwargs)
            except Exception:
                self.failed(function)
            finally:
                self._hook_ns += _cpu_ns() - began

        hook.__name__ = _name_of(function)
        return hook

    def guarded(self, function):
        """`function`, run once (at an import): its exceptions caught, its time the hook's."""
        return self.timed(function)

    def failed(self, function):
        self._errors += 1
        self.count("python_hook_errors")
        if self._errors == 1:
            kind, error, _ = sys.exc_info()
            where = traceback.extract_tb(sys.exc_info()[2])[-1]
            self.say("the Python hook's %s failed (%s: %s, at %s:%d) and left out what it would have recorded; "
                     "the program runs on (python_hook_errors counts every failure)"
                     % (_name_of(function).lstrip("_"), kind.__name__, error,
                        os.path.basename(where.filename), where.lineno))

    def report_cost(self):
        self.python_cost(self._hook_ns)


def _name_of(function):
    """A hook's name, for the line that says it failed (a partial's is its function's)."""
    return getattr(function, "__name__", None) or getattr(getattr(function, "func", None), "__name__", "hook")


def connect():
    """The agent, when this process captures Python; None otherwise."""
    try:
        # PyDLL: the calls keep the GIL. They take microseconds and never
        # block; releasing and taking the GIL back around each would let the
        # program's other threads (gloo's, a DataLoader's) in every time.
        library = ctypes.PyDLL(None)
        agent = Agent(library)
    except (OSError, AttributeError):
        return None  # the capture library is not in this process
    if not agent.python_attach():
        return None
    return agent
