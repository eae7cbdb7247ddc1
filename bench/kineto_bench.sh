#!/usr/bin/env bash
# bench/kineto_bench.sh [RANKSCOPE] [SIZE]: rankscope's Kineto import + HTA-compatible
# report against Holistic Trace Analysis (HTA) on one generated multi-rank trace set.
#
#   RANKSCOPE  rankscope binary (default: build/coordinator/rankscope)
#   SIZE       RANKS:EVENTS_PER_RANK, or a preset: small (4:100000, seconds),
#              default (8:500000, 4 M events, about 1.5 min of HTA on the 2-core VM),
#              large (16:1000000, 16 M events, 4 GB of JSON: HTA needs roughly 8 min and
#              6 GiB, extrapolated from 16:400000 = 186 s, 2.5 GiB; not run here)
#              (measured 2026-11-22, this VM: default = 3.9 M events, 980 MB, HTA 0.5.0 93 s,
#              1.7 GiB peak summed over its fork()ed workers)
#
# One run: generates the set (bench/make_kineto_trace.py, deterministic), then, one after
# the other on the same files,
#   /usr/bin/time -v RANKSCOPE import-kineto FILES... -o OUT.h5
#   /usr/bin/time -v RANKSCOPE report OUT.h5 --hta-compat --format json -o OUT.json
#   /usr/bin/time -v $HTA_VENV/bin/python bench/hta_measure.py FOLDER
# and prints wall seconds, peak RSS, uncompressed JSON MB/s of each, the ratios
# HTA time / rankscope time and rankscope RSS / HTA RSS, and, where rankscope's JSON
# holds per-rank HTA figures (HTA's names idle_time_pctg ... or rankscope's idle_pct,
# compute_pct, non_compute_pct, comm_comp_overlap_pct, kernel_time_ns, preferring a
# nested "hta" object), their differences from HTA's, and the clock offsets rankscope
# estimated against the ones the generator put in.
#
# Environment:
#   HTA_VENV             virtualenv with holistictraceanalysis (default build/hta-venv, made and
#                        filled from PyPI when missing: HTA is for this benchmark only)
#   KINETO_BENCH_DIR     work folder, kept whole (default: a mktemp folder whose traces and
#                        .h5 are removed at the end; its logs and JSON stay)
#   KINETO_BENCH_SEED    generator seed (default 1)
#   KINETO_BENCH_OFFSETS per-rank clock offsets, generator syntax (default random:250, µs)
#   KINETO_BENCH_STEPS   ProfilerSteps per rank (default 6)
#   KINETO_BENCH_GZIP=1  write rank-N.json.gz instead of .json
#   KINETO_BENCH_EDGE=1  add kernels HTA classes OTHER and sub-microsecond kernels that its
#                        ceil/floor rounding turns into dur -1 (generator --edge-cases)
#   KINETO_BENCH_HTA_ONLY=1  skip rankscope
#   KINETO_BENCH_RANKSCOPE_ONLY=1  skip HTA
# Exit status: 0 when every half asked for ran; 3 when the rankscope half failed or is
# missing (the HTA half is still run and reported); 4 when the HTA half failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rankscope=${1:-$root/build/coordinator/rankscope}
size=${2:-default}
case $size in
  small) size=4:100000 ;;
  default) size=8:500000 ;;
  large) size=16:1000000 ;;
esac
existing=
if [ -d "$size" ]; then
  existing=$(cd "$size" && pwd)
elif ! [[ $size =~ ^[0-9]+:[0-9]+$ ]]; then
  echo "kineto_bench: SIZE must be RANKS:EVENTS_PER_RANK, small|default|large or a folder, got '$size'" >&2
  exit 2
fi
ranks=${size%%:*} per_rank=${size##*:}
hta_venv=${HTA_VENV:-$root/build/hta-venv}
hta_python=$hta_venv/bin/python
if [ "${KINETO_BENCH_RANKSCOPE_ONLY:-0}" != 1 ] && [ ! -x "$hta_python" ]; then
  echo "installing Holistic Trace Analysis into $hta_venv (for this benchmark only)"
  if ! python3 -c 'import ensurepip' 2>/dev/null && [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
  fi
  python3 -m venv "$hta_venv" && "$hta_python" -m pip install -q holistictraceanalysis ||
    echo "kineto_bench: could not install HTA (Debian needs python3-venv)" >&2
fi
seed=${KINETO_BENCH_SEED:-1}
offsets=${KINETO_BENCH_OFFSETS:-random:250}
steps=${KINETO_BENCH_STEPS:-6}
work=${KINETO_BENCH_DIR:-$(mktemp -d /tmp/kineto_bench.XXXXXX)}
mkdir -p "$work"
traces=$work/traces      # only the rank files: HTA loads every *.json / *.gz in the folder
out=$work/out            # everything else
mkdir -p "$out"
gz_flag=()
[ "${KINETO_BENCH_GZIP:-0}" = 1 ] && gz_flag=(--gzip)
[ "${KINETO_BENCH_EDGE:-0}" = 1 ] && gz_flag+=(--edge-cases)

echo "date: $(date -u +%FT%TZ), machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
if [ -n "$existing" ]; then
  echo "traces: $existing"
else
  echo "size: $ranks ranks x $per_rank events/rank, seed $seed, clock offsets '$offsets' us, $steps steps"
fi
echo "work: $work"

# -- 1. generate (or take the traces given) ------------------------------------------------
if [ -n "$existing" ]; then
  traces=$existing
  python3 - "$traces" "$out/manifest.json" <<'EOF'
import glob, gzip, json, os, sys
folder, manifest = sys.argv[1:3]
files = sorted(glob.glob(os.path.join(folder, "*.json")) + glob.glob(os.path.join(folder, "*.json.gz")))
size = events = 0
for f in files:
    text = (gzip.open(f) if f.endswith(".gz") else open(f, "rb")).read()
    size += len(text)
    events += len(json.loads(text)["traceEvents"])
json.dump({"events_total": events, "uncompressed_bytes": size, "out_dir": folder}, open(manifest, "w"))
EOF
  gen_t0=$(date +%s.%N)
else
gen_t0=$(date +%s.%N)
if ! python3 "$root/bench/make_kineto_trace.py" "$traces" --ranks "$ranks" --events-per-rank "$per_rank" \
      --seed "$seed" --clock-offset-us "$offsets" --steps "$steps" "${gz_flag[@]}" \
      --manifest "$out/manifest.json" >"$out/generate.log" 2>&1; then
  echo "kineto_bench: generator failed:" >&2
  cat "$out/generate.log" >&2
  exit 2
fi
fi
gen_t1=$(date +%s.%N)
read -r events bytes < <(python3 -c "import json; m=json.load(open('$out/manifest.json')); print(m['events_total'], m['uncompressed_bytes'])")
mapfile -t files < <(find "$traces" -maxdepth 1 \( -name '*.json' -o -name '*.json.gz' \) | sort -V)
printf "%s: %d files, %d events, %.1f MB uncompressed JSON in %.1f s\n" "$([ -n "$existing" ] && echo read || echo generated)" \
  "${#files[@]}" "$events" "$(python3 -c "print($bytes/1e6)")" "$(python3 -c "print($gen_t1-$gen_t0)")"

# /usr/bin/time -v output -> "wall_s peak_kib exit"
time_fields() {
  python3 - "$1" <<'EOF'
import re, sys
t = open(sys.argv[1], errors="replace").read()
m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t)
w = 0.0
if m:
    for part in m.group(1).split(":"):
        w = w * 60 + float(part)
r = re.search(r"Maximum resident set size \(kbytes\): (\d+)", t)
e = re.search(r"Exit status: (\d+)", t)
print(f"{w:.3f} {r.group(1) if r else 0} {e.group(1) if e else 'na'}")
EOF
}

status=0
rs_ok=0
rs_note=""
# -- 2. rankscope --------------------------------------------------------------------------
if [ "${KINETO_BENCH_HTA_ONLY:-0}" != 1 ]; then
  if [ ! -x "$rankscope" ]; then
    rs_note="rankscope binary not found or not executable: $rankscope"
  else
    /usr/bin/time -v -o "$out/import.time" "$rankscope" import-kineto --overwrite "${files[@]}" -o "$out/out.h5" \
      >"$out/import.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      rs_note="'rankscope import-kineto' failed (exit $rc): $(tail -n 3 "$out/import.log" | tr '\n' ' ')"
    else
      /usr/bin/time -v -o "$out/report.time" "$rankscope" report --overwrite "$out/out.h5" --hta-compat --format json \
        -o "$out/rankscope.json" >"$out/report.log" 2>&1
      rc=$?
      if [ $rc -ne 0 ]; then
        rs_note="'rankscope report --hta-compat' failed (exit $rc): $(tail -n 3 "$out/report.log" | tr '\n' ' ')"
      else
        rs_ok=1
      fi
    fi
  fi
  if [ $rs_ok = 1 ]; then
    read -r imp_wall imp_kib _ < <(time_fields "$out/import.time")
    read -r rep_wall rep_kib _ < <(time_fields "$out/report.time")
  else
    echo "RANKSCOPE: NOT MEASURED - $rs_note" >&2
    status=3
  fi
fi

# -- 3. HTA --------------------------------------------------------------------------------
hta_ok=0
if [ "${KINETO_BENCH_RANKSCOPE_ONLY:-0}" != 1 ]; then
  if [ ! -x "$hta_python" ] || ! "$hta_python" -c "import hta" 2>/dev/null; then
    echo "HTA: NOT MEASURED - no HTA in $hta_venv (python3 -m venv $hta_venv && $hta_venv/bin/pip install holistictraceanalysis)" >&2
    status=4
  else
    /usr/bin/time -v -o "$out/hta.time" "$hta_python" "$root/bench/hta_measure.py" "$traces" \
      -o "$out/hta.json" >/dev/null 2>"$out/hta.log"
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "HTA: FAILED (exit $rc): $(tail -n 5 "$out/hta.log")" >&2
      status=4
    else
      hta_ok=1
      read -r hta_wall hta_kib _ < <(time_fields "$out/hta.time")
    fi
  fi
fi

# -- 4. summary ----------------------------------------------------------------------------
python3 - "$out" "$bytes" "$events" "$rs_ok" "$hta_ok" "${imp_wall:-0}" "${imp_kib:-0}" "${rep_wall:-0}" \
  "${rep_kib:-0}" "${hta_wall:-0}" "${hta_kib:-0}" "$rs_note" <<'EOF'
import json, math, sys
(out, nbytes, events, rs_ok, hta_ok, imp_w, imp_k, rep_w, rep_k, hta_w, hta_k, rs_note) = sys.argv[1:13]
nbytes, events = int(nbytes), int(events)
rs_ok, hta_ok = rs_ok == "1", hta_ok == "1"
imp_w, rep_w, hta_w = float(imp_w), float(rep_w), float(hta_w)
imp_m, rep_m, hta_m = int(imp_k) / 1024, int(rep_k) / 1024, int(hta_k) / 1024
summary = {"events": events, "uncompressed_bytes": nbytes,
           "manifest": json.load(open(f"{out}/manifest.json"))}
rows = []
if rs_ok:
    rows.append(("rankscope import-kineto", imp_w, imp_m))
    rows.append(("rankscope report --hta-compat", rep_w, rep_m))
    rs_w, rs_m = imp_w + rep_w, max(imp_m, rep_m)
    rows.append(("rankscope total", rs_w, rs_m))
    summary["rankscope"] = {"import_wall_s": imp_w, "import_peak_mib": round(imp_m, 1),
                            "report_wall_s": rep_w, "report_peak_mib": round(rep_m, 1),
                            "wall_s": round(rs_w, 3), "peak_mib": round(rs_m, 1)}
else:
    summary["rankscope"] = {"error": rs_note or "skipped"}
hta = None
if hta_ok:
    hta = json.load(open(f"{out}/hta.json"))
    # GNU time's figure is the largest single process; HTA's pool workers run side by side,
    # so the peak is the larger of that and hta_measure's sampled process-tree PSS.
    hta_peak = max(hta_m, hta.get("tree_peak_pss_mib") or 0.0)
    rows.append((f"HTA {hta['hta_version']} (whole process)", hta_w, hta_peak))
    rows.append(("  HTA load+analyses only", hta["wall_s"], None))
    summary["hta"] = {"wall_s": hta_w, "peak_mib": round(hta_peak, 1),
                      "largest_process_maxrss_mib": round(hta_m, 1), **{k: v for k, v in hta.items()
                      if k not in ("per_rank", "files")}}
print()
print(f"{'what':<38} {'wall s':>9} {'peak MiB':>9} {'MB/s':>8} {'M events/s':>11}")
for name, w, m in rows:
    mbs = nbytes / 1e6 / w if w > 0 else float("nan")
    evs = events / 1e6 / w if w > 0 else float("nan")
    print(f"{name:<38} {w:>9.2f} {('%.1f' % m) if m is not None else '':>9} {mbs:>8.1f} {evs:>11.3f}")
if rs_ok and hta_ok:
    tr = hta_w / rs_w if rs_w > 0 else float("inf")
    mr = rs_m / hta_peak if hta_peak > 0 else float("nan")
    print(f"\nHTA time / rankscope time: {tr:.1f}x    rankscope RSS / HTA RSS: {mr:.3f}")
    summary["ratios"] = {"hta_time_over_rankscope_time": round(tr, 2),
                         "rankscope_rss_over_hta_rss": round(mr, 4)}
    # figure comparison, best effort: per-rank dicts (with "rank") holding HTA's names or
    # rankscope's (idle_pct, compute_pct, non_compute_pct, comm_comp_overlap_pct,
    # kernel_time_ns), preferring a nested "hta" dict when there is one
    keys = ("idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg", "comp_comm_overlap_pctg",
            "kernel_time_us")
    alias = {"idle_pct": "idle_time_pctg", "compute_pct": "compute_time_pctg",
             "non_compute_pct": "non_compute_time_pctg", "comm_comp_overlap_pct": "comp_comm_overlap_pctg"}
    try:
        rs = json.load(open(f"{out}/rankscope.json"))
    except Exception as e:  # noqa: BLE001
        rs = None
        print(f"rankscope JSON unreadable: {e}")
    found = {}
    def take(d, rank):
        got = {}
        for k, v in d.items():
            k2 = k if k in keys else alias.get(k)
            if k2 and isinstance(v, (int, float)):
                got[k2] = v
        if isinstance(d.get("kernel_time_ns"), (int, float)):
            got["kernel_time_us"] = d["kernel_time_ns"] / 1000
        if got:
            found.setdefault(int(rank), {}).update(got)
    def walk(o, rank=None):
        if isinstance(o, dict):
            r = o.get("rank", rank)
            if r is not None and isinstance(r, int):
                if isinstance(o.get("hta"), dict):
                    take(o["hta"], r)
                elif int(r) not in found:
                    take(o, r)
            for k, v in o.items():
                if k != "hta":
                    walk(v, r)
        elif isinstance(o, list):
            for v in o:
                walk(v, rank)
    if rs is not None:
        walk(rs)
    if not found:
        print("figures: rankscope JSON has no per-rank HTA figures (idle_pct/compute_pct/...); not compared")
    else:
        worst = 0.0
        worst_kt = 0.0
        diffs = {}
        compared = 0
        for r, h in hta["per_rank"].items():
            for k in keys:
                a, b = h.get(k), found.get(int(r), {}).get(k)
                if a is None or b is None:
                    continue
                compared += 1
                d = abs(float(a) - float(b))
                if k != "kernel_time_us":
                    worst = max(worst, d)
                else:
                    worst_kt = max(worst_kt, d)
                if d > 1e-9:
                    diffs.setdefault(r, {})[k] = {"hta": a, "rankscope": b}
        summary["figure_differences"] = diffs
        print(f"figures vs HTA: {compared} values over {len(found)} ranks: "
              + ("all identical" if not diffs else
                 f"largest |difference| {worst:.2f} percentage points, kernel_time {worst_kt:.0f} us; "
                 f"differing ranks: {sorted(diffs, key=int)[:10]} (details in summary.json)"))
    # clock offsets rankscope estimated vs the generator's (relative to rank 0)
    man = summary["manifest"].get("clock_offset_us") or []
    est = {}
    if rs is not None and isinstance(rs.get("clock"), dict):
        for c in rs["clock"].get("ranks", []):
            if isinstance(c, dict) and "offset_ns" in c:
                est[int(c["rank"])] = c["offset_ns"]
    if est and man and 0 in est:
        errs = [abs((est[r] - est[0]) - (man[r] - man[0]) * 1000) for r in est if r < len(man)]
        print(f"clock offsets vs generator: largest |error| {max(errs):.0f} ns over {len(errs)} ranks")
        summary["clock_offset_max_error_ns"] = max(errs)
if hta_ok:
    print("\nHTA per rank (idle / compute / non-compute % of kernel_time, comm-comp overlap %):")
    for r, v in list(hta["per_rank"].items())[:8]:
        print(f"  rank {r}: {v['idle_time_pctg']} / {v['compute_time_pctg']} / {v['non_compute_time_pctg']}"
              f", kernel_time {v['kernel_time_us']} us, overlap {v.get('comp_comm_overlap_pctg')}")
    if len(hta["per_rank"]) > 8:
        print(f"  ... {len(hta['per_rank']) - 8} more in {out}/hta.json")
if not rs_ok:
    print(f"\nRANKSCOPE: NOT MEASURED - {rs_note or 'skipped (KINETO_BENCH_HTA_ONLY=1)'}")
with open(f"{out}/summary.json", "w") as f:
    json.dump(summary, f, indent=2)
print(f"summary: {out}/summary.json")
EOF

# a folder of our own: drop the bulky parts, keep the logs and JSON (a few KiB)
[ -z "${KINETO_BENCH_DIR:-}" ] && [ -z "$existing" ] && rm -rf "$traces"
[ -z "${KINETO_BENCH_DIR:-}" ] && rm -f "$out/out.h5"
exit $status
