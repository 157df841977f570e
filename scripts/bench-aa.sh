#!/usr/bin/env bash
# A/A stability study: runs examples/perf/aa.yaml N times (default 5) and
# prints, per run, the A/A control of both metrics (median and 95% CI), how
# many rounds had the SUT thread on its CPU throughout, and how much of a
# window it ran; then the spread of the medians over the runs. From each
# run's windows.csv it also recomputes the throughput A/A the way the tool
# did before sandwich.max_lost existed (every saturated round counted), for
# comparison. Root only. SEGCHAIN=path picks the binary (default
# bin/segchain); extra arguments go to `segchain perf run`.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-5}
out=${OUT:-bench-out/aa}
bin=${SEGCHAIN:-bin/segchain}
[ -n "${SEGCHAIN:-}" ] || make -s build
mkdir -p "$out"
for i in $(seq 1 "$n"); do
	"$bin" perf run -f examples/perf/aa.yaml -q --out "$out/run$i" "$@" > "$out/run$i.md" || true
done
python3 - "$out" "$n" <<'PY'
import csv, json, os, statistics as st, sys
out, n = sys.argv[1], int(sys.argv[2])
def shares(path):
    """Median fractions of a window the SUT thread ran, lost (waited for
    its CPU or was stolen) and idled (no work: the generator lost its CPU)."""
    if not os.path.exists(path):
        return ""
    rows = [r for r in csv.DictReader(open(path)) if r["valid"] != "latency"]  # throughput windows only
    b = [float(r["busy"]) for r in rows]
    l = [float(r["lost"]) for r in rows]
    i = [max(0.0, 1 - x - y) for x, y in zip(b, l)]
    return f"{100 * st.median(b):.0f} / {100 * st.median(l):.0f} / {100 * st.median(i):.0f} %"
def old_method(path):
    """Throughput A/A over every saturated round (the pre-max_lost rule)."""
    if not os.path.exists(path):
        return None
    rows = list(csv.DictReader(open(path)))
    ratios = []
    for i in range(1, len(rows) - 1):
        a, x, b = rows[i - 1], rows[i], rows[i + 1]
        if x['arm'] != 'A/A' or a['arm'] != b['arm'] or a['arm'] == 'A/A':
            continue
        if any(r['valid'] not in ('ok', 'disturbed') for r in (a, x, b)):
            continue
        ref = (float(a['rx_pps']) + float(b['rx_pps'])) / 2
        ratios.append(float(x['rx_pps']) / ref)
    return st.median(ratios) if ratios else None
print("| run | A/A cpu (95% CI) | A/A throughput (95% CI) | undisturbed rounds | SUT thread ran / lost / idle (median of windows) | throughput A/A, all rounds (old rule) | physical limit (kpps) |")
print("|---:|---|---|---:|---:|---:|---:|")
cpu, thr, old = [], [], []
for i in range(1, n + 1):
    p = f"{out}/run{i}/report.json"
    if not os.path.exists(p):
        print(f"| {i} | failed | | | | | |"); continue
    r = json.load(open(p))
    c = r["controls"][0]
    cr, tr = c["cpu_ratio"], c["ratio"]
    cpu.append(cr["median"])
    t = "not measurable" if c.get("throughput_inconclusive") else f"{tr['median']:.3f} ({tr['ci95'][0]:.3f}–{tr['ci95'][1]:.3f})"
    if not c.get("throughput_inconclusive") and tr.get("runs", 0) > 0:
        thr.append(tr["median"])
    o = old_method(f"{out}/run{i}/windows.csv")
    if o is not None:
        old.append(o)
    lim = r.get("ceilings", [{}])[0].get("xdp_drop_pps", 0) / 1e3
    # Reports of binaries before max_lost count every round: no split.
    und = f"{tr.get('runs', 0)} of {cr.get('runs', 0)}" if "median_busy" in c else "(all counted)"
    print(f"| {i} | {cr['median']:.3f} ({cr['ci95'][0]:.3f}–{cr['ci95'][1]:.3f}) | {t} | {und} | "
          f"{shares(f'{out}/run{i}/windows.csv')} | {'' if o is None else f'{o:.3f}'} | {lim:.0f} |")
def spread(name, xs):
    if xs:
        print(f"{name}: {len(xs)} runs, medians {min(xs):.3f}–{max(xs):.3f}, largest |1 − median| {max(abs(1 - x) for x in xs):.3f}")
print()
spread("A/A cpu", cpu)
spread("A/A throughput (undisturbed rounds)", thr)
spread("A/A throughput (all rounds, old rule)", old)
PY
