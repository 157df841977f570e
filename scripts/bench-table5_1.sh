#!/usr/bin/env bash
# Reproduces the measured table of docs/benchmarks.md (thesis Table 5.1 on
# the built-in netns testbed): runs examples/perf/table5_1.yaml twice (the
# second run checks reproducibility) and leaves report.json, results.csv,
# table.md, windows.csv and PNG/SVG plots per run in OUT (default
# bench-out/), then OUT/summary.md: both runs side by side, the ceilings,
# both A/A controls, the CI widths and the run-to-run agreement. Root only.
# Extra arguments go to `segchain perf run` (e.g. --rounds 80 --sut-nice -20).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out}
exp=${EXP:-examples/perf/table5_1.yaml} # another experiment: same two runs and summary
bin=${SEGCHAIN:-bin/segchain} # SEGCHAIN=path: use that binary, do not build
[ -n "${SEGCHAIN:-}" ] || make -s build
mkdir -p "$out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/load.txt"
for run in 1 2; do
	echo "== $exp, run $run of 2 =="
	# A rejected run (A/A control off by > 3%) exits non-zero: keep going
	# and keep its report, the summary says which runs were valid.
	"$bin" perf run -f "$exp" --out "$out/table5_1-run$run" "$@" \
		> "$out/table5_1-run$run.md" || echo "run $run rejected or failed (exit $?)"
	echo "load after run $run: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"
	cat "$out/table5_1-run$run.md"
done
python3 - "$out" > "$out/summary.md" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
reps = [json.load(open(f"{out}/table5_1-run{i}/report.json")) for i in (1, 2)]
def res(r):
    return {x["name"]: x for x in r["results"]}
a, b = res(reps[0]), res(reps[1])
pct = lambda v: f"{100 * v:.1f}%"
def ci(s):
    return f"{pct(s['median'])} ({100 * s['ci95'][0]:.1f}–{100 * s['ci95'][1]:.1f})" if s else "—"
def thr(x):
    s = x.get("ratio")
    return pct(s["median"]) if s else "—"
def kpps(x):
    s = x.get("throughput_pps")
    if not s:
        return "—"
    v = f"{s['median'] / 1e3:.0f}"
    return f"({v})" if x.get("throughput_disturbed") else v
for r in reps:
    print(f"- run started {r['started']}, took {r['duration']}, valid: {r['valid']}")
print()
print("| Behaviour | R_cpu run 1 (CI95) | R_cpu run 2 (CI95) | throughput ratio run 1 / 2 | SUT ns/packet run 1 / 2 | kpps run 1 / 2 |")
print("|---|---:|---:|---:|---:|---:|")
for name, x in a.items():
    y = b.get(name, {})
    print(f"| {name} | {ci(x.get('cpu_ratio'))} | {ci(y.get('cpu_ratio'))} | {thr(x)} / {thr(y) if y else '—'} | "
          f"{x['ns_per_packet']['median']:.0f} / {y['ns_per_packet']['median'] if y else 0:.0f} | {kpps(x)} / {kpps(y) if y else '—'} |")
print()
print("| | run 1 | run 2 |")
print("|---|---|---|")
cs = [r["controls"][0] for r in reps]
print("| A/A control, CPU ratio | " + " | ".join(f"{c['cpu_ratio']['median']:.3f} ({c['cpu_ratio']['ci95'][0]:.3f}–{c['cpu_ratio']['ci95'][1]:.3f}) {'ok' if c['cpu_valid'] else '> 3% off'}" for c in cs) + " |")
print("| A/A control, throughput ratio | " + " | ".join(
    "not measurable" if c.get("throughput_inconclusive") else f"{c['ratio']['median']:.3f} ({c['ratio']['ci95'][0]:.3f}–{c['ratio']['ci95'][1]:.3f}) {'ok' if c['valid'] else '> 3% off'}"
    for c in cs) + " |")
print("| A/A rounds with the SUT thread on its CPU throughout | " + " | ".join(f"{c['ratio'].get('runs', 0)} of {c['cpu_ratio']['runs']} (busy {100 * c.get('median_busy', 0):.0f}%)" for c in cs) + " |")
ce = [r["ceilings"][0] for r in reps]
print("| physical limit: generator → native XDP_DROP (kpps) | " + " | ".join(f"{c['xdp_drop_pps'] / 1e3:.0f}" for c in ce) + " |")
print("| same, every frame rewritten (kpps) | " + " | ".join(f"{c.get('xdp_drop_rewrite_pps', 0) / 1e3:.0f}" for c in ce) + " |")
print("| generator → SUT stack + tc drop (kpps) | " + " | ".join(f"{c['stack_drop_pps'] / 1e3:.0f}" for c in ce) + " |")
def widths(res, key):
    w = {n: (x[key]["ci95"][1] - x[key]["ci95"][0]) / 2 for n, x in res.items() if n != reps[0]["baseline"] and x.get(key)}
    if not w:
        return "—"
    worst = max(w, key=w.get)
    return f"±{100 * st.median(w.values()):.1f} % / ±{100 * w[worst]:.1f} % ({worst})"
print("| CI95 half-width of R_cpu: median / widest | " + " | ".join(widths(res(r), "cpu_ratio") for r in reps) + " |")
print("| CI95 half-width of the throughput ratio: median / widest | " + " | ".join(widths(res(r), "ratio") for r in reps) + " |")
print()
d = [abs(a[n]["cpu_ratio"]["median"] - b[n]["cpu_ratio"]["median"]) for n in a if n in b and n != reps[0]["baseline"] and a[n].get("cpu_ratio") and b[n].get("cpu_ratio")]
inside = sum(1 for n in a if n in b and n != reps[0]["baseline"] and a[n]["cpu_ratio"]["ci95"][0] <= b[n]["cpu_ratio"]["median"] <= a[n]["cpu_ratio"]["ci95"][1])
overlap = sum(1 for n in a if n in b and n != reps[0]["baseline"] and a[n]["cpu_ratio"]["ci95"][0] <= b[n]["cpu_ratio"]["ci95"][1] and b[n]["cpu_ratio"]["ci95"][0] <= a[n]["cpu_ratio"]["ci95"][1])
if d:
    print(f"Run-to-run agreement of R_cpu: median |Δ| {100 * st.median(d):.1f} points, max {100 * max(d):.1f}; "
          f"{inside} of {len(d)} run-2 medians inside the run-1 CI; CIs overlap for {overlap} of {len(d)}.")
dt = [abs(a[n]["ratio"]["median"] - b[n]["ratio"]["median"]) for n in a if n in b and n != reps[0]["baseline"] and a[n].get("ratio") and b[n].get("ratio")]
if dt:
    print(f"Run-to-run agreement of the throughput ratio: median |Δ| {100 * st.median(dt):.1f} points, max {100 * max(dt):.1f} ({len(dt)} behaviours with both).")
for r in reps:
    for s in r.get("skipped", []):
        print(f"- skipped {s['behavior']}: {s['reason']}")
    break
PY
cat "$out/summary.md"
