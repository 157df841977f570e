#!/usr/bin/env python3
"""Writes the seed frames of the boundary fuzz corpus: issue 24's findings
1-5, crafted with scapy from the issue's description, one .hex file each in
test/fuzz/testdata/corpus (TestFuzzCorpusReplay replays them).

The SIDs are the ones segchain allocates for the example domains (the
allocation is a stable function of the domain file); MAC addresses are
placeholders that the replay rewrites. Run it again after changing an
example's services or chains:

  scripts/fuzz-boundary-seeds.py [OUTDIR]
"""

import hashlib
import hmac
import ipaddress
import os
import struct
import sys

from scapy.all import Ether, Dot1Q, Dot1AD, IPv6, UDP, Raw, IPv6ExtHdrSegmentRouting, IPv6ExtHdrDestOpt, HBHOptUnknown, PadN  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "fuzz", "testdata", "corpus")
MAC_DST, MAC_SRC = "02:00:00:00:00:01", "02:00:00:00:00:02"  # rewritten by the replay

# default.yaml
DX6_FIREWALLED = "fc00:4::a7c9:0"  # chains.firewalled.egress (End.DX6)
NFV1_END = "fc00:2::646c:0"
INGRESS_ETH_S = "fc00:1a::1"
S, D = "fc00:1a::a", "fc00:4d::d"
SF1 = "fc00:27::7"
# hmac.yaml
DX6_SIGNED = "fc00:4::a2da:0"  # chains.signed.egress
NFV1_EGRESS, EGRESS_NFV1 = "fc00:24::2", "fc00:24::4"
KEY_ID = 1001


def marker(n):
    # the fuzzer's marker: b"SCFZ" + run id 0 (seeds) + frame number
    return b"SCFZ" + struct.pack("!II", 0, n)


def inner(n, src=S):
    return IPv6(src=src, dst=D) / UDP(sport=4000, dport=20000 + n) / Raw(marker(n))


def write(name, what, domain, sender, expect, pkt):
    b = bytes(pkt)
    with open(os.path.join(OUT, name + ".hex"), "w") as f:
        f.write("# %s\n" % what)
        f.write("# domain: %s\n# sender: %s\n# expect: %s\n" % (domain, sender, expect))
        f.write("# scapy: %s\n" % pkt.command().replace("\n", " ")[:2000])
        f.write(b.hex() + "\n")


def srh_hmac(src, segs, flags=0x08, keyid=KEY_ID, secret=None):
    """An SRH with a correct HMAC TLV (RFC 8754 §2.1.2, one-byte length;
    the digest as the kernel's seg6_hmac_compute: source, Last Entry,
    flags, key id, segments)."""
    le = len(segs) - 1
    msg = ipaddress.IPv6Address(src).packed + bytes([le, flags]) + struct.pack("!I", keyid) + b"".join(ipaddress.IPv6Address(s).packed for s in segs)
    digest = hmac.new(secret, msg, hashlib.sha256).digest()
    tlv = bytes([5, 38, 0, 0]) + struct.pack("!I", keyid) + digest
    body = struct.pack("!BBH", le, flags, 0) + b"".join(ipaddress.IPv6Address(s).packed for s in segs) + tlv
    return body  # without the first 4 bytes (nh, hdrlen, type, SL)


def rh4(nh, sl, body):
    return bytes([nh, (len(body) + 4) // 8 - 1, 4, sl]) + body


def main():
    os.makedirs(OUT, exist_ok=True)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    secret = open(os.path.join(root, "examples", "secrets", "k1.key"), "rb").read()
    if secret.endswith(b"\n"):
        secret = secret[:-1]

    e = Ether(dst=MAC_DST, src=MAC_SRC)
    # 1: Segments Left > Last Entry, to the ingress' own address
    write("issue24-1a-sl-gt-le-to-own-address",
          "issue 24 #1: SRH to the ingress' own address with SL 1 > Last Entry 0; the kernel processed it and forwarded to the End.DX6 of chain firewalled",
          "default", "s", "dropped",
          e / IPv6(src=S, dst=INGRESS_ETH_S) / IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED, "::"], segleft=1, lastentry=0) / inner(1))
    write("issue24-1b-le-beyond-length-to-own-address",
          "issue 24 #1: SRH to the ingress' own address with Last Entry 5 beyond the header's 2 segments",
          "default", "s", "dropped",
          e / IPv6(src=S, dst=INGRESS_ETH_S) / IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED, "::"], segleft=1, lastentry=5) / inner(2))
    # 2: priority tags (VID 0) around forged SRv6
    write("issue24-2a-qinq-vid0-from-s",
          "issue 24 #2: 802.1ad + 802.1Q tags of VID 0 around SRv6 to the End.DX6 of chain firewalled, from s",
          "default", "s", "dropped",
          Ether(dst=MAC_DST, src=MAC_SRC) / Dot1AD(vlan=0) / Dot1Q(vlan=0) / IPv6(src=S, dst=DX6_FIREWALLED) /
          IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED], segleft=0, lastentry=0) / inner(3))
    write("issue24-2b-dot1q-vid0-from-s",
          "issue 24 #2: one 802.1Q tag of VID 0 around SRv6 to the End.DX6 of chain firewalled, from s",
          "default", "s", "dropped",
          Ether(dst=MAC_DST, src=MAC_SRC) / Dot1Q(vlan=0, prio=5) / IPv6(src=S, dst=DX6_FIREWALLED) /
          IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED], segleft=0, lastentry=0) / inner(4))
    write("issue24-2c-qinq-vid0-from-sf1",
          "issue 24 #2: 802.1ad + 802.1Q tags of VID 0 around SRv6 to the End.DX6 of chain firewalled, from the SF sf1 with nfv1:eth-sf1 a boundary interface (skipped the End.AD proxy and the boundary)",
          "default+sf1-boundary", "sf1", "dropped",
          Ether(dst=MAC_DST, src=MAC_SRC) / Dot1AD(vlan=0) / Dot1Q(vlan=0) / IPv6(src=SF1, dst=DX6_FIREWALLED) /
          IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED], segleft=0, lastentry=0) / inner(5, src=SF1))
    # 3: through an external SID to the rest of the domain
    write("issue24-3-external-sid-door",
          "issue 24 #3: SRv6 to nfv1-end (external: true) whose SRH continues to the End.DX6 of chain firewalled, skipping its firewall",
          "default+nfv1-end-external", "s", "dropped",
          e / IPv6(src=S, dst=NFV1_END) / IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED, NFV1_END], segleft=1, lastentry=1) / inner(6))
    # 4: the trick of 1 with Last Entry 7, towards the signed chain's End.DX6
    write("issue24-4a-hmac-bypass-bad-rh-from-s",
          "issue 24 #4: SRH with SL 1, Last Entry 7 (beyond the header) to the ingress' own address towards the signed chain's End.DX6, from s",
          "hmac", "s", "dropped",
          e / IPv6(src=S, dst=INGRESS_ETH_S) / IPv6ExtHdrSegmentRouting(addresses=[DX6_SIGNED, "::"], segleft=1, lastentry=7) / inner(7))
    write("issue24-4b-hmac-bypass-bad-rh-inside",
          "issue 24 #4, variant: the same from inside the domain (nfv1), to the egress' own address: the egress' kernel drops it (seg6_require_hmac on the receiving interface, ipv6_srh_rcv), where no segchain counter sees it; it never reached d",
          "hmac", "nfv1:eth-egress", "dropped-uncounted",
          e / IPv6(src=NFV1_EGRESS, dst=EGRESS_NFV1) / IPv6ExtHdrSegmentRouting(addresses=[DX6_SIGNED, "::"], segleft=1, lastentry=7) / inner(8, src=NFV1_EGRESS))
    write("issue24-4c-hmac-bypass-bad-rh-to-sid",
          "issue 24 #4: a Last Entry beyond the header straight to the signed chain's End.DX6, from inside (nfv1)",
          "hmac", "nfv1:eth-egress", "dropped",
          e / IPv6(src=NFV1_EGRESS, dst=DX6_SIGNED) / IPv6ExtHdrSegmentRouting(addresses=[DX6_SIGNED], segleft=0, lastentry=7) / inner(9, src=NFV1_EGRESS))
    # 5: a Destination Options header holding a copy of a signed SRH, then an altered SRH
    src = "fc00:1::1"
    signed = srh_hmac(src, [DX6_SIGNED, NFV1_END], secret=secret)  # path nfv1-end, then the End.DX6
    good = rh4(41, 0, signed)
    write("control-5-signed-srh-delivered",
          "control for issue 24 #5: the correctly signed SRH alone, as the egress receives it (SL 0): the kernel verifies it and End.DX6 delivers it to d (proves the HMAC of 5a is right)",
          "hmac", "nfv1:eth-egress", "delivered",
          e / IPv6(src=src, dst=DX6_SIGNED, nh=43) / Raw(good) / inner(10))
    altered = srh_hmac(src, [DX6_SIGNED, "fc00:2::bad:0"], secret=secret)
    altered = altered[:4 + 16 + 16] + signed[4 + 32:]  # altered segment list, the signed SRH's TLV
    copy = rh4(43, 0, signed)  # the DOH option's data: the signed SRH, byte for byte
    opt = bytes([0x1E, len(copy)]) + copy  # option type 0x1e: skip if unknown
    pad = (-(2 + len(opt))) % 8
    opt += b"\x00" if pad == 1 else (bytes([1, pad - 2]) + bytes(pad - 2) if pad else b"")
    doh = bytes([43, (2 + len(opt)) // 8 - 1]) + opt
    # The copy is the Destination Options header itself: the signed SRH byte
    # for byte, only its first byte (next header) now says "routing". The
    # kernel's seg6_hmac_validate_skb reads the SRH at the transport header,
    # which at route input is the first header after IPv6.
    copy_hdr = bytes([43]) + good[1:]
    write("issue24-5a-hmac-copy-in-doh",
          "issue 24 #5: a Destination Options header that is a byte copy of a correctly signed SRH (next header 43), then an SRH whose segment list was altered (the signed TLV kept): the digest was checked on the copy",
          "hmac", "nfv1:eth-egress", "dropped",
          e / IPv6(src=src, dst=DX6_SIGNED, nh=60) / Raw(copy_hdr + rh4(41, 0, altered)) / inner(11))
    write("issue24-5c-hmac-copy-in-doh-option",
          "issue 24 #5, variant: the signed SRH's bytes as the data of a skippable option (type 0x1e) of a Destination Options header, then the altered SRH",
          "hmac", "nfv1:eth-egress", "dropped",
          e / IPv6(src=src, dst=DX6_SIGNED, nh=60) / Raw(doh + rh4(41, 0, altered)) / inner(13))
    write("issue24-5b-hmac-altered-alone",
          "issue 24 #5: the altered SRH without the copy (rejected before the fix too)",
          "hmac", "nfv1:eth-egress", "dropped",
          e / IPv6(src=src, dst=DX6_SIGNED, nh=43) / Raw(rh4(41, 0, altered)) / inner(12))

    # Found by scripts/fuzz-boundary.py after the fixes of 1-5 (not in the
    # issue): the SF's own address is not in the boundary's node list, the
    # lab's SF processes SRHs (seg6_enabled), and what it forwards re-enters
    # the domain behind the boundary.
    write("found-sf-address-door",
          "NEW (fuzzer, seed 1): SRv6 from outside addressed to the SF sf1's own address (fc00:27::7), its SRH continuing to d: the boundary passes it (sf1 is not a node of its list), sf1's kernel processes the SRH and sends it to d by nfv1, whose End.AD outbound pushes the firewalled chain's headers on it (a SID processes a packet from outside): it is delivered to d through the rest of the chain",
          "default", "s", "known-bypass",
          e / IPv6(src=S, dst=SF1) / IPv6ExtHdrSegmentRouting(addresses=[D, SF1], segleft=1, lastentry=1) / UDP(sport=4000, dport=20014) / Raw(marker(14)))
    write("found-sf-address-door-to-sid",
          "NEW (fuzzer, seed 1): the same with the SRH continuing to the End.DX6 of chain firewalled: re-encapsulated by nfv1's End.AD, decapsulated by the egress, dropped there by the leak check (leak-sid): it crossed the domain",
          "default", "s", "known-bypass",
          e / IPv6(src=S, dst=SF1) / IPv6ExtHdrSegmentRouting(addresses=[DX6_FIREWALLED, SF1], segleft=1, lastentry=1) / inner(16))
    write("found-sf-address-plain",
          "NEW (fuzzer, seed 1): plain IPv6 from outside to the SF sf1's own address reaches sf1 (the boundary lets it in; nfv1 routes it to sf1)",
          "default", "s", "known-bypass",
          e / IPv6(src=S, dst=SF1) / UDP(sport=4000, dport=20015) / Raw(marker(15)))


if __name__ == "__main__":
    main()
