#!/usr/bin/env bash
# O-flag sampling's cost (docs/oam.md, "O-flag sampling"): the web chain's
# throughput with sampling at 1:1000 against without, in one run, with the
# A/A control (off against off), ROUNDS rounds of four one-second arms (the fourth: the marker alone) in
# rotating order (test/oam TestSampleOverheadBench). Root only; brings up
# and removes a lab of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
SEGCHAIN_SAMPLE_BENCH=1 OAM_BENCH_ROUNDS=${ROUNDS:-15} go test -count=1 -v -run "^TestSampleOverheadBench$" ./test/oam
