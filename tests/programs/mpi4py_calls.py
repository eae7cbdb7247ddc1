"""mpi4py's own wheel from PyPI, on whatever MPI it picked at import: the
collectives, blocking, combined and nonblocking point-to-point calls a
training script's helpers make, with buffers (one MPI call each) and one
pickled object (mpi4py's own sequence of calls). Usage: mpi4py_calls.py
[ARG...] (echoed by rank 0, with the MPI library and what the calls computed).
Needs no numpy: the buffers are the standard library's arrays."""
import array
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
left, right = (rank - 1) % size, (rank + 1) % size


def doubles(count, value):
    return array.array("d", [float(value)] * count)


if rank == 0:
    print(f"argc={len(sys.argv) - 1}")
    for i, arg in enumerate(sys.argv[1:], 1):
        print(f"argv[{i}]=<{arg}>")
    print("MPI library:", MPI.Get_library_version().split(",")[0].strip())

total = doubles(256, 0)
for step in range(4):
    comm.Allreduce(doubles(256, rank + step), total, op=MPI.SUM)
scale = doubles(16, 1.5 if rank == 0 else 0)
comm.Bcast(scale, root=0)

from_left = doubles(64, 0)
comm.Sendrecv(doubles(64, rank), dest=right, sendtag=7, recvbuf=from_left, source=left, recvtag=7)
posted_in, posted_out = doubles(32, 0), doubles(32, 10 * rank)
MPI.Request.Waitall([comm.Irecv(posted_in, source=left, tag=3), comm.Isend(posted_out, dest=right, tag=3)])
pair = doubles(8, 2 if rank == 0 else 0)
if rank == 0:
    comm.Send(pair, dest=1, tag=5)
elif rank == 1:
    comm.Recv(pair, source=0, tag=5)

gathered = doubles(4 * size, 0)
comm.Gather(doubles(4, rank), gathered, root=0)
part = doubles(4, 0)
comm.Scatter(gathered, part, root=0)
every = doubles(2 * size, 0)
comm.Allgather(doubles(2, rank), every)
exchanged = doubles(size, 0)
comm.Alltoall(doubles(size, rank), exchanged)
reduced = doubles(8, 0)
comm.Reduce(doubles(8, rank + 1), reduced, op=MPI.SUM, root=0)
settings = comm.bcast({"lr": 0.125, "buckets": [25, 25, 8]} if rank == 0 else None, root=0)
comm.Barrier()

mine = doubles(1, sum(from_left) + sum(posted_in) + sum(pair) + sum(part) + sum(every) + sum(exchanged))
results = doubles(size, 0)
comm.Gather(mine, results, root=0)
if rank == 0:
    print(f"allreduce {total[0]:.1f} bcast {scale[0]:.2f} reduce {reduced[0]:.1f} settings {settings}")
    for r, value in enumerate(results):
        print(f"rank {r} computed {value:.1f}")
