#!/usr/bin/env bash
# The Linux column of the thesis' Table 5.2 as PDR@2% (exponential then
# binary search, median of 3 trials per step) plus saturated ratios, on the
# built-in netns testbed. Results in OUT (default bench-out/). Root only.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out}
make -s build
mkdir -p "$out"
bin/segchain perf run -f examples/perf/table5_2.yaml --out "$out/table5_2" "$@" | tee "$out/table5_2.md"
