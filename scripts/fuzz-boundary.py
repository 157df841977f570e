#!/usr/bin/env python3
"""Differential fuzzer of the SR domain boundary (issue 24).

Sends structure-aware, mutated Ethernet frames into a running, applied lab
from a node outside the domain (host `s`, default) or from an SF (`--from
sf1`), with a capture on every interface of every other node of the lab, and
checks the boundary's property:

  nothing addressed into the domain (a SID that is not external, the SID
  space, a domain node's address, an SF's address) gets past the interface
  where it enters the domain, no SID processes it, and the drops are counted.

Frames addressed to an outside host (e.g. `d`) are ordinary traffic the
ingress classifies: they may cross the domain and are reported as "legit".
Plain traffic to a node's address may travel to that node ("to-node"), not
past it. From an SF, the proxy's outbound path re-encapsulates whatever the
SF sends (End.AS/End.AD's design): there only SRv6 into the SID space must
stop, and the captures alone judge ("SF output" is not a violation).
An SF's own address is inside the domain too (class `sf`): an SF behind a
proxy is reached through its proxy only, so from outside every frame to it
must stop at the entry interface and be counted (to-sf), like one to the SID
space. --known CLASS counts the crossings of a class with a reported, not
yet fixed bypass apart (none is known today).

Every frame carries a marker in its payload, b"SCFZ" + run id (4 bytes) +
frame index (4 bytes), so that a copy seen anywhere (even quoted in an ICMP
error or encapsulated) is matched to the frame sent. A frame seen past the
entry interface is a violation (exit status 1) and is written to the corpus
directory (--corpus) as one .hex file with comments saying what it is.

The oracle is not segchain's code: the class of a frame is derived from its
final bytes by kernel_view() below, which follows what Linux does with a
received frame (priority tags stripped, a VLAN tag with a non-zero VID and
no VLAN device turns the frame into PACKET_OTHERHOST, which ip6_rcv drops)
and the lab's addresses (`ip -j addr` in every namespace), not the
boundary's maps.

Accounting, per phase (a phase is one target class, sent as one batch with
counter snapshots around it): frames sent; the boundary's drops per node,
interface and reason (`segchain status -o json`); frames the kernel dropped
at the entry interface before any TCX program (veth rx/tx drops); the entry
node's IPv6/IPv4 MIB counters (frames that passed the boundary and were
handled by the stack: delivered locally, dropped with a header error, no
route, ...); SID and proxy packet counters (a domain-bound phase must not
move any); and frames seen per node. `must-drop` is the number of frames
whose kernel view is IPv6 to a non-external SID or locator: each of those
must show up as a boundary drop.

Usage (needs root, scapy; the lab must be up and applied):
  segchain lab up --lab h3fz && segchain apply --lab h3fz
  scripts/fuzz-boundary.py --lab h3fz --count 100000 --seed 1
  scripts/fuzz-boundary.py --lab h3fz --from sf1 --prime s,fc00:4d::d,8080 --count 20000   # lab with security.boundary.interfaces: [nfv1:eth-sf1]
  scripts/fuzz-boundary.py --lab h3fz --count 5000 --json         # figures as JSON
"""

import argparse
import ctypes
import hashlib
import hmac as hmaclib
import ipaddress
import json
import logging
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

from scapy.all import conf, Ether, Dot1Q, Dot1AD, IPv6, IP, UDP, TCP, Raw  # noqa: E402
from scapy.layers.inet import IPOption_NOP, IPOption_EOL, IPOption_RR, IPOption_LSRR, IPOption_SSRR, IPOption_Timestamp, IPOption_Router_Alert  # noqa: E402

conf.verb = 0
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # "Found 2 Source Routing Options" is what we want

MARK = b"SCFZ"
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_STATISTICS = 6
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL("libc.so.6", use_errno=True)

# Extension header numbers (RFC 8200 §4, IANA).
HBH, RH, FRAG, DOH, AH, ESP, NONXT, IP6, IP4, UDPN, TCPN, ICMP6 = 0, 43, 44, 60, 51, 50, 59, 41, 4, 17, 6, 58
EXT = {HBH, RH, FRAG, DOH, AH}


# ---------------------------------------------------------------- namespaces

def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + path)
    finally:
        os.close(fd)


class InNetns:
    """Runs a block in a named network namespace (this thread only)."""

    def __init__(self, ns):
        self.ns = ns

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        setns("/run/netns/" + self.ns)

    def __exit__(self, *a):
        if libc.setns(self.home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(self.home)


def sh(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


# ---------------------------------------------------------------- the lab

class Lab:
    """What the fuzzer knows about the lab: namespaces, links, addresses,
    SIDs (from segchain status) and the boundary's external prefixes (from
    segchain plan)."""

    def __init__(self, name, segchain, sender):
        self.name, self.segchain = name, segchain
        st = json.load(open("/run/segchain/labs/%s.json" % name))
        self.ns = st["nodes"]
        self.links = []  # (nodeA, ifA, nodeB, ifB)
        for l in st["links"]:
            a, ia = l["a"].split(":")
            b, ib = l["b"].split(":")
            self.links.append((a, ia, b, ib))
        self.addrs = {}   # node -> [ipaddress]
        self.ifaces = {}  # node -> [ifname]
        self.mac = {}     # (node, if) -> mac bytes
        for n, ns in self.ns.items():
            self.addrs[n], self.ifaces[n] = [], []
            for l in json.loads(sh("ip", "-n", ns, "-j", "addr")):
                if l["ifname"] == "lo":
                    continue
                self.ifaces[n].append(l["ifname"])
                self.mac[(n, l["ifname"])] = bytes.fromhex(l.get("address", "00:00:00:00:00:00").replace(":", ""))
                for a in l.get("addr_info", []):
                    ip = ipaddress.ip_address(a["local"])
                    if not ip.is_link_local:
                        self.addrs[n].append(ip)
        plan = json.loads(self.run_segchain("plan", "-o", "json"))["plan"]["nodes"]
        self.sr_nodes = {n for n, v in plan.items() if v.get("boundary")}
        self.locators, self.external = set(), set()
        for v in plan.values():
            b = v.get("boundary") or {}
            self.locators |= {ipaddress.ip_network(p) for p in b.get("locators") or []}
            self.external |= {ipaddress.ip_network(p) for p in b.get("external") or []}
        self.sids = []  # (node, network, behavior, service)
        sf_addrs = set()
        for nd in self.status()["nodes"]:
            for s in nd.get("sids") or []:
                self.sids.append((nd["node"], ipaddress.ip_network(s["sid"]), s["behavior"], s.get("service", "")))
                words = s.get("route", "").split()
                # an SR proxy's next hop is an SF (End.DX6's is a host)
                for k in (("nh6", "nh4") if s["behavior"].startswith(("End.AS", "End.AD", "End.AM", "End.EAD")) else ()):
                    if k in words:
                        sf_addrs.add(ipaddress.ip_address(words[words.index(k) + 1]))
        others = [n for n in self.ns if n not in self.sr_nodes]
        self.sfs = [n for n in others if any(a in sf_addrs for a in self.addrs[n])]
        self.hosts = [n for n in others if n not in self.sfs]
        self.sender = sender
        # the sender's interface and the domain interface at its other end
        self.entry = None
        for a, ia, b, ib in self.links:
            if a == sender and b in self.sr_nodes:
                self.out_if, self.entry = ia, (b, ib)
            elif b == sender and a in self.sr_nodes:
                self.out_if, self.entry = ib, (a, ia)
        if self.entry is None:
            raise SystemExit("fuzz: %s has no link to an SR node of lab %s" % (sender, name))
        self.node_addrs = set()
        for n in self.sr_nodes:
            self.node_addrs |= set(self.addrs[n])
        self.sf_addrs = set()
        for n in self.sfs:
            self.sf_addrs |= set(self.addrs[n])
        self.host_addrs = set()
        for n in self.hosts:
            self.host_addrs |= set(self.addrs[n])
        # prefixes of the links inside the domain (an address nobody has:
        # routed to the link, where neighbour discovery fails)
        self.link_nets = {}
        for a, ia, b, ib in self.links:
            for ad in self.addrs[a] + self.addrs[b]:
                net = ipaddress.ip_network("%s/%d" % (ad, 64 if ad.version == 6 else 24), strict=False)
                self.link_nets.setdefault(net, set()).update({a, b} & self.sr_nodes)
        # prefixes of the links that lead to a host: traffic to them is
        # ordinary traffic (classified by the ingress or routed natively)
        self.host_nets = set()
        for a, ia, b, ib in self.links:
            for n in (a, b):
                if n in self.hosts:
                    for ad in self.addrs[n]:
                        self.host_nets.add(ipaddress.ip_network("%s/%d" % (ad, 64 if ad.version == 6 else 24), strict=False))

    def owner(self, dst):
        for n, ads in self.addrs.items():
            if dst in ads:
                return n
        return None

    def path_nodes(self, dst):
        """Nodes on a shortest path from the entry node to the node owning
        dst, or to the SR nodes on dst's link (plain traffic to a node's
        address may travel there)."""
        own = self.owner(dst)
        if own is None:
            out = set()
            for net, ends in self.link_nets.items():
                if dst in net:
                    for n in ends:
                        out |= self.path_to(n)
            return out
        return self.path_to(own)

    def path_to(self, own):
        adj = {}
        for a, _, b, _ in self.links:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
        prev, todo = {self.entry[0]: None}, [self.entry[0]]
        while todo:
            n = todo.pop(0)
            for m in sorted(adj.get(n, ())):
                if m not in prev and m != self.sender:
                    prev[m] = n
                    todo.append(m)
        out, n = set(), own
        while n is not None and n in prev:
            out.add(n)
            n = prev[n]
        return out

    def run_segchain(self, *args):
        return sh(self.segchain, *args, "--lab", self.name)

    def status(self):
        return json.loads(self.run_segchain("status", "-o", "json"))

    def classify_dst(self, dst):
        """Target class of a destination as seen by the kernel."""
        if dst is None:
            return "not-ip"
        for n in self.external:
            if dst in n:
                return "external-sid"
        for n in self.locators:
            if dst in n:
                return "sid" if any(dst in s[1] for s in self.sids) else "locator"
        if dst in self.node_addrs:
            # a node's address inside a host's link prefix: a chain's
            # classifier may match it (default: web's dst fc00:4d::/64), so
            # plain traffic to it is carried to the host like any other
            return "node-in-host-net" if any(dst in n for n in self.host_nets) else "node"
        if dst in self.sf_addrs:
            return "sf"
        for net, ends in self.link_nets.items():
            if dst in net and not any(dst in n for n in self.host_nets):
                return "node-link"  # an unused address of a link inside the domain
        if dst in self.host_addrs or any(dst in n for n in self.host_nets):
            return "host"
        if dst.is_multicast:
            return "multicast"
        return "unroutable"


# ---------------------------------------------------------------- the oracle

def kernel_view(frame):
    """(l3 proto, bytes of the L3 packet) as Linux's receive path would hand
    them to the IP stack (vlan_do_receive / check_vlan_id in
    __netif_receive_skb_core), or (why, None) when the stack never sees it."""
    if len(frame) < 14:
        return "runt", None
    et = struct.unpack("!H", frame[12:14])[0]
    off = 14
    tags = 0
    while et in (0x8100, 0x88A8):
        if len(frame) < off + 4:
            return "bad-vlan", None
        tci, et = struct.unpack("!HH", frame[off:off + 4])
        off += 4
        tags += 1
        if tci & 0x0FFF:
            return "vlan-otherhost", None  # VID != 0 and no VLAN device
    if et == 0x86DD:
        return "ipv6", frame[off:]
    if et == 0x0800:
        return "ipv4", frame[off:]
    return "ethertype-%04x" % et, None


def ipv6_dst(pkt):
    if len(pkt) < 40 or pkt[0] >> 4 != 6:
        return None
    return ipaddress.IPv6Address(pkt[24:40])


def ipv4_dst(pkt):
    if len(pkt) < 20 or pkt[0] >> 4 != 4:
        return None
    return ipaddress.IPv4Address(pkt[16:20])


# ---------------------------------------------------------------- generator

def pad8(b):
    return b + bytes((-len(b)) % 8)


class Gen:
    """Structure-aware frame generator: every choice comes from one seeded
    random.Random, so a (seed, lab) pair always yields the same frames."""

    def __init__(self, lab, seed, hmac_key=None, known=()):
        self.lab, self.r, self.known = lab, random.Random(seed), set(known)
        self.run = struct.pack("!I", seed & 0xFFFFFFFF)
        self.hmac_key = hmac_key  # (key id, secret) to sign some SRHs correctly
        self.src_mac = lab.mac[(lab.sender, lab.out_if)]
        self.dst_mac = lab.mac[lab.entry]
        sr = sorted(lab.sids, key=lambda s: str(s[1]))
        self.sid_targets = sr
        # a node's address inside a host's prefix (the egress' fc00:4d::4) is
        # classified traffic, like the host's: left to the host phase, and
        # never a spoofed source (an ICMP error to it would travel a chain
        # and move SID counters)
        self.node_targets = sorted((a for a in lab.node_addrs if not any(a in n for n in lab.host_nets)), key=str)
        self.sf_targets = sorted(lab.sf_addrs, key=str)
        self.host_targets = sorted((a for a in lab.host_addrs if a not in lab.addrs[lab.sender]), key=str)
        self.own = [a for a in lab.addrs[lab.sender]]

    # -- addresses
    def sid_addr(self, s=None):
        node, net, beh, svc = s or self.r.choice(self.sid_targets)
        base = int(net.network_address)
        span = net.num_addresses
        if span > 1 and self.r.random() < 0.5:
            base += self.r.randrange(span)  # random ARGS
        return ipaddress.IPv6Address(base)

    def v6(self, pool):
        c = [a for a in pool if a.version == 6]
        return self.r.choice(c) if c else ipaddress.IPv6Address("2001:db8::1")

    def any_domain6(self):
        k = self.r.random()
        if k < 0.6:
            return self.sid_addr()
        if k < 0.8:
            return self.v6(self.node_targets)
        if k < 0.9:
            loc = self.r.choice(sorted(self.lab.locators, key=str))
            return ipaddress.IPv6Address(int(loc.network_address) + self.r.randrange(1, 1 << 32))
        return self.v6(self.sf_targets or self.node_targets)

    def src6(self, dst=None):
        """A source: the sender's own, an outside address, a domain node's
        (spoofed), or a SID (spoofed) — the last only towards the SID space,
        which the boundary drops before the stack could answer: an ICMP
        error of a node to a spoofed SID would reach that SID's processing
        and be taken for the frame itself."""
        k = self.r.random()
        if k >= 0.85 and k < 0.95 and not (dst is not None and any(dst in n for n in self.lab.locators)
                                           and not any(dst in n for n in self.lab.external)):
            k = 0.0
        if k < 0.5:
            return self.v6(self.own)
        if k < 0.65:
            return ipaddress.IPv6Address("2001:db8:%x::%x" % (self.r.randrange(1 << 16), self.r.randrange(1 << 16)))
        if k < 0.85:
            return self.v6(self.node_targets)  # spoofed domain node
        if k < 0.95:
            return self.sid_addr()  # spoofed SID
        return ipaddress.IPv6Address("::")

    # -- extension headers, each returned as (next-header value, bytes builder)
    def tlv_options(self):
        opts = b""
        for _ in range(self.r.randrange(0, 4)):
            k = self.r.random()
            if k < 0.3:
                n = self.r.randrange(0, 10)
                opts += bytes([1, n]) + bytes(n)  # PadN
            elif k < 0.45:
                opts += b"\x00"  # Pad1
            elif k < 0.6:
                opts += bytes([5, 2, 0, 0])  # Router Alert
            elif k < 0.7:
                opts += bytes([0xC2, 4]) + struct.pack("!I", self.r.randrange(1 << 32))  # Jumbo payload
            else:
                t = self.r.choice([0x1E, 0x3E, 0x5E, 0x7E, 0x9E, 0xDE, self.r.randrange(256)])
                n = self.r.randrange(0, 12)
                opts += bytes([t, n]) + bytes(self.r.randrange(256) for _ in range(n))
        return opts

    def opt_hdr(self, nh, feats, name):
        body = self.tlv_options()
        if name == "DOH" and self.r.random() < 0.25 and self.last_srh:
            body = bytes([1, len(self.last_srh)]) + self.last_srh if len(self.last_srh) < 250 else body
            feats.append("DOH(srh-copy)")
        else:
            feats.append(name)
        hdr = pad8(bytes([nh, 0]) + body)
        if len(hdr) > 2048:
            hdr = hdr[:2048]
        hl = len(hdr) // 8 - 1
        if self.r.random() < 0.08:
            hl = self.r.randrange(256)
            feats.append(name + "(bad-len)")
        return bytes([nh, hl]) + hdr[2:]

    def segments(self):
        n = self.r.choice([1, 1, 2, 2, 3, 4, 5, 8])
        segs = []
        for _ in range(n):
            k = self.r.random()
            if k < 0.6:
                segs.append(self.sid_addr())
            elif k < 0.75:
                segs.append(self.v6(self.host_targets) if self.host_targets else self.sid_addr())
            elif k < 0.85:
                segs.append(self.v6(self.node_targets))
            elif k < 0.9:
                segs.append(ipaddress.IPv6Address("::"))
            else:
                segs.append(self.any_domain6())
        return segs  # Segment List[0] first (the last segment of the path)

    def srh(self, nh, feats, dst, src):
        segs = self.segments()
        le = len(segs) - 1
        sl = self.r.randrange(0, len(segs))
        flags, tag = 0, self.r.choice([0, 0, self.r.randrange(1 << 16)])
        tlvs = b""
        k = self.r.random()
        if k < 0.3:
            flags |= 0x08  # H flag (RFC 8754: the HMAC TLV follows)
            keyid, secret = self.hmac_key or (self.r.randrange(1 << 32), b"")
            if self.r.random() < 0.3:
                keyid = self.r.randrange(1 << 32)
            if secret and self.r.random() < 0.5:
                msg = src.packed + bytes([le, flags]) + struct.pack("!I", keyid) + b"".join(s.packed for s in segs)
                digest = hmaclib.new(secret, msg, hashlib.sha256).digest()
                feats.append("HMAC(signed)")
            else:
                digest = bytes(self.r.randrange(256) for _ in range(32))
                feats.append("HMAC(random)")
            tl = 38 if self.r.random() < 0.85 else self.r.choice([0, 6, 36, 40, 255])
            tlvs += bytes([5, tl, 0, 0]) + struct.pack("!I", keyid) + digest  # 1-byte length, RFC 8754 §2.1.2
            if self.r.random() < 0.2:
                tlvs = bytes([4, 2, 0, 0]) + tlvs  # PadN before: the kernel looks only at the first TLV
                feats.append("HMAC(after-pad)")
        elif k < 0.45:
            tlvs += bytes([4, self.r.randrange(0, 12)]) + bytes(self.r.randrange(0, 12))
            feats.append("SRH-TLV(padn)")
        elif k < 0.5:
            tlvs += bytes([self.r.randrange(256), self.r.randrange(256)]) + bytes(self.r.randrange(0, 16))
            feats.append("SRH-TLV(random)")
        body = struct.pack("!BBH", le, flags, tag) + b"".join(s.packed for s in segs) + tlvs
        body = body + bytes((-(len(body) + 4)) % 8)
        hl = (len(body) + 4) // 8 - 1
        anomaly = self.r.random()
        if anomaly < 0.15:
            sl = le + 1 + self.r.randrange(0, 8)
            feats.append("SRH(SL>LE)")
        elif anomaly < 0.3:
            le2 = min(255, le + 1 + self.r.randrange(0, 8))
            body = bytes([le2]) + body[1:]
            feats.append("SRH(LE>len)")
        elif anomaly < 0.38:
            hl = self.r.choice([0, 1, hl - 1, hl + 1, hl + 2, 255]) & 0xFF
            feats.append("SRH(bad-hdrlen)")
        elif anomaly < 0.42:
            sl = 0
            feats.append("SRH(SL=0)")
        else:
            feats.append("SRH")
        hdr = bytes([nh, hl, 4, sl & 0xFF]) + body
        self.last_srh = hdr
        return hdr

    def rh_other(self, nh, feats):
        t = self.r.choice([0, 0, 2, 2, 3, 5, 6, 253, 254, 255, self.r.randrange(256)])
        n = 1 if t == 2 else self.r.randrange(0, 4)
        addrs = b"".join(self.any_domain6().packed for _ in range(n))
        sl = self.r.randrange(0, n + 2)
        if t == 3:  # RPL source route (RFC 6554): CmprI/CmprE/Pad + addresses
            data = bytes([0, 0, 0, 0]) + addrs
        else:
            data = bytes(4) + addrs
        hdr = pad8(bytes([nh, 0, t, sl]) + data)
        hl = len(hdr) // 8 - 1
        if self.r.random() < 0.1:
            hl = self.r.randrange(256)
        feats.append("RH%d" % t)
        return bytes([nh, hl]) + hdr[2:]

    def frag(self, nh, feats):
        k = self.r.random()
        if k < 0.4:
            off, m, f = 0, 1, "FRAG(first)"
        elif k < 0.7:
            off, m, f = 0, 0, "FRAG(atomic)"
        else:
            off, m, f = self.r.randrange(1, 8192), self.r.randrange(2), "FRAG(later)"
        feats.append(f)
        return struct.pack("!BBHI", nh, 0, (off << 3) | m, self.r.randrange(1 << 32))

    def ah(self, nh, feats):
        feats.append("AH")
        icv = bytes(12)
        return struct.pack("!BBHII", nh, (12 + len(icv)) // 4 - 2, 0, self.r.randrange(1, 1 << 32), 1) + icv

    def chain(self, final_nh, dst, src):
        """An extension-header chain ending in final_nh: headers in any
        order and repetition, weighted towards the routing header."""
        self.last_srh = None
        n = self.r.choice([0, 1, 1, 1, 2, 2, 3, 4, 6, 9])
        kinds = [self.r.choice(["SRH", "SRH", "SRH", "RH", "HBH", "DOH", "DOH", "FRAG", "AH"]) for _ in range(n)]
        if n and self.r.random() < 0.3:
            kinds[0] = "HBH"
        feats, hdrs = [], []
        # build back to front so that each header knows its next header
        nh = final_nh
        built = []
        for k in reversed(kinds):
            if k == "SRH":
                h = self.srh(nh, feats, dst, src)
                v = RH
            elif k == "RH":
                h, v = self.rh_other(nh, feats), RH
            elif k in ("HBH", "DOH"):
                h, v = self.opt_hdr(nh, feats, k), (HBH if k == "HBH" else DOH)
            elif k == "FRAG":
                h, v = self.frag(nh, feats), FRAG
            else:
                h, v = self.ah(nh, feats), AH
            built.insert(0, h)
            nh = v
        feats.reverse()
        return nh, b"".join(built), feats

    # -- payloads
    def marker(self, idx):
        return MARK + self.run + struct.pack("!I", idx)

    def payload(self, idx, host_class):
        """(next header, bytes, name): UDP with the marker, or the marker
        inside 6in6 / 4in6 / TCP."""
        m = self.marker(idx) + bytes(self.r.randrange(0, 24))
        dport = self.r.randrange(20000, 30000) if host_class else self.r.choice([53, 5555, 6001, 6666, 7777, 8080, self.r.randrange(1, 65536)])
        k = self.r.random()
        if k < 0.55:
            return UDPN, bytes(UDP(sport=4000, dport=dport) / Raw(m)), "udp"
        if k < 0.75:
            idst = self.v6(self.host_targets) if self.r.random() < 0.5 else self.any_domain6()
            return IP6, bytes(IPv6(src=str(self.src6()), dst=str(idst)) / UDP(sport=4000, dport=dport) / Raw(m)), "6in6"
        if k < 0.88:
            return IP4, bytes(IP(src="198.18.1.10", dst="198.18.4.13") / UDP(sport=4000, dport=dport) / Raw(m)), "4in6"
        if k < 0.95 and not host_class:
            return TCPN, bytes(TCP(sport=4000, dport=8080, flags="S") / Raw(m)), "tcp8080"
        return NONXT, m, "nonext"

    def ipv6_frame(self, idx, target, host_class):
        src = self.src6(target)
        pnh, pl, pname = self.payload(idx, host_class)
        nh, ext, feats = self.chain(pnh, target, src)
        # where the SRH (if any) is the first routing header, point the
        # destination at its active segment half of the time, like a real
        # packet would be
        plen = len(ext) + len(pl)
        if self.r.random() < 0.05:
            plen = self.r.choice([0, 8, max(0, plen - 8), plen + 8, 0xFFFF])
            feats.append("bad-plen")
        hlim = self.r.choice([64, 64, 64, 1, 0, 255])
        hdr = struct.pack("!IHBB", 0x60000000 | (idx & 0xFFFFF), plen, nh, hlim) + src.packed + target.packed
        return hdr + ext + pl, feats, pname

    def ipv4_frame(self, idx, target, host_class):
        opts = []
        for _ in range(self.r.randrange(0, 3)):
            o = self.r.choice(["nop", "rr", "lsrr", "ssrr", "ts", "ra", "eol"])
            opts.append({"nop": IPOption_NOP(), "eol": IPOption_EOL(), "rr": IPOption_RR(routers=["0.0.0.0"]),
                         "lsrr": IPOption_LSRR(routers=["198.18.4.13"]), "ssrr": IPOption_SSRR(routers=["198.18.4.13"]),
                         "ts": IPOption_Timestamp(flg=0), "ra": IPOption_Router_Alert()}[o])
        m = self.marker(idx)
        proto = self.r.random()
        if proto < 0.7 or host_class:
            inner = UDP(sport=4000, dport=self.r.randrange(20000, 30000)) / Raw(m)
            p = 17
        else:  # 6in4 carrying SRv6 to a SID: no sit device should take it
            sid = self.sid_addr()
            inner = IPv6(src=str(self.src6()), dst=str(sid)) / Raw(self.srh(UDPN, [], sid, self.v6(self.own))) / UDP() / Raw(m)
            p = 41
        pkt = IP(src="198.18.1.10", dst=str(target), proto=p, options=opts, ttl=self.r.choice([64, 1])) / inner
        b = bytes(pkt)
        return b, ["IPv4-opt(%s)" % len(opts) if opts else "IPv4", "6in4" if p == 41 else "udp"], "ipv4"

    def l2(self, l3, et):
        """Ethernet header with 0..3 VLAN tags: 802.1Q, 802.1ad, or the
        0x9100 legacy QinQ TPID, any VID (0 often)."""
        k = self.r.random()
        tags, desc = b"", []
        n = 0 if k < 0.6 else self.r.choice([1, 1, 2, 2, 3])
        for _ in range(n):
            tpid = self.r.choice([0x8100, 0x88A8, 0x8100, 0x88A8, 0x9100])
            vid = self.r.choice([0, 0, 0, 1, self.r.randrange(4096), 4095])
            pcp = self.r.randrange(8)
            tags += struct.pack("!HH", tpid, (pcp << 13) | vid)
            desc.append("%04x/%d" % (tpid, vid))
        dst = self.dst_mac
        if self.r.random() < 0.03:
            dst = self.r.choice([b"\xff" * 6, b"\x33\x33\x00\x00\x00\x01", bytes([2, 0, 0, 0, 0, self.r.randrange(256)])])
            desc.append("mac-" + dst.hex())
        # the tags' TPIDs shift: the ethertype of each tag is the next tag's TPID
        b = dst + self.src_mac
        if tags:
            b += tags[0:2]
            for i in range(n):
                tci = tags[i * 4 + 2:i * 4 + 4]
                nxt = tags[(i + 1) * 4:(i + 1) * 4 + 2] if i + 1 < n else struct.pack("!H", et)
                b += tci + nxt
        else:
            b += struct.pack("!H", et)
        return b + l3, "+".join(desc) or "untagged"

    def frame(self, idx, phase):
        """One frame of a phase: (bytes, description)."""
        host = phase == "host"
        if phase == "sid":
            target = self.sid_addr()
        elif phase == "external":
            ext = self.r.choice(sorted(self.lab.external, key=str))
            target = ipaddress.IPv6Address(int(ext.network_address) + self.r.randrange(ext.num_addresses))
        elif phase == "node":
            target = self.v6(self.node_targets)
        elif phase == "sf":
            target = self.v6(self.sf_targets or self.node_targets)
        elif phase == "locator":
            target = self.any_domain6()
        elif phase == "host":
            target = self.v6(self.host_targets)
        else:
            target = None
        if phase == "ipv4":
            t4 = [a for a in self.node_targets + self.sf_targets if a.version == 4]
            t4 = [a for a in t4 if a not in self.lab.addrs[self.lab.sender]] or [ipaddress.IPv4Address("198.18.1.1")]
            target = self.r.choice(t4)
            l3, feats, pname = self.ipv4_frame(idx, target, False)
            et = 0x0800
        elif phase == "junk":
            l3 = bytes(self.r.randrange(256) for _ in range(self.r.randrange(0, 60))) + self.marker(idx)
            feats, pname = ["junk"], "junk"
            et = self.r.choice([0x0806, 0x88CC, 0x86DD, 0x0800, 0x8847, self.r.randrange(0x600, 0x10000)])
        else:
            l3, feats, pname = self.ipv6_frame(idx, target, host)
            et = 0x86DD
        if phase not in ("junk",) and self.r.random() < 0.06:
            # blind byte flips in the L3 headers (never in the marker)
            # A flip may move the destination out of the SID space past the
            # boundary; a spoofed SID source would then get an ICMP error
            # from the entry node into that SID's processing, which the SID
            # counters cannot tell from the frame: the source becomes the
            # sender's own and is never flipped.
            mpos = l3.find(MARK + self.run)
            b = bytearray(l3)
            if et == 0x86DD and len(b) >= 40:
                b[8:24] = self.v6(self.own).packed
            for _ in range(self.r.randrange(1, 4)):
                if mpos > 1:
                    p = self.r.randrange(0, mpos)
                    if et == 0x86DD and 8 <= p < 24:
                        continue
                    b[p] = self.r.randrange(256)
            l3 = bytes(b)
            feats.append("flip")
        frame, l2 = self.l2(l3, et)
        return frame, {"phase": phase, "target": str(target), "l2": l2, "ext": feats, "payload": pname}


# ---------------------------------------------------------------- capture

class Captures:
    """An AF_PACKET socket on every interface of every lab node except the
    sender, inbound only, opened before anything is sent."""

    def __init__(self, lab):
        self.socks = {}
        for n, ns in lab.ns.items():
            if n == lab.sender:
                continue
            with InNetns(ns):
                for ifname in lab.ifaces[n]:
                    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                    try:
                        s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
                    except OSError:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
                    s.bind((ifname, 0))
                    s.setblocking(False)
                    self.socks[s.fileno()] = (s, n, ifname)
        self.poll = select.epoll()
        for fd in self.socks:
            self.poll.register(fd, select.EPOLLIN)

    def drain(self, run, on_match, quiet=0.4, limit=10.0):
        """Reads every socket until none has had a frame for `quiet` seconds."""
        t0 = last = time.monotonic()
        key = MARK + run
        while True:
            ev = self.poll.poll(0.05)
            now = time.monotonic()
            for fd, _ in ev:
                s, n, ifname = self.socks[fd]
                while True:
                    try:
                        b = s.recv(65536)
                    except BlockingIOError:
                        break
                    last = now
                    p = b.find(key)
                    if p >= 0 and len(b) >= p + 12:
                        on_match(struct.unpack("!I", b[p + 8:p + 12])[0], n, ifname, b)
            if now - last > quiet or now - t0 > limit:
                return

    def losses(self):
        lost = 0
        for s, n, ifname in self.socks.values():
            st = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
            lost += struct.unpack("II", st)[1]
        return lost


# ---------------------------------------------------------------- counters

def snap(lab):
    """Counters that must explain every frame: the boundary's drops, the SIDs'
    packets, the entry interface's kernel drops, the entry node's MIBs."""
    st = lab.status()
    b, sids = {}, {}
    for nd in st["nodes"]:
        for c in nd.get("boundary") or []:
            b[(nd["node"], c["iface"], c["direction"], c["reason"])] = c["packets"]
        for s in nd.get("sids") or []:
            v = s.get("packets", 0)
            det = s.get("detail") or {}
            sids[(nd["node"], s["sid"])] = (v, s.get("errors", 0), det.get("in-packets", 0), det.get("in-drops", 0), det.get("out-packets", 0), det.get("out-drops", 0))
    node, ifname = lab.entry
    ns = lab.ns[node]
    dev = {}
    for l in json.loads(sh("ip", "-n", ns, "-j", "-s", "-s", "link", "show", "dev", ifname)):
        for k, v in l["stats64"]["rx"].items():
            dev["rx_" + k] = v
    for l in json.loads(sh("ip", "-n", lab.ns[lab.sender], "-j", "-s", "link", "show", "dev", lab.out_if)):
        dev["sender_tx_dropped"] = l["stats64"]["tx"]["dropped"]
    mib = {}
    out = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp6")
    for line in out.splitlines():
        k, v = line.split()
        mib[k] = int(v)
    out = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").splitlines()
    for i in range(0, len(out) - 1, 2):
        ks, vs = out[i].split(), out[i + 1].split()
        if ks[0] in ("Ip:", "Icmp:"):
            for k, v in zip(ks[1:], vs[1:]):
                mib[ks[0][:-1] + k] = int(v)
    return {"boundary": b, "sids": sids, "dev": dev, "mib": mib}


def delta(a, b):
    return {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b) if b.get(k, 0) != a.get(k, 0)}


# ---------------------------------------------------------------- main

PHASES = ["sid", "locator", "node", "sf", "ipv4", "junk", "host"]
SHARE = {"sid": 0.40, "locator": 0.12, "node": 0.20, "sf": 0.08, "ipv4": 0.06, "junk": 0.04, "host": 0.10, "external": 0.20}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lab", required=True, help="lab name (segchain lab up --lab NAME; applied)")
    ap.add_argument("--from", dest="sender", default="s", help="node that sends (outside the domain or an SF)")
    ap.add_argument("--count", type=int, default=10000, help="frames per campaign")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=int, default=20000, help="frames per second (pacing, so that the veth backlog never overflows)")
    ap.add_argument("--segchain", default=os.environ.get("SEGCHAIN", "segchain"))
    ap.add_argument("--hmac-key", help="ID:SECRET_FILE: sign some SRHs correctly with this key")
    ap.add_argument("--corpus", help="directory to write every frame that got through to (one .hex each)")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--prime", help="HOST,DST,TCPPORT: before the campaign, send 3 TCP SYNs from HOST to DST:TCPPORT "
                    "(fills an SR proxy's cache the way its chain's traffic does, e.g. s,fc00:4d::d,8080 for the default domain's End.AD)")
    ap.add_argument("--known", default="", help="target classes with a known, reported bypass (none today): their crossings are counted as known_bypass, not violations")
    a = ap.parse_args()

    lab = Lab(a.lab, a.segchain, a.sender)
    key = None
    if a.hmac_key:
        kid, path = a.hmac_key.split(":", 1)
        sec = open(path, "rb").read()
        key = (int(kid), sec[:-1] if sec.endswith(b"\n") else sec)
    known = set(k for k in a.known.split(",") if k)
    gen = Gen(lab, a.seed, key, known)
    phases = a.phases.split(",")
    if lab.external and a.phases == ",".join(PHASES):
        phases.insert(1, "external")  # the domain exposes SIDs: aim at them too
    total_share = sum(SHARE[p] for p in phases)

    if a.prime:
        prime(lab, a.prime)
    caps = Captures(lab)
    with InNetns(lab.ns[lab.sender]):
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((lab.out_if, 0))

    entry = lab.entry
    sf_sender = lab.sender in lab.sfs
    sent_meta = {}
    seen = {}  # idx -> set of (node, if)
    frames_of = {}

    def on_match(idx, node, ifname, b):
        seen.setdefault(idx, set()).add((node, ifname, is_reflection(lab, b)))
        frames_of.setdefault(idx, []).append((node, ifname, b))

    report = {"lab": a.lab, "sender": a.sender, "entry": "%s:%s" % entry, "seed": a.seed, "phases": {}}
    idx = 0
    violations = []
    t_start = time.monotonic()
    for ph in phases:
        n = int(round(a.count * SHARE[ph] / total_share))
        frames = []
        for _ in range(n):
            f, desc = gen.frame(idx, ph)
            frames.append((idx, f, desc))
            idx += 1
        before = snap(lab)
        caps.drain(gen.run, on_match, quiet=0.1, limit=1)
        t0 = time.monotonic()
        for i, (fi, f, desc) in enumerate(frames):
            try:
                tx.send(f)
            except OSError as e:  # e.g. a frame the driver refuses (too short)
                desc["send_error"] = str(e)
            sent_meta[fi] = (f, desc)
            if i % 64 == 63:
                lag = t0 + (i + 1) / a.rate - time.monotonic()
                if lag > 0:
                    time.sleep(lag)
                caps.drain(gen.run, on_match, quiet=0, limit=0)
        caps.drain(gen.run, on_match)
        after = snap(lab)
        # the oracle, frame by frame
        st = {"sent": len(frames), "send_errors": 0, "by_kernel_view": {}, "by_class": {}, "features": {},
              "must_drop": 0, "at_entry": 0, "legit_crossed": 0, "to_node": 0, "sf_output": 0, "known_bypass": 0, "external_ok": 0, "reflected": 0, "violations": 0}
        for fi, f, desc in frames:
            if "send_error" in desc:
                st["send_errors"] += 1
                continue
            view, l3 = kernel_view(f)
            dst = ipv6_dst(l3) if view == "ipv6" else ipv4_dst(l3) if view == "ipv4" else None
            cls = lab.classify_dst(dst) if dst is not None else view
            desc["class"] = cls
            st["by_kernel_view"][view] = st["by_kernel_view"].get(view, 0) + 1
            st["by_class"][cls] = st["by_class"].get(cls, 0) + 1
            for ft in desc["ext"] + [desc["l2"].split("+")[0] if desc["l2"] != "untagged" else "untagged", desc["payload"]]:
                k = ft.split("(")[0] if ft.startswith("IPv4") else ft
                st["features"][k] = st["features"].get(k, 0) + 1
            if view == "ipv6" and (cls in ("sid", "locator") or (cls == "sf" and not sf_sender)):
                # the boundary counts every IPv6 frame to the SID space,
                # and from outside every one to an SF (to-sf)
                st["must_drop"] += 1
            where = seen.get(fi, set())
            beyond = {(nn, ii) for nn, ii, refl in where if (nn, ii) != entry and not refl}
            if (entry[0], entry[1], False) in where:
                st["at_entry"] += 1
            if any(refl for _, _, refl in where):
                st["reflected"] += 1
            if not beyond:
                continue
            if cls in known:
                st["known_bypass"] += 1
                continue
            if sf_sender and cls not in ("sid", "locator"):
                # an SR proxy pushes its chain's headers on whatever its SF
                # sends (End.AS/AD outbound): that is the SF's output, not a
                # crossing; only SRv6 into the SID space must stop here
                st["sf_output"] += 1
                continue
            if cls == "external-sid" and not any(nn in lab.sfs for nn, _ in beyond):
                # an external SID is reachable from outside and may send the
                # packet on to outside destinations; that it goes no further
                # into the domain is the SID counters' check (below)
                st["external_ok"] += 1
                continue
            if cls in ("host", "node-in-host-net"):
                # ordinary traffic to an outside host, classified by the
                # ingress into a chain (through an SF, too: firewalled)
                st["legit_crossed"] += 1
                continue
            if cls in ("node", "node-link"):
                # plain traffic to a node's address may reach that node
                # (ping, ND); nothing may go past it
                ok = lab.path_nodes(dst)
                if all(nn in ok for nn, _ in beyond):
                    st["to_node"] += 1
                    continue
            st["violations"] += 1
            violations.append((fi, f, desc, sorted(beyond)))
        bd = delta(before["boundary"], after["boundary"])
        st["boundary_drops"] = {"%s:%s:%s:%s" % k: v for k, v in sorted(bd.items())}
        st["boundary_drops_total"] = sum(bd.values())
        st["entry_dev"] = delta(before["dev"], after["dev"])
        st["entry_mib"] = {k: v for k, v in delta(before["mib"], after["mib"]).items()
                           if k.startswith(("Ip6In", "Ip6Reasm", "Ip6Frag", "Ip6OutNoRoutes", "Ip6OutForw", "IpIn", "IpReasm", "IpForw", "IpOutNoRoutes", "Icmp6OutParm", "Icmp6OutDest", "Icmp6OutTime", "Icmp6OutErrors", "IcmpOut"))
                           and v}
        sd = {}
        for k in set(before["sids"]) | set(after["sids"]):
            b0, b1 = before["sids"].get(k, (0,) * 6), after["sids"].get(k, (0,) * 6)
            d = [y - x for x, y in zip(b0, b1)]
            if any(d):
                sd["%s %s" % k] = dict(zip(["packets", "errors", "proxy-in", "proxy-in-drops", "proxy-out", "proxy-out-drops"], d))
        st["sid_counters"] = sd
        # (from an SF, the proxy's outbound processes every plain frame the
        # SF sends, legitimately: there the captures alone judge)
        if ph != "host" and ph not in known and not sf_sender:
            # no SID may process anything of a domain-bound phase
            for k, d in sd.items():
                sidnet = ipaddress.ip_network(k.split()[1])
                if any(sidnet.subnet_of(e) or e.subnet_of(sidnet) for e in lab.external):
                    continue  # an external SID: reachable by design
                if d["packets"] or d["proxy-in"] or d["proxy-out"]:
                    st["violations"] += 1
                    violations.append((None, b"", {"phase": ph, "sid": k, "delta": d}, []))
        st["seconds"] = round(time.monotonic() - t0, 2)
        report["phases"][ph] = st

    report["capture_losses"] = caps.losses()
    tot = {"sent": 0, "violations": 0, "must_drop": 0, "boundary_drops": 0, "legit_crossed": 0, "to_node": 0, "sf_output": 0, "known_bypass": 0, "reflected": 0, "at_entry": 0}
    reasons = {}
    for st in report["phases"].values():
        tot["sent"] += st["sent"]
        tot["violations"] += st["violations"]
        tot["must_drop"] += st["must_drop"]
        tot["boundary_drops"] += st["boundary_drops_total"]
        tot["legit_crossed"] += st["legit_crossed"]
        tot["to_node"] += st["to_node"]
        tot["sf_output"] += st["sf_output"]
        tot["known_bypass"] += st["known_bypass"]
        tot["reflected"] += st["reflected"]
        tot["at_entry"] += st["at_entry"]
        for k, v in st["boundary_drops"].items():
            r = k.split(":", 2)[2]
            reasons[r] = reasons.get(r, 0) + v
    tot["boundary_drops_by_reason"] = reasons
    tot["seconds"] = round(time.monotonic() - t_start, 1)
    report["total"] = tot
    report["delivered"] = tot["violations"]
    # must-drop frames not counted by the boundary are a failure too: the
    # boundary counts at least every IPv6 frame addressed to the SID space
    undercount = [p for p, st in report["phases"].items() if st["boundary_drops_total"] < st["must_drop"]]
    report["undercounted_phases"] = undercount

    if a.corpus and violations:
        os.makedirs(a.corpus, exist_ok=True)
        for fi, f, desc, beyond in violations:
            if fi is None:
                continue
            path = os.path.join(a.corpus, "found-%s-seed%d-%d.hex" % (desc["phase"], a.seed, fi))
            with open(path, "w") as w:
                w.write("# found by scripts/fuzz-boundary.py --lab %s --from %s --seed %d (frame %d)\n" % (a.lab, a.sender, a.seed, fi))
                w.write("# sender: %s\n# expect: dropped\n" % a.sender)
                w.write("# what: %s\n" % json.dumps(desc, sort_keys=True))
                w.write("# seen beyond %s:%s at: %s\n" % (entry[0], entry[1], beyond))
                w.write(f.hex() + "\n")
    if a.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        print_report(report, violations)
    return 1 if tot["violations"] or undercount else 0


def prime(lab, spec):
    host, dst, port = spec.split(",")
    ifname, peer = None, None
    for a, ia, b, ib in lab.links:
        if a == host:
            ifname, peer = ia, (b, ib)
        elif b == host:
            ifname, peer = ib, (a, ia)
    src = [x for x in lab.addrs[host] if x.version == 6][0]
    f = bytes(Ether(dst=lab.mac[peer], src=lab.mac[(host, ifname)]) / IPv6(src=str(src), dst=dst) / TCP(sport=4000, dport=int(port), flags="S"))
    with InNetns(lab.ns[host]):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((ifname, 0))
    for _ in range(3):
        s.send(f)
    s.close()
    time.sleep(0.5)  # not an assertion: lets the SYNs reach the proxy before the captures start


def is_reflection(lab, b):
    """An ICMP error a domain node generated about the frame (it quotes the
    marker): the node answered the sender or a spoofed source, the frame
    itself did not cross. The error may itself be carried in SRv6 (a
    spoofed source inside a chain's classifier) or IPv6-in-IPv6."""
    view, l3 = kernel_view(b)
    for _ in range(4):  # encapsulation levels
        if view == "ipv6" and len(l3) >= 41 and l3[0] >> 4 == 6:
            src = ipaddress.IPv6Address(l3[8:24])
            nh, off = l3[6], 40
            while nh in (HBH, RH, DOH) and len(l3) >= off + 2:
                nh, off = l3[off], off + (l3[off + 1] + 1) * 8
            if nh == ICMP6 and len(l3) > off:
                return l3[off] < 128 and src in (lab.node_addrs | lab.sf_addrs)
            if nh == IP6:
                l3 = l3[off:]
                continue
            if nh == IP4:
                view, l3 = "ipv4", l3[off:]
                continue
            return False
        if view == "ipv4" and len(l3) >= 21 and l3[0] >> 4 == 4:
            ihl = (l3[0] & 15) * 4
            src = ipaddress.IPv4Address(l3[12:16])
            return l3[9] == 1 and len(l3) > ihl and l3[ihl] in (3, 4, 5, 11, 12) and src in (lab.node_addrs | lab.sf_addrs)
        return False
    return False


def print_report(r, violations):
    print("fuzz-boundary: lab %s, from %s (entry %s), seed %d" % (r["lab"], r["sender"], r["entry"], r["seed"]))
    print("%-8s %8s %9s %9s %9s %8s %8s %8s %10s" % ("phase", "sent", "must-drop", "bnd-drops", "at-entry", "legit", "to-node", "reflect", "violations"))
    for p, st in r["phases"].items():
        print("%-8s %8d %9d %9d %9d %8d %8d %8d %10d" % (p, st["sent"], st["must_drop"], st["boundary_drops_total"], st["at_entry"], st["legit_crossed"], st["to_node"], st["reflected"], st["violations"]))
    for p, st in r["phases"].items():
        print("\n[%s] %.1f s; kernel view %s; classes %s" % (p, st["seconds"], st["by_kernel_view"], st["by_class"]))
        print("  boundary drops: %s" % st["boundary_drops"])
        print("  entry device: %s" % st["entry_dev"])
        print("  entry node MIB: %s" % st["entry_mib"])
        if st["sid_counters"]:
            print("  SID counters: %s" % st["sid_counters"])
        print("  features: %s" % dict(sorted(st["features"].items())))
    t = r["total"]
    print("\ntotal: sent %d, must-drop %d, boundary drops %d %s, legit crossed %d, to a node %d, SF output %d, reflected %d, capture losses %d, %.1f s"
          % (t["sent"], t["must_drop"], t["boundary_drops"], t["boundary_drops_by_reason"], t["legit_crossed"], t["to_node"], t["sf_output"], t["reflected"], r["capture_losses"], t["seconds"]))
    if t["known_bypass"]:
        print("known bypasses (--known): %d" % t["known_bypass"])
    print("delivered (violations): %d" % r["delivered"])
    if r["undercounted_phases"]:
        print("UNDERCOUNTED: boundary drops < must-drop in phases %s" % r["undercounted_phases"])
    for fi, f, desc, beyond in violations[:20]:
        print("VIOLATION frame %s %s seen at %s\n  %s" % (fi, json.dumps(desc, sort_keys=True), beyond, f.hex()))


if __name__ == "__main__":
    sys.exit(main())
