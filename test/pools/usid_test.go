package pools

import (
	"fmt"
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
