package testutil

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nsutil"
)

// MustMAC parses a MAC address or panics.
func MustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// L4 is an 8-byte UDP header (ports and length, no checksum) and payload.
func L4(sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(8+len(payload)))
	return append(b, payload...)
}

// SkbCtx is the head of struct __sk_buff that BPF_PROG_TEST_RUN accepts.
type SkbCtx struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTci, VlanProto, Priority uint32
	IngressIfindex, Ifindex, TcIndex                                                      uint32
	Cb                                                                                    [5]uint32
}

// RunTC runs the tc program prog on pkt inside ns as if it arrived on
// ifindex (BPF_PROG_TEST_RUN), and returns the verdict and the packet as
// the program left it (room: bytes it may grow by).
func RunTC(t *testing.T, ns string, prog *ebpf.Program, ifindex uint32, pkt []byte, room int) (uint32, []byte) {
	t.Helper()
	var ret uint32
	out := make([]byte, len(pkt)+room)
	err := nsutil.Do(ns, func() error {
		opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Context: SkbCtx{IngressIfindex: ifindex, Ifindex: ifindex}}
		var err error
		ret, err = prog.Run(opts)
		out = opts.DataOut
		return err
	})
	if err != nil {
		t.Fatalf("test run (%d bytes, % x): %v", len(pkt), pkt, err)
	}
	return ret, out
}

// Uplink gives ns a forwarding IPv6 uplink for programs that consult the
// FIB: veth pa (MAC mac) to pb (MAC peer), both up, fc00:99::1/64 on pa,
// a default route via fc00:99::2 whose neighbour is peer. It returns pa's
// ifindex.
func Uplink(t testing.TB, ns string, mac, peer net.HardwareAddr) uint32 {
	t.Helper()
	x := func(args ...string) { Exec(t, ns, args...) }
	x("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	x("ip", "link", "add", "pa", "address", mac.String(), "type", "veth", "peer", "pb", "address", peer.String())
	x("ip", "link", "set", "pa", "up")
	x("ip", "link", "set", "pb", "up")
	x("ip", "-6", "addr", "add", "fc00:99::1/64", "dev", "pa", "nodad")
	x("ip", "-6", "route", "add", "default", "via", "fc00:99::2", "dev", "pa")
	x("ip", "-6", "neigh", "replace", "fc00:99::2", "lladdr", peer.String(), "dev", "pa", "nud", "permanent")
	return IfIndex(t, ns, "pa")
}

// IfIndex returns the index of interface name in ns.
func IfIndex(t testing.TB, ns, name string) uint32 {
	t.Helper()
	var idx uint32
	err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		idx = uint32(i.Index)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}
