#!/usr/bin/env python3
"""Compares a timeline's MPI calls, per rank, with a count made outside rankscope.

Usage: compare_counts.py PROGRAM SUMMARY_JSON COUNTS_DIR RANKS

SUMMARY_JSON is what tests/support's timeline_summary prints. COUNTS_DIR
holds rank-N.txt files in shared/tools/mpicount.c's format ("MPI_Name count"
per line, only the functions called), written by that PMPI counter or by a
program that counts its own calls. Prints one line per difference, naming
the program, the rank and the function, and exits 1 if there is any.
"""
import json
import sys
from pathlib import Path

# The functions mpicount.c counts. A timeline event's "kind name" says which
# call made it (docs/agent-reference.md, "What is captured").
COLLECTIVES = {"MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Barrier", "MPI_Alltoall", "MPI_Alltoallv",
               "MPI_Allgather", "MPI_Allgatherv", "MPI_Gather", "MPI_Scatter"}
BLOCKING_P2P = {"MPI_Send", "MPI_Recv"}
# A nonblocking post is an mpi_call event; the message it starts is a second,
# mpi_p2p event at its completion, which is not a call.
POSTS = {"MPI_Isend", "MPI_Irecv"}
CALLS = {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Test", "MPI_Testall", "MPI_Iprobe", "MPI_Probe"}
# How often these are called depends on when messages arrive, so a count from
# another run says nothing exact: they need only be present.
TIMING_DEPENDENT = {"MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Iprobe", "MPI_Waitany",
                    "MPI_Waitsome"}
KNOWN = COLLECTIVES | BLOCKING_P2P | POSTS | CALLS | {"MPI_Sendrecv"}


def calls_in_timeline(counts, name):
    """How many calls of `name` the rank's timeline events stand for."""
    if name in COLLECTIVES:
        return counts.get(f"mpi_collective {name}", 0)
    if name in BLOCKING_P2P:
        return counts.get(f"mpi_p2p {name}", 0)
    if name == "MPI_Sendrecv":
        # A send and a receive for each call.
        events = counts.get("mpi_p2p MPI_Sendrecv", 0)
        return events / 2
    return counts.get(f"mpi_call {name}", 0)


def events_named(counts, name):
    return ", ".join(f"{key}: {n}" for key, n in sorted(counts.items()) if key.endswith(" " + name)) or "none"


def main():
    program, summary_path, counts_dir, ranks = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    summary = json.loads(summary_path.read_text())
    problems = []
    by_rank = {r["rank"]: r for r in summary["ranks"]}
    if sorted(by_rank) != list(range(ranks)):
        problems.append(f"the timeline has ranks {sorted(by_rank)}, not 0 to {ranks - 1}")
    for rank in range(ranks):
        count_file = counts_dir / f"rank-{rank}.txt"
        if not count_file.exists():
            problems.append(f"rank {rank}: no count file {count_file} (the run that counts did not finish)")
            continue
        expected = {}
        for line in count_file.read_text().split("\n"):
            if line.strip():
                name, n = line.split()
                expected[name] = int(n)
        if rank not in by_rank:
            continue
        info = by_rank[rank]
        if info["status"] != "complete":
            problems.append(f"rank {rank}: status {info['status']}, not complete")
        counts = info["counts"]
        for name in sorted(KNOWN | set(expected)):
            want = expected.get(name, 0)
            got = calls_in_timeline(counts, name)
            if name in TIMING_DEPENDENT:
                if want > 0 and got == 0:
                    problems.append(f"rank {rank}: {name}: called (counted {want} times) but not in the timeline "
                                    f"(events named so: {events_named(counts, name)})")
            elif got != want:
                problems.append(f"rank {rank}: {name}: {want} calls counted, the timeline has {got:g} "
                                f"(events named so: {events_named(counts, name)})")
    # The programs here receive every message they send, so every message
    # must show both its ends.
    p2p = summary["p2p"]
    if not p2p["sends"] == p2p["receives"] == p2p["matched"]:
        problems.append(f"of {p2p['sends']} sends and {p2p['receives']} receives in the timeline, only "
                        f"{p2p['matched']} pair up (same communicator, ranks, tag and sequence number): "
                        f"{p2p['receives'] - p2p['matched']} receives without their send, "
                        f"{p2p['sends'] - p2p['matched']} sends without their receive")
    for problem in problems:
        print(f"FAIL: {program}: {problem}", file=sys.stderr)
    if not problems:
        total = sum(sum(r["counts"].values()) for r in summary["ranks"])
        print(f"{program}: the timeline's MPI calls match the count ({total} events on {ranks} ranks)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
