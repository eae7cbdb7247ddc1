#!/usr/bin/python3
"""Checks an OTF2 archive of `rankscope export --otf2` against its timeline,
reading the archive with OTF2's Python bindings and the timeline with h5py
(no rankscope code on either side):

- every location's Enter and Leave records nest, with times that never go
  back; each region entered and left is one event of the timeline, at the
  event's begin and end (an instant: entered and left at its begin), and
  each selected event of the timeline (counters aside) is one such region, on
  a location of its rank, with the paradigm its kind maps to;
- MPI messages: one send record (MpiSend or MpiIsend) per point-to-point send
  whose receive is in the selection too, one receive record (MpiRecv or
  MpiIrecv) per such receive, and every send paired with a receive by
  (communicator, sender, receiver, tag); nonblocking requests completed;
- MpiCollectiveBegin and MpiCollectiveEnd once per MPI collective of a known
  communicator, their communicator holding the rank;
- the clock properties (ns, offset and length of what was written), and,
  from `otf2-print -A` (which must give no warning), the archive properties
  with the clock bound, and its counts of Enter, Leave and MPI records;
- the exporter's printed counts (processes, locations, slices, instants).

Usage: check_otf2.py TIMELINE ARCHIVE_FOLDER EXPORT_OUTPUT [--ranks 0,2] [--begin NS] [--end NS]
Prints a summary as JSON; exits 1 with the first difference.
"""
import argparse
import collections
import json
import re
import subprocess
import sys

import h5py
import otf2

COUNTER = 16
MPI_KINDS, CUDA_KINDS = {3, 4, 5}, {6, 7, 8, 9, 10, 11, 12, 13, 14}
MPI_COLLECTIVE, MPI_P2P = 4, 5
SEND, RECV = 12, 13
COLLECTIVE_OPS = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}  # AllReduce ... Exscan: those OTF2 has
INCOMPLETE = 1 << 2
UNDEFINED_UINT32 = (1 << 32) - 1  # a collective without a root


def paradigm_of(kind):
    if kind in MPI_KINDS:
        return "MPI"
    return "CUDA" if kind in CUDA_KINDS else "USER"


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def timeline_selection(path, ranks, begin, end):
    """The selected events, per rank, as the exporter selects them."""
    with h5py.File(path, "r") as f:
        rows = f["ranks"][:]
        data, offsets = f["strings/bytes"][:].tobytes(), f["strings/offsets"][:]
        name = lambda i: data[offsets[i]:offsets[i + 1]].decode("utf-8", "replace")
        bound = {int(r["rank"]): int(r["bound_ns"]) for r in f["clock"][:]}
        selected = {}
        for row in rows:
            rank = int(row["rank"])
            if ranks is not None and rank not in ranks:
                continue
            events = f["events"][row["event_offset"]:row["event_offset"] + row["event_count"]]
            keep = (events["end_ns"] >= begin) & (events["begin_ns"] <= end)
            chosen = events[keep]
            if len(chosen) == 0:
                continue
            selected[rank] = [(int(e["kind"]), name(int(e["name_id"])), int(e["begin_ns"]), int(e["end_ns"]),
                               int(e["op"]), int(e["peer"]), int(e["comm_hash"]), int(e["correlation_id"]),
                               int(e["seq"]), int(e["flags"])) for e in chosen if int(e["kind"]) != COUNTER]
        corrected = bool(f.attrs["clock_corrected"])
    return selected, max((bound[r] for r in selected), default=0), corrected


def expected_records(selected):
    regions = collections.Counter()
    sends = collections.Counter()
    receives = collections.Counter()
    collectives = collections.Counter()
    for rank, events in selected.items():
        for kind, name, b, e, *_ in events:
            regions[(rank, name, paradigm_of(kind), b, max(b, e))] += 1
    # A message is written where both its send and its receive are selected and complete.
    complete = [(rank, ev) for rank, events in selected.items() for ev in events
                if ev[0] == MPI_P2P and ev[4] in (SEND, RECV) and not ev[9] & INCOMPLETE and ev[5] >= 0]
    keys = collections.Counter()
    for rank, ev in complete:
        sender, receiver = (rank, ev[5]) if ev[4] == SEND else (ev[5], rank)
        keys[(ev[4], ev[6], sender, receiver, ev[7], ev[8])] += 1
    for rank, ev in complete:
        sender, receiver = (rank, ev[5]) if ev[4] == SEND else (ev[5], rank)
        other = RECV if ev[4] == SEND else SEND
        if keys[(other, ev[6], sender, receiver, ev[7], ev[8])]:
            (sends if ev[4] == SEND else receives)[rank] += 1
    for rank, events in selected.items():
        collectives[rank] += sum(1 for ev in events if ev[0] == MPI_COLLECTIVE and ev[6] != 0 and
                                 ev[4] in COLLECTIVE_OPS and not ev[9] & INCOMPLETE)
    return regions, sends, receives, collectives


def enum_name(value):  # the bindings' enums print as "Paradigm.MPI"
    return str(value).split(".")[-1]


def rank_of(group):
    match = re.fullmatch(r"rank (\d+)( GPU)?", group.name)
    if not match:
        fail(f"location group {group.name!r} is not named after a rank")
    return int(match.group(1))


def read_archive(folder):
    found = {"regions": collections.Counter(), "records": collections.Counter(), "sends": collections.Counter(),
             "receives": collections.Counter(), "collectives": collections.Counter(), "messages": collections.Counter()}
    with otf2.reader.open(f"{folder}/traces.otf2") as trace:
        defs = trace.definitions
        clock = defs.clock_properties
        def world_rank(comm, index):  # a rank within a communicator to the job's (members resolve to locations)
            return rank_of(comm.group.members[index].group)
        stacks, last, requests = collections.defaultdict(list), {}, collections.defaultdict(dict)
        first_ns, last_ns = None, None
        for location, event in trace.events:
            rank = rank_of(location.group)
            kind = type(event).__name__
            found["records"][kind] += 1
            if event.time < last.get(location, 0):
                fail(f"{location.name}: {kind} at {event.time} after {last[location]}")
            last[location] = event.time
            first_ns = event.time if first_ns is None else min(first_ns, event.time)
            last_ns = event.time if last_ns is None else max(last_ns, event.time)
            if kind == "Enter":
                stacks[location].append((event.region, event.time))
            elif kind == "Leave":
                if not stacks[location] or stacks[location][-1][0] != event.region:
                    fail(f"{location.name}: Leave of {event.region.name} at {event.time} without its Enter")
                region, begin = stacks[location].pop()
                found["regions"][(rank, region.name, enum_name(region.paradigm), begin, event.time)] += 1
            elif kind in ("MpiSend", "MpiIsend"):
                found["sends"][rank] += 1
                found["messages"][(event.communicator.name, rank, world_rank(event.communicator, event.receiver),
                                   event.msg_tag)] += 1
                if kind == "MpiIsend":
                    requests[location][event.request_id] = kind
            elif kind in ("MpiRecv", "MpiIrecv"):
                found["receives"][rank] += 1
                found["messages"][(event.communicator.name, world_rank(event.communicator, event.sender), rank,
                                   event.msg_tag)] -= 1
                if kind == "MpiIrecv" and requests[location].pop(event.request_id, None) != "MpiIrecvRequest":
                    fail(f"{location.name}: MpiIrecv of a request never made")
            elif kind == "MpiIrecvRequest":
                requests[location][event.request_id] = kind
            elif kind == "MpiIsendComplete":
                if requests[location].pop(event.request_id, None) != "MpiIsend":
                    fail(f"{location.name}: MpiIsendComplete of a request never made")
            elif kind == "MpiCollectiveBegin":
                found["collectives"][rank] += 1
            elif kind == "MpiCollectiveEnd":
                members = [rank_of(member.group) for member in event.communicator.group.members]
                if event.root != UNDEFINED_UINT32 and event.root >= len(members):
                    fail(f"{location.name}: a collective's root outside its communicator")
                if rank not in members:
                    fail(f"{location.name}: a collective on {event.communicator.name}, which rank {rank} is not in")
        for location, stack in stacks.items():
            if stack:
                fail(f"{location.name}: {len(stack)} regions never left")
        for location, open_requests in requests.items():
            if open_requests:
                fail(f"{location.name}: {len(open_requests)} requests never completed")
        found["clock"] = (clock.timer_resolution, clock.global_offset, clock.trace_length, first_ns, last_ns)
        found["locations"] = len(defs.locations)
        found["process_groups"] = sum(1 for g in defs.location_groups
                                      if g.location_group_type == otf2.LocationGroupType.PROCESS)
        found["location_types"] = collections.Counter(enum_name(loc.type) for loc in defs.locations)
    return found


def otf2_print(folder):
    """Record counts by type and the archive properties, as otf2-print reads them (without a warning)."""
    # -Werror: a definition out of order or a record otf2-print doubts fails the check.
    run = subprocess.run(["otf2-print", "-A", "-Werror", f"{folder}/traces.otf2"], capture_output=True, text=True)
    if run.returncode != 0 or run.stderr:
        fail(f"otf2-print: {run.stderr.strip()[:500]}")
    text = run.stdout
    records = collections.Counter(line.split()[0] for line in text.splitlines()
                                  if re.match(r"^[A-Z_]+ +\d+ +\d+ ", line))
    properties = dict(re.findall(r"^Property name +(\S+)\nProperty value +(.*)$", text, re.M))
    return records, properties


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("timeline")
    parser.add_argument("folder")
    parser.add_argument("export_output")
    parser.add_argument("--ranks")
    parser.add_argument("--begin", type=int, default=-(1 << 63))
    parser.add_argument("--end", type=int, default=(1 << 63) - 1)
    args = parser.parse_args()
    ranks = {int(r) for r in args.ranks.split(",")} if args.ranks else None
    selected, bound_ns, corrected = timeline_selection(args.timeline, ranks, args.begin, args.end)
    regions, sends, receives, collectives = expected_records(selected)
    found = read_archive(args.folder)

    if found["regions"] != regions:
        missing, extra = regions - found["regions"], found["regions"] - regions
        fail(f"regions differ from the timeline's events: missing {list(missing.items())[:3]}, "
             f"extra {list(extra.items())[:3]}")
    for what, expected in (("sends", sends), ("receives", receives), ("collectives", collectives)):
        if +found[what] != +expected:
            fail(f"MPI {what} per rank: archive {dict(found[what])}, timeline {dict(expected)}")
    if +found["messages"] or -found["messages"]:
        fail(f"sends and receives do not pair up: {dict(+found['messages'])} {dict(-found['messages'])}")
    resolution, offset, length, first_ns, last_ns = found["clock"]
    if (resolution, offset, length) != (10**9, first_ns, last_ns - first_ns):
        fail(f"clock properties {found['clock']}")

    records, properties = otf2_print(args.folder)
    for kind in ("ENTER", "LEAVE", "MPI_SEND", "MPI_ISEND", "MPI_ISEND_COMPLETE", "MPI_RECV", "MPI_IRECV_REQUEST",
                 "MPI_IRECV", "MPI_COLLECTIVE_BEGIN", "MPI_COLLECTIVE_END"):
        name = "".join(w.capitalize() for w in kind.lower().split("_"))  # MPI_ISEND: MpiIsend
        if records[kind] != found["records"][name]:
            fail(f"otf2-print counts {records[kind]} {kind}, the bindings {found['records'][name]}")
    if properties.get("RANKSCOPE::CLOCK_BOUND_NS") != str(bound_ns):
        fail(f"clock bound property {properties.get('RANKSCOPE::CLOCK_BOUND_NS')}, the timeline's {bound_ns}")
    if properties.get("RANKSCOPE::CLOCK_CORRECTED", "").lower() != str(corrected).lower():
        fail(f"clock corrected property {properties.get('RANKSCOPE::CLOCK_CORRECTED')}, the timeline's {corrected}")

    line = next((l for l in open(args.export_output) if "(otf2):" in l), None) or fail("no otf2 line printed")
    said = {k: int(re.search(rf"(\d+) {k}\b", line).group(1)) for k in ("ranks", "locations", "slices", "instants")}
    instants = sum(n for (_, _, _, b, e), n in found["regions"].items() if b == e)
    archive = {"processes": found["process_groups"], "locations": found["locations"],
               "slices": sum(found["regions"].values()) - instants, "instants": instants}
    printed = {"processes": said["ranks"], "locations": said["locations"],
               "slices": said["slices"], "instants": said["instants"]}
    if archive != printed or found["process_groups"] != len(selected):
        fail(f"the exporter printed {printed}, the archive holds {archive} ({len(selected)} ranks selected)")
    paradigms = collections.Counter()
    for (_, _, paradigm, _, _), n in found["regions"].items():
        paradigms[paradigm] += n
    print(json.dumps({"ranks": sorted(selected), **archive, "paradigms": paradigms, "sends": sum(sends.values()),
                      "receives": sum(receives.values()), "collectives": sum(collectives.values()),
                      "location_types": found["location_types"], "properties": properties}))


if __name__ == "__main__":
    main()
