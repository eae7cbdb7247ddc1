#!/usr/bin/env python3
"""Write a synthetic multi-rank PyTorch profiler (Kineto) trace set.

One JSON file per rank, laid out like the traces torch.profiler writes for a
DDP training job (see shared/data/kineto beside the project for real ones):

  * top level: schemaVersion, deviceProperties, distributedInfo (backend,
    rank, world_size, pg_config, nccl_version), displayTimeUnit,
    baseTimeNanoseconds, then traceEvents;
  * timestamps are microseconds relative to baseTimeNanoseconds, written with
    three decimals ("4458676522690.655"), as recent Kineto does; with
    --epoch-us, microseconds since the epoch ("1716422222416431.397") and no
    baseTimeNanoseconds, as older Kineto did (a float64 holds those only to
    0.25 µs);
  * per step: a ProfilerStep#N user_annotation; the input copy (aten::to ...
    cudaMemcpyAsync -> gpu_memcpy), zero_grad (cudaMemsetAsync -> gpu_memset),
    forward ops on the main thread, backward ops on the autograd thread, DDP
    bucket all-reduces (c10d::allreduce_ > record_param_comms > nccl:all_reduce
    > cudaLaunchKernelExC -> ncclKernel_AllReduce_RING_LL_Sum_float on the
    NCCL stream, "Collective name", "In msg nelems", "dtype",
    "Process Group Name", "Seq" ... in the args of both), the optimizer, and
    a loss.item() device-to-host copy followed by cudaStreamSynchronize;
  * every launch is a cuda_runtime event with args correlation, its GPU
    activity lies on pid = device, tid = stream with args device, stream,
    correlation, and an ac2g flow pair ("s" on the launch, "f" on the kernel)
    joins them;
  * gpu_user_annotation ranges (no stream arg, as Kineto writes them),
    process/thread metadata ("M"), the two global instant events with string
    pids, and the "Trace" span event, so an importer meets what real files hold.

The collectives are simulated across ranks in lock step: a rank's NCCL kernel
starts when its stream and its bucket are ready and every rank's kernel of one
collective ends at the same true time (plus a few ns of jitter), so the
kernels carry a real cross-rank signal. Each rank can be given a known clock
offset (µs, may be fractional) that is added to every timestamp it writes;
the offsets, the seed and the counts go to a manifest beside the folder
(never inside it: HTA loads every *.json / *.gz of the folder as a rank).

By default the job is not a healthy one: one rank computes 12 % slower than
the others, the DataLoader makes every rank wait a random while between
steps, kernel durations vary at random, and the all-reduces run at 60 GB/s,
so the ranks wait for each other and the last buckets' all-reduces are not
hidden. --healthy writes a job with none of that (ranks equally fast, each
kernel as long in every step and on every rank, batches ready when asked
for, all-reduces at NVLink's 200 GB/s, a 1 MiB input batch): the base on
which --inject adds bottlenecks, one class of the report's verdict each
(docs/report-reference.md, "What is slow in a step"), to every step of the ranks
--inject-ranks names (default all):

  slow_data_loader    DataLoader's __next__ (enumerate(DataLoader)#...) for
                      --loader-ms at the start of the step, the GPU idle
  sync_every_step     a .item() after the forward: a D2H copy, then
                      cudaStreamSynchronize until the GPU ran dry, then
                      --sync-host-us of host work before the next launch
  tiny_kernels        --tiny-kernels kernels after zero_grad, each shorter
                      than its launch call: the GPU waits for the host
  pageable_copies     --pageable-copies H2D copies of --pageable-mb each
                      from pageable memory ("Memcpy HtoD (Pageable ->
                      Device)", 6 GB/s) before the forward, no kernel beside
  growing_allocation  a cudaMalloc of --malloc-us after the forward, and
                      torch.profiler's [memory] events (profile_memory=True)
                      whose Total Allocated grows --leak-mb a step
  slow_rank           the ranks' kernels --slow-rank-factor times longer
                      (needs ranks left out; of 2 ranks, the report's
                      lateness test names none in fewer than 14 steps)

With --healthy or --inject, a truth file beside the manifest (never inside
the folder) names each injected class with its ranks and its cost per step,
worked out from the generated events by the report's definitions; and, per
rank, the cost per step of every class those definitions let it work out.

Deterministic: the same arguments give byte-identical files; without
--healthy and --inject, the files of earlier versions of this script.

usage: make_kineto_trace.py OUT_DIR [--ranks N] [--events-per-rank N]
         [--steps N] [--kernels-per-step N] [--buckets N] [--seed N] [--clock-offset-us SPEC] [--gzip]
         [--edge-cases] [--epoch-us] [--manifest PATH]
         [--healthy] [--inject CLASS[,CLASS...]] [--inject-ranks LIST] [--truth PATH]
         [--loader-ms X] [--sync-host-us X] [--tiny-kernels N] [--pageable-copies N] [--pageable-mb X]
         [--malloc-us X] [--leak-mb X] [--slow-rank-factor X]
SPEC: "0" (default), a comma list of per-rank offsets ("0,12.5,-40"; the list
is repeated when shorter than the rank count), "linear:X" (rank r gets r*X)
or "random:X" (uniform in [-X, X], seeded).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import tempfile

# ---------------------------------------------------------------------------
# names, as they appear in real traces

FWD_OPS = [
    ("aten::linear", "aten::addmm",
     "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas"),
    ("aten::conv2d", "aten::cudnn_convolution",
     "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)"),
    ("aten::relu", "aten::clamp_min",
     "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"),
    ("aten::layer_norm", "aten::native_layer_norm",
     "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)"),
    ("aten::add", "aten::add",
     "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"),
    ("aten::softmax", "aten::_softmax",
     "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, int, int, int, bool const*, int, bool)"),
]
BWD_OPS = [
    ("autograd::engine::evaluate_function: AddmmBackward0", "aten::mm",
     "ampere_sgemm_128x64_nn"),
    ("autograd::engine::evaluate_function: ConvolutionBackward0", "aten::convolution_backward",
     "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, float const*, float*)"),
    ("autograd::engine::evaluate_function: ReluBackward0", "aten::threshold_backward",
     "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3>)"),
    ("autograd::engine::evaluate_function: NativeLayerNormBackward0", "aten::native_layer_norm_backward",
     "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, float const*, float const*, float const*, float*, float*)"),
    ("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", "aten::add_",
     "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)"),
]
OPT_KERNEL = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, "
              "at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, float*, double, double, double, bool, bool, bool, float*, float*>(...)")
NCCL_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
# --edge-cases only: names HTA's classifier puts apart (OTHER: contains "Sync"
# or "Memcpy" without starting with Memcpy/Memset)
EDGE_OTHER_KERNEL = "void at::native::batch_norm_SyncStats_kernel<float>(float const*, float*, int)"
EDGE_MEMCPY_LIKE = "void at::native::(anonymous namespace)::CatArrayBatchedMemcpy<float, unsigned int, 2, 128, 1>(float*, ...)"

# --inject only
DATALOADER_NEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
TINY_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >"
               "(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>)")
PAGEABLE_H2D = "Memcpy HtoD (Pageable -> Device)"
PAGEABLE_BYTES_PER_NS = 6.0   # 6 GB/s: pageable copies are staged through a pinned buffer

CBID = {"cudaLaunchKernel": 211, "cudaLaunchKernelExC": 430, "cudaMemcpyAsync": 41,
        "cudaMemsetAsync": 51, "cudaStreamSynchronize": 131, "cudaStreamWaitEvent": 147,
        "cudaEventRecord": 135, "cudaMalloc": 20}

# What --inject can add, and the class of the report's verdict each one is.
INJECTIONS = {
    "slow_data_loader": "data_loading",
    "sync_every_step": "sync_stall",
    "tiny_kernels": "launch_overhead",
    "pageable_copies": "transfer",
    "growing_allocation": "memory",
    "slow_rank": "straggler",
}
# The calls that make the host wait for the GPU (docs/report-reference.md, "GPU idle gaps and their causes").
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
ALLOCATION_CALLS = ("cudaMalloc", "cudaFree")
KERNEL_TO_KERNEL_CUTOFF_NS = 30_000
SYNC_RETURN_SLACK_NS = 10_000

COMPUTE_STREAM = 7
NCCL_STREAM = 20
BASE_TIME_NS = 1_711_964_646_000_000_000   # as Kineto writes: a round epoch, ns
REL_START_NS = 4_458_676_416_431_397       # first step, ns after BASE_TIME_NS (~51.6 days, as in real files)


def us(ns: int) -> str:
    """Integer nanoseconds -> exact 'us.nnn' decimal text (sign handled)."""
    if ns < 0:
        return "-" + us(-ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


def jstr(s: str) -> str:
    return json.dumps(s)


class KernelShapes:
    """--healthy: every rank runs the same kernels on the same shapes in every
    step, so a kernel lasts as long as its place in the step says."""

    def __init__(self, seed):
        self.rng = random.Random(seed * 7_927 + 3)
        self.ns: list[float] = []

    def duration(self, index: int, median_us: float) -> float:
        if index == len(self.ns):
            self.ns.append(self.rng.lognormvariate(math.log(median_us * 1000), 0.6))
        return self.ns[index]


class RankWriter:
    """Holds one rank's state (clocks, counters, RNG) and its output file."""

    def __init__(self, out_dir, rank, world, seed, offset_ns, gz, speed, shapes=None):
        self.rank = rank
        self.world = world
        self.rng = random.Random(seed * 1_000_003 + rank)
        # What --inject adds draws from its own generator: the rest of the job stays as without it.
        self.inject_rng = random.Random(seed * 1_000_033 + rank)
        self.shapes = shapes
        self.kernel_index = 0
        self.offset_ns = offset_ns
        self.speed = speed
        self.pid = 2_910_249 + 97 * rank
        self.tid_main = self.pid
        self.tid_bwd = self.pid + 9_503
        self.dev = rank % 8
        self.corr = 20_000
        self.ext = 1
        self.ev_idx = 0
        self.n_events = 0
        self.nbytes = 0
        name = f"rank-{rank}.json" + (".gz" if gz else "")
        self.path = os.path.join(out_dir, name)
        raw = open(self.path, "wb")
        self.fh = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) if gz else raw
        self._raw = raw
        self.first = True
        # timelines: true time, ns after BASE_TIME_NS
        self.cpu = 0          # main thread cursor
        self.gpu_free = {COMPUTE_STREAM: 0, NCCL_STREAM: 0}
        self.buf_cpu: list[str] = []
        self.buf_gpu: list[str] = []
        # What the truth file is worked out from, in true ns: steps, GPU work (begin,
        # end, kind, when its launch call began), CUDA calls (begin, end, name), and
        # the data-loading ranges of the training thread.
        self.steps: list[tuple[int, int]] = []
        self.gpu_work: list[tuple[int, int, str, int]] = []
        self.cuda_calls: list[tuple[int, int, str]] = []
        self.loading: list[tuple[int, int]] = []
        # the caching allocator's figures, for --inject growing_allocation
        self.allocated = 2 << 30
        self.reserved = 2 << 30

    # -- low level -------------------------------------------------------
    def t(self, true_ns: int) -> str:
        return us(true_ns + self.offset_ns)

    def _emit(self, line: str, gpu: bool = False):
        (self.buf_gpu if gpu else self.buf_cpu).append(line)

    def flush_step(self):
        lines = self.buf_cpu + self.buf_gpu
        self.buf_cpu.clear()
        self.buf_gpu.clear()
        if not lines:
            return
        prefix = "" if self.first else ",\n"
        self.first = False
        data = (prefix + ",\n".join(lines)).encode()
        self.fh.write(data)
        self.nbytes += len(data)
        self.n_events += len(lines)

    def write_raw(self, text: str):
        data = text.encode()
        self.fh.write(data)
        self.nbytes += len(data)

    def next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def cpu_op(self, name, cat, ts, dur, tid, ext, extra=""):
        self.ev_idx += 1
        self._emit(
            f'{{"ph": "X", "cat": "{cat}", "name": {jstr(name)}, "pid": {self.pid}, "tid": {tid}, '
            f'"ts": {self.t(ts)}, "dur": {us(dur)}, "args": {{"External id": {ext}, '
            f'"Record function id": {ext - 1}, "Ev Idx": {self.ev_idx}{extra}}}}}')

    def runtime(self, name, ts, dur, tid, ext, corr):
        self.cuda_calls.append((ts, ts + dur, name))
        self._emit(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": {self.pid}, "tid": {tid}, '
            f'"ts": {self.t(ts)}, "dur": {us(dur)}, "args": {{"External id": {ext}, '
            f'"cbid": {CBID[name]}, "correlation": {corr}}}}}')

    def flow(self, corr, ts_launch, tid, ts_kernel, stream):
        self._emit(f'{{"ph": "s", "id": {corr}, "pid": {self.pid}, "tid": {tid}, "ts": {self.t(ts_launch)}, '
                   f'"cat": "ac2g", "name": "ac2g"}}')
        self._emit(f'{{"ph": "f", "id": {corr}, "pid": {self.dev}, "tid": {stream}, "ts": {self.t(ts_kernel)}, '
                   f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}', gpu=True)

    def gpu_event(self, cat, name, ts, dur, stream, ext, corr, launched_at, extra="", rng=None):
        kind = {"kernel": "nccl" if name == NCCL_KERNEL else "kernel", "gpu_memcpy": "memcpy",
                "gpu_memset": "memset"}[cat]
        self.gpu_work.append((ts, ts + dur, kind, launched_at))
        if cat == "kernel":
            g = (rng or self.rng).choice((80, 108, 216, 432, 864))
            args = (f'"External id": {ext}, "queued": 0, "device": {self.dev}, "context": 1, '
                    f'"stream": {stream}, "correlation": {corr}, "registers per thread": 64, '
                    f'"shared memory": 0, "blocks per SM": {g / 108:.6f}, "warps per SM": {g * 8 / 108:.6f}, '
                    f'"grid": [{g}, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 50{extra}')
        else:
            nbytes = int(extra) if extra else 4096
            bw = nbytes / max(dur, 1)  # bytes/ns == GB/s
            args = (f'"External id": {ext}, "device": {self.dev}, "context": 1, "stream": {stream}, '
                    f'"correlation": {corr}, "bytes": {nbytes}, "memory bandwidth (GB/s)": {bw:.6f}')
        self._emit(f'{{"ph": "X", "cat": "{cat}", "name": {jstr(name)}, "pid": {self.dev}, "tid": {stream}, '
                   f'"ts": {self.t(ts)}, "dur": {us(dur)}, "args": {{{args}}}}}', gpu=True)

    def gpu_annotation(self, name, ts, dur, stream, ext):
        self._emit(f'{{"ph": "X", "cat": "gpu_user_annotation", "name": {jstr(name)}, "pid": {self.dev}, '
                   f'"tid": {stream}, "ts": {self.t(ts)}, "dur": {us(dur)}, "args": {{"External id": {ext}}}}}',
                   gpu=True)

    # -- composite: one op that launches one GPU activity -----------------
    def launch(self, tid, parent, child, kname, kdur, cat="kernel", stream=COMPUTE_STREAM,
               rt_name="cudaLaunchKernel", not_before=0, extra_gpu="", with_child=True, rng=None, call_ns=None):
        """CPU op(s) + runtime launch + GPU activity + flow. Advances self.cpu.
        call_ns: how long the runtime call takes (default: a launch's few µs).
        Returns (gpu_start, gpu_end) in true ns."""
        rng = rng or self.rng
        t0 = self.cpu
        ext_p = self.next_ext()
        ext_c = self.next_ext() if with_child else ext_p
        pre = rng.randint(2_000, 6_000)
        rt_ts = t0 + pre + (rng.randint(1_000, 3_000) if with_child else 0)
        rt_dur = rng.randint(3_500, 9_000) if call_ns is None else call_ns
        corr = self.next_corr()
        post = rng.randint(1_500, 4_000)
        t_end = rt_ts + rt_dur + post
        self.cpu_op(parent, "cpu_op", t0, t_end - t0, tid, ext_p)
        if with_child:
            self.cpu_op(child, "cpu_op", t0 + pre, t_end - t0 - pre - 700, tid, ext_c)
        self.runtime(rt_name, rt_ts, rt_dur, tid, ext_c, corr)
        q = rt_ts + rng.randint(4_000, 9_000)
        g0 = max(q, self.gpu_free[stream], not_before)
        self.gpu_event(cat, kname, g0, kdur, stream, ext_c, corr, rt_ts, extra_gpu, rng)
        self.flow(corr, rt_ts, tid, g0, stream)
        self.gpu_free[stream] = g0 + kdur
        self.cpu = t_end + rng.randint(500, 3_000)
        return g0, g0 + kdur

    def kdur(self, median_us: float) -> int:
        """Lognormal kernel duration, ns, with sub-µs precision; with --healthy, the
        duration of the step's kernel at this place, within 1 %."""
        if self.shapes:
            shape_ns = self.shapes.duration(self.kernel_index, median_us)
            self.kernel_index += 1
            return max(900, int(shape_ns * self.speed * self.rng.uniform(0.99, 1.01)))
        d = self.rng.lognormvariate(math.log(median_us * 1000 * self.speed), 0.6)
        return max(900, int(d))

    def synchronize(self, rng):
        """cudaStreamSynchronize: the host waits until the GPU ran dry, then goes on."""
        sync_ts = self.cpu
        drained = max(self.gpu_free.values())
        sync_end = max(sync_ts + 3_000, drained + rng.randint(4_000, 9_000))
        self.runtime("cudaStreamSynchronize", sync_ts, sync_end - sync_ts, self.tid_main, self.next_ext(),
                     self.next_corr())
        self.cpu = sync_end + rng.randint(2_000, 6_000)

    def item(self, rng):
        """loss.item(): a device-to-host copy of 4 bytes, then the host waits for it."""
        self.launch(self.tid_main, "aten::item", "aten::_local_scalar_dense", "Memcpy DtoH (Device -> Pinned)",
                    1_500 + rng.randint(0, 600), cat="gpu_memcpy", rt_name="cudaMemcpyAsync", extra_gpu="4", rng=rng)
        self.synchronize(rng)

    # -- what --inject adds to a step ---------------------------------------
    def slow_data_loader(self, loader_ns):
        """DataLoader's __next__ on the training thread; the GPU, whose queue the
        last step's loss.item() emptied, has nothing to do meanwhile."""
        begin = self.cpu
        self.cpu_op(DATALOADER_NEXT, "user_annotation", begin, loader_ns, self.tid_main, self.next_ext())
        self.loading.append((begin, begin + loader_ns))
        self.cpu = begin + loader_ns + self.inject_rng.randint(1_000, 3_000)

    def pageable_copies(self, copies, nbytes):
        """tensor.to("cuda") from pageable memory: the driver stages the bytes
        through a pinned buffer, so the call returns only with its copy."""
        copy_ns = int(nbytes / PAGEABLE_BYTES_PER_NS)
        for _ in range(copies):
            self.launch(self.tid_main, "aten::to", "aten::_to_copy", PAGEABLE_H2D, copy_ns, cat="gpu_memcpy",
                        rt_name="cudaMemcpyAsync", extra_gpu=str(nbytes), rng=self.inject_rng,
                        call_ns=copy_ns + 12_000)

    def tiny_kernels(self, count):
        """A loop of per-tensor ops (an optimizer without foreach, a metric per
        parameter): each kernel runs shorter than its launch call takes."""
        rng = self.inject_rng
        for _ in range(count):
            self.launch(self.tid_main, "aten::mul_", "aten::mul_", TINY_KERNEL, rng.randint(1_200, 2_500),
                        with_child=False, rng=rng)

    def sync_every_step(self, host_ns):
        """A .item() in the middle of the step (a loss printed, a NaN check): the
        host waits until the GPU ran dry, then does host_ns of Python work before
        it launches again."""
        self.item(self.inject_rng)
        self.cpu += host_ns

    def growing_allocation(self, leak_bytes, malloc_ns):
        """A tensor kept across steps (a loss appended without .detach() keeps its
        graph): the caching allocator asks CUDA for a new segment every step."""
        ts = self.cpu
        self.runtime("cudaMalloc", ts, malloc_ns, self.tid_main, self.next_ext(), self.next_corr())
        self.reserved += leak_bytes
        self.allocated += leak_bytes
        self.memory_event(ts + malloc_ns + 1_000, leak_bytes)
        self.cpu = ts + malloc_ns + self.inject_rng.randint(2_000, 5_000)

    def memory_event(self, ts, nbytes):
        """torch.profiler's [memory] instant event (profile_memory=True)."""
        self._emit(f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": {self.pid}, '
                   f'"tid": {self.tid_main}, "ts": {self.t(ts)}, "args": {{"Total Reserved": {self.reserved}, '
                   f'"Total Allocated": {self.allocated}, "Bytes": {nbytes}, "Addr": {139_637_976_727_552 + self.allocated}, '
                   f'"Device Type": 1, "Device Id": {self.dev}}}}}')

    def close(self, trailer: str):
        self.write_raw(trailer)
        self.fh.close()
        if self._raw is not self.fh:
            self._raw.close()


# ---------------------------------------------------------------------------
# the truth file: each class's cost per step by docs/report-reference.md's definitions,
# worked out from the events a rank wrote (true ns)

def union(intervals) -> list[list[int]]:
    out: list[list[int]] = []
    for begin, end in sorted(intervals):
        if end <= begin:
            continue
        if out and begin <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([begin, end])
    return out


def minus(kept, removed) -> list[list[int]]:
    """The parts of union `kept` outside union `removed`."""
    out = []
    j = 0
    for begin, end in kept:
        while j < len(removed) and removed[j][1] <= begin:
            j += 1
        at = begin
        k = j
        while k < len(removed) and removed[k][0] < end:
            if removed[k][0] > at:
                out.append([at, removed[k][0]])
            at = max(at, removed[k][1])
            k += 1
        if at < end:
            out.append([at, end])
    return out


def overlap(intervals, begin, end) -> int:
    return sum(max(0, min(end, e) - max(begin, b)) for b, e in intervals)


def gap_cause(begin, end, launched_at, loading, syncs) -> str:
    """Why the GPU idled over [begin, end): "GPU idle gaps and their causes". The
    generator's host makes no MPI call nor c10d wait, so no gap is communication's."""
    if launched_at < begin:
        return "kernel_to_kernel" if end - begin < KERNEL_TO_KERNEL_CUTOFF_NS else "other"
    if 2 * overlap(loading, begin, end) >= end - begin:
        return "data_loading"
    if overlap(syncs, begin - SYNC_RETURN_SLACK_NS, end) > 0:
        return "sync_stall"
    return "host_bound"


def expected_costs(w: RankWriter) -> dict[str, int]:
    """The rank's cost per step, the mean over its steps, of each class that the
    report costs from the rank's own events ("The verdict"); not communication
    nor straggler, which need the other ranks."""
    steps = union(w.steps)

    def in_steps(intervals):
        return sum(overlap(steps, begin, end) for begin, end in intervals)

    gpu_work = sorted(w.gpu_work)
    kernels = union((b, e) for b, e, kind, _ in gpu_work if kind == "kernel")
    copies = union((b, e) for b, e, kind, _ in gpu_work if kind == "memcpy")
    loading = union(w.loading)
    syncs = union((b, e) for b, e, name in w.cuda_calls if name in SYNC_CALLS)
    busy = union([(b, e) for b, e, _, _ in gpu_work] + [(b, e) for b, e, _ in w.cuda_calls])
    total = {
        # copy time no kernel hid
        "transfer": in_steps(minus(copies, kernels)),
        # loading time no GPU work (NCCL's included) nor CUDA call hid
        "data_loading": in_steps(minus(loading, busy)),
        # allocation calls, booked to the step they begin in
        "memory": sum(e - b for b, e, name in w.cuda_calls
                      if name in ALLOCATION_CALLS and any(sb <= b < se for sb, se in steps)),
        "launch_overhead": 0, "sync_stall": 0, "gpu_idle": 0,
    }
    # The GPU (one a rank) idle between two operations, by cause; each step books its part.
    class_of_cause = {"host_bound": "launch_overhead", "kernel_to_kernel": "launch_overhead",
                      "sync_stall": "sync_stall", "other": "gpu_idle"}
    busy_until = None
    for begin, end, _, launched_at in gpu_work:
        if busy_until is not None and begin > busy_until:
            cause = gap_cause(busy_until, begin, launched_at, loading, syncs)
            if cause in class_of_cause:
                total[class_of_cause[cause]] += in_steps([(busy_until, begin)])
        busy_until = end if busy_until is None else max(busy_until, end)
    return {c: round(ns / len(w.steps)) for c, ns in total.items()}


def header(rank, world, epoch_us) -> str:
    pg_ranks = list(range(world))
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{
            "id": rank % 8, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_031_714_816,
            "computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
            "sharedMemPerBlock": 49152, "numSms": 108, "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 166912, "sharedMemPerMultiprocessor": 167936}],
        # HTA finds the rank with the regex '"rank":\s+(\d+)', so the space after
        # the colon (json.dumps' default) matters, and this must precede traceEvents.
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world, "pg_count": 1,
                            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                           "backend_config": "cuda:nccl", "pg_size": world,
                                           "ranks": pg_ranks}],
                            "nccl_version": "2.21.5"},
        "record_shapes": 0,
        "with_stack": 0,
        "traceName": f"/tmp/trace_rank_{rank}.json",
        "displayTimeUnit": "ms",
    }
    if not epoch_us:
        doc["baseTimeNanoseconds"] = BASE_TIME_NS
    body = json.dumps(doc, indent=2)
    assert body.endswith("\n}")
    return body[:-2] + ',\n  "traceEvents": [\n'


def parse_offsets(spec: str, ranks: int, seed: int) -> list[int]:
    """Offsets in integer ns."""
    spec = spec.strip()
    if spec.startswith("linear:"):
        x = float(spec.split(":", 1)[1])
        vals = [r * x for r in range(ranks)]
    elif spec.startswith("random:"):
        x = float(spec.split(":", 1)[1])
        rng = random.Random(seed * 7_919 + 17)
        vals = [0.0] + [rng.uniform(-x, x) for _ in range(ranks - 1)]
    else:
        parts = [float(p) for p in spec.split(",") if p.strip() != ""] or [0.0]
        vals = [parts[r % len(parts)] for r in range(ranks)]
    return [int(round(v * 1000)) for v in vals]


def mean_step_ns(writers) -> float:
    """The job's mean step: over steps, the mean over ranks of the step's time."""
    return sum(end - begin for w in writers for begin, end in w.steps) / sum(len(w.steps) for w in writers)


def straggler_cost_ns(a, writers) -> int:
    """What the slow ranks cost a step: the mean step less that of the same job
    with them as fast as the others (the report's what-if)."""
    with tempfile.TemporaryDirectory() as folder:
        twin = argparse.Namespace(**vars(a))
        twin.out_dir = os.path.join(folder, "twin")
        twin.manifest = os.path.join(folder, "twin.manifest.json")
        twin.truth = os.path.join(folder, "twin.truth.json")
        twin.injections = [c for c in a.injections if c != "slow_rank"]
        twin_writers, _ = generate(twin)
    return round(mean_step_ns(writers) - mean_step_ns(twin_writers))


def write_truth(a, writers) -> str:
    """The truth file: what each injection costs a step on the ranks it was
    added to, and every rank's cost per step of the classes worked out."""
    injected, inject_ranks = a.injections, a.injected_ranks
    expected = [expected_costs(w) for w in writers]

    def cost(name):
        if name == "slow_rank":
            return straggler_cost_ns(a, writers)
        # the report costs a class on the rank where it costs most
        return max(expected[r][INJECTIONS[name]] for r in inject_ranks)

    sizes = {"slow_data_loader": {"loader_ms": a.loader_ms},
             "sync_every_step": {"sync_host_us": a.sync_host_us},
             "tiny_kernels": {"tiny_kernels": a.tiny_kernels},
             "pageable_copies": {"pageable_copies": a.pageable_copies, "pageable_mb": a.pageable_mb},
             "growing_allocation": {"malloc_us": a.malloc_us, "leak_mb": a.leak_mb},
             "slow_rank": {"slow_rank_factor": a.slow_rank_factor}}
    truth = {
        "generator": "bench/make_kineto_trace.py",
        "out_dir": os.path.abspath(a.out_dir),
        "seed": a.seed, "ranks": a.ranks, "steps": len(writers[0].steps), "healthy": a.healthy,
        "mean_step_ns": round(mean_step_ns(writers)),
        "injected": [{"injection": name, "class": INJECTIONS[name], "ranks": inject_ranks, "size": sizes[name],
                      "cost_ns_per_step": cost(name)} for name in injected],
        "expected_cost_ns_per_step": [{"rank": w.rank} | costs for w, costs in zip(writers, expected)],
    }
    path = a.truth or (os.path.abspath(a.out_dir).rstrip("/") + ".truth.json")
    with open(path, "w") as f:
        json.dump(truth, f, indent=2)
        f.write("\n")
    return path


def parse_args(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--events-per-rank", type=int, default=100_000,
                    help="target trace events per rank (whole steps are written; at least 4 steps)")
    ap.add_argument("--steps", type=int, default=6,
                    help="ProfilerStep#N ranges per rank (torch.profiler schedules record a few; HTA "
                         "analyses all complete ones but the last). Kernels per step follow from "
                         "--events-per-rank / --steps unless --kernels-per-step is given")
    ap.add_argument("--kernels-per-step", type=int, default=0)
    ap.add_argument("--buckets", type=int, default=0,
                    help="DDP all-reduce buckets per step (default: kernels per step / 40, within 4..400)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clock-offset-us", default="0")
    ap.add_argument("--first-step", type=int, default=3)
    ap.add_argument("--gzip", action="store_true", help="write rank-N.json.gz instead of rank-N.json")
    ap.add_argument("--edge-cases", action="store_true",
                    help="add kernels HTA classifies OTHER and sub-microsecond kernels")
    ap.add_argument("--epoch-us", action="store_true",
                    help="timestamps in µs since the epoch, without baseTimeNanoseconds (older Kineto)")
    ap.add_argument("--manifest", default=None,
                    help="where to write the manifest (default OUT_DIR.manifest.json, beside the folder)")
    ap.add_argument("--healthy", action="store_true",
                    help="a job without bottlenecks: ranks equally fast, steady kernels, batches ready, "
                         "all-reduces at 200 GB/s, a 1 MiB input batch")
    ap.add_argument("--inject", default="",
                    help="bottlenecks to add to every step, comma separated: " + ", ".join(INJECTIONS))
    ap.add_argument("--inject-ranks", default="",
                    help="the ranks --inject adds to, comma separated (default every rank)")
    ap.add_argument("--truth", default=None,
                    help="where to write the truth file (default OUT_DIR.truth.json, beside the folder)")
    ap.add_argument("--loader-ms", type=float, default=2.0, help="slow_data_loader: __next__'s time a step")
    ap.add_argument("--sync-host-us", type=float, default=800.0,
                    help="sync_every_step: host work between the synchronisation and the next launch")
    ap.add_argument("--tiny-kernels", type=int, default=150, help="tiny_kernels: kernels a step")
    ap.add_argument("--pageable-copies", type=int, default=2, help="pageable_copies: copies a step")
    ap.add_argument("--pageable-mb", type=float, default=4.0, help="pageable_copies: MiB a copy")
    ap.add_argument("--malloc-us", type=float, default=400.0, help="growing_allocation: cudaMalloc's time a step")
    ap.add_argument("--leak-mb", type=float, default=64.0, help="growing_allocation: MiB kept a step")
    ap.add_argument("--slow-rank-factor", type=float, default=1.3,
                    help="slow_rank: how much longer the ranks' kernels run")
    a = ap.parse_args(argv)
    if a.ranks < 1 or a.steps < 2 or a.kernels_per_step < 0 or a.buckets < 0:
        ap.error("need --ranks >= 1, --steps >= 2")
    a.injections = [c.strip() for c in a.inject.split(",") if c.strip()]
    for c in a.injections:
        if c not in INJECTIONS:
            ap.error(f"--inject: unknown {c!r} (known: {', '.join(INJECTIONS)})")
    a.injected_ranks = sorted({int(r) for r in a.inject_ranks.split(",") if r.strip()}) or list(range(a.ranks))
    if any(r < 0 or r >= a.ranks for r in a.injected_ranks):
        ap.error(f"--inject-ranks: ranks are 0..{a.ranks - 1}")
    if "slow_rank" in a.injections and len(a.injected_ranks) == a.ranks:
        ap.error("--inject slow_rank: ranks all equally slow make no straggler; name fewer with --inject-ranks")
    return a


def generate(a: argparse.Namespace) -> tuple[list[RankWriter], dict]:
    """Writes the trace set, its manifest and (--healthy, --inject) its truth file."""
    injected, inject_ranks = a.injections, a.injected_ranks
    os.makedirs(a.out_dir, exist_ok=True)
    for fn in os.listdir(a.out_dir):
        if fn.startswith("rank-") and (fn.endswith(".json") or fn.endswith(".json.gz")):
            os.remove(os.path.join(a.out_dir, fn))

    R = a.ranks
    steps = a.steps
    # about 6.1 written events per kernel (ops, launch, activity, flow pair; the
    # collectives' extra ops included), plus ~30 fixed per step
    K = a.kernels_per_step or max(20, int((a.events_per_rank / steps - 30) / 6.1))
    if a.kernels_per_step:
        steps = max(a.steps, math.ceil(a.events_per_rank / (K * 6.1 + 30)))
    buckets = a.buckets or min(400, max(4, K // 40))
    n_fwd = max(3, int(K * 0.35))
    n_opt = max(1, int(K * 0.08))
    n_bwd = max(buckets, K - n_fwd - n_opt - buckets)
    offsets = parse_offsets(a.clock_offset_us, R, a.seed)

    srng = random.Random(a.seed)
    speeds = [1.0 + 0.04 * srng.uniform(-1, 1) for _ in range(R)]
    straggler = srng.randrange(R) if R > 1 else 0
    if R > 1:
        speeds[straggler] *= 1.12
    if a.healthy:
        speeds = [1.0] * R
        straggler = None
    if "slow_rank" in injected:
        for r in inject_ranks:
            speeds[r] *= a.slow_rank_factor
    shapes = KernelShapes(a.seed) if a.healthy else None
    input_bytes = (1 if a.healthy else 4) * 1024 * 1024
    allreduce_bytes_per_ns = 200.0 if a.healthy else 60.0

    # Epoch timestamps: the base moves into every time written.
    zero_ns = BASE_TIME_NS if a.epoch_us else 0
    writers = [RankWriter(a.out_dir, r, R, a.seed, offsets[r] + zero_ns, a.gzip, speeds[r], shapes)
               for r in range(R)]
    for w in writers:
        w.write_raw(header(w.rank, R, a.epoch_us))
        w.cpu = REL_START_NS + srng.randint(0, 40_000)
    trace_start = min(w.cpu for w in writers)

    # metadata events, as Kineto writes them
    for w in writers:
        meta_ts = trace_start - 300_000
        m = [("process_name", w.pid, 0, {"name": "python3.11"}),
             ("process_labels", w.pid, 0, {"labels": "CPU"}),
             ("process_sort_index", w.pid, 0, {"sort_index": w.pid}),
             ("process_name", w.dev, 0, {"name": "python3.11"}),
             ("process_labels", w.dev, 0, {"labels": f"GPU {w.dev}"}),
             ("process_sort_index", w.dev, 0, {"sort_index": 16_777_216 + w.dev}),
             ("thread_name", w.pid, w.tid_main, {"name": "thread 1 (python3.11)"}),
             ("thread_name", w.pid, w.tid_bwd, {"name": "thread 2 (pt_autograd_0)"}),
             ("thread_name", w.dev, COMPUTE_STREAM, {"name": f"stream {COMPUTE_STREAM} "}),
             ("thread_name", w.dev, NCCL_STREAM, {"name": f"stream {NCCL_STREAM} "})]
        for name, pid, tid, args in m:
            w._emit(f'{{"name": "{name}", "ph": "M", "ts": {w.t(meta_ts)}, "pid": {pid}, "tid": {tid}, '
                    f'"args": {json.dumps(args)}}}')
        w._emit(f'{{"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", '
                f'"tid": "Trace PyTorch Profiler", "ts": {w.t(trace_start - 28_000_000)}}}')
        w.flush_step()

    seq = 0
    for s in range(steps):
        step_no = a.first_step + s
        step_start = {}
        for w in writers:
            injecting = w.rank in inject_ranks
            if a.healthy:
                w.cpu += w.rng.randint(20_000, 60_000)  # the DataLoader's workers had the batch ready
            else:
                w.cpu += int(w.rng.uniform(0.15, 0.4) * K * 50_000)  # data loader wait: the GPU idles
            step_start[w.rank] = w.cpu
            w.step_ext = w.next_ext()
            w.kernel_index = 0
            w.cpu += w.rng.randint(3_000, 8_000)
            if injecting and "slow_data_loader" in injected:
                w.slow_data_loader(int(a.loader_ms * 1e6))
            # input batch H2D
            w.launch(w.tid_main, "aten::to", "aten::_to_copy", "Memcpy HtoD (Pinned -> Device)",
                     int(input_bytes / 20.0), cat="gpu_memcpy", rt_name="cudaMemcpyAsync", extra_gpu=str(input_bytes))
            if injecting and "pageable_copies" in injected:
                w.pageable_copies(a.pageable_copies, int(a.pageable_mb * 1024 * 1024))
            # zero_grad
            z0 = w.cpu
            w.zg_ext = w.next_ext()
            w.launch(w.tid_main, "aten::zero_", "aten::fill_", "Memset (Device)", 2_000 + w.rng.randint(0, 900),
                     cat="gpu_memset", rt_name="cudaMemsetAsync", extra_gpu="1048576")
            w.cpu_op("Optimizer.zero_grad#SGD.zero_grad", "user_annotation", z0 - 500, w.cpu - z0 + 400,
                     w.tid_main, w.zg_ext)
            if injecting and "tiny_kernels" in injected:
                w.tiny_kernels(a.tiny_kernels)
            # forward
            f0 = w.cpu
            fwd_ext = w.next_ext()
            gf0 = None
            gf1 = 0
            for i in range(n_fwd):
                parent, child, kname = FWD_OPS[i % len(FWD_OPS)]
                med = 120 if "gemm" in kname or "cutlass" in kname else 25
                g0, g1 = w.launch(w.tid_main, parent, child, kname, w.kdur(med))
                gf0 = g0 if gf0 is None else gf0
                gf1 = g1
            if a.edge_cases:
                w.launch(w.tid_main, "aten::batch_norm", "aten::_batch_norm_impl_index", EDGE_OTHER_KERNEL,
                         w.kdur(15))
                w.launch(w.tid_main, "aten::cat", "aten::_cat", EDGE_MEMCPY_LIKE, w.kdur(10))
                # a sub-microsecond kernel at a fractional time: HTA's ceil/floor gives it dur -1
                w.launch(w.tid_main, "aten::fill_", "aten::fill_",
                         "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
                         450)
            w.cpu_op("DistributedDataParallel.forward", "user_annotation", f0 - 800, w.cpu - f0 + 600,
                     w.tid_main, fwd_ext)
            w.cpu_op("## forward ##", "user_annotation", f0 - 1_500, w.cpu - f0 + 1_400, w.tid_main, w.next_ext())
            w.gpu_annotation("DistributedDataParallel.forward", gf0, gf1 - gf0, COMPUTE_STREAM, fwd_ext)
            if injecting and "growing_allocation" in injected:
                w.growing_allocation(int(a.leak_mb * 1024 * 1024), int(a.malloc_us * 1000))
            if injecting and "sync_every_step" in injected:
                w.sync_every_step(int(a.sync_host_us * 1000))
            w.cpu += w.rng.randint(5_000, 15_000)
            w.bwd_start = w.cpu
            w.main_resume = None
        # backward, bucket by bucket, collectives in lock step across ranks
        per_bucket = [n_bwd // buckets + (1 if b < n_bwd % buckets else 0) for b in range(buckets)]
        for b in range(buckets):
            ready = {}
            for w in writers:
                gb1 = 0
                for j in range(per_bucket[b]):
                    parent, child, kname = BWD_OPS[(b * 7 + j) % len(BWD_OPS)]
                    med = 140 if "sgemm" in kname else 30
                    _, gb1 = w.launch(w.tid_bwd, parent, child, kname, w.kdur(med))
                # c10d::allreduce_ > record_param_comms > nccl:all_reduce > launch
                nelems = 1_048_576 * (1 + (b * 5 + 3) % 7)
                t0 = w.cpu
                e_c10d = w.next_ext()
                e_rpc = w.next_ext()
                e_ua = w.next_ext()
                corr = w.next_corr()
                rt_ts = t0 + 48_000
                rt_dur = w.rng.randint(8_000, 12_000)
                t_end = rt_ts + rt_dur + 30_000
                ranks_str = "[" + ", ".join(str(x) for x in range(R)) + "]"
                comm_args = (f', "Process Group Name": "0", "Process Group Description": "default_pg", '
                             f'"Process Group Ranks": "{ranks_str}", "Collective name": "allreduce", '
                             f'"In msg nelems": {nelems}, "Out msg nelems": {nelems}, "Group size": {R}, '
                             f'"dtype": "Float", "In split size": "[]", "Out split size": "[]", '
                             f'"Global rank start": 0, "Global rank stride": 1, "Seq": {seq}')
                w.cpu_op("c10d::allreduce_", "cpu_op", t0, t_end - t0, w.tid_bwd, e_c10d)
                w.cpu_op("record_param_comms", "cpu_op", t0 + 4_000, t_end - t0 - 8_000, w.tid_bwd, e_rpc, comm_args)
                w.cpu_op("nccl:all_reduce", "user_annotation", t0 + 20_000, rt_ts + rt_dur + 2_000 - t0 - 20_000,
                         w.tid_bwd, e_ua)
                w.runtime("cudaLaunchKernelExC", rt_ts, rt_dur, w.tid_bwd, e_rpc, corr)
                w.pending = (corr, rt_ts, nelems, e_rpc, comm_args,
                             max(rt_ts + 6_000, w.gpu_free[NCCL_STREAM], gb1))
                ready[w.rank] = w.pending[5]
                w.cpu = t_end + w.rng.randint(1_000, 4_000)
            # every rank's kernel ends together: last arrival + transfer time
            nbytes = w.pending[2] * 4
            xfer = int(20_000 + 2 * (R - 1) / max(R, 1) * nbytes / allreduce_bytes_per_ns)
            end_true = max(ready.values()) + xfer
            for w in writers:
                corr, rt_ts, nelems, e_rpc, comm_args, g0 = w.pending
                g1 = end_true + w.rng.randint(0, 3_000)
                w.gpu_event("kernel", NCCL_KERNEL, g0, g1 - g0, NCCL_STREAM, e_rpc, corr, rt_ts, comm_args)
                w.gpu_annotation("nccl:all_reduce", g0, g1 - g0, NCCL_STREAM, e_rpc)
                w.flow(corr, rt_ts, w.tid_bwd, g0, NCCL_STREAM)
                w.gpu_free[NCCL_STREAM] = g1
            seq += 1
        for w in writers:
            b0 = w.bwd_start
            w.cpu_op("## backward ##", "user_annotation", b0 - 1_000, w.cpu - b0 + 900, w.tid_main, w.next_ext())
            # optimizer: compute stream waits for the last all-reduce
            o0 = w.cpu
            o_ext = w.next_ext()
            corr = w.next_corr()
            w.runtime("cudaStreamWaitEvent", o0 + 1_000, 2_000, w.tid_main, o_ext, corr)
            w.cpu = o0 + 4_000
            for i in range(n_opt):
                w.launch(w.tid_main, "aten::_fused_sgd_", "aten::_fused_sgd_", OPT_KERNEL, w.kdur(40),
                         not_before=w.gpu_free[NCCL_STREAM], with_child=False)
            w.cpu_op("Optimizer.step#SGD.step", "user_annotation", o0, w.cpu - o0, w.tid_main, o_ext)
            w.cpu_op("## optimizer ##", "user_annotation", o0 - 300, w.cpu - o0 + 600, w.tid_main, w.next_ext())
            # loss.item(): D2H copy + stream synchronize (CPU blocks until the GPU drains)
            w.item(w.rng)
            w.cpu_op(f"ProfilerStep#{step_no}", "user_annotation", step_start[w.rank],
                     w.cpu - step_start[w.rank], w.tid_main, w.step_ext)
            w.steps.append((step_start[w.rank], w.cpu))
            w.flush_step()

    end_all = max(w.cpu for w in writers)
    for w in writers:
        w._emit(f'{{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", '
                f'"tid": "PyTorch Profiler", "ts": {w.t(trace_start)}, "dur": {us(end_all - trace_start)}, '
                f'"args": {{"Op count": 0}}}}')
        w._emit(f'{{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", '
                f'"ts": {w.t(end_all + 500_000)}}}')
        w.flush_step()
        w.close("\n]\n}\n")

    manifest = {
        "generator": "bench/make_kineto_trace.py",
        "out_dir": os.path.abspath(a.out_dir),
        "seed": a.seed, "ranks": R, "steps": steps,
        "profiler_steps": [a.first_step + s for s in range(steps)],
        "kernels_per_step": {"forward": n_fwd, "backward": n_bwd, "allreduce": buckets, "optimizer": n_opt},
        "clock_offset_us": [o / 1000 for o in offsets],
        "straggler_rank": straggler if R > 1 else None,
        "base_time_ns": BASE_TIME_NS,
        "edge_cases": a.edge_cases,
        "epoch_us": a.epoch_us,
        "gzip": a.gzip,
        "files": [os.path.basename(w.path) for w in writers],
        "events_per_rank": [w.n_events for w in writers],
        "events_total": sum(w.n_events for w in writers),
        "uncompressed_bytes": sum(w.nbytes for w in writers),
        "collectives": seq,
    }
    if a.healthy or injected:
        manifest["healthy"] = a.healthy
        manifest["injected"] = injected
        manifest["truth"] = write_truth(a, writers)
    manifest_path = a.manifest or (os.path.abspath(a.out_dir).rstrip("/") + ".manifest.json")
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return writers, manifest | {"manifest": manifest_path}


def main(argv=None) -> int:
    _, manifest = generate(parse_args(argv))
    print(json.dumps({k: manifest[k] for k in ("ranks", "steps", "events_total", "uncompressed_bytes",
                                                "collectives", "manifest")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
