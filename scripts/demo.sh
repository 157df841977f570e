#!/usr/bin/env bash
# make demo: bring up the thesis' Fig. 3.1 lab, apply the default domain,
# send ping/TCP/UDP/IPv4 traffic from S to D through the chains (one of them
# through the SR-aware firewall on nfv2, which drops one UDP port), and show
# the SID lists, per-SID and per-rule counters that prove each packet took
# its chain; a forged SRv6 packet from S is dropped at the SR domain
# boundary; finally a second lab (examples/netfilter.yaml) shows End.AN.NF:
# nfv2's own nftables rules drop one UDP port of a chain's inner packets.
# KEEP=1 leaves the labs up afterwards (segchain lab down --lab demo, and
# --lab demo-nf).
set -euo pipefail
cd "$(dirname "$0")/.."
SC=${SC:-bin/segchain}
LAB=${LAB:-demo}
NFLAB=$LAB-nf

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
	if [ "${KEEP:-0}" != 1 ]; then
		step "lab down"
		# destroy first: it also removes the SR proxy's pinned eBPF state.
		for l in "$LAB" "$NFLAB"; do
			"$SC" destroy --lab "$l" >/dev/null 2>&1 || true
			"$SC" lab down --lab "$l" 2>/dev/null || true
		done
	else
		echo; echo "KEEP=1: lab '$LAB' left up. Try: $SC status --lab $LAB; $SC lab down --lab $LAB"
	fi
}

# Labs of these names left by an earlier KEEP=1 demo are ours: replace them.
for l in "$LAB" "$NFLAB"; do
	if "$SC" lab ls -o json 2>/dev/null | python3 -c "import json,sys; sys.exit(0 if any(x.get('name')=='$l' for x in json.load(sys.stdin) or []) else 1)"; then
		"$SC" destroy --lab "$l" >/dev/null 2>&1 || true
		"$SC" lab down --lab "$l"
	fi
done

step "lab up: the thesis' Figure 3.1 network (S, ingress, R1, NFV1, R2, NFV2, egress, D)"
"$SC" lab up --lab "$LAB"
trap cleanup EXIT

step "plan: what apply will install on every node"
"$SC" plan --lab "$LAB" | sed -n '1,400p' | grep -E '^node|route .*seg6|rule|prox' || true

step "apply"
"$SC" apply --lab "$LAB" | tail -n 1
step "apply again: idempotent"
"$SC" apply --lab "$LAB" | tail -n 1

# veth leaves transport checksums to "hardware" that never computes them;
# make the hosts compute them so captures show real checksums.
"$SC" lab exec --lab "$LAB" s -- ethtool -K eth-ingress tx off >/dev/null
"$SC" lab exec --lab "$LAB" d -- ethtool -K eth-egress tx off >/dev/null

step "sf1: an SR-unaware firewall (nftables) behind nfv1's dynamic proxy (End.AD)"
"$SC" lab exec --lab "$LAB" sf1 -- nft -f - <<'EOF'
table inet sf {
	counter fw8080 {}
	chain forward {
		type filter hook forward priority 0; policy accept;
		tcp dport 8080 counter name fw8080 accept
		tcp dport 8081 counter drop
	}
}
EOF
"$SC" lab exec --lab "$LAB" sf1 -- nft list table inet sf

counters() { "$SC" status --lab "$LAB" -o json; }

# udp_verdicts LAB DST PASS DROP: s sends 3 datagrams to each of UDP ports
# PASS and DROP at DST; d counts what arrives on both until 2 s pass
# without one. Succeeds when all of PASS's and none of DROP's arrived.
udp_verdicts() {
	local lab=$1 dst=$2 pass=$3 drop=$4 srv
	"$SC" lab exec --lab "$lab" d -- python3 -c '
import select, socket, sys
pass_, drop = int(sys.argv[1]), int(sys.argv[2])
ss = {}
for p in (pass_, drop):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("::", p)); ss[s] = p
n = {pass_: 0, drop: 0}
while True:
    ready = select.select(list(ss), [], [], 2)[0]
    if not ready:
        break
    for s in ready:
        s.recv(100); n[ss[s]] += 1
print("UDP received at D: port %d: %d datagrams, port %d: %d" % (pass_, n[pass_], drop, n[drop]))
sys.exit(0 if n == {pass_: 3, drop: 0} else 1)
' "$pass" "$drop" &
	srv=$!
	sleep 0.5
	"$SC" lab exec --lab "$lab" s -- python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for i in range(3):
    for p in (int(sys.argv[2]), int(sys.argv[3])):
        s.sendto(b"datagram %d" % i, (sys.argv[1], p)); time.sleep(0.05)
print("sent 3 datagrams each to UDP %s and %s" % (sys.argv[2], sys.argv[3]))
' "$dst" "$pass" "$drop"
	wait "$srv"
}
before=$(counters)

D6=fc00:4d::d
D4=198.18.4.13
step "traffic S -> D: ping6 (chain web, encap), TCP 8080 (chain firewalled, through sf1), UDP 5000-5999 (chain insert6, insert mode), UDP 6000/6666 (chain filtered, SR-aware firewall), ping IPv4 (chain legacy4)"
# segchain dump shows the chain on the wire: one encapsulated echo request
# as nfv1 receives it, annotated with the domain's SIDs.
"$SC" dump --lab "$LAB" -i nfv1:eth-r1 -c 1 -v --domain examples/default.yaml ip6 proto 43 > /tmp/segchain-demo-dump1.txt 2>&1 &
dump1=$!
sleep 0.5
"$SC" lab exec --lab "$LAB" s -- ping -6 -c 5 -i 0.2 -W 2 "$D6"
wait "$dump1" || true
step "segchain dump at nfv1 (eth-r1): the H.Encaps packet of chain web"
cat /tmp/segchain-demo-dump1.txt
"$SC" lab exec --lab "$LAB" d -- python3 -c '
import socket,threading
s=socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::",8080)); s.listen(4)
c,_=s.accept(); data=c.recv(100); c.sendall(b"pong:"+data); c.close()
' &
srv=$!
sleep 0.5
"$SC" lab exec --lab "$LAB" s -- python3 -c '
import socket
c=socket.create_connection(("'"$D6"'",8080),timeout=5); c.sendall(b"hello over SRv6"); print("TCP reply:", c.recv(100).decode())
'
wait "$srv"
step "the TCP exchange went through sf1: the proxy's counters and the firewall's"
"$SC" sid --netns "sc-$LAB-nfv1" show
"$SC" lab exec --lab "$LAB" sf1 -- nft list counter inet sf fw8080
"$SC" lab exec --lab "$LAB" d -- python3 -c '
import socket
s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("::",5001)); s.settimeout(5)
for i in range(3):
    data,addr=s.recvfrom(100); print("UDP received at D:", data.decode(), "from", addr[0])
' &
srv=$!
"$SC" dump --lab "$LAB" -i d:eth-egress -c 1 --domain examples/default.yaml ip6 proto 43 > /tmp/segchain-demo-dump2.txt 2>&1 &
dump2=$!
sleep 0.5
"$SC" lab exec --lab "$LAB" s -- python3 -c '
import socket
s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
for i in range(3): s.sendto(b"datagram %d" % i, ("'"$D6"'",5001))
'
wait "$srv"
wait "$dump2" || true
echo "segchain dump at d: insert mode, the SRH arrives with SL 0 and d as Segment List[0]:"
cat /tmp/segchain-demo-dump2.txt

step "chain filtered: UDP 6000 and 6666 through nfv1-end and nfv2's SR-aware firewall (End.AN.FW)"
echo "nfv2-fw as the domain file configured it (policy drop, two rules):"
"$SC" fw list --netns "sc-$LAB-nfv2"
if udp_verdicts "$LAB" "$D6" 6000 6666; then
	echo "6000 delivered, 6666 dropped by the firewall: as the rules say"
else
	echo "UNEXPECTED: the firewall's verdicts did not match its rules"; exit 1
fi
echo "per-rule counters: rule 1 (basic, the inner packet) dropped 6666, rule 2 (-m srh --srh-psid) accepted 6000:"
"$SC" fw list --netns "sc-$LAB-nfv2"

"$SC" lab exec --lab "$LAB" s -- ping -4 -c 3 -i 0.2 -W 2 "$D4"

after=$(counters)

step "status: chains, SID lists and per-SID counters"
"$SC" status --lab "$LAB"

step "proof: packets counted at each SID during the traffic above"
python3 - "$before" "$after" <<'EOF'
import ipaddress, json, sys
b, a = (json.loads(x) for x in sys.argv[1:3])
def packets(st, node, sid):
    """Packets counted by the local SID entry of node that covers sid."""
    for n in st["nodes"]:
        for s in n.get("sids") or []:
            if n["node"] == node and ipaddress.ip_address(sid) in ipaddress.ip_network(s["sid"]):
                return s.get("packets", 0)
    return 0
ok = True
for ch in a["chains"]:
    print(f"chain {ch['name']} ({ch['mode']}): {ch['match']}")
    for h in ch["hops"]:
        d = packets(a, h["node"], h["sid"]) - packets(b, h["node"], h["sid"])
        print(f"   {h['sid']:<24} {h['node']:<8} {h['behavior']:<8} +{d} packets")
        ok &= d > 0
print("every SID of every chain saw traffic" if ok else "SOME SID SAW NO TRAFFIC")
sys.exit(0 if ok else 1)
EOF

step "SR domain boundary: S forges SRv6 straight to the egress End.DX6 SID of chain web (skipping every service)"
DX6=$("$SC" status --lab "$LAB" -o json | python3 -c 'import json,sys; st=json.load(sys.stdin); print([c for c in st["chains"] if c["name"]=="web"][0]["hops"][-1]["sid"])')
"$SC" lab exec --lab "$LAB" s -- python3 -c "
from scapy.all import IPv6, IPv6ExtHdrSegmentRouting, UDP, send
send(IPv6(src='fc00:1a::a', dst='$DX6')/IPv6ExtHdrSegmentRouting(addresses=['$DX6'], segleft=0, lastentry=0)/IPv6(src='fc00:1a::a', dst='$D6')/UDP(dport=6666), count=5, verbose=0)
print('sent 5 forged packets to $DX6')"
echo "dropped at the ingress' host-facing interface and counted there (docs/security.md):"
"$SC" sid show --netns "sc-$LAB-ingress" | grep boundary

step "End.AN.NF: nfv2's own nftables rule set on the chain's inner packets (examples/netfilter.yaml, a second lab)"
"$SC" lab up --lab "$NFLAB" -f examples/netfilter.yaml >/dev/null
"$SC" apply --lab "$NFLAB" | tail -n 1
echo "the rule set apply loaded into nfv2 (examples/netfilter.nft):"
"$SC" lab exec --lab "$NFLAB" nfv2 -- nft list table inet segchain_nf
echo "chain filtered: fw on nfv1, End.AN.NF on nfv2"
if udp_verdicts "$NFLAB" fc00:4d::d 5000 9999; then
	echo "5000 delivered, 9999 dropped by nfv2's nftables rule: as the rule set says"
else
	echo "UNEXPECTED: netfilter's verdicts did not match the rule set"; exit 1
fi
echo "End.AN.NF's counters (in, accepted, dropped by netfilter) and the rules' own:"
"$SC" sid --netns "sc-$NFLAB-nfv2" show | grep "End.AN.NF args"
"$SC" lab exec --lab "$NFLAB" nfv2 -- nft list chain inet segchain_nf forward | grep counter
