#!/usr/bin/env bash
# change-matrix.sh — packets lost while apply changes a chain (issue 12).
#
# Brings up its own lab (unique name, removed on exit), then for every cell
# of the matrix: applies the "before" domain, starts a sequence-numbered UDP
# stream s -> d through the chain "probe" (scripts/seqstream.py, RATE pps for
# SECONDS s), applies the "after" domain while the stream flows, and counts
# the sequence numbers the receiver never got (lost) or got twice (dup).
#
# Rows: the service changed — native (End / End.X, seg6local routes),
# proxy (End.AD/AS/AM behind the eBPF SR proxy, SF sf1), same-node (a proxy
# right after a native End of its node: the service loop comes and goes)
# and firewall (End.AN.FW, the eBPF SR-aware firewall). Columns: add, remove, reorder,
# SID change, type change, parameter change (several type changes for the
# proxy). The target is 0 lost in every cell.
#
# usage: sudo scripts/change-matrix.sh [-r RATE] [-s SECONDS] [-o CELL-REGEX] [-k]
#   -k keeps the lab (for inspection); its name is printed.
# env: SEGCHAIN_BIN=path to a built binary ($SEGCHAIN also works; default:
#      bin/segchain, built only when older than the sources:
#      scripts/segchain-bin.sh)
set -euo pipefail
RATE=2000 SECONDS_=3 ONLY=. KEEP=0
while getopts "r:s:o:k" o; do
	case $o in
	r) RATE=$OPTARG ;;
	s) SECONDS_=$OPTARG ;;
	o) ONLY=$OPTARG ;;
	k) KEEP=1 ;;
	*) sed -n '2,21p' "$0"; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "change-matrix: needs root (namespaces)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/change-matrix.XXXXXX)
lab="cm$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
. "$here/segchain-bin.sh"
segchain_bin
bin=$BIN
cleanup() {
	[ -n "${rpid:-}" ] && kill "$rpid" 2>/dev/null || true
	if [ "$KEEP" = 0 ]; then
		"$bin" lab down --lab "$lab" >/dev/null 2>&1 || true
	else
		echo "lab kept: $lab (segchain lab down --lab $lab)"
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# The cells: python writes <cell>.before.yaml / <cell>.after.yaml (JSON,
# which is YAML) and the cell list.
python3 - "$work" "$ONLY" <<'PY'
import copy, json, re, sys
work, only = sys.argv[1], sys.argv[2]
base = {
  "name": "changematrix",
  "nodes": {
    "s": {"role": "host", "id": 0xa}, "ingress": {"role": "ingress", "id": 1, "locator": "fc00:1::/64"},
    "r1": {"role": "router", "id": 5}, "nfv1": {"role": "nfv", "id": 2, "locator": "fc00:2::/64"},
    "r2": {"role": "router", "id": 6}, "nfv2": {"role": "nfv", "id": 3, "locator": "fc00:3::/64"},
    "egress": {"role": "egress", "id": 4, "locator": "fc00:4::/64"}, "d": {"role": "host", "id": 0xd},
    "sf1": {"role": "sf", "id": 7}},
  "links": [
    {"endpoints": ["s:eth-ingress", "ingress:eth-s"], "ipv6": "fc00:1a::/64"},
    {"endpoints": ["ingress:eth-r1", "r1:eth-ingress"], "ipv6": "fc00:15::/64"},
    {"endpoints": ["r1:eth-nfv1", "nfv1:eth-r1"], "ipv6": "fc00:25::/64"},
    {"endpoints": ["nfv1:eth-r2", "r2:eth-nfv1"], "ipv6": "fc00:26::/64"},
    {"endpoints": ["r2:eth-nfv2", "nfv2:eth-r2"], "ipv6": "fc00:36::/64"},
    {"endpoints": ["nfv2:eth-egress", "egress:eth-nfv2"], "ipv6": "fc00:34::/64"},
    {"endpoints": ["egress:eth-d", "d:eth-egress"], "ipv6": "fc00:4d::/64"},
    {"endpoints": ["nfv1:eth-sf1", "sf1:eth-nfv1"], "ipv6": "fc00:27::/64"}],
  "routing": {"mode": "static"},
}
END1 = {"node": "nfv1", "behavior": "End", "function": "0x11"}
END2 = {"node": "nfv2", "behavior": "End", "function": "0x12"}
ENDX = {"node": "nfv1", "behavior": "End.X", "function": "0x11", "nh6": "fc00:26::6", "oif": "eth-r2"}
def px(kind, **kw):
    s = {"node": "nfv1", "kind": "sr-unaware", "proxy": kind, "function": "0x21", "iface_out": "eth-sf1", "iface_in": "eth-sf1"}
    if kind != "masquerading":
        s["inner"] = "ipv6"
    s["sf_nh6"] = "fc00:27::7"
    s.update(kw)
    return s
def fw(**kw):
    s = {"node": "nfv2", "kind": "firewall", "function": "0xf1",
         "firewall": {"policy": "accept", "rules": ["-p udp --dport 9 -j DROP"]}}
    s.update(kw)
    return s
def dom(services, chain):
    d = copy.deepcopy(base)
    d["services"] = {k: v for k, v in (("nfv1-end", END1), ("nfv2-end", END2)) if k in chain}
    d["services"].update(services)
    d["chains"] = {"probe": {"ingress": "ingress", "mode": "encap",
        "match": {"dst": "fc00:4d::/64", "proto": "udp", "dport": "7100"},
        "services": chain, "egress": {"node": "egress", "behavior": "End.DX6", "nh6": "fc00:4d::d"}}}
    return d
P = lambda k, **kw: {"px": px(k, **kw)}
cells = [
  ("native", "add",     dom({}, ["nfv1-end"]), dom({}, ["nfv1-end", "nfv2-end"])),
  ("native", "remove",  dom({}, ["nfv1-end", "nfv2-end"]), dom({}, ["nfv1-end"])),
  ("native", "reorder", dom({}, ["nfv1-end", "nfv2-end"]), dom({}, ["nfv2-end", "nfv1-end"])),
  ("native", "sid",     dom({}, ["nfv1-end", "nfv2-end"]), dom({"nfv1-end": dict(END1, function="0x13")}, ["nfv1-end", "nfv2-end"])),
  ("native", "type End>End.X", dom({}, ["nfv1-end", "nfv2-end"]), dom({"nfv1-end": ENDX}, ["nfv1-end", "nfv2-end"])),
  ("native", "param",   dom({"nfv1-end": ENDX}, ["nfv1-end", "nfv2-end"]), dom({"nfv1-end": {k: v for k, v in ENDX.items() if k != "oif"}}, ["nfv1-end", "nfv2-end"])),
  ("proxy", "add",      dom({}, ["nfv2-end"]), dom(P("dynamic"), ["px", "nfv2-end"])),
  ("proxy", "remove",   dom(P("dynamic"), ["px", "nfv2-end"]), dom({}, ["nfv2-end"])),
  ("proxy", "reorder",  dom(P("dynamic"), ["px", "nfv2-end"]), dom(P("dynamic"), ["nfv2-end", "px"])),
  ("proxy", "sid",      dom(P("dynamic"), ["px", "nfv2-end"]), dom(P("dynamic", function="0x22"), ["px", "nfv2-end"])),
  ("proxy", "sid static", dom(P("static"), ["px", "nfv2-end"]), dom(P("static", function="0x22"), ["px", "nfv2-end"])),
  ("proxy", "type dyn>static", dom(P("dynamic"), ["px", "nfv2-end"]), dom(P("static"), ["px", "nfv2-end"])),
  ("proxy", "type static>dyn", dom(P("static"), ["px", "nfv2-end"]), dom(P("dynamic"), ["px", "nfv2-end"])),
  ("proxy", "type dyn>flow", dom(P("dynamic"), ["px", "nfv2-end"]), dom(P("dynamic-flow", flow_timeout=30), ["px", "nfv2-end"])),
  ("proxy", "type flow>dyn", dom(P("dynamic-flow", flow_timeout=30), ["px", "nfv2-end"]), dom(P("dynamic"), ["px", "nfv2-end"])),
  ("proxy", "type dyn>masq", dom(P("dynamic"), ["px", "nfv2-end"]), dom(P("masquerading"), ["px", "nfv2-end"])),
  ("proxy", "type masq>dyn", dom(P("masquerading"), ["px", "nfv2-end"]), dom(P("dynamic"), ["px", "nfv2-end"])),
  ("proxy", "type+sid", dom(P("dynamic"), ["px", "nfv2-end"]), dom(P("static", function="0x22"), ["px", "nfv2-end"])),
  ("proxy", "param", dom(P("dynamic-flow", flow_timeout=30), ["px", "nfv2-end"]), dom(P("dynamic-flow", flow_timeout=60, flow_max=1000), ["px", "nfv2-end"])),
  ("same-node", "add End>proxy", dom({}, ["nfv1-end", "nfv2-end"]), dom(P("dynamic"), ["nfv1-end", "px", "nfv2-end"])),
  ("same-node", "remove End>proxy", dom(P("dynamic"), ["nfv1-end", "px", "nfv2-end"]), dom({}, ["nfv1-end", "nfv2-end"])),
  ("same-node", "reorder", dom(P("dynamic"), ["nfv1-end", "px", "nfv2-end"]), dom(P("dynamic"), ["px", "nfv1-end", "nfv2-end"])),
  ("same-node", "proxy sid", dom(P("dynamic"), ["nfv1-end", "px", "nfv2-end"]), dom(P("dynamic", function="0x22"), ["nfv1-end", "px", "nfv2-end"])),
  ("firewall", "add",     dom({}, ["nfv1-end"]), dom({"fw": fw()}, ["nfv1-end", "fw"])),
  ("firewall", "remove",  dom({"fw": fw()}, ["nfv1-end", "fw"]), dom({}, ["nfv1-end"])),
  ("firewall", "reorder", dom({"fw": fw()}, ["nfv1-end", "fw"]), dom({"fw": fw()}, ["fw", "nfv1-end"])),
  ("firewall", "sid",     dom({"fw": fw()}, ["nfv1-end", "fw"]), dom({"fw": fw(function="0xf3")}, ["nfv1-end", "fw"])),
  ("firewall", "type fw>End", dom({"fw": fw()}, ["nfv1-end", "fw"]), dom({"fw": {"node": "nfv2", "behavior": "End", "function": "0xf1"}}, ["nfv1-end", "fw"])),
  ("firewall", "type End>fw", dom({"fw": {"node": "nfv2", "behavior": "End", "function": "0xf1"}}, ["nfv1-end", "fw"]), dom({"fw": fw()}, ["nfv1-end", "fw"])),
  ("firewall", "param",   dom({"fw": fw()}, ["nfv1-end", "fw"]), dom({"fw": fw(firewall={"policy": "drop", "rules": ["-p udp --dport 7100 -j ACCEPT"]})}, ["nfv1-end", "fw"])),
]
with open(f"{work}/cells", "w") as out:
    for i, (row, col, a, b) in enumerate(cells):
        name = f"{row}/{col}"
        if not re.search(only, name):
            continue
        for tag, d in (("before", a), ("after", b)):
            json.dump(d, open(f"{work}/{i}.{tag}.yaml", "w"), indent=1)
        out.write(f"{i}\t{row}\t{col}\n")
    json.dump(dom({}, ["nfv1-end"]), open(f"{work}/base.yaml", "w"), indent=1)
PY

"$bin" lab up -f "$work/base.yaml" --lab "$lab" >/dev/null
ns() { echo "sc-$lab-$1"; }
count=$((RATE * SECONDS_))
printf "%-10s %-18s %7s %6s %5s %8s %7s %s\n" ROW CHANGE SENT LOST DUP MAXGAP DRIFT "APPLY"
total_lost=0
while IFS=$'\t' read -r i row col; do
	if ! "$bin" apply -f "$work/$i.before.yaml" --lab "$lab" >"$work/$i.before.log" 2>&1; then
		printf "%-10s %-18s before: apply failed: %s\n" "$row" "$col" "$(tail -1 "$work/$i.before.log")"
		continue
	fi
	rm -f "$work/ready"
	ip netns exec "$(ns d)" python3 "$here/seqstream.py" recv 7100 --ready "$work/ready" --first 10 --idle 1.5 >"$work/$i.recv" 2>&1 &
	rpid=$!
	while [ ! -e "$work/ready" ]; do sleep 0.05; done
	ip netns exec "$(ns s)" python3 "$here/seqstream.py" send fc00:4d::d 7100 --count "$count" --rate "$RATE" &
	spid=$!
	sleep "$(python3 -c "print($SECONDS_/3)")"
	if "$bin" apply -f "$work/$i.after.yaml" --lab "$lab" >"$work/$i.after.log" 2>&1; then
		ap="ok ($(grep -o 'applied [0-9]* change' "$work/$i.after.log" | grep -o '[0-9]*') changes)"
	else
		ap="FAILED: $(grep -v '^ ' "$work/$i.after.log" | tail -1)"
	fi
	wait "$spid"
	wait "$rpid" || true
	rpid=
	r=$(cat "$work/$i.recv")
	read -r sent lost dup gap < <(python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(r['sent'] or $count, ($count - r['unique']) if r['sent'] < $count else r['lost'], r['duplicates'], r['longest_gap'])" "$r" 2>/dev/null || echo "$count $count 0 $count")
	total_lost=$((total_lost + lost))
	# DRIFT: what a plan of the after file still finds (0: apply left the
	# domain exactly as the file says).
	drift=$("$bin" plan -f "$work/$i.after.yaml" --lab "$lab" 2>&1 | grep -o '^[0-9]* change' | grep -o '[0-9]*' || echo 0)
	printf "%-10s %-18s %7s %6s %5s %8s %7s %s\n" "$row" "$col" "$sent" "$lost" "$dup" "$gap" "$drift" "$ap"
done <"$work/cells"
echo "total lost: $total_lost (rate $RATE pps, $count packets per cell)"
