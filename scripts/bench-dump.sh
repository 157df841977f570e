#!/usr/bin/env bash
# Benchmark (not a test): dissect one N-packet pcap with segchain dump (text,
# text -v, json), tshark and tcpdump, output to /dev/null, and print packets/s.
# Usage: scripts/bench-dump.sh [N=1000000] [WORKDIR]
set -euo pipefail
N=${1:-1000000}
WORK=${2:-$(mktemp -d)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
trap '[ -z "${2:-}" ] && rm -rf "$WORK"' EXIT
mkdir -p "$WORK"
PCAP=$WORK/bench.pcap

echo "building segchain..." >&2
(cd "$ROOT" && go build -o "$WORK/segchain" ./cmd/segchain)

echo "generating $N packets with scapy templates..." >&2
python3 - "$N" "$PCAP" <<'PY'
import sys, struct
from scapy.all import Ether, IPv6, IP, UDP, TCP, ICMPv6EchoRequest, raw
from scapy.layers.inet6 import IPv6ExtHdrSegmentRouting as SRH, IPv6ExtHdrSegmentRoutingTLVPadN as PadN
n, out = int(sys.argv[1]), sys.argv[2]
S, P0, P1, P2 = "fd00::1", "fc00:1::100", "fc00:2::200", "fc00:3::300"
H1, H2 = "2001:db8::1", "2001:db8::2"
E = lambda: Ether(src="02:00:00:00:00:aa", dst="02:00:00:00:00:bb")
# HMAC TLV written by hand (scapy's class has a wrong length field): type 5, len 38, D, key id, 32 octets
hmac = bytes([5, 38, 0x80, 0, 0, 0, 0, 7]) + bytes(range(32))
class T: pass
tpl = [
  E()/IPv6(src=S, dst=P1)/SRH(nh=41, addresses=[P2, P1, P0], segleft=1, tag=7)/IPv6(src=H1, dst=H2)/UDP(sport=1234, dport=53)/(b"x"*64),
  E()/IPv6(src=S, dst=P0)/SRH(nh=4, addresses=[P1, P0])/IP(src="10.0.0.1", dst="10.0.0.2")/TCP(sport=80, dport=4321, flags="PA")/(b"y"*200),
  E()/IPv6(src=H1, dst=P0)/SRH(nh=58, addresses=[H2, P1, P0], tlv_objects=[PadN(padding=b"\0\0\0\0")])/ICMPv6EchoRequest(id=1, seq=2, data=b"z"*32),
  E()/IPv6(src=S, dst=P0)/SRH(nh=143, addresses=[P1, P0])/E()/IPv6(src=H1, dst=H2)/UDP(sport=7, dport=9)/(b"w"*100),
  E()/IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P2, P1], segleft=2, lastentry=1)/IPv6(src=H1, dst=H2)/TCP(sport=443, dport=5555, flags="S"),
  E()/IPv6(src=H1, dst=H2)/UDP(sport=1, dport=2)/(b"p"*20),
]
frames = [raw(p) for p in tpl]
# SRH with an HMAC TLV, built from bytes: fixed header + 1 segment + HMAC TLV
seg = bytes.fromhex("fc000001000000000000000000000100")
srh = bytes([41, (8 + 16 + len(hmac)) // 8 - 1, 4, 0, 0, 0, 0, 0]) + seg + hmac
inner = raw(IPv6(src=H1, dst=H2)/UDP(sport=5, dport=6)/b"h")
ip6 = raw(IPv6(src=S, dst="fc00:1::100", nh=43, plen=len(srh) + len(inner)))
frames.append(raw(E()/IPv6())[:14] + ip6[:40] + srh + inner)
with open(out, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 262144, 1))
    recs = []
    for fr in frames:
        recs.append((len(fr), fr))
    t = 1700000000
    for i in range(n):
        l, fr = recs[i % len(recs)]
        f.write(struct.pack("<IIII", t + i // 1000000, i % 1000000, l, l))
        f.write(fr)
PY
ls -l "$PCAP" >&2

run() { # name, command...: wall time and CPU time (user+sys) of the command
  local name=$1; shift
  /usr/bin/time -o "$WORK/time" -f "%e %U %S" "$@" > /dev/null 2>/dev/null || true
  python3 - "$N" "$name" "$WORK/time" <<'PY'
import sys
n, name = int(sys.argv[1]), sys.argv[2]
e, u, s = (float(x) for x in open(sys.argv[3]).read().split()[-3:])
print(f"| {name} | {e:.2f} | {n/e:,.0f} | {u+s:.2f} | {n/(u+s):,.0f} |")
PY
}
echo "| tool | wall s | packets/s (wall) | CPU s | packets/s (CPU) |"
echo "|---|---:|---:|---:|---:|"
run "segchain dump -r (text)" "$WORK/segchain" dump -r "$PCAP"
run "segchain dump -r -o json" "$WORK/segchain" dump -r "$PCAP" -o json
run "segchain dump -r -v (tree)" "$WORK/segchain" dump -r "$PCAP" -v
run "tcpdump -n -r" tcpdump -n -r "$PCAP"
run "tcpdump -n -v -r" tcpdump -n -v -r "$PCAP"
run "tshark -n -r" tshark -n -r "$PCAP"
