package pools

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPoolF3216: a pool in an f3216 domain, its members' SIDs pinned full
// (a pool of uSIDs is refused: internal/plan TestPoolsF3216), the chain's
// egress a uSID: the chain is pushed as encap with the pool's SID and a
// uSID container as SRH entries. Flows spread as the model says and all
// arrive; a frame sent to fw2 carries fw2's SID as its destination and
// the container after it (tshark); with fw2 down new flows avoid it.
func TestPoolF3216(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	e := setupFile(t, "testdata/pooled-f3216.yaml", pool.Failover)
	fw2 := e.pool.Instances[1].SID
	capt := testutil.StartCapture(t, e.NS("ingress"), "eth-nfv2", "ip6 dst "+fw2.String(), 1)

	s0 := e.stats()
	sent := e.send(ports(27000, 60))
	want := e.expect(sent, e.pool.AllLive(), nil)
	if got := delta(s0, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spread: instances got %v packets, model %v", got, want)
	}
	if slices.Contains(want, 0) {
		t.Fatalf("an instance got no flow of 60: %v", want)
	}
	capt.Wait(10 * time.Second)
	pkts := testutil.Tshark(t, capt.Path(), "ipv6.dst", "ipv6.routing.segleft", "ipv6.routing.srh.addr")
	if len(pkts) == 0 {
		t.Fatal("no frame to fw2 captured on ingress's eth-nfv2")
	}
	p := pkts[0]
	segs := p["ipv6.routing.srh.addr"]
	if p.First("ipv6.dst") != fw2.String() || len(segs) != 2 || segs[1] != fw2.String() || !strings.HasPrefix(segs[0], "fcbb:bb00:") || p.First("ipv6.routing.segleft") != "1" {
		t.Errorf("frame to fw2: dst %s, SL %s, segments %v; want dst %s, SL 1, [a container fcbb:bb00:…, %s]", p.First("ipv6.dst"), p.First("ipv6.routing.segleft"), segs, fw2, fw2)
	}

	// fw2 down: new flows go to fw1 and fw3 only, and arrive.
	if err := e.he.SetInstance(0, 1, false); err != nil {
		t.Fatal(err)
	}
	s1 := e.stats()
	sent = e.send(ports(27100, 60))
	want = e.expect(sent, e.pool.AllLive()&^2, nil)
	if got := delta(s1, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) || want[1] != 0 {
		t.Errorf("fw2 down: instances got %v packets, model %v", got, want)
	}
}

// TestPoolF3216USID: a pool whose members are uSIDs (refused before
// session 12: the selector rewrote a full SID of the SRH and found none
// in a container, so every flow went to the pool's own instance). Each
// instance's table holds the chain packed with its uSID: flows spread
// as the model says and all arrive; a frame to fw2 leaves the headend
// with a container that starts with fw2's uSID as its destination and
// the datagram inside (tshark); with fw2 down new flows avoid it.
func TestPoolF3216USID(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	e := setupFile(t, "testdata/pooled-f3216-usid.yaml", pool.Failover)
	fw2 := e.pool.Instances[1].SID.As16()
	if fw2[0] != 0xfc || fw2[1] != 0xbb {
		t.Fatalf("fw2's SID %s is not a uSID", e.pool.Instances[1].SID)
	}
	// Frames to fw2's uSID (its container's first 48 bits), the data's
	// and the probes'.
	net48 := netip.PrefixFrom(netip.AddrFrom16([16]byte{fw2[0], fw2[1], fw2[2], fw2[3], fw2[4], fw2[5]}), 48)
	capt := testutil.StartCapture(t, e.NS("ingress"), "eth-nfv2", "ip6 dst net "+net48.String()+" and not udp", 3)

	s0 := e.stats()
	sent := e.send(ports(27200, 60))
	want := e.expect(sent, e.pool.AllLive(), nil)
	if got := delta(s0, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spread: instances got %v packets, model %v", got, want)
	}
	if slices.Contains(want, 0) {
		t.Fatalf("an instance got no flow of 60: %v", want)
	}
	capt.Wait(10 * time.Second)
	pkts := testutil.Tshark(t, capt.Path(), "ipv6.dst")
	data := 0
	for _, p := range pkts {
		dsts := p["ipv6.dst"]
		if len(dsts) == 2 && dsts[1] == dstAddr.String() {
			data++
			if !net48.Contains(netip.MustParseAddr(dsts[0])) {
				t.Errorf("frame to fw2: outer dst %s, want a container in %s", dsts[0], net48)
			}
		}
	}
	if data == 0 {
		t.Fatalf("no data frame to fw2 (%s) captured on ingress's eth-nfv2: %v", net48, pkts)
	}

	// fw2 down: new flows go to fw1 and fw3 only, and arrive.
	if err := e.he.SetInstance(0, 1, false); err != nil {
		t.Fatal(err)
	}
	s1 := e.stats()
	sent = e.send(ports(27300, 60))
	want = e.expect(sent, e.pool.AllLive()&^2, nil)
	if got := delta(s1, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) || want[1] != 0 {
		t.Errorf("fw2 down: instances got %v packets, model %v", got, want)
	}
}

// TestPoolF3216USIDLocal: datagrams the headend itself sends into a uSID
// pool's chain (pool_local on the chain's local table, then the
// instance's table, packed): they spread as the model says for their
// flows and all arrive; a local frame to fw2 leaves with a container
// starting with fw2's uSID as its destination and the datagram, from the
// headend, inside (tshark); with fw2 down new local flows avoid it.
func TestPoolF3216USIDLocal(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	e := setupAs(t, "testdata/pooled-f3216-usid.yaml", pool.Failover, "s18pt")
	fw2 := e.pool.Instances[1].SID.As16()
	if fw2[0] != 0xfc || fw2[1] != 0xbb {
		t.Fatalf("fw2's SID %s is not a uSID", e.pool.Instances[1].SID)
	}
	net48 := netip.PrefixFrom(netip.AddrFrom16([16]byte{fw2[0], fw2[1], fw2[2], fw2[3], fw2[4], fw2[5]}), 48)
	local := addrOn(t, e.NS("ingress"), "eth-s")
	capt := testutil.StartCapture(t, e.NS("ingress"), "eth-nfv2", "ip6 dst net "+net48.String()+" and not udp", 3)

	s0 := e.stats()
	sent := e.sendLocal(local, ports(28200, 60))
	want := e.expectLocal(local, sent, e.pool.AllLive())
	if got := delta(s0, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("local flows: instances got %v packets, model %v", got, want)
	}
	if slices.Contains(want, 0) {
		t.Fatalf("an instance got no local flow of 60: %v", want)
	}
	capt.Wait(10 * time.Second)
	pkts := testutil.Tshark(t, capt.Path(), "ipv6.src", "ipv6.dst")
	data := 0
	for _, p := range pkts {
		srcs, dsts := p["ipv6.src"], p["ipv6.dst"]
		if len(dsts) == 2 && dsts[1] == dstAddr.String() && len(srcs) == 2 && srcs[1] == local.String() {
			data++
			if !net48.Contains(netip.MustParseAddr(dsts[0])) {
				t.Errorf("local frame to fw2: outer dst %s, want a container in %s", dsts[0], net48)
			}
		}
	}
	if data == 0 {
		t.Fatalf("no local data frame to fw2 (%s) captured on ingress's eth-nfv2: %v", net48, pkts)
	}

	if err := e.he.SetInstance(0, 1, false); err != nil {
		t.Fatal(err)
	}
	s1 := e.stats()
	sent = e.sendLocal(local, ports(28300, 60))
	want = e.expectLocal(local, sent, e.pool.AllLive()&^2)
	if got := delta(s1, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) || want[1] != 0 {
		t.Errorf("fw2 down: local flows got %v packets, model %v", got, want)
	}
}
