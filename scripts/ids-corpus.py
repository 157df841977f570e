#!/usr/bin/env python3
"""Writes the stateless corpus of the SR-IDS's differential test against
Suricata (internal/ids TestSuricataDifferential, docs/ids.md "Agreement with
Suricata"):

    python3 scripts/ids-corpus.py OUTDIR [--seed N] [--count N]

OUTDIR/plain.pcap  the packets as Suricata reads them (LINKTYPE_RAW)
OUTDIR/srv6.pcap   the same packets as the IDS sees them: each one the inner
                   packet of an SRv6 packet (outer IPv6 + SRH, H.Encaps)
                   whose active segment is the IDS's SID fc00:2::f1:0

Stateless: every packet is a flow of its own (no two packets share their
address pair), so Suricata's per-flow logic (IP-only rules evaluated once
per flow direction, pass verdicts kept for the flow, stream reassembly) sees
one packet per flow, like segchain's per-packet engine. TCP segments carry
no handshake; SYNs carry no payload. The payloads mix fragments that the
rules of internal/ids/testdata/suricata/corpus.rules look for (HTTP request
lines, DNS labels, non-ASCII bytes, vertical tabs, pcre backtracking
traps...) with random filler. Deterministic for a seed: the same bytes
every run."""
import argparse
import os
import random

from scapy.all import (IP, IPv6, IPv6ExtHdrHopByHop, IPv6ExtHdrDestOpt, PadN, IPOption_NOP, IPv6ExtHdrSegmentRouting, TCP, UDP, ICMP, Raw, wrpcap,
                       ICMPv6EchoRequest, ICMPv6EchoReply, ICMPv6DestUnreach, ICMPv6PacketTooBig,
                       ICMPv6TimeExceeded)

SNIPPETS = [
    b"GET /admin/panel HTTP/1.1\r\n", b"GET /index.html HTTP/1.1\r\n", b"GET /../../etc/passwd HTTP/1.0\r\n",
    b"get /admin HTTP/1.1\r\n", b"POST /login HTTP/1.1\r\n", b"post /x HTTP/1.0\r\n",
    b"User-Agent: sqlmap/1.7\r\n", b"user-agent: SQLMap\r\n", b"User-Agent: curl/8.0\r\n",
    b"\x04evil\x07example\x00", b"\x04EVIL\x07Example\x00", b"\x04good\x07example\x00",
    b"malware", b"MalWare!", b"whitelist", b"passwd", b"root", b"rootkit",
    b"x\x0by", b"x y", b"x\ty", b"x\x0cy", b"xy",
    b"a\xc3\xa9b", b"a\xe9b", b"a-b", b"ab",
    b"555-1234", b"12-3456", b"\xd9\xa3\xd9\xa3\xd9\xa3-1234",
    b"id=1&no id=22&ok", b"id=7&ok", b"id=x&ok",
    b"last line\n", b"last line", b"line\n\n",
    b"caf\xc3\xa9!", b"cafe!", b"caf\xe9!", b"CAF\xc9", b"Caf\xe9",
    b"\xff\xfe", b"\xfe\xff",
    b"ABC", b"END", b"ABCEND",
    b"cmd=ls; rm -rf", b"cmd=" + b"x" * 12 + b"; rm", b"cmd=;rm",
    b"ping", b"secret", b"SECRET",
    b"\xde\xad\xbe\xefxx", b"x\xde\xad\xbe\xef", b"\xde\xad\xbe\xef",
    b"SRV6", b"ajb", b"a b", b"aab",
    b"bob@mail.com", b"Hello", b"hello", b"x\xe9y", b"x-y",
]

PATHS = [b"/admin/panel", b"/admin", b"/index.html", b"/../../etc/passwd", b"/a/../b", b"/x?cmd=ls;rm",
         b"/" + b"a" * 30 + b"/admin"]


def http(rng):
    req = rng.choice([b"GET ", b"GET ", b"POST ", b"get "]) + rng.choice(PATHS) + rng.choice([b" HTTP/1.1\r\n", b" HTTP/1.0\r\n"])
    for _ in range(rng.randint(0, 2)):
        req += rng.choice([b"Host: b\r\n", b"User-Agent: sqlmap/1.7\r\n", b"User-Agent: curl/8.0\r\n", b"X: passwd\r\n"])
    return req + b"\r\n"



def payload(rng):
    r = rng.random()
    if r < 0.08:
        return b""
    parts = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.75:
            parts.append(rng.choice(SNIPPETS))
        else:
            parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 24))))
    if rng.random() < 0.3:
        parts.insert(0, rng.choice([b"GET ", b"POST ", b"ABC"]))
    if rng.random() < 0.2:
        parts.append(rng.choice([b"END", b"\n", b"HTTP/1.1", b"line\n"]))
    return b"".join(parts)


def v4(rng):
    r = rng.random()
    if r < 0.45:  # HOME_NET 10.1.0.0/16, its DMZ 10.1.8.0/24 and the trusted 10.1.99.0/24
        third = rng.choice([8, 8, 99, rng.randrange(256), rng.randrange(256)])
        return "10.1.%d.%d" % (third, rng.randrange(1, 255))
    if r < 0.5:
        return "1.2.3.4"
    return rng.choice(["192.0.2.%d", "198.51.100.%d", "203.0.113.%d", "10.2.0.%d"]) % rng.randrange(1, 255)


def v6(rng):
    r = rng.random()
    if r < 0.1:
        return "2001:db8:1::1"
    if r < 0.45:
        return "2001:db8:1::%x" % rng.randrange(2, 0xffff)
    if r < 0.7:
        return "2001:db8:2::%x" % rng.randrange(1, 0xffff)
    return "2001:db9:%x::%x" % (rng.randrange(0xffff), rng.randrange(1, 0xffff))


def tcp_port(rng):
    return rng.choice([80, 8080, 443, 22, 23, 21, 25, rng.randrange(1, 1024), rng.randrange(1024, 65536)])


def udp_port(rng):
    return rng.choice([53, 123, 5000, 5005, 5010, 5011, 161, rng.randrange(1, 1024), rng.randrange(1024, 65536)])


def packet(rng, seen):
    six = rng.random() < 0.45
    while True:
        src, dst = (v6(rng), v6(rng)) if six else (v4(rng), v4(rng))
        key = frozenset((src, dst))
        if src != dst and key not in seen:
            seen.add(key)
            break
    if six:
        ip = IPv6(src=src, dst=dst)
        if rng.random() < 0.08:  # extension headers before the transport
            ip = ip / rng.choice([IPv6ExtHdrHopByHop(), IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\0\0\0\0")])])
    else:
        ip = IP(src=src, dst=dst, options=[IPOption_NOP()] * 4 if rng.random() < 0.08 else [])
    r = rng.random()
    data = payload(rng)
    if r < 0.42:
        flags = rng.choice(["PA", "PA", "PA", "A", "FA", "S", "R"])
        if flags in ("S", "R"):
            data = b""
        elif rng.random() < 0.3:
            data = http(rng)
        dport = tcp_port(rng)
        if data[:4] in (b"GET ", b"get ", b"POST", b"post") and rng.random() < 0.6:
            dport = rng.choice([80, 8080])
        elif b"root" in data and rng.random() < 0.5:
            dport = 23
        opts = [("NOP", None), ("Timestamp", (rng.randrange(1 << 32), 0))] if rng.random() < 0.15 else []
        return ip / TCP(sport=tcp_port(rng), dport=dport, flags=flags, seq=rng.randrange(1 << 32),
                        ack=rng.randrange(1 << 32) if "A" in flags else 0, options=opts) / Raw(data)
    if r < 0.80:
        return ip / UDP(sport=udp_port(rng), dport=udp_port(rng)) / Raw(data)
    if r < 0.95:
        # Errors quote a packet of the reverse flow.
        quoted = (IPv6(src=dst, dst=src) if six else IP(src=dst, dst=src)) / UDP(sport=5000, dport=53) / Raw(data[:32])
        k = rng.random()
        if six:
            if k < 0.6:
                return ip / rng.choice([ICMPv6EchoRequest, ICMPv6EchoReply])(id=rng.randrange(65536), seq=1, data=data)
            if k < 0.8:
                return ip / ICMPv6DestUnreach(code=rng.choice([0, 1, 3, 4])) / quoted
            if k < 0.9:
                return ip / ICMPv6PacketTooBig(mtu=1280) / quoted
            return ip / ICMPv6TimeExceeded(code=0) / quoted
        if k < 0.6:
            if rng.random() < 0.3:
                data = rng.choice([b"ping", b"ping " * 3, b"xping"])
            return ip / ICMP(type=rng.choice([8, 0]), id=rng.randrange(65536), seq=1) / Raw(data)
        if k < 0.85:
            return ip / ICMP(type=3, code=rng.choice([0, 1, 3, 4])) / quoted
        return ip / ICMP(type=11, code=0) / quoted
    # Another IP protocol (experimental numbers): no transport header.
    if six:
        ip.nh = rng.choice([253, 254])
    else:
        ip.proto = rng.choice([253, 254])
    return ip / Raw(data or b"malware")


SRC, SID, LAST = "fc00:1::1", "fc00:2::f1:0", "fc00:3::d6"


def srv6(inner):
    nh = 41 if inner.version == 6 else 4
    return (IPv6(src=SRC, dst=SID)
            / IPv6ExtHdrSegmentRouting(addresses=[LAST, SID], segleft=1, lastentry=1, nh=nh)
            / inner)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--count", type=int, default=900)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    seen = set()
    plain, enc = [], []
    for i in range(a.count):
        p = packet(rng, seen)
        p.time = 1764072000 + i
        # Rebuild from bytes: lengths and checksums final, identical in both files.
        raw = bytes(p)
        q = IPv6(raw) if p.version == 6 else IP(raw)
        q.time = p.time
        plain.append(q)
        e = srv6(q)
        e.time = p.time
        enc.append(e)
    os.makedirs(a.outdir, exist_ok=True)
    wrpcap(os.path.join(a.outdir, "plain.pcap"), plain, linktype=101)
    wrpcap(os.path.join(a.outdir, "srv6.pcap"), enc, linktype=101)


if __name__ == "__main__":
    main()
