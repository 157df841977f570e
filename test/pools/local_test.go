package pools

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
)

// TestPoolLocalTraffic: datagrams the headend itself sends into the
// pool's chain have no ingress hook before their route lookup: the
// chain's route pushes the placeholder's list and pool_out (TCX egress)
// selects them as before session 12. They spread over the instances
// exactly as the model says for their flows and all arrive; with fw2
// down new local flows avoid it.
func TestPoolLocalTraffic(t *testing.T) {
	e := setup(t, pool.Failover)
	local := addrOn(t, e.NS("ingress"), "eth-s")
	sendLocal := func(ps []int) map[int]int { return e.sendLocal(local, ps) }
	expect := func(sent map[int]int, live uint32) []uint64 { return e.expectLocal(local, sent, live) }
	s0 := e.stats()
	sent := sendLocal(ports(28000, 60))
	want := expect(sent, e.pool.AllLive())
	if got := delta(s0, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("local flows: instances got %v packets, model %v", got, want)
	}
	if slices.Contains(want, 0) {
		t.Fatalf("an instance got no local flow of 60: %v", want)
	}
	if err := e.he.SetInstance(0, 1, false); err != nil {
		t.Fatal(err)
	}
	s1 := e.stats()
	sent = sendLocal(ports(28100, 60))
	want = expect(sent, e.pool.AllLive()&^2)
	if got := delta(s1, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) || want[1] != 0 {
		t.Errorf("fw2 down: local flows got %v packets, model %v", got, want)
	}
}

// addrOn is namespace ns's global IPv6 address on interface iface.
func addrOn(t *testing.T, ns, iface string) netip.Addr {
	t.Helper()
	var addr netip.Addr
	if err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		as, err := i.Addrs()
		for _, a := range as {
			if p, ok := netip.AddrFromSlice(a.(*net.IPNet).IP); ok && p.Is6() && !p.IsLinkLocalUnicast() {
				addr = p
			}
		}
		return err
	}); err != nil || !addr.IsValid() {
		t.Fatalf("%s's address on %s: %v (%v)", ns, iface, addr, err)
	}
	return addr
}

// sendLocal sends one datagram per port from the headend itself (source
// local), resending those d has not got, and returns how many it sent
// per port.
func (e *env) sendLocal(local netip.Addr, ps []int) map[int]int {
	t := e.t
	t.Helper()
	sent := map[int]int{}
	base := map[int]int{}
	for _, p := range ps {
		base[p] = e.rcv.count(p)
	}
	missing := ps
	for round := 0; len(missing) > 0; round++ {
		if round == 6 {
			t.Fatalf("%d of %d local flows never reached d", len(missing), len(ps))
		}
		for _, p := range missing {
			if err := nsutil.Do(e.NS("ingress"), func() error {
				c, err := net.DialUDP("udp6", &net.UDPAddr{IP: local.AsSlice(), Port: p}, &net.UDPAddr{IP: dstAddr.AsSlice(), Port: dport})
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write([]byte("local datagram"))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			sent[p]++
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			missing = nil
			for _, p := range ps {
				if e.rcv.count(p) <= base[p] {
					missing = append(missing, p)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return sent
}

// expectLocal is the model's packets per instance for the local
// datagrams sent per port, instances live.
func (e *env) expectLocal(local netip.Addr, sent map[int]int, live uint32) []uint64 {
	want := make([]uint64, len(e.pool.Instances))
	for p, n := range sent {
		f := pool.Flow{Src: local, Dst: dstAddr, Sport: uint16(p), Dport: dport, Proto: 17}
		if d := e.pool.Decide(live, f.Hash(e.pool.Symmetric)); d.Instance >= 0 {
			want[d.Instance] += uint64(n)
		}
	}
	return want
}
