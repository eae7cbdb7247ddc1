"""What the hook records of a PyTorch job, through torch's public hooks
where it has them (docs/pytorch.md):

- steps: ProfilerStep#N, N counting the steps of the first optimizer that
  steps (torch.optim's global step hooks), numbered alike on every rank. A
  step begins where the one before ended (the first one: at the training
  loop's first data loading, forward or backward) and ends as the optimizer's
  step returns, so that steps follow each other as torch.profiler's do;
- data loading: each DataLoader __next__, waiting for workers included, as
  torch.profiler names it (enumerate(DataLoader)#...__next__);
- phases: forward (hooks on the outermost DistributedDataParallel or FSDP
  module only), backward (torch.autograd.backward), the optimizer's step;
- torch.distributed collectives of any backend: each group's pre and post
  hooks (torch 2.15 on) give the call; the work's future, or the Python
  Work.wait that waited for it, its completion. Python's waits on work, and
  DDP's own wait for its gradient buckets at the end of backward, are the
  time the thread was blocked on communication.

Names of ranges are those model/host_phases.h classifies.
"""

import atexit
import collections
import functools
import sys
import threading
import weakref

from . import _agent

STEP_PREFIX = "ProfilerStep#"
FORWARD = "forward"
BACKWARD = "backward"
DDP_WAIT = "DistributedDataParallel: wait for gradient buckets"
WORK_WAIT = "c10d::Work.wait"

# Any id, the same for every group: the hooks are rankscope's.
_HOOK_ID = 0x52534350

# c10d's HookOpName, by the CommOp of docs/format.md; send, receive and the
# others are no collective to match across ranks.
_OPS = {
    "ALLREDUCE": "AllReduce", "ALLREDUCE_COALESCED": "AllReduce",
    "ALLGATHER": "AllGather", "ALLGATHER_BASE": "AllGather", "ALLGATHER_COALESCED": "AllGather",
    "ALLGATHER_INTO_TENSOR_COALESCED": "AllGather",
    "REDUCE_SCATTER": "ReduceScatter", "REDUCE_SCATTER_BASE": "ReduceScatter",
    "REDUCE_SCATTER_TENSOR_COALESCED": "ReduceScatter",
    "ALLTOALL": "AllToAll", "ALLTOALL_BASE": "AllToAll",
    "BROADCAST": "Broadcast", "REDUCE": "Reduce", "GATHER": "Gather", "SCATTER": "Scatter",
    "BARRIER": "Barrier",
}
# torch's dtype names, by the DataType names of docs/format.md where they differ.
_DTYPES = {"float8_e4m3fn": "float8e4m3", "float8_e5m2": "float8e5m2"}

# Works whose completion waits for a Python Work.wait (no future): those of
# steps before the last are let go at each step, and at most this many are
# held between steps; both are recorded with their end unknown.
_MAX_WORKS_HELD = 4096


def install(agent, torch):
    """Hooks torch once it is imported; says what it could not hook."""
    job = _Job(agent, torch)
    hooked = 0
    missing = []
    for bit, part, hook in ((agent.hooked("steps"), "steps", job.hook_steps),
                            (agent.hooked("data_loading"), "data loading", job.hook_data_loading),
                            (agent.hooked("phases"), "forward and backward", job.hook_phases),
                            (agent.hooked("collectives"), "torch.distributed collectives", job.hook_collectives)):
        try:
            why_not = hook()
        except Exception as error:  # an API of another shape than the hook knows
            agent.count("python_hook_errors")
            why_not = "%s: %s" % (type(error).__name__, error)
        if why_not:
            missing.append("%s (%s)" % (part, why_not))
        else:
            hooked |= bit
    agent.python_hooked(hooked)
    if missing:
        agent.say_once_for_the_job("torch %s: the Python hook does not capture %s"
                                   % (getattr(torch, "__version__", "?"), "; ".join(missing)))
    atexit.register(agent.report_cost)
    global _job
    _job = job
    # FSDP imported before torch's own import ended (torch imports it itself one day).
    if "torch.distributed.fsdp" in sys.modules:
        job.hook_fully_shard(sys.modules["torch.distributed.fsdp"])


def install_fsdp(agent, fsdp):
    """FSDP2's fully_shard marks the modules whose outermost forward is the forward phase."""
    if _job is not None:
        _job.hook_fully_shard(fsdp)


_job = None


class _Thread(threading.local):
    forward_depth = 0
    forward_slot = -1


class _Job:
    def __init__(self, agent, torch):
        self.agent = agent
        self.torch = torch
        self.thread = _Thread()
        # Steps (on the training thread).
        self.step = 0
        self.step_slot = None  # the open step's; None before the first
        self.leading_optimizer = None  # a weak reference
        self.rival_steps = {}  # id(optimizer) -> its steps since the leading one's last
        self.optimizer_ranges = {}  # id(optimizer) -> its range's slot
        self.optimizer_names = {}  # optimizer class -> its range's name id
        self.loader_names = {}  # DataLoader iterator class -> its range's name id
        # Backward (on whichever thread runs it: autograd's own, for reentrant checkpointing) and DDP's wait.
        self.backward_depth = 0
        self.compute_done_at = None
        self.callback_queued = False
        self.last_async = (0, 0, 0)  # group hash, op, seq of backward's last async collective
        # Collectives.
        self.groups = {}  # id(group) -> _Group, for every group hooked (which it keeps alive)
        self.groups_seen = -1  # the size of torch's table of groups when last looked at
        self.calls = {}  # op_id -> _Call, between a collective's pre and post hooks
        self.works = collections.OrderedDict()  # id(work) -> (work, _Call): awaiting completion
        self.datatypes = {}  # torch dtype -> DataType
        self.forward_name = agent.name(FORWARD)
        self.backward_name = agent.name(BACKWARD)
        self.ddp_wait_name = agent.name(DDP_WAIT)
        self.work_wait_name = agent.name(WORK_WAIT)
        self.completed_hook = agent.timed(self.completed)
        self.backward_computed_hook = agent.timed(self._backward_computed)
        self.nccl_captured = bool(agent.agent_capturing(agent.capture_bit("nccl")))
        self.mpi_captured = bool(agent.agent_capturing(agent.capture_bit("mpi")))
        self.now = agent.python_now
        # Hooks that torch.compile may trace step aside while it does (the hook is no graph).
        self.compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)

    # ----------------------------------------------------------------- steps

    def activity(self):
        """The training loop does something of a step: the first step begins, if it has not."""
        if self.step_slot is None:
            self.begin_step(_agent.NOW)

    def begin_step(self, at):
        # Each step's name once: interned by the agent, not kept here.
        name = self.agent.python_name(("%s%d" % (STEP_PREFIX, self.step)).encode())
        self.step_slot = self.agent.python_begin(name, at)

    def hook_steps(self):
        optim = sys.modules.get("torch.optim.optimizer")
        pre = getattr(optim, "register_optimizer_step_pre_hook", None)
        post = getattr(optim, "register_optimizer_step_post_hook", None)
        if pre is None or post is None:
            return "no global optimizer step hooks (torch 2.0 on)"
        pre(self.untraced(self.agent.timed(self._optimizer_step_begins)))
        post(self.untraced(self.agent.timed(self._optimizer_step_ends)))
        return None

    def _optimizer_step_begins(self, optimizer, args, kwargs):
        self.activity()
        kind = type(optimizer)
        name = self.optimizer_names.get(kind)
        if name is None:
            name = self.optimizer_names[kind] = self.agent.name("Optimizer.step#%s.step" % kind.__name__)
        self.optimizer_ranges[id(optimizer)] = self.agent.python_begin(name, _agent.NOW)

    def _optimizer_step_ends(self, optimizer, args, kwargs):
        end = self.agent.python_end(self.optimizer_ranges.pop(id(optimizer), -1))
        if not self.leads(optimizer):
            return  # another optimizer of the same step (a GAN's)
        self.activity()
        # The next step begins where this one ends, as torch.profiler's steps follow each other.
        end = self.agent.python_end(self.step_slot) or end or _agent.NOW
        self.step += 1
        self.begin_step(end)
        self.hook_new_groups()
        self.forget_stale_works()
        self.agent.report_cost()

    def leads(self, optimizer):
        """Whether `optimizer` marks the steps: the first that stepped, until another steps twice
        without it (a job that moved on to another optimizer)."""
        leading = self.leading_optimizer() if self.leading_optimizer is not None else None
        if leading is not None and leading is not optimizer:
            steps = self.rival_steps[id(optimizer)] = self.rival_steps.get(id(optimizer), 0) + 1
            if steps < 2:
                return False
        self.leading_optimizer = weakref.ref(optimizer)
        self.rival_steps.clear()
        return True

    # ---------------------------------------------------------- data loading

    def hook_data_loading(self):
        dataloader = sys.modules.get("torch.utils.data.dataloader")
        base = getattr(dataloader, "_BaseDataLoaderIter", None)
        original = getattr(base, "__next__", None)
        if original is None:
            return "no torch.utils.data.dataloader._BaseDataLoaderIter.__next__"
        agent = self.agent
        begins = agent.timed(self._data_loading_begins)
        ends = agent.timed(self._data_loading_ends)

        @functools.wraps(original)
        def __next__(iterator):
            opened = begins(iterator)
            try:
                return original(iterator)
            finally:
                ends(opened)

        base.__next__ = __next__
        return None

    def _data_loading_begins(self, iterator):
        self.activity()
        kind = type(iterator)
        name = self.loader_names.get(kind)
        if name is None:
            name = self.loader_names[kind] = self.agent.name("enumerate(DataLoader)#%s.__next__" % kind.__name__)
        return self.agent.python_begin(name, _agent.NOW)

    def _data_loading_ends(self, slot):
        if slot is not None:
            self.agent.python_end(slot)

    # ---------------------------------------------------------------- phases

    def hook_phases(self):
        ddp = getattr(sys.modules.get("torch.nn.parallel.distributed"), "DistributedDataParallel", None)
        autograd = sys.modules.get("torch.autograd")
        original_backward = getattr(autograd, "backward", None)
        if ddp is None or original_backward is None:
            return "no torch.nn.parallel.DistributedDataParallel or torch.autograd.backward"
        original_init = ddp.__init__
        watch = self.agent.timed(self.watch_forward)

        @functools.wraps(original_init)
        def __init__(module, *args, **kwargs):
            original_init(module, *args, **kwargs)
            watch(module)

        ddp.__init__ = __init__

        begins = self.agent.timed(self._backward_begins)
        ends = self.agent.timed(self._backward_ends)

        @functools.wraps(original_backward)
        def backward(*args, **kwargs):
            opened = begins()
            try:
                return original_backward(*args, **kwargs)
            finally:
                ends(opened)

        autograd.backward = backward
        return None

    def hook_fully_shard(self, fsdp):
        """fully_shard's public names answer with a fully_shard that also watches the modules it shards."""
        original = getattr(fsdp, "fully_shard", None)
        if original is None:
            return
        watch = self.agent.timed(self.watch_forward)

        @functools.wraps(original)
        def fully_shard(module, *args, **kwargs):
            sharded = original(module, *args, **kwargs)
            for each in sharded if isinstance(sharded, (list, tuple)) else [sharded]:
                watch(each)
            return sharded

        # Only the package's names: FSDP's own module keeps calling its own.
        for name in ("torch.distributed.fsdp", "torch.distributed.fsdp._fully_shard",
                     "torch.distributed._composable.fsdp"):
            package = sys.modules.get(name)
            if package is not None and getattr(package, "fully_shard", None) is original:
                package.fully_shard = fully_shard

    def untraced(self, hook):
        """`hook`, which does nothing while torch.compile traces it: it would break the graph."""
        compiling = self.compiling

        def step_aside(*args):
            if not compiling():
                return hook(*args)

        return step_aside

    def watch_forward(self, module):
        pre = self.untraced(self.agent.timed(self._forward_begins))
        post = self.untraced(self.agent.timed(self._forward_ends))
        module.register_forward_pre_hook(pre, prepend=True)
        try:
            module.register_forward_hook(post, always_call=True)
        except TypeError:  # before always_call (torch 2.1)
            module.register_forward_hook(post)

    def _forward_begins(self, module, args):
        thread = self.thread
        thread.forward_depth += 1
        # Only the outermost forward, and none recomputed in backward (activation checkpointing).
        if thread.forward_depth > 1 or self.backward_depth > 0:
            return
        self.activity()
        thread.forward_slot = self.agent.python_begin(self.forward_name, _agent.NOW)

    def _forward_ends(self, module, args, output):
        thread = self.thread
        if thread.forward_depth == 0:
            return
        thread.forward_depth -= 1
        if thread.forward_depth > 0 or self.backward_depth > 0:
            return
        self.agent.python_end(thread.forward_slot)

    def _backward_begins(self):
        self.backward_depth += 1
        if self.backward_depth > 1:
            return None  # a backward inside backward (reentrant checkpointing): the outer one times both
        self.activity()
        self.compute_done_at = None
        self.callback_queued = False
        return self.agent.python_begin(self.backward_name, _agent.NOW)

    def _backward_ends(self, slot):
        self.backward_depth = max(0, self.backward_depth - 1)
        if slot is None:
            return
        self.agent.python_end(slot)
        if self.compute_done_at is not None:
            group, op, seq = self.last_async
            self.agent.python_wait(self.ddp_wait_name, group, op, seq, self.compute_done_at)

    def _backward_computed(self):
        """Queued as backward's final callback at its first gradient allreduce: it runs
        once every gradient is computed, before DDP's own callback waits for the buckets."""
        self.compute_done_at = self.now()

    # ----------------------------------------------------------- collectives

    def hook_collectives(self):
        c10d = sys.modules.get("torch._C._distributed_c10d")
        group_class = getattr(c10d, "ProcessGroup", None)
        if group_class is None or not hasattr(group_class, "register_pre_hook"):
            return "no ProcessGroup.register_pre_hook (torch 2.15 on)"
        distributed = sys.modules.get("torch.distributed")
        c10d_module = sys.modules.get("torch.distributed.distributed_c10d")
        hook_group = self.agent.timed(self.hook_group)
        # Groups as they are made: every group's maker, and a split's.
        helper = getattr(c10d_module, "_new_process_group_helper", None)
        if helper is not None:
            c10d_module._new_process_group_helper = _then(helper, lambda made: hook_group(
                made[0] if isinstance(made, tuple) else made))
        split = getattr(c10d_module, "split_group", None)
        if split is not None:
            for module in (c10d_module, distributed):
                if getattr(module, "split_group", None) is split:
                    module.split_group = _then(split, hook_group)
        work = getattr(c10d, "Work", None)
        original_wait = getattr(work, "wait", None)
        if original_wait is not None:
            waited = self.agent.timed(self._work_waited)
            now = self.now

            @functools.wraps(original_wait)
            def wait(this, *args, **kwargs):
                begin = now()
                try:
                    return original_wait(this, *args, **kwargs)
                finally:
                    waited(this, begin)

            work.wait = wait
        self.hook_new_groups()
        return None

    def hook_new_groups(self):
        """Groups made where the hook did not see (a name bound before it came): found by the job's table."""
        c10d_module = sys.modules.get("torch.distributed.distributed_c10d")
        groups = getattr(getattr(c10d_module, "_world", None), "pg_map", None) or {}
        if len(groups) == self.groups_seen:  # each step looks; a new group is rare
            return
        self.groups_seen = len(groups)
        for group in list(groups):
            self.hook_group(group)

    def hook_group(self, group):
        if group is None or id(group) in self.groups or not hasattr(group, "register_pre_hook"):
            return
        name = str(getattr(group, "group_name", "") or id(group))
        backend = str(group._get_backend_name()) if hasattr(group, "_get_backend_name") else "?"
        description = "torch.distributed group %s (%s, %d ranks, %s)" % (
            name, getattr(group, "group_desc", "") or "no description", group.size(), backend)
        hash_value = _agent.ctypes.c_uint64(0)
        track = self.agent.python_group(name.encode(), description.encode(), _agent.ctypes.byref(hash_value))
        state = _Group(group, track, hash_value.value, backend)
        self.groups[id(group)] = state
        group.register_pre_hook(_HOOK_ID, self.agent.timed(functools.partial(self._called, state)))
        group.register_post_hook(_HOOK_ID, self.agent.timed(functools.partial(self._returned, state)))

    def _called(self, group, args):
        now = self.now()
        name = args.name
        kind = group.kinds.get(name)
        if kind is None:
            kind = group.kinds[name] = self._kind(group, name.name)
        if not kind.op:
            return
        inputs = args.input_tensors
        # The output tensors only where the size is theirs: reading them costs a Python object each.
        outputs = args.output_tensors if kind.gathers or not inputs else ()
        first = inputs[0] if inputs else outputs[0] if outputs else None
        root = args.root
        call = _Call(self, group, kind, group.seq, _size(kind, inputs, outputs, group.size),
                     self._datatype(first), self._root(group, root) if root >= 0 else -1, now)
        group.seq += 1
        # NCCL's own plugin records NCCL's collectives, with their GPU time, better than the hook can.
        call.nccl = group.nccl and first is not None and first.is_cuda
        call.skip = (call.nccl and self.nccl_captured) or (group.mpi and self.mpi_captured)
        # A synchronous call blocks its thread to the end: it goes on the thread's track; an
        # asynchronous one is in flight beside the program, on its group's.
        async_op = args.async_op
        call.track = group.track if async_op else self.agent.python_thread_track()
        call.step = self.step
        self.calls[args.op_id] = call
        if self.backward_depth > 0 and kind.op_name == "AllReduce" and async_op:
            self.last_async = (group.hash, kind.op, call.seq)
            if not self.callback_queued:
                self.callback_queued = True
                self.torch.autograd.Variable._execution_engine.queue_callback(self.backward_computed_hook)

    def _kind(self, group, hook_name):
        op_name = _OPS.get(hook_name)
        if op_name is None:
            return _Kind(0, None, 0)
        return _Kind(self.agent.op(op_name), op_name, self.agent.name("%s:%s" % (group.backend, hook_name.lower())))

    def _returned(self, group, args):
        call = self.calls.pop(args.op_id, None)
        if call is None or call.skip:
            return
        if call.nccl:
            # On the GPU: the call enqueued it; its future completes with the enqueue, not the
            # transfer. NCCL counts one rank's share of what is gathered or scattered.
            share = call.bytes // group.size if call.kind.op_name in ("AllGather", "ReduceScatter") else call.bytes
            self.agent.python_enqueue(group.hash, call.kind.name, call.kind.op, call.seq, share, call.datatype,
                                      call.root, call.begin)
            return
        work = args.work
        if work is None:
            self.record(call)
            return
        future = None
        if call.kind.has_future:
            try:
                future = work.get_future()
            except RuntimeError:  # this backend's work of this kind has none: its Python wait ends it
                call.kind.has_future = False
        call.work_id = id(work)
        self.works[call.work_id] = (work, call)
        if future is not None:
            call.by_future = True
            future.add_done_callback(call.completed)
        while len(self.works) > _MAX_WORKS_HELD:  # a program that never steps an optimizer
            _, (_, oldest) = self.works.popitem(last=False)
            if not oldest.recorded:
                self.agent.count("python_collective_ends_unknown")
                self.record(oldest, completed=False)

    def completed(self, call):
        """A collective's future completed (on the backend's thread)."""
        self.record(call)
        held = self.works.get(call.work_id)
        if held is not None and held[1] is call:
            del self.works[call.work_id]

    def _work_waited(self, work, begin):
        held = self.works.get(id(work))
        call = held[1] if held is not None and held[0] is work else None
        if call is None:
            self.agent.python_wait(self.work_wait_name, 0, 0, 0, begin)
            return
        self.agent.python_wait(self.work_wait_name, call.group.hash, call.kind.op, call.seq, begin)
        if not call.by_future:
            del self.works[id(work)]
            self.record(call)

    def record(self, call, completed=True):
        """The collective, ending now (or, its completion never seen, where it began)."""
        if call.recorded:
            return
        call.recorded = True
        self.agent.python_collective(call.track, call.group.hash, call.kind.name, call.kind.op, call.seq,
                                     call.bytes, call.datatype, call.root, call.begin, 1 if completed else 0)

    def forget_stale_works(self):
        """Works of steps before the last that no future or wait ended (the program dropped them):
        recorded with their end unknown, and let go, so that their tensors are not kept alive."""
        stale = [key for key, (_, call) in self.works.items() if not call.by_future and call.step < self.step - 1]
        for key in stale:
            _, call = self.works.pop(key)
            self.agent.count("python_collective_ends_unknown")
            self.record(call, completed=False)

    def _datatype(self, tensor):
        if tensor is None:
            return 0
        code = self.datatypes.get(tensor.dtype)
        if code is None:
            name = str(tensor.dtype).replace("torch.", "")
            code = self.datatypes[tensor.dtype] = (self.agent.datatype(_DTYPES.get(name, name)) or
                                                   self.agent.datatype("other"))
        return code

    def _root(self, group, root):
        try:
            return self.torch.distributed.get_global_rank(group.group, root)
        except Exception:
            return root


class _Group:
    __slots__ = ("group", "track", "hash", "backend", "nccl", "mpi", "size", "seq", "kinds")

    def __init__(self, group, track, hash_value, backend):
        self.group = group
        self.track = track
        self.hash = hash_value
        self.backend = backend
        self.nccl = "nccl" in backend
        self.mpi = backend == "mpi"
        self.size = group.size()
        self.seq = 0
        self.kinds = {}  # c10d's HookOpName -> _Kind


class _Kind:
    """One c10d operation of one group, as the events name it."""
    __slots__ = ("op", "op_name", "name", "has_future", "gathers")

    def __init__(self, op, op_name, name):
        self.op = op
        self.op_name = op_name
        self.name = name
        self.has_future = True  # until its work shows none (gloo's reduce-scatter)
        self.gathers = op_name in ("AllGather", "Gather")  # its size is its output's


class _Call:
    __slots__ = ("job", "group", "kind", "seq", "bytes", "datatype", "root", "begin", "nccl", "skip", "by_future",
                 "recorded", "work_id", "track", "step")

    def __init__(self, job, group, kind, seq, size, datatype, root, begin):
        self.job = job
        self.group = group
        self.kind = kind
        self.seq = seq
        self.bytes = size
        self.datatype = datatype
        self.root = root
        self.begin = begin
        self.nccl = False
        self.skip = False
        self.by_future = False
        self.recorded = False
        self.work_id = 0
        self.track = group.track
        self.step = 0

    def completed(self, future):
        """The work's future callback: on the backend's thread, timed and guarded as every hook."""
        self.job.completed_hook(self)


def _then(function, after):
    """`function`, which then hands what it returns to `after`."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        result = function(*args, **kwargs)
        after(result)
        return result

    return wrapper


def _bytes(tensors):
    return sum(t.nbytes for t in tensors)


def _size(kind, inputs, outputs, group_size):
    """The collective's size as nccl-tests counts it: the whole of what is gathered or scattered."""
    if kind.gathers:
        return _bytes(outputs) or _bytes(inputs) * group_size
    if kind.op_name == "Scatter":
        return _bytes(inputs) or _bytes(outputs) * group_size
    return _bytes(inputs)
