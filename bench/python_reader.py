"""bench/python_reader.py PACKAGE_DIR TIMELINE [ROUNDS]: the Python
package's events into a frame against the same rows read with h5py by hand.

PACKAGE_DIR is python/ of the tree measured. Run with the Python of a
virtual environment holding h5py, numpy and pandas (tests/python/
python_venv.sh makes one). Each round runs the three readers below, each
round starting with the next one:
- package: rankscope.open(T).events(), every rank's events with names
  resolved, each block's CRC-32C and each value checked;
- by hand: the docs/format.md recipe, each rank's rows with h5py, a
  DataFrame of the record's fields and names as a categorical (the fastest
  hand-made form; no checks);
- and, to say what the checksums cost, the package with the blocks'
  CRC-32C left unchecked (not an option of the package: set here only).
Prints wall seconds and events per second of each, the medians' ratios and
the process's peak RSS.
"""

import gc
import resource
import sys
import time

import h5py
import numpy as np
import pandas as pd

sys.path.insert(0, sys.argv[1])
import rankscope  # noqa: E402 - from the tree given

path = sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def by_hand():
    with h5py.File(path, "r") as f:
        b, o = f["strings/bytes"][:].tobytes(), f["strings/offsets"][:]
        names = [b[o[i]:o[i + 1]].decode() for i in range(len(o) - 1)]
        frames = []
        for r in f["ranks"][:]:
            rows = f["events"][r["event_offset"]:r["event_offset"] + r["event_count"]]
            frame = pd.DataFrame({field: rows[field] for field in rows.dtype.names})
            frame["name"] = pd.Categorical.from_codes(rows["name_id"].astype(np.int64), categories=names)
            frame["rank"] = r["rank"]
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)


def package():
    with rankscope.open(path) as t:
        return t.events()


def package_without_crc():
    with rankscope.open(path) as t:
        t._checksummed = False
        return t.events()


def measure(read):
    gc.collect()
    start = time.perf_counter()
    frame = read()
    seconds = time.perf_counter() - start
    rows = len(frame)
    del frame
    return seconds, rows


readers = [("package", package), ("by hand", by_hand), ("package without CRC", package_without_crc)]
results = {label: [] for label, _ in readers}
for round_number in range(rounds):
    order = readers[round_number % 3:] + readers[:round_number % 3]
    for label, read in order:
        seconds, rows = measure(read)
        results[label].append(seconds)
        print(f"round {round_number} {label}: {rows:,} events in {seconds:.3f} s ({rows / seconds / 1e6:.2f} M events/s)")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
median = {label: np.median(seconds) for label, seconds in results.items()}
for label, seconds in median.items():
    print(f"median {label}: {seconds:.3f} s ({rows / seconds / 1e6:.2f} M events/s), "
          f"{seconds / median['by hand']:.2f} x by hand")
print(f"peak RSS {peak:.0f} MiB")
