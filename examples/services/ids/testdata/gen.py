#!/usr/bin/env python3
"""Writes srv6.pcap: SRv6 traffic as it reaches an IDS bound to the SID
fc00:2::f1:0/112 (ARGS in the low 16 bits). Run from this directory:

    python3 gen.py

Each packet's comment below says which rules of ../rules/example.rules it
should fire; ids_test.go checks exactly that."""
from scapy.all import IP, IPv6, IPv6ExtHdrSegmentRouting, TCP, UDP, ICMP, Raw, wrpcap, DNS, DNSQR

SRC = "fc00:1::1"           # ingress (H.Encaps) node
SID = "fc00:2::f1:0"        # the IDS's SID, ARGS 0
LAST = "fc00:3::d6"         # egress End.DT6


def srv6(inner, nh, sid=SID, segs=None, sl=1):
    segs = segs or [LAST, sid]   # SRH order: [0] is the last segment
    return (IPv6(src=SRC, dst=segs[sl])
            / IPv6ExtHdrSegmentRouting(addresses=segs, segleft=sl, lastentry=len(segs) - 1, nh=nh)
            / inner)


web6 = IPv6(src="2001:db8:a::10", dst="2001:db8:b::80")
web4 = IP(src="10.0.1.10", dst="10.0.2.80")
pkts = [
    # 0: IPv6 inner, HTTP request for /etc/passwd -> sid 1000001 (alert)
    srv6(web6 / TCP(sport=40000, dport=80, flags="PA") / Raw(b"GET /etc/passwd HTTP/1.1\r\nHost: b\r\n\r\n"), 41),
    # 1: IPv6 inner, benign request -> nothing
    srv6(web6 / TCP(sport=40001, dport=80, flags="PA") / Raw(b"GET /index.html HTTP/1.1\r\nHost: b\r\n\r\n"), 41),
    # 2: IPv4 inner, sqlmap user agent (mixed case) -> sid 1000002 (drop)
    srv6(web4 / TCP(sport=40002, dport=8080, flags="PA") / Raw(b"GET / HTTP/1.1\r\nUser-Agent: SQLMap/1.7\r\n\r\n"), 4),
    # 3: IPv4 inner, DNS query for evil.example -> sid 1000003 (alert, hex content)
    srv6(IP(src="10.0.1.10", dst="10.0.9.53") / UDP(sport=5353, dport=53) / DNS(rd=1, qd=DNSQR(qname="evil.example")), 4),
    # 4: IPv4 inner ICMP echo -> sid 1000004 (alert icmp)
    srv6(IP(src="10.0.1.10", dst="10.0.2.80") / ICMP(type=8, id=7, seq=1) / Raw(b"ping"), 4),
    # 5: the same /etc/passwd request from the trusted host -> pass rule 1000005 suppresses
    srv6(IPv6(src="2001:db8:a::1", dst="2001:db8:b::80") / TCP(sport=40005, dport=80, flags="PA") / Raw(b"GET /etc/passwd HTTP/1.1\r\n\r\n"), 41),
    # 6: ARGS 0x0bad on the active SID -> sid 1000006 (drop on srv6.args)
    srv6(web6 / TCP(sport=40006, dport=443, flags="PA") / Raw(b"hello"), 41, sid="fc00:2::f1:bad"),
    # 7: a path through the quarantine locator fc00:66::/32 -> sid 1000007 (alert on srv6.segment)
    srv6(web6 / UDP(sport=40007, dport=9999) / Raw(b"data"), 41, segs=[LAST, "fc00:66::1", SID], sl=2),
    # 8: a plain IPv6 packet (no SRH) with /etc/passwd -> sid 1000001 (rules apply to non-SR traffic too)
    IPv6(src="2001:db8:a::10", dst="2001:db8:b::80") / TCP(sport=40008, dport=80, flags="PA") / Raw(b"GET /etc/passwd HTTP/1.1\r\n\r\n"),
]
for i, p in enumerate(pkts):
    p.time = 1764072000 + i   # a fixed epoch + i seconds: stable alert timestamps
wrpcap("srv6.pcap", pkts, linktype=101)  # LINKTYPE_RAW: packets start at the IP header
