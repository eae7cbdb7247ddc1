"""mpi4py with h5py from PyPI, whose wheel bundles its own HDF5: every rank
writes its own file, then reads its neighbour's after a barrier. The agent
rankscope preloads is linked to Debian's parallel HDF5; h5py must still get
its own library. Usage: h5py_roundtrip.py [ARG...] (echoed by rank 0);
writes rank-N.h5 in the working directory."""
import sys

import h5py
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if rank == 0:
    print(f"argc={len(sys.argv) - 1}")
    for i, arg in enumerate(sys.argv[1:], 1):
        print(f"argv[{i}]=<{arg}>")
    print("h5py", h5py.__version__, "HDF5", h5py.version.hdf5_version)

scale = comm.bcast(0.25 if rank == 0 else None, root=0)
values = scale * (rank + 1) * np.arange(64 * 16, dtype="f8").reshape(64, 16)
# No modification times, so two runs write the same bytes.
with h5py.File(f"rank-{rank}.h5", "w") as f:
    group = f.create_group("results")
    group.create_dataset("values", data=values, track_times=False)
    group.create_dataset("labels", data=np.array([b"left", b"right"]), track_times=False)
    group.attrs["rank"] = rank

comm.Barrier()
left, right = (rank - 1) % size, (rank + 1) % size
with h5py.File(f"rank-{left}.h5", "r") as f:
    assert f["results"].attrs["rank"] == left
    assert list(f["results/labels"][...]) == [b"left", b"right"]
    read_sum = float(f["results/values"][...].sum())

buffer = np.array([read_sum]), np.zeros(1)
comm.Sendrecv(buffer[0], dest=right, sendtag=1, recvbuf=buffer[1], source=left, recvtag=1)
total = np.zeros(1)
comm.Allreduce(np.array([read_sum]), total, op=MPI.SUM)
sums = comm.gather(float(buffer[1][0]), root=0)
if rank == 0:
    for r, s in enumerate(sums):
        print(f"rank {r} received {s:.1f}")
    print(f"total {total[0]:.1f}")
