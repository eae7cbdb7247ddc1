#!/usr/bin/python3
"""Every clock measurement of a timeline made on test hosts, against the truth.

    clock_truth.py TIMELINE raw|auto SHM_FOLDER UID check BOUND_LIMIT_NS [ERROR_LIMIT_NS]
    clock_truth.py TIMELINE raw|auto SHM_FOLDER UID samples LABEL

The truth: on the kernel's clock (raw), the hosts' offsets, 3 s a host
(scripts/testhosts.sh up --offset-step 3); on the TSC (auto), where each host
calibrated the one counter onto its own kernel clock (the calibration in its
/dev/shm), what host1's calibration reads at the moment a rank's reads its
local time: two calibrations seconds apart differ by tens of microseconds
(bench/results/clock-sync.md), more than the bounds. The hosts share one counter, so
the true drift is 0 on the kernel's clock, the calibrations' rates apart on
the TSC.

check: every measurement within its stated bound of the truth, every bound
and error within the limits, the drift reported within its uncertainty of
the truth's, every rank synchronised, the ranks of a host on
their leader's measurement; prints the largest bound and error per host.
samples: one line per rank off host1, "LABEL HOSTS RANKS_PER_HOST BOUND ERROR
DRIFT_ERROR_PPM DRIFT_UNCERTAINTY_PPM", its worst measurement, and its drift
less the truth's, for bench/clock_hosts.sh.
"""
import sys

import h5py

OFFSET_STEP_NS = 3_000_000_000


def drift_uncertainty_ppm(measured):
    """Two offsets, each within its bound: the slope between the first and the
    last is known to within the sum of their bounds over the time between."""
    span_ns = measured[-1][0] - measured[0][0]
    return (measured[0][1] + measured[-1][1]) / span_ns * 1e6 if span_ns > 0 else float("inf")


def true_drift_ppm(measured):
    """0 on the kernel's clock; on the TSC, the two hosts' calibrations' rates apart."""
    span_ns = measured[-1][0] - measured[0][0]
    return (measured[-1][3] - measured[0][3]) / span_ns * 1e6 if span_ns > 0 else 0.0


def main():
    path, clock_kind, shm, uid, mode = sys.argv[1:6]
    with h5py.File(path, "r") as f:
        host = {int(r["rank"]): r["host"].decode() for r in f["ranks"][:]}
        points = f["clock_points"][:]
        clock = {int(c["rank"]): c for c in f["clock"][:]}
    assert host[0] == "host1", host

    def calibration(name):
        base_tsc, base_ns, q32 = map(int, open(f"{shm}/h{name[4:]}/rankscope-tsc-{uid}").read().split(":")[1:])
        to_ns = lambda tsc: base_ns + ((tsc - base_tsc) * q32 >> 32)
        to_tsc = lambda ns: base_tsc + ((ns - base_ns) << 32) // q32
        return to_ns, to_tsc

    def truth(rank, local_ns):
        if clock_kind == "raw":
            return OFFSET_STEP_NS * (int(host[rank][4:]) - 1)
        reference_ns, _ = calibration("host1")
        _, to_tsc = calibration(host[rank])
        return local_ns - reference_ns(to_tsc(local_ns))

    by_rank = {}
    for p in points:
        r = int(p["rank"])
        true_offset = truth(r, int(p["local_ns"]))
        by_rank.setdefault(r, []).append((int(p["local_ns"]), int(p["bound_ns"]), int(p["offset_ns"]) - true_offset,
                                          true_offset))
    if mode == "samples":
        label = sys.argv[6]
        hosts = len(set(host.values()))
        per_host = len(host) // hosts
        for r, measured in sorted(by_rank.items()):
            if host[r] == "host1":
                continue
            bound, error = max((b, abs(e)) for _, b, e, _ in measured)
            print(label, hosts, per_host, bound, error, float(clock[r]["drift_ppm"]) - true_drift_ppm(measured),
                  drift_uncertainty_ppm(measured))
        return

    bound_limit = int(sys.argv[6])
    error_limit = int(sys.argv[7]) if len(sys.argv) > 7 else None
    worst = {}
    for r, measured in by_rank.items():
        uncertainty, drift, true_drift = drift_uncertainty_ppm(measured), float(clock[r]["drift_ppm"]), true_drift_ppm(measured)
        assert abs(drift - true_drift) <= uncertainty, f"rank {r} on {host[r]}: drift {drift:.3f} ppm, the truth " \
            f"{true_drift:.3f} ppm beyond its uncertainty {uncertainty:.3f} ppm"
        for _, bound, err, _ in measured:
            # 2 ns: the calibrations' rounding, each way.
            assert abs(err) <= bound + 2, f"rank {r} on {host[r]}: off by {err} ns, beyond its bound {bound} ns"
            assert bound <= bound_limit, f"rank {r} on {host[r]}: bound {bound} ns, above {bound_limit} ns"
            assert error_limit is None or abs(err) <= error_limit, \
                f"rank {r} on {host[r]}: off by {err} ns, more than {error_limit} ns"
            worst[host[r]] = max(worst.get(host[r], (0, 0)), (bound, abs(err)))
    assert all(clock[r]["synced"] for r in host), "a rank is not synchronised"
    # The ranks of a host read one clock: they take their leader's measurement.
    measurements = lambda rank: [tuple(p)[1:] for p in points if p["rank"] == rank]
    for r in host:
        leader = min(q for q in host if host[q] == host[r])
        assert measurements(r), f"rank {r} has no measurement"
        assert measurements(r) == measurements(leader), f"rank {r} measured apart from its leader, rank {leader}"
    print("largest bound / error per host (ns):", {h: b for h, b in sorted(worst.items())})


if __name__ == "__main__":
    main()
