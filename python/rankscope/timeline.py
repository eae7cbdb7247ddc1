"""A rankscope timeline as pandas frames (docs/python.md).

Times are nanoseconds on the job's clock: the merge already put every rank's
events on the reference rank's clock (plus any `merge --repair-clock` shift),
so rows of different ranks compare directly; `ranks()` says per rank whether
its clock was synchronised and within what bound.
"""

import h5py
import numpy as np
import pandas as pd

from . import _crc32c, _schema
from .errors import DamagedTimelineError, MissingTableError, NotATimelineError, UnsupportedVersionError

DEFAULT_CHUNK_ROWS = 1 << 22  # 4,194,304 events (256 MiB of records) a frame


def open(path):  # noqa: A001 - rankscope.open, as the guide names it
    """The timeline at `path`; close it with close() or a `with` block."""
    return Timeline(path)


def _categorical(codes, names):
    return pd.Categorical.from_codes(np.asarray(codes, dtype=np.int64), categories=names)


class Timeline:
    """One job's timeline, read as frames. Each method reads what it needs
    from the file; events are read a block at a time, their checksums and
    values checked before any becomes a row."""

    def __init__(self, path):
        self.path = str(path)
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as error:
            raise NotATimelineError(f"{self.path}: not an HDF5 file rankscope wrote ({error})") from None
        try:
            self._check_format()
            self._strings = None
            self._ranks = self._read_table("ranks")
            self._check_ranks()
        except BaseException:
            self._file.close()
            raise

    # --- the file ---------------------------------------------------------

    def close(self):
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def __repr__(self):
        return f"<rankscope.Timeline {self.path}: {self.world_size} ranks, {self.event_count:,} events>"

    def _check_format(self):
        attrs = self._file.attrs
        if attrs.get("format") != _schema.FORMAT_NAME:
            raise NotATimelineError(f"{self.path}: an HDF5 file, but not a rankscope timeline (no format attribute "
                                    f"'{_schema.FORMAT_NAME.decode()}')")
        self.format_version = int(attrs["format_version"])
        if self.format_version > _schema.FORMAT_VERSION:
            raise UnsupportedVersionError(
                f"{self.path}: timeline format version {self.format_version} is newer than this package reads "
                f"(version {_schema.FORMAT_VERSION}): install the rankscope package of the rankscope that wrote it")
        if self.format_version < 1:
            raise DamagedTimelineError(self.path, "/", None, f"format_version {self.format_version} is not a version")
        self.world_size = int(attrs["world_size"])
        self.clock_corrected = bool(attrs["clock_corrected"])
        self.rankscope_version = attrs["rankscope_version"].decode()
        events = self._file["events"]
        for name, base, offset in _schema.EVENT_FIELDS:
            stored = events.dtype.fields.get(name)
            if stored is None or stored[1] != offset or stored[0].str != np.dtype(base).str:
                raise DamagedTimelineError(self.path, "/events", None,
                                           f"the stored type's member {name} is not the event record's "
                                           f"({base} at byte {offset}): the metadata is damaged")

    def _read(self, dataset, start=None, stop=None):
        """Rows [start, stop) of `dataset`, HDF5's refusals (a chunk whose
        checksum does not match, a file cut short) raised as damage."""
        data = self._file[dataset]
        try:
            return data[start:stop] if start is not None else data[()]
        except OSError as error:
            rows = None if start is None else (f"{start}" if stop == start + 1 else f"{start}-{stop - 1}")
            raise DamagedTimelineError(self.path, "/" + dataset, rows,
                                       f"unreadable: the file is damaged or cut short there ({error})") from None

    def _read_table(self, dataset):
        if dataset not in self._file:
            raise MissingTableError(f"{self.path}: has no /{dataset}")
        return self._read(dataset)

    def _check_ranks(self):
        ranks = self._ranks
        if len(ranks) != self.world_size:
            raise DamagedTimelineError(self.path, "/ranks", None,
                                       f"{len(ranks)} rows for a world of {self.world_size} ranks")
        events = self._file["events"].shape[0]
        for row, rank in enumerate(ranks):
            problem = None
            if rank["rank"] != row:
                problem = f"rank {rank['rank']} in the row of rank {row}"
            elif rank["status"] >= len(_schema.STATUSES):
                problem = f"status {rank['status']} is not a status"
            elif rank["event_offset"] + rank["event_count"] > events:
                problem = f"its events run past the end of /events ({events} rows)"
            elif rank["event_count"] and rank["first_ns"] > rank["last_ns"]:
                problem = "first_ns is after last_ns"
            if problem:
                raise DamagedTimelineError(self.path, "/ranks", row, problem)
        self.event_count = int(ranks["event_count"].sum())
        self._checksummed = "event_checksums" in self._file and "checksum_offset" in ranks.dtype.names
        if self._checksummed:
            self._checksums = self._read("event_checksums")
            blocks = -(-ranks["event_count"].astype(np.int64) // _crc32c.BLOCK_ROWS)
            past = np.nonzero(ranks["checksum_offset"].astype(np.int64) + blocks > len(self._checksums))[0]
            if len(past):
                raise DamagedTimelineError(self.path, "/ranks", int(past[0]), "checksum_offset points past the end "
                                           "of /event_checksums")

    @property
    def strings(self):
        """The job's string table: string i is what name_id i names."""
        if self._strings is None:
            blob = self._read("strings/bytes").tobytes()
            offsets = self._read("strings/offsets").astype(np.int64)
            bad = np.nonzero((np.diff(offsets) < 0) | (offsets[1:] > len(blob)))[0]
            if len(offsets) == 0 or offsets[0] != 0 or len(bad):
                raise DamagedTimelineError(self.path, "/strings/offsets", int(bad[0]) + 1 if len(bad) else 0,
                                           "offsets out of order or past the bytes")
            self._strings = [blob[a:b].decode("utf-8", "replace") for a, b in zip(offsets[:-1], offsets[1:])]
            self._names_unique = len(set(self._strings)) == len(self._strings)
        return self._strings

    def _names(self, name_ids):
        """name_ids as a categorical column of names (plain strings where the
        table repeats a string, which a categorical cannot hold)."""
        strings = self.strings
        if self._names_unique:
            return _categorical(name_ids, strings)
        return np.asarray(strings, dtype=object)[name_ids]

    # --- small tables -----------------------------------------------------

    def ranks(self):
        """One row per rank: where it ran, how it ended, its events and its clock."""
        r = self._ranks
        frame = pd.DataFrame({
            "rank": r["rank"], "host": [h.decode() for h in r["host"]], "local_rank": r["local_rank"],
            "node_id": r["node_id"], "pid": r["pid"], "status": _categorical(r["status"], _schema.STATUSES),
            "event_count": r["event_count"], "first_ns": r["first_ns"], "last_ns": r["last_ns"],
            "last_heard_ns": r["last_heard_ns"], "capture": [c.decode() for c in r["capture"]],
            "gpu_uuids": [g.decode() for g in r["gpu_uuids"]],
        })
        if "windowed" in r.dtype.names:
            frame["windowed"] = r["windowed"].astype(bool)
        if "job_id" in r.dtype.names:
            frame["job_id"] = [j.decode() for j in r["job_id"]]
        clock = self._read_table("clock")
        for row, entry in enumerate(clock):
            if entry["rank"] != row:
                raise DamagedTimelineError(self.path, "/clock", row, f"rank {entry['rank']} in the row of rank {row}")
        frame["clock_synced"] = clock["synced"].astype(bool)
        frame["clock_offset_ns"] = clock["offset_ns"]
        frame["clock_drift_ppm"] = clock["drift_ppm"]
        frame["clock_bound_ns"] = clock["bound_ns"]
        if "repair_shift_ns" in clock.dtype.names:
            frame["clock_repair_shift_ns"] = clock["repair_shift_ns"]
        return frame

    def tracks(self):
        """Each rank's tracks: threads (os_id the thread id), CUDA streams (os_id
        the stream), communicators, process groups, NVTX domains."""
        t = self._read_table("tracks")
        self._check_rows_of_ranks("tracks", t)
        types = t["type"].astype(np.int64)
        if len(types) and (types.min() < 1 or types.max() > len(_schema.TRACK_TYPES)):
            row = int(np.nonzero((types < 1) | (types > len(_schema.TRACK_TYPES)))[0][0])
            raise DamagedTimelineError(self.path, "/tracks", row, f"type {types[row]} is not a track type")
        self._check_name_ids("tracks", t["name_id"])
        return pd.DataFrame({
            "rank": t["rank"], "track": t["id"], "type": _categorical(types - 1, list(_schema.TRACK_TYPES.values())),
            "name": self._names(t["name_id"]), "os_id": t["os_id"], "device": t["device"],
        })

    def counters(self):
        """The data-quality counters, one row per rank and counter (docs/agent-reference.md)."""
        c = self._read_table("counters")
        self._check_rows_of_ranks("counters", c)
        self._check_name_ids("counters", c["name_id"])
        return pd.DataFrame({"rank": c["rank"], "name": self._names(c["name_id"]), "value": c["value"]})

    def capture_windows(self):
        """The spans a windowed rank's events were captured in (docs/windows-and-hangs.md,
        "Capture windows"); none for ranks recorded throughout."""
        if "capture_windows" not in self._file:
            return pd.DataFrame({"rank": np.empty(0, np.int32), "from_ns": np.empty(0, np.int64),
                                 "until_ns": np.empty(0, np.int64)})
        w = self._read("capture_windows")
        bad = np.nonzero((w["until_ns"] < w["from_ns"]) | (w["rank"] < 0) | (w["rank"] >= self.world_size))[0]
        if len(bad):
            raise DamagedTimelineError(self.path, "/capture_windows", int(bad[0]), "ends before it begins, or of "
                                       "no rank of the job")
        return pd.DataFrame({"rank": w["rank"], "from_ns": w["from_ns"], "until_ns": w["until_ns"]})

    def _check_rows_of_ranks(self, dataset, rows):
        bad = np.nonzero((rows["rank"] < 0) | (rows["rank"] >= self.world_size))[0]
        if len(bad):
            raise DamagedTimelineError(self.path, "/" + dataset, int(bad[0]), f"rank {rows['rank'][bad[0]]} is not a "
                                       f"rank of the job (world size {self.world_size})")

    def _check_name_ids(self, dataset, name_ids, first_row=0, field="name_id"):
        bad = np.nonzero(name_ids >= len(self.strings))[0]
        if len(bad):
            raise DamagedTimelineError(self.path, "/" + dataset, first_row + int(bad[0]),
                                       f"{field} {name_ids[bad[0]]} is not in the string table "
                                       f"({len(self.strings)} strings)")

    # --- events -----------------------------------------------------------

    def events(self, kinds=None, ranks=None, time=None):
        """Every selected event in one frame: rank by rank, each rank's in time
        order. For more events than memory holds, iter_events()."""
        frames = list(self.iter_events(kinds=kinds, ranks=ranks, time=time))
        if not frames:
            return self._event_frame(np.empty(0, _schema.EVENT_DTYPE), np.empty(0, np.int32))
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def iter_events(self, kinds=None, ranks=None, time=None, chunk_rows=DEFAULT_CHUNK_ROWS):
        """The selected events as frames of at most `chunk_rows` rows read at
        a time: memory holds one chunk, whatever the timeline's size.

        kinds: event kind names (docs/format.md: "gpu_kernel", "mpi_collective",
        ...); ranks: rank numbers; time: (begin_ns, end_ns), events that
        overlap [begin_ns, end_ns) (either may be None: open)."""
        for rank, rows in self._selected_rows(kinds, ranks, time, chunk_rows):
            yield self._event_frame(rows, np.full(len(rows), rank, dtype=np.int32))

    def _selected_rows(self, kinds, ranks, time, chunk_rows):
        """(rank, records) of the selected events, read `chunk_rows` (whole
        checksum blocks) at a time."""
        kind_codes = self._kind_codes(kinds)
        chunk_rows = max(_crc32c.BLOCK_ROWS, chunk_rows // _crc32c.BLOCK_ROWS * _crc32c.BLOCK_ROWS)
        begin, end = (None, None) if time is None else time
        for rank in self._selected_ranks(ranks):
            info = self._ranks[rank]
            if not self._may_hold(rank, kind_codes, info, begin, end):
                continue
            count = int(info["event_count"])
            for first in range(0, count, chunk_rows):
                rows = self._read_events(rank, first, min(count, first + chunk_rows))
                if end is not None and len(rows) and rows["begin_ns"][0] >= end:
                    break  # time order: nothing later begins before `end`
                selected = self._select(rows, kind_codes, begin, end)
                if len(selected):
                    yield rank, selected

    @staticmethod
    def _select(rows, kind_codes, begin, end):
        """The rows of the selected kinds that overlap [begin, end): `rows`
        itself, not a copy, where every row is."""
        keep = None
        for condition in (None if kind_codes is None else np.isin(rows["kind"], kind_codes),
                          None if begin is None else rows["end_ns"] >= begin,
                          None if end is None else rows["begin_ns"] < end):
            if condition is not None:
                keep = condition if keep is None else keep & condition
        return rows if keep is None or keep.all() else rows[keep]

    def _kind_codes(self, kinds):
        if kinds is None:
            return None
        if isinstance(kinds, str):
            kinds = [kinds]
        unknown = [k for k in kinds if k not in _schema.KINDS]
        if unknown:
            raise ValueError(f"unknown event kind {unknown[0]!r}: the kinds are {', '.join(_schema.KINDS)}")
        return np.array([_schema.KINDS.index(k) + 1 for k in kinds], dtype=np.uint8)

    def _selected_ranks(self, ranks):
        if ranks is None:
            return range(self.world_size)
        ranks = [ranks] if np.isscalar(ranks) else list(ranks)
        outside = [r for r in ranks if not 0 <= r < self.world_size]
        if outside:
            raise ValueError(f"rank {outside[0]} is not a rank of {self.path} (world size {self.world_size})")
        return sorted(set(int(r) for r in ranks))

    def _may_hold(self, rank, kind_codes, info, begin, end):
        """Whether the rank may hold a selected event, from its counts alone."""
        if info["event_count"] == 0:
            return False
        if end is not None and info["first_ns"] >= end or begin is not None and info["last_ns"] < begin:
            return False
        if kind_codes is None or "event_counts" not in self._file:
            return True
        counts = self._read("event_counts", rank, rank + 1)[0]
        if counts.sum() != info["event_count"]:
            return True  # damaged counts say nothing: read the events
        return any(int(k) - 1 < len(counts) and counts[int(k) - 1] > 0 for k in kind_codes)

    def _read_events(self, rank, first, stop):
        """Rows [first, stop) of the rank's events, whole checksum blocks (a
        chunk starts on one), checked."""
        info = self._ranks[rank]
        offset = int(info["event_offset"])
        rows = self._read("events", offset + first, offset + stop)
        if len(rows) != stop - first:
            raise DamagedTimelineError(self.path, "/events", offset + first, "the file is cut short in these rows")
        if self._checksummed:
            self._check_blocks(rank, first, rows)
        self._check_values(rank, offset + first, rows)
        return rows

    def _check_blocks(self, rank, first, rows):
        info = self._ranks[rank]
        sums = _crc32c.block_checksums(rows.view(np.uint8).reshape(len(rows), _crc32c.ROW_BYTES))
        block = int(info["checksum_offset"]) + first // _crc32c.BLOCK_ROWS
        bad = np.nonzero(sums != self._checksums[block:block + len(sums)])[0]
        if len(bad):
            row = int(info["event_offset"]) + first + int(bad[0]) * _crc32c.BLOCK_ROWS
            block_end = min(row + _crc32c.BLOCK_ROWS, int(info["event_offset"] + info["event_count"]))
            raise DamagedTimelineError(self.path, "/events", f"{row}-{block_end - 1}",
                                       f"rank {rank}'s block's CRC-32C does not match /event_checksums row "
                                       f"{block + int(bad[0])}: the rows are damaged")

    def _check_values(self, rank, first_row, rows):
        info = self._ranks[rank]
        checks = [
            ("kind", (rows["kind"] < 1) | (rows["kind"] > len(_schema.KINDS)), "is not an event kind"),
            ("op", rows["op"] >= len(_schema.OPS), "is not an operation"),
            ("datatype", rows["datatype"] >= len(_schema.DATATYPES), "is not a datatype"),
            ("algorithm", rows["algorithm"] >= len(_schema.ALGORITHMS), "is not an algorithm"),
            ("protocol", rows["protocol"] >= len(_schema.PROTOCOLS), "is not a protocol"),
            ("flags", (rows["flags"] & np.uint8(0xFF ^ _schema.KNOWN_FLAGS)) != 0, "has bits no version sets"),
            ("name_id", rows["name_id"] >= len(self.strings), "is not in the string table"),
            ("end_ns", rows["end_ns"] < rows["begin_ns"], "is before begin_ns"),
            ("begin_ns", rows["begin_ns"] < info["first_ns"], f"is before the rank's first_ns {info['first_ns']}"),
            ("end_ns", rows["end_ns"] > info["last_ns"], f"is after the rank's last_ns {info['last_ns']}"),
        ]
        for field, bad, problem in checks:
            where = np.nonzero(bad)[0]
            if len(where):
                at = int(where[0])
                raise DamagedTimelineError(self.path, "/events", first_row + at,
                                           f"rank {rank}'s {field} {rows[field][at]} {problem}")

    def _event_frame(self, rows, rank_column):
        return pd.DataFrame({
            "rank": rank_column,
            "kind": _categorical(rows["kind"].astype(np.int64) - 1, _schema.KINDS),
            "name": self._names(rows["name_id"]),
            "begin_ns": rows["begin_ns"], "end_ns": rows["end_ns"],
            "duration_ns": rows["end_ns"] - rows["begin_ns"],
            "track": rows["track"],
            "op": _categorical(rows["op"], _schema.OPS),
            "bytes": rows["bytes"], "comm_hash": rows["comm_hash"], "seq": rows["seq"],
            "correlation_id": rows["correlation_id"], "peer": rows["peer"],
            "datatype": _categorical(rows["datatype"], _schema.DATATYPES),
            "algorithm": _categorical(rows["algorithm"], _schema.ALGORITHMS),
            "protocol": _categorical(rows["protocol"], _schema.PROTOCOLS),
            "flags": rows["flags"],
        })

    # --- derived frames ---------------------------------------------------

    def kernels(self, ranks=None, time=None):
        """GPU kernels with their stream and device."""
        frame = self.events(kinds=["gpu_kernel"], ranks=ranks, time=time)
        streams = self.tracks()
        streams = streams[streams["type"] == "cuda_stream"][["rank", "track", "os_id", "device"]]
        frame = frame.merge(streams.rename(columns={"os_id": "stream"}), on=["rank", "track"], how="left")
        return frame[["rank", "name", "begin_ns", "end_ns", "duration_ns", "stream", "device", "correlation_id"]]

    def steps(self, ranks=None):
        """Each rank's ProfilerStep#N ranges (torch.profiler's, or the agent's
        PyTorch hook's): one row per range. For a rank whose capture was
        windowed, `whole` says whether one capture window holds the step (the
        report leaves the others out of its figures)."""
        strings = self.strings
        step_ids = [i for i, s in enumerate(strings) if s.startswith(_schema.STEP_PREFIX)
                    and s[len(_schema.STEP_PREFIX):].isdigit()]
        columns = ["rank", "step", "begin_ns", "end_ns", "duration_ns", "track", "whole"]
        if not step_ids:
            return pd.DataFrame({c: [] for c in columns})
        frames = []
        for chunk in self.iter_events(kinds=["nvtx_range"], ranks=ranks):
            chunk = chunk[chunk["name"].isin([strings[i] for i in step_ids])]
            if len(chunk):
                frames.append(chunk)
        if not frames:
            return pd.DataFrame({c: [] for c in columns})
        ranges = pd.concat(frames, ignore_index=True)
        steps = pd.DataFrame({
            "rank": ranges["rank"], "step": ranges["name"].astype(str).str.slice(len(_schema.STEP_PREFIX)).astype(int),
            "begin_ns": ranges["begin_ns"], "end_ns": ranges["end_ns"], "duration_ns": ranges["duration_ns"],
            "track": ranges["track"],
        })
        steps["whole"] = self._held_by_windows(steps)
        return steps.reset_index(drop=True)

    def _held_by_windows(self, steps):
        windows = self.capture_windows()
        windowed = set(self.ranks().query("windowed")["rank"]) if "windowed" in self._ranks.dtype.names else set()
        whole = np.ones(len(steps), dtype=bool)
        for rank in windowed:
            mine = (steps["rank"] == rank).to_numpy()
            of_rank = windows[windows["rank"] == rank]
            froms, untils = of_rank["from_ns"].to_numpy(), of_rank["until_ns"].to_numpy()
            begins, ends = steps["begin_ns"].to_numpy()[mine], steps["end_ns"].to_numpy()[mine]
            # The window that begins last at or before the step's begin is the only one that may hold it.
            at = np.searchsorted(froms, begins, side="right") - 1
            held = (at >= 0) & (ends <= untils[np.maximum(at, 0)] if len(untils) else False)
            whole[mine] = held
        return whole

    def collectives(self):
        """Collectives matched across ranks (as the merge matched them, docs/report-reference.md):
        one row per rank and instance, with arrival, start, end, waits and bytes;
        unknown times are <NA>."""
        if "collectives" not in self._file:
            raise MissingTableError(f"{self.path}: has no /collectives: it was written before the merge stored the "
                                    "matched collectives; `rankscope merge` or `import-kineto` again writes them")
        instances = self._read("collectives/instances")
        participants = self._read("collectives/participants")
        first = instances["first_participant"].astype(np.int64)
        count = instances["participant_count"].astype(np.int64)
        past = np.nonzero(first + count > len(participants))[0]
        if len(past):
            raise DamagedTimelineError(self.path, "/collectives/instances", int(past[0]),
                                       "its participants run past the end of /collectives/participants")
        self._check_name_ids("collectives/instances", instances["name_id"])
        instance = np.repeat(np.arange(len(instances)), count)
        rows = np.repeat(first - np.concatenate(([0], np.cumsum(count)[:-1])), count) + np.arange(count.sum())
        p = participants[rows]
        self._check_rows_of_ranks("collectives/participants", p)
        i = instances[instance]
        frame = pd.DataFrame({
            "instance": instance, "name": self._names(i["name_id"]), "op": _categorical(i["op"], _schema.OPS),
            "source": pd.Categorical([_schema.SOURCES.get(int(s), "other") for s in i["source"]]),
            "comm_hash": i["comm_hash"], "seq": i["seq"], "bytes": i["bytes"], "step": i["step"],
            "nonblocking": i["nonblocking"].astype(bool), "rank": p["rank"],
        })
        for column in ("enqueue_ns", "arrival_ns", "start_ns", "end_ns", "wait_ns", "exposed_wait_ns",
                       "exposed_transfer_ns"):
            values = p[column].astype(np.int64)
            frame[column] = pd.arrays.IntegerArray(values, mask=values == _schema.UNKNOWN_NS)
        return frame
