#!/usr/bin/env bash
# bgp-failover.sh — how long chain traffic is lost when the active path's
# link fails under routing: bgp (examples/redundant.yaml).
#
#   scripts/bgp-failover.sh [RUNS]        (as root; SEGCHAIN=path/to/segchain)
#   CASES="silent-bfd" scripts/bgp-failover.sh 3    (a subset of the cases)
#
# A sequence-numbered UDP stream (scripts/seqstream.py) at RATE pps (10000)
# goes s → nfv1 → egress → d through chain web, whose first segment ingress
# reaches over r1. Two seconds in, the ingress–r1 link fails:
#   carrier  r1's end is set down: ingress's eth-r1 loses carrier (the
#            agent's link watch reroutes at once)
#   silent   both ends drop every packet they receive (an nftables
#            netdev ingress chain, policy drop), carrier stays: only the
#            BGP hold timer (3 s) notices
#   silent-bfd  the same silent failure in a second lab whose domain runs
#            BFD on every session (routing.bgp.bfd, BFD_MULT x BFD_INTERVAL
#            ms, default 3 x 300): BFD notices (segchain's own on ingress,
#            bfdd on r1)
# and ROUTE is how long until ingress routes nfv1's locator over eth-r2
# (polled every 10 ms); LOST is what the receiver missed and GAP the
# longest run of lost packets, in ms, and GAPAT where that run began, in
# ms into the stream (the receiver waits 8 s for a late packet, longer
# than any outage measured). The link is repaired after 6 s.
# Prints one row per run and case.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
RATE=${RATE:-10000}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-12}
SEGCHAIN=${SEGCHAIN:-./segchain}
CASES=${CASES:-carrier silent silent-bfd}
SUFFIX=$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')
[ -x "$SEGCHAIN" ] || { echo "build segchain first (go build -o segchain ./cmd/segchain) or set SEGCHAIN" >&2; exit 1; }

# Two labs: the example as it is, and the same domain with BFD on every
# session (only what silent-bfd needs is brought up).
LABS=()
BFDFILE=$(mktemp --suffix=.yaml)
BFD_INTERVAL=${BFD_INTERVAL:-300}
BFD_MULT=${BFD_MULT:-3}
sed "s/^    hold: 3\$/    hold: 3\n    bfd: true\n    bfd_interval: $BFD_INTERVAL\n    bfd_multiplier: $BFD_MULT/" examples/redundant.yaml >"$BFDFILE"
grep -q '^    bfd: true$' "$BFDFILE" || { echo "examples/redundant.yaml: no 'hold: 3' line to add bfd after" >&2; exit 1; }
cleanup() {
	for l in "${LABS[@]}"; do
		"$SEGCHAIN" destroy --lab "$l" >/dev/null 2>&1 || true
		"$SEGCHAIN" lab down --lab "$l" >/dev/null 2>&1 || true
	done
	rm -f "$BFDFILE"
}
trap cleanup EXIT
up() { # up LAB FILE
	LABS+=("$1")
	"$SEGCHAIN" lab up -f "$2" --lab "$1" >/dev/null 2>&1
	"$SEGCHAIN" apply -f "$2" --lab "$1" >/dev/null
}
LAB_PLAIN=bgpfo-$SUFFIX
LAB_BFD=bgpfb-$SUFFIX
case " $CASES " in *" carrier "*|*" silent "*) up "$LAB_PLAIN" examples/redundant.yaml ;; esac
case " $CASES " in *" silent-bfd "*) up "$LAB_BFD" "$BFDFILE" ;; esac
LAB=
ns() { echo "sc-$LAB-$1"; }

route_dev() { ip -n "$(ns ingress)" -6 route show proto 199 fc00:2::/64 | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -1; }
wait_dev() { # wait_dev DEV LIMIT_S → ms waited (or -1)
	local start end; start=$(date +%s%N)
	while :; do
		[ "$(route_dev)" = "$1" ] && break
		end=$(date +%s%N)
		if (( (end - start) / 1000000 > $2 * 1000 )); then echo -1; return; fi
		sleep 0.01
	done
	end=$(date +%s%N); echo $(( (end - start) / 1000000 ))
}
for LAB in "${LABS[@]}"; do wait_dev eth-r1 60 >/dev/null; done

fail() {
	case $1 in
	carrier) ip -n "$(ns r1)" link set eth-ingress down ;;
	silent|silent-bfd) blackhole r1 eth-ingress add; blackhole ingress eth-r1 add ;;
	esac
}
blackhole() { # blackhole NODE DEV add|delete
	if [ "$3" = add ]; then
		ip netns exec "$(ns "$1")" nft add table netdev bgpfo
		ip netns exec "$(ns "$1")" nft "add chain netdev bgpfo in { type filter hook ingress device $2 priority 0; policy drop; }"
	else
		ip netns exec "$(ns "$1")" nft delete table netdev bgpfo
	fi
}
repair() {
	case $1 in
	carrier) ip -n "$(ns r1)" link set eth-ingress up ;;
	silent|silent-bfd) blackhole r1 eth-ingress delete; blackhole ingress eth-r1 delete ;;
	esac
}

printf '%-10s %3s %8s %8s %8s %9s %8s\n' CASE RUN SENT LOST GAPms ROUTEms GAPATms
for run in $(seq 1 "$RUNS"); do
	for c in $CASES; do
		case $c in
		carrier|silent) LAB=$LAB_PLAIN ;;
		silent-bfd) LAB=$LAB_BFD ;;
		*) echo "unknown case $c (carrier, silent, silent-bfd)" >&2; exit 1 ;;
		esac
		count=$((RATE * SECONDS_PER_RUN))
		ready=$(mktemp -u)
		out=$(mktemp)
		ip netns exec "$(ns d)" python3 scripts/seqstream.py recv 5001 --ready "$ready" --first 10 --idle 8 >"$out" &
		rpid=$!
		while [ ! -e "$ready" ]; do sleep 0.02; done
		ip netns exec "$(ns s)" python3 scripts/seqstream.py send fc00:4d::d 5001 --count "$count" --rate "$RATE" &
		spid=$!
		sleep 2
		fail "$c"
		ms=$(wait_dev eth-r2 10)
		sleep 6
		repair "$c"
		wait "$spid"; wait "$rpid"
		rm -f "$ready"
		python3 - "$out" "$c" "$run" "$ms" "$RATE" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
rate = int(sys.argv[5])
# Where the longest gap began, in ms into the stream: the failure is at
# 2000, the repair 6 s and the reroute after it.
at = r["gaps"][0][0] * 1000 // rate if r.get("gaps") else -1
print("%-10s %3s %8d %8d %8d %9s %8d" % (sys.argv[2], sys.argv[3], r["sent"], r["lost"], r["longest_gap"] * 1000 // rate, sys.argv[4], at))
EOF
		rm -f "$out"
		wait_dev eth-r1 30 >/dev/null
		sleep 2
	done
done
