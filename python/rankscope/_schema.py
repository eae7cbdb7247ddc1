"""What this package knows of the timeline's format (docs/format.md): the
version it reads, the event record's layout and the enums' names."""

import numpy as np

FORMAT_NAME = b"rankscope-timeline"
FORMAT_VERSION = 1

# The 64-byte event record, as the merge writes it (no padding).
EVENT_FIELDS = [
    ("begin_ns", "<i8", 0), ("end_ns", "<i8", 8), ("correlation_id", "<u8", 16), ("comm_hash", "<u8", 24),
    ("seq", "<u8", 32), ("bytes", "<u8", 40), ("name_id", "<u4", 48), ("track", "<u2", 52), ("kind", "u1", 54),
    ("op", "u1", 55), ("peer", "<i4", 56), ("datatype", "u1", 60), ("algorithm", "u1", 61), ("protocol", "u1", 62),
    ("flags", "u1", 63),
]
EVENT_DTYPE = np.dtype({"names": [f[0] for f in EVENT_FIELDS], "formats": [f[1] for f in EVENT_FIELDS],
                        "offsets": [f[2] for f in EVENT_FIELDS], "itemsize": 64})

KINDS = ["nvtx_range", "nvtx_mark", "mpi_call", "mpi_collective", "mpi_p2p", "cuda_api", "gpu_kernel", "gpu_memcpy",
         "gpu_memset", "gpu_sync", "nccl_coll_enqueue", "nccl_coll_gpu", "nccl_p2p_enqueue", "nccl_p2p_gpu", "instant",
         "counter", "torch_collective", "torch_wait"]  # kind k is KINDS[k - 1]
OPS = ["none", "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AllToAll", "Gather", "Scatter",
       "Barrier", "Scan", "Exscan", "Send", "Recv", "SendRecv"]
DATATYPES = ["none", "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32",
             "float64", "float8e4m3", "float8e5m2", "other"]
ALGORITHMS = ["none", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"]
PROTOCOLS = ["none", "LL", "LL128", "SIMPLE"]
STATUSES = ["complete", "dead", "missing", "terminated", "aborted", "crashed", "exited"]
TRACK_TYPES = {1: "thread", 2: "cuda_stream", 3: "nccl_comm", 4: "counter", 5: "mpi_comm", 6: "nvtx_domain",
               7: "process_group"}
SOURCES = {1: "MPI", 2: "NCCL"}
KNOWN_FLAGS = 0x1F  # bits 0-4 (docs/format.md, the event record)

# Where INT64_MIN stands for "unknown" in /collectives/participants.
UNKNOWN_NS = np.iinfo(np.int64).min
STEP_PREFIX = "ProfilerStep#"
