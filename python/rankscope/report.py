"""The report's JSON (`rankscope report --format json`, docs/report.md) as
frames: every list of records in it, by its path ("ranks", "breakdown",
"top_kernels.by_time", "buckets.buckets", ...), and the lists of records
inside those records with their parent's plain members beside each row
("breakdown.steps": each rank's steps, with the rank)."""

import json
import os
import shutil
import subprocess

import pandas as pd

from .errors import RankscopeError


def _is_records(value):
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _nested_frame(records, key):
    """The rows of each record's list `key`, each with its record's plain
    members (those not already among the row's own)."""
    frames = []
    for record in records:
        rows = record.get(key)
        if not _is_records(rows):
            continue
        frame = pd.json_normalize(rows)
        for name, member in record.items():
            if name != key and not isinstance(member, (dict, list)) and name not in frame.columns:
                frame.insert(0, name, member)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


class Report:
    """A report: `data` the JSON as read; `frames` each list of records in it
    as a DataFrame by its dotted path; report["ranks"] one of them."""

    def __init__(self, data, source):
        self.data, self.source = data, source
        self.frames = {}
        self._collect(data, "")

    def _collect(self, value, path):
        if isinstance(value, dict):
            for key, member in value.items():
                self._collect(member, f"{path}.{key}" if path else key)
        elif _is_records(value):
            self.frames[path] = pd.json_normalize(value)
            nested = {key for item in value for key, member in item.items() if _is_records(member)}
            for key in sorted(nested):
                self.frames[f"{path}.{key}"] = _nested_frame(value, key)

    def __getitem__(self, path):
        if path not in self.frames:
            raise KeyError(f"{self.source}: the report has no list '{path}' (it has: {', '.join(self.frames) or 'none'})")
        return self.frames[path]

    def __repr__(self):
        return f"<rankscope.Report of {self.data.get('file', self.source)}: {', '.join(self.frames)}>"


def report(path, rankscope=None, options=()):
    """The report of `path`: a JSON report written by `rankscope report
    --format json`, or a timeline, which `rankscope report` (the program
    `rankscope`, else $RANKSCOPE, else on PATH) reports on with `options`."""
    path = os.fspath(path)
    with open(path, "rb") as file:
        head = file.read(8)
    if head.startswith(b"{"):
        with open(path, encoding="utf-8") as file:
            try:
                return Report(json.load(file), path)
            except json.JSONDecodeError as error:
                raise RankscopeError(f"{path}: not a JSON report: {error}") from None
    program = rankscope or os.environ.get("RANKSCOPE") or shutil.which("rankscope")
    if not program:
        raise RankscopeError(f"{path}: reporting on a timeline needs the rankscope program: give rankscope=PATH, set "
                             "$RANKSCOPE or put it on PATH")
    done = subprocess.run([program, "report", path, "--format", "json", *options], capture_output=True, text=True)
    if done.returncode != 0:
        raise RankscopeError(f"{path}: rankscope report failed (status {done.returncode}): {done.stderr.strip()}")
    return Report(json.loads(done.stdout), path)
