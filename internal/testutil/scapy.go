package testutil

import (
	"bytes"
	"os/exec"
	"testing"
)

// ScapyImport is the python that imports scapy for a test script: only
// the layers the scripts use (Ethernet and VLAN tags, IPv4, IPv6 with its
// extension headers and ICMPv6, UDP/TCP, DNS) instead of the ~50 layer
// modules of scapy.all's default. Every script starts a python, and that
// import was most of its cost (about 2 s of CPU of scapy 2.8 on this VM,
// 0.7 s with these layers): the suite runs hundreds of them. A dissected
// payload of a layer not loaded stays Raw.
const ScapyImport = `from scapy.config import conf
conf.load_layers = ["l2", "inet", "inet6", "dns"]
from scapy.all import *
`

// ScapyPrelude is python defining, after importing scapy, SRHHMAC: a correct
// SRH HMAC TLV (RFC 8754 §2.1.2: type 5, ONE-octet length = 6 + len(hmac),
// D bit, 15 reserved bits, 32-bit key id, hmac). scapy's own
// IPv6ExtHdrSegmentRoutingTLVHMAC gets the length field wrong; put SRHHMAC
// instances in IPv6ExtHdrSegmentRouting(tlv_objects=[...]) instead. It also
// defines SRHTLV(type, value) for arbitrary (unknown) TLVs.
const ScapyPrelude = `
import sys, json, binascii
` + ScapyImport + `
from scapy.layers.inet6 import *
from scapy.packet import Packet as _Pkt
from scapy.fields import ByteField, FieldLenField, BitField, IntField, StrLenField

class SRHHMAC(_Pkt):
    name = "SRH HMAC TLV (RFC 8754)"
    fields_desc = [ByteField("type", 5),
                   FieldLenField("len", None, length_of="hmac", fmt="B", adjust=lambda pkt, x: x + 6),
                   BitField("D", 0, 1), BitField("reserved", 0, 15),
                   IntField("keyid", 0),
                   StrLenField("hmac", b"", length_from=lambda pkt: pkt.len - 6)]
    def extract_padding(self, s):
        return b"", s

class SRHTLV(_Pkt):
    name = "SRH TLV"
    fields_desc = [ByteField("type", 0),
                   FieldLenField("len", None, length_of="value", fmt="B"),
                   StrLenField("value", b"", length_from=lambda pkt: pkt.len)]
    def extract_padding(self, s):
        return b"", s

def hexof(b):
    return binascii.hexlify(bytes(b)).decode()
`

// RunScapy runs script with python3 after ScapyPrelude and returns its
// standard output. It skips the test when scapy is missing and fails it
// (printing stderr) when the script fails. Batch many packets per script:
// starting python with scapy takes about a second.
func RunScapy(t testing.TB, script string) []byte {
	t.Helper()
	RequireScapy(t)
	cmd := exec.Command(Python(), "-")
	cmd.Stdin = bytes.NewBufferString(ScapyPrelude + script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("scapy script: %v\n%s", err, errb.String())
	}
	return out.Bytes()
}
