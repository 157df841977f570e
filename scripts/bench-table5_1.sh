#!/usr/bin/env bash
# Reproduces the measured table of docs/benchmarks.md (thesis Table 5.1 on
# the built-in netns testbed): runs examples/perf/table5_1.yaml twice (the
# second run checks reproducibility) and leaves report.json, results.csv,
# table.md and PNG/SVG plots per run in OUT (default bench-out/). Root only.
# Extra arguments go to `segchain perf run` (e.g. --rounds 40 --sut-nice -20).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out}
make -s build
mkdir -p "$out"
for run in 1 2; do
	echo "== table5_1, run $run of 2 =="
	# A rejected run (A/A control off by > 3%) exits non-zero: keep going
	# and keep its report, the doc says which runs were valid.
	bin/segchain perf run -f examples/perf/table5_1.yaml --out "$out/table5_1-run$run" "$@" \
		> "$out/table5_1-run$run.md" || echo "run $run rejected or failed (exit $?)"
	cat "$out/table5_1-run$run.md"
done
