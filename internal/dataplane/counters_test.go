package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedCountersTraffic: namespace A encapsulates UDP datagrams with
// H.Encaps towards an End SID (with count) in namespace B; B's counters
// must show exactly those packets, and ClearCounters must zero them.
func TestPrivilegedCountersTraffic(t *testing.T) {
	testutil.RequireRoot(t)
	nsA := testutil.NewNetns(t, "dpca")
	nsB := testutil.NewNetns(t, "dpcb")
	testutil.Exec(t, nsA, "ip", "link", "add", "a0", "type", "veth", "peer", "name", "b0", "netns", nsB)
	testutil.Exec(t, nsA, "ip", "addr", "add", "fc00:ab::1/64", "dev", "a0", "nodad")
	testutil.Exec(t, nsB, "ip", "addr", "add", "fc00:ab::2/64", "dev", "b0", "nodad")
	testutil.Exec(t, nsA, "ip", "link", "set", "a0", "up")
	testutil.Exec(t, nsB, "ip", "link", "set", "b0", "up")

	a, b := openT(t, nsA), openT(t, nsB)
	f := b.Probe()
	checkProbe(t, f.Counters)
	if !f.Counters.Supported {
		t.Skipf("counters: %s", f.Counters.Reason)
	}
	for _, kv := range [][2]string{{"net.ipv6.conf.all.forwarding", "1"}, {"net.ipv6.conf.b0.seg6_enabled", "1"}} {
		if err := b.SetSysctl(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	sid := nodestate.Route{Dst: pfx("fc00:b::100/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}}
	for _, c := range []struct {
		h *Handle
		r nodestate.Route
	}{
		{b, sid},
		{a, nodestate.Route{Dst: pfx("fc00:b::/64"), Via: ip("fc00:ab::2"), Dev: "a0"}},
		{a, nodestate.Route{Dst: pfx("fc00:99::/64"), Dev: "a0", Seg6: &nodestate.Seg6Encap{
			Mode: "encap", Segs: []netip.Addr{ip("fc00:b::100"), ip("fc00:ab::1")}}}},
	} {
		if err := c.h.ReplaceRoute(c.r); err != nil {
			t.Fatal(err)
		}
	}
	counters := func() *Counters {
		t.Helper()
		sids, err := b.LocalSIDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sids {
			if s.Route.Dst == sid.Dst {
				return s.Counters
			}
		}
		t.Fatalf("SID %s not found in %v", sid.Dst, sids)
		return nil
	}
	if diff := cmp.Diff(&Counters{}, counters()); diff != "" {
		t.Fatalf("fresh counters (-want +got):\n%s", diff)
	}
	const n = 3
	// Each datagram on B's wire: outer IPv6 40 + SRH 8+2*16 + inner IPv6 40
	// + UDP 8 + 56 payload bytes = 184 bytes.
	const perPacket = 40 + 8 + 2*16 + 40 + 8 + 56
	send := func(want uint64) {
		t.Helper()
		err := nsutil.Do(nsA, func() error {
			c, err := net.Dial("udp6", "[fc00:99::1]:9")
			if err != nil {
				return err
			}
			defer c.Close()
			for range n {
				if _, err := c.Write(make([]byte, 56)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Synchronisation, not an assertion: wait (bounded) until B has
		// seen the packets, then compare exact values below.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if c := counters(); c.Packets+c.Errors >= want {
				return
			}
		}
	}
	send(n)
	if diff := cmp.Diff(&Counters{Packets: n, Bytes: n * perPacket}, counters()); diff != "" {
		t.Errorf("counters after %d datagrams (-want +got):\n%s", n, diff)
	}
	if err := b.ClearCounters(sid); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Counters{}, counters()); diff != "" {
		t.Errorf("counters after ClearCounters (-want +got):\n%s", diff)
	}
	routes, err := b.Routes()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]nodestate.Route{sid}, routes, cmpOpts); diff != "" {
		t.Errorf("ClearCounters changed the route (-want +got):\n%s", diff)
	}
	send(n)
	if got := counters(); got.Packets != n {
		t.Errorf("counting after clear: %+v, want %d packets", got, n)
	}
	if err := b.ClearCounters(nodestate.Route{Dst: pfx("fc00:b::999/128")}); !errors.Is(err, unix.ESRCH) {
		t.Errorf("ClearCounters of a missing SID: %v, want ESRCH", err)
	}
}

// TestPrivilegedDecapSIDDelivers proves a device-less SID (installed as a
// local route on lo) runs a decapsulating behaviour: A encapsulates UDP
// towards B's End.DX6 SID, B decapsulates and cross-connects to C, where a
// socket receives the payload.
func TestPrivilegedDecapSIDDelivers(t *testing.T) {
	testutil.RequireRoot(t)
	nsA := testutil.NewNetns(t, "dpxa")
	nsB := testutil.NewNetns(t, "dpxb")
	nsC := testutil.NewNetns(t, "dpxc")
	for _, c := range []struct {
		ns   string
		args []string
	}{
		{nsA, []string{"ip", "link", "add", "a0", "type", "veth", "peer", "name", "b0", "netns", nsB}},
		{nsB, []string{"ip", "link", "add", "b1", "type", "veth", "peer", "name", "c0", "netns", nsC}},
		{nsA, []string{"ip", "addr", "add", "fc00:ab::1/64", "dev", "a0", "nodad"}},
		{nsB, []string{"ip", "addr", "add", "fc00:ab::2/64", "dev", "b0", "nodad"}},
		{nsB, []string{"ip", "addr", "add", "fc00:bc::1/64", "dev", "b1", "nodad"}},
		{nsC, []string{"ip", "addr", "add", "fc00:bc::2/64", "dev", "c0", "nodad"}},
		{nsC, []string{"ip", "addr", "add", "fc00:c::1/64", "dev", "c0", "nodad"}},
		{nsA, []string{"ip", "link", "set", "a0", "up"}},
		{nsB, []string{"ip", "link", "set", "b0", "up"}},
		{nsB, []string{"ip", "link", "set", "b1", "up"}},
		{nsC, []string{"ip", "link", "set", "c0", "up"}},
	} {
		testutil.Exec(t, c.ns, c.args...)
	}
	a, b, c := openT(t, nsA), openT(t, nsB), openT(t, nsC)
	if err := b.SetSysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
		t.Fatal(err)
	}
	sid := nodestate.Route{Dst: pfx("fc00:b::6/128"), Seg6Local: &nodestate.Seg6Local{Action: "End.DX6", Nh6: ip("fc00:bc::2"), Count: true}}
	for _, x := range []struct {
		h *Handle
		r nodestate.Route
	}{
		{b, sid},
		{a, nodestate.Route{Dst: pfx("fc00:b::/64"), Via: ip("fc00:ab::2"), Dev: "a0"}},
		{a, nodestate.Route{Dst: pfx("fc00:c::/64"), Dev: "a0", Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{ip("fc00:b::6")}}}},
		{c, nodestate.Route{Dst: pfx("fc00:ab::/64"), Via: ip("fc00:bc::1"), Dev: "c0"}},
	} {
		if err := x.h.ReplaceRoute(x.r); err != nil {
			t.Fatal(err)
		}
	}
	var conn net.PacketConn
	if err := nsutil.Do(nsC, func() (err error) {
		conn, err = net.ListenPacket("udp6", "[fc00:c::1]:9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := []byte("through End.DX6")
	if err := nsutil.Do(nsA, func() error {
		s, err := net.Dial("udp6", "[fc00:c::1]:9999")
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.Write(msg)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// A read deadline bounds the wait; the assertion is on the content.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, from, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatalf("C received nothing: %v", err)
	}
	if string(buf[:n]) != string(msg) || from.(*net.UDPAddr).IP.String() != "fc00:ab::1" {
		t.Errorf("C received %q from %s, want %q from fc00:ab::1", buf[:n], from, msg)
	}
	sids, err := b.LocalSIDs()
	if err != nil || len(sids) != 1 || sids[0].Counters == nil || sids[0].Counters.Packets != 1 {
		t.Errorf("B's SID counters: %+v, %v; want 1 packet", sids, err)
	}
}
