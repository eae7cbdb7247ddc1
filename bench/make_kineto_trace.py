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

Deterministic: the same arguments give byte-identical files.

usage: make_kineto_trace.py OUT_DIR [--ranks N] [--events-per-rank N]
         [--steps N] [--kernels-per-step N] [--buckets N] [--seed N] [--clock-offset-us SPEC] [--gzip]
         [--edge-cases] [--epoch-us] [--manifest PATH]
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

CBID = {"cudaLaunchKernel": 211, "cudaLaunchKernelExC": 430, "cudaMemcpyAsync": 41,
        "cudaMemsetAsync": 51, "cudaStreamSynchronize": 131, "cudaStreamWaitEvent": 147,
        "cudaEventRecord": 135}

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


class RankWriter:
    """Holds one rank's state (clocks, counters, RNG) and its output file."""

    def __init__(self, out_dir, rank, world, seed, offset_ns, gz, speed):
        self.rank = rank
        self.world = world
        self.rng = random.Random(seed * 1_000_003 + rank)
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
        self._emit(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "{name}", "pid": {self.pid}, "tid": {tid}, '
            f'"ts": {self.t(ts)}, "dur": {us(dur)}, "args": {{"External id": {ext}, '
            f'"cbid": {CBID[name]}, "correlation": {corr}}}}}')

    def flow(self, corr, ts_launch, tid, ts_kernel, stream):
        self._emit(f'{{"ph": "s", "id": {corr}, "pid": {self.pid}, "tid": {tid}, "ts": {self.t(ts_launch)}, '
                   f'"cat": "ac2g", "name": "ac2g"}}')
        self._emit(f'{{"ph": "f", "id": {corr}, "pid": {self.dev}, "tid": {stream}, "ts": {self.t(ts_kernel)}, '
                   f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}', gpu=True)

    def gpu_event(self, cat, name, ts, dur, stream, ext, corr, extra=""):
        if cat == "kernel":
            g = self.rng.choice((80, 108, 216, 432, 864))
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
               rt_name="cudaLaunchKernel", not_before=0, extra_gpu="", with_child=True):
        """CPU op(s) + runtime launch + GPU activity + flow. Advances self.cpu.
        Returns (gpu_start, gpu_end) in true ns."""
        rng = self.rng
        t0 = self.cpu
        ext_p = self.next_ext()
        ext_c = self.next_ext() if with_child else ext_p
        pre = rng.randint(2_000, 6_000)
        rt_ts = t0 + pre + (rng.randint(1_000, 3_000) if with_child else 0)
        rt_dur = rng.randint(3_500, 9_000)
        corr = self.next_corr()
        post = rng.randint(1_500, 4_000)
        t_end = rt_ts + rt_dur + post
        self.cpu_op(parent, "cpu_op", t0, t_end - t0, tid, ext_p)
        if with_child:
            self.cpu_op(child, "cpu_op", t0 + pre, t_end - t0 - pre - 700, tid, ext_c)
        self.runtime(rt_name, rt_ts, rt_dur, tid, ext_c, corr)
        q = rt_ts + rng.randint(4_000, 9_000)
        g0 = max(q, self.gpu_free[stream], not_before)
        self.gpu_event(cat, kname, g0, kdur, stream, ext_c, corr, extra_gpu)
        self.flow(corr, rt_ts, tid, g0, stream)
        self.gpu_free[stream] = g0 + kdur
        self.cpu = t_end + rng.randint(500, 3_000)
        return g0, g0 + kdur

    def kdur(self, median_us: float) -> int:
        """Lognormal kernel duration, ns, with sub-µs precision."""
        d = self.rng.lognormvariate(math.log(median_us * 1000 * self.speed), 0.6)
        return max(900, int(d))

    def close(self, trailer: str):
        self.write_raw(trailer)
        self.fh.close()
        if self._raw is not self.fh:
            self._raw.close()


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


def main(argv=None) -> int:
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
    a = ap.parse_args(argv)
    if a.ranks < 1 or a.steps < 2 or a.kernels_per_step < 0 or a.buckets < 0:
        ap.error("need --ranks >= 1, --steps >= 2")

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

    # Epoch timestamps: the base moves into every time written.
    zero_ns = BASE_TIME_NS if a.epoch_us else 0
    writers = [RankWriter(a.out_dir, r, R, a.seed, offsets[r] + zero_ns, a.gzip, speeds[r]) for r in range(R)]
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
            w.cpu += int(w.rng.uniform(0.15, 0.4) * K * 50_000)  # data loader wait: the GPU idles
            step_start[w.rank] = w.cpu
            w.step_ext = w.next_ext()
            w.cpu += w.rng.randint(3_000, 8_000)
            # input batch H2D
            nbytes = 4 * 1024 * 1024
            w.launch(w.tid_main, "aten::to", "aten::_to_copy", "Memcpy HtoD (Pinned -> Device)",
                     int(nbytes / 20.0), cat="gpu_memcpy", rt_name="cudaMemcpyAsync", extra_gpu=str(nbytes))
            # zero_grad
            z0 = w.cpu
            w.zg_ext = w.next_ext()
            w.launch(w.tid_main, "aten::zero_", "aten::fill_", "Memset (Device)", 2_000 + w.rng.randint(0, 900),
                     cat="gpu_memset", rt_name="cudaMemsetAsync", extra_gpu="1048576")
            w.cpu_op("Optimizer.zero_grad#SGD.zero_grad", "user_annotation", z0 - 500, w.cpu - z0 + 400,
                     w.tid_main, w.zg_ext)
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
            xfer = int(20_000 + 2 * (R - 1) / max(R, 1) * nbytes / 60.0)  # ~60 GB/s bus bandwidth
            end_true = max(ready.values()) + xfer
            for w in writers:
                corr, rt_ts, nelems, e_rpc, comm_args, g0 = w.pending
                g1 = end_true + w.rng.randint(0, 3_000)
                w.gpu_event("kernel", NCCL_KERNEL, g0, g1 - g0, NCCL_STREAM, e_rpc, corr, comm_args)
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
            w.launch(w.tid_main, "aten::item", "aten::_local_scalar_dense", "Memcpy DtoH (Device -> Pinned)",
                     1_500 + w.rng.randint(0, 600), cat="gpu_memcpy", rt_name="cudaMemcpyAsync", extra_gpu="4")
            sync_ts = w.cpu
            drained = max(w.gpu_free.values())
            sync_end = max(sync_ts + 3_000, drained + w.rng.randint(4_000, 9_000))
            w.runtime("cudaStreamSynchronize", sync_ts, sync_end - sync_ts, w.tid_main, w.next_ext(), w.next_corr())
            w.cpu = sync_end + w.rng.randint(2_000, 6_000)
            w.cpu_op(f"ProfilerStep#{step_no}", "user_annotation", step_start[w.rank],
                     w.cpu - step_start[w.rank], w.tid_main, w.step_ext)
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
    mpath = a.manifest or (os.path.abspath(a.out_dir).rstrip("/") + ".manifest.json")
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(json.dumps({k: manifest[k] for k in ("ranks", "steps", "events_total", "uncompressed_bytes",
                                                "collectives")} | {"manifest": mpath}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
