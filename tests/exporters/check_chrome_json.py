#!/usr/bin/env python3
"""Checks a Chrome trace-event JSON file the way trace viewers read it, with
the standard library only (json), independently of the exporter.

    check_chrome_json.py [--summary] trace.json

Checks: the file is one JSON object with a traceEvents list; every process
(pid) has exactly one process_name and no two processes share a pid; every
thread (pid, tid) that holds events has a thread_name; complete ("X") and
B/E slices nest on each thread (a slice that overlaps another without
nesting is an error); every flow id has one "s" and one "f", the start no
later than the finish, each inside a slice of its thread. Times are read as
exact decimals. Exit status 0 without errors, 1 with errors.
--summary prints one JSON object: processes, threads, slices, instants,
counters (samples), counter_tracks, flows (ids), errors.
"""
import argparse
import collections
import decimal
import json
import sys


def check(path):
    errors = []
    with open(path, encoding="utf-8") as f:
        trace = json.load(f, parse_float=decimal.Decimal)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return {"errors": 1}, ["not an object with a traceEvents list"]
    process_names = collections.defaultdict(list)
    thread_names = {}
    slices = collections.defaultdict(list)  # (pid, tid) -> [(begin, end)]
    open_slices = collections.defaultdict(list)  # B events waiting for their E
    flows = collections.defaultdict(list)  # id -> [(phase, pid, tid, ts)]
    counts = collections.Counter()
    counter_tracks = set()
    used_threads = set()
    for event in trace["traceEvents"]:
        phase, pid, tid = event.get("ph"), event.get("pid"), event.get("tid")
        if not isinstance(pid, int) or pid <= 0:
            errors.append(f"event with pid {pid!r}: pids are positive integers")
            continue
        if phase == "M":
            if event.get("name") == "process_name":
                process_names[pid].append(event["args"]["name"])
            elif event.get("name") == "thread_name":
                thread_names[(pid, tid)] = event["args"]["name"]
        elif phase == "X":
            ts, dur = event["ts"], event["dur"]
            if dur < 0:
                errors.append(f"X event {event.get('name')!r} with negative dur on {pid}/{tid}")
            slices[(pid, tid)].append((ts, ts + dur))
            used_threads.add((pid, tid))
            counts["slices"] += 1
        elif phase == "B":
            open_slices[(pid, tid)].append(event["ts"])
            used_threads.add((pid, tid))
            counts["slices"] += 1
        elif phase == "E":
            if not open_slices[(pid, tid)]:
                errors.append(f"E without B on {pid}/{tid} at {event['ts']}")
            else:
                slices[(pid, tid)].append((open_slices[(pid, tid)].pop(), event["ts"]))
        elif phase in ("i", "I"):
            used_threads.add((pid, tid))
            counts["instants"] += 1
        elif phase == "C":
            counter_tracks.add((pid, event.get("name")))
            counts["counters"] += 1
        elif phase in ("s", "f"):
            flows[event["id"]].append((phase, pid, tid, event["ts"]))
        else:
            errors.append(f"unexpected phase {phase!r}")
    for key, left in open_slices.items():
        if left:
            errors.append(f"{len(left)} B events never ended on {key[0]}/{key[1]}")

    pids_in_use = {pid for pid, _ in used_threads} | {pid for pid, _ in counter_tracks}
    for pid in sorted(pids_in_use):
        names = process_names.get(pid, [])
        if len(names) != 1:
            errors.append(f"pid {pid} has {len(names)} process_name records (one per rank expected)")
    if len(set(map(tuple, process_names.values()))) != len(process_names):
        errors.append("two pids carry the same process name")
    for key in sorted(used_threads):
        if key not in thread_names:
            errors.append(f"thread {key[0]}/{key[1]} has events but no thread_name")

    # Nesting per thread: by begin, longer first, as viewers sort them.
    for key, intervals in slices.items():
        intervals.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for begin, end in intervals:
            while stack and stack[-1] <= begin:
                stack.pop()
            if stack and end > stack[-1]:
                errors.append(f"slice [{begin}, {end}] on {key[0]}/{key[1]} overlaps an enclosing one "
                              f"ending at {stack[-1]} without nesting")
            stack.append(end)

    def inside_slice(pid, tid, ts):
        return any(begin <= ts <= end for begin, end in slices.get((pid, tid), ()))

    for flow_id, ends in flows.items():
        phases = sorted(e[0] for e in ends)
        if phases != ["f", "s"]:
            errors.append(f"flow {flow_id} has {phases} (one 's' and one 'f' expected)")
            continue
        start = next(e for e in ends if e[0] == "s")
        finish = next(e for e in ends if e[0] == "f")
        if start[3] > finish[3]:
            errors.append(f"flow {flow_id} finishes ({finish[3]}) before it starts ({start[3]})")
        for phase, pid, tid, ts in ends:
            if not inside_slice(pid, tid, ts):
                errors.append(f"flow {flow_id} '{phase}' at {ts} on {pid}/{tid} is in no slice")

    summary = {"processes": len(process_names), "threads": len(thread_names), "slices": counts["slices"],
               "instants": counts["instants"], "counters": counts["counters"],
               "counter_tracks": len(counter_tracks), "flows": len(flows), "errors": len(errors)}
    return summary, errors


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--summary", action="store_true", help="print one JSON summary object")
    args = parser.parse_args(argv)
    try:
        summary, errors = check(args.trace)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {args.trace}: {e}", file=sys.stderr)
        return 1
    if args.summary:
        print(json.dumps(summary))
    else:
        for message in errors[:50]:
            print(f"error: {message}")
        print(f"{'FAIL' if errors else 'OK'}: {len(errors)} errors ({args.trace})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
