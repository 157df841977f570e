#!/bin/sh
# trace-bench.sh [LAB] [N] [TAP]: the segchain trace benchmark of docs/oam.md
# (TAP: tracepoint, the default, or tcx). AGENTS=1: the lab runs an agent
# per node (lab up --agents) and trace goes through them (mTLS).
# Brings up the default domain in lab LAB (default tb<pid>), applies it,
# traces chain firewalled (headend, End.AD proxy, its SF, End, End.DX6,
# delivery) N times (default 20) and prints each trace's total and phases,
# then min/median/max. Columns: took_ms attach_ms probe_ms
# detach_ms min_held_us delivered. Takes its lab down on exit, even on failure.
set -eu
LAB=${1:-tb$$}
N=${2:-20}
TAP=${3:-tracepoint}
BIN=${SEGCHAIN:-$(mktemp -d)/segchain}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/segchain
trap '"$BIN" lab down --lab "$LAB" >/dev/null 2>&1 || true' EXIT
"$BIN" lab up --lab "$LAB" ${AGENTS:+--agents} >/dev/null
"$BIN" apply --lab "$LAB" >/dev/null
i=0
while [ "$i" -lt "$N" ]; do
	"$BIN" trace --lab "$LAB" --tap "$TAP" firewalled -o json |
		jq -r '[.took_ms, .phases.attach_ms, .phases.probe_ms, .phases.detach_ms,
		        ([.hops[].held_us | select(. != null)] | min), .delivered] | @tsv'
	i=$((i + 1))
done | tee /dev/stderr | sort -n | awk '{ t[NR] = $1 } END {
	printf "trace total ms: min %.1f median %.1f max %.1f (%d runs)\n", t[1], t[int((NR + 1) / 2)], t[NR], NR }'
