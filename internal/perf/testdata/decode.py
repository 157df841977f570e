# Decodes hex Ethernet frames (one per line on stdin) with scapy and prints
# one JSON object per frame: the oracle of packet_test.go.
import json
import sys

from scapy.all import IP, UDP, Ether, IPv6, IPv6ExtHdrSegmentRouting, raw


def udp_info(u, out):
    out["udp_sport"], out["udp_dport"], out["udp_len"] = u.sport, u.dport, u.len
    # Rebuild the checksum with scapy (it knows the SRH's final destination)
    # and compare with the one in the frame.
    if u.chksum != 0:
        c = u.copy()
        c.chksum = None
        rebuilt = c.__class__(raw(c))
        out["udp_csum_ok"] = rebuilt.chksum == u.chksum


def ip_info(p, out, prefix):
    if IPv6 in p and isinstance(p, IPv6):
        out[prefix + "family"] = 6
        out[prefix + "src"], out[prefix + "dst"] = p.src, p.dst
        out[prefix + "len"] = 40 + p.plen
        out[prefix + "hlim"] = p.hlim
    elif isinstance(p, IP):
        out[prefix + "family"] = 4
        out[prefix + "src"], out[prefix + "dst"] = p.src, p.dst
        out[prefix + "len"] = p.len
        c = p.copy()
        c.chksum = None
        out[prefix + "csum_ok"] = IP(raw(c)).chksum == p.chksum


for line in sys.stdin:
    b = bytes.fromhex(line.strip())
    e = Ether(b)
    out = {"frame_len": len(b), "eth_type": e.type}
    outer = e.payload
    ip_info(outer, out, "outer_")
    if IPv6ExtHdrSegmentRouting in e:
        s = e[IPv6ExtHdrSegmentRouting]
        out["sl"], out["last_entry"] = s.segleft, s.lastentry
        out["segs"] = [str(a) for a in s.addresses]
        out["srh_nh"] = s.nh
        inner = s.payload
        if s.nh == 143:  # Ethernet: scapy does not bind it, decode by hand
            ie = Ether(raw(inner))
            out["inner_eth_type"] = ie.type
            inner = ie.payload
        if s.nh in (4, 41, 143):
            ip_info(inner, out, "inner_")
            if UDP in inner:
                udp_info(inner[UDP], out)
        elif UDP in s:
            udp_info(s[UDP], out)
    elif UDP in e:
        udp_info(e[UDP], out)
    print(json.dumps(out), flush=True)
