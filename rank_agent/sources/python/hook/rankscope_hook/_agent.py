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
import threading
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
    "rankscope_python_thread_track": (_c_uint32, []),
    "rankscope_python_collective": (None, [_c_uint32, _c_uint64, _c_uint32, _c_uint32, _c_uint64, _c_uint64,
                                           _c_uint32, _c_int32, _c_int64, ctypes.c_int]),
    "rankscope_python_enqueue": (None, [_c_uint64, _c_uint32, _c_uint32, _c_uint64, _c_uint64, _c_uint32,
                                        _c_int32, _c_int64]),
    "rankscope_python_wait": (None, [_c_uint32, _c_uint64, _c_uint32, _c_uint64, _c_int64]),
    "rankscope_python_count": (None, [_c_char_p, _c_uint64]),
    "rankscope_python_cost": (None, [_c_uint64]),
    "rankscope_python_say": (None, [_c_char_p]),
    "rankscope_agent_capturing": (ctypes.c_bool, [_c_uint32]),
    "rankscope_agent_rank": (_c_int32, []),
}

# A begin time that means "now" to python_begin.
NOW = -1


class Agent:
    def __init__(self, library):
        for name, (result, arguments) in _ENTRY_POINTS.items():
            function = getattr(library, name)
            function.restype = result
            function.argtypes = arguments
            setattr(self, name[len("rankscope_"):], function)
        self.rank = self.agent_rank()
        self._names = {}
        self._errors = 0
        self._cost = threading.local()  # each thread's own total: += on one shared number loses counts
        self._costs = []  # every thread's total, a one-element list each

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

    def capture_bit(self, name):
        """A capture source's bit (agent.h's CaptureBit), by its name in --capture."""
        return self._enum("capture", name)

    def hooked(self, part):
        """The bit of what the hook hooked in torch (counters.h's PythonTorchHooked), by its name."""
        return self._enum("hooked", part)

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
            except Exception:  # the hook's own failure; Ctrl-C and exits are the program's
                self.failed(function)
            finally:
                self.add_cost(began)

        hook.__name__ = _name_of(function)
        return hook

    def add_cost(self, began):
        try:
            total = self._cost.total
        except AttributeError:  # the thread's first hook
            total = self._cost.total = [0]
            self._costs.append(total)
        except Exception:  # the interpreter going down: nothing to count into
            return
        total[0] += _cpu_ns() - began

    def failed(self, function):
        """Counted, and the first failure said; never raised, whatever else fails here (at shutdown too)."""
        try:
            self._errors += 1
            self.count("python_hook_errors")
            if self._errors == 1:
                kind, error, trace = sys.exc_info()
                where = traceback.extract_tb(trace)[-1]
                self.say("the Python hook's %s failed (%s: %s, at %s:%d) and left out what it would have "
                         "recorded; the program runs on (python_hook_errors counts every failure)"
                         % (_name_of(function).lstrip("_"), kind.__name__, error,
                            os.path.basename(where.filename), where.lineno))
        except Exception:
            pass

    def report_cost(self):
        self.python_cost(sum(total[0] for total in self._costs))


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
