package netfilter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// TestNetfilterDomain applies examples/netfilter.yaml to a lab: the chain
// fw (End.AN.FW, nfv1) → nf (End.AN.NF, nfv2) → egress. The rule set file
// is loaded into nfv2 with the SID; UDP to port 9999 is dropped by it, UDP
// to 5000 reaches d (its rule counts it); a re-apply changes nothing; a
// table deleted by hand is drift that apply repairs; destroy removes the
// SID, the loop and the table.
func TestNetfilterDomain(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/netfilter.yaml", Prefix: "h16nf", Tools: []string{"tcpdump", "tshark", "nft"}})
	testutil.RequireScapy(t)
	ns := e.NS
	nfv2 := ns("nfv2")
	t.Cleanup(func() { _ = netfilter.Flush(nfv2) })
	ctl := e.Session(nil)
	ctx := context.Background()
	res, err := ctl.Apply(ctx)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.Changes() == 0 {
		t.Fatal("first apply changed nothing")
	}
	sts, err := netfilter.List(nfv2)
	if err != nil || len(sts) != 1 || sts[0].SID.String() != "fc00:3::e0:0/112" || sts[0].ArgsBits != 16 {
		t.Fatalf("End.AN.NF on nfv2: %+v, %v", sts, err)
	}
	if out := testutil.Exec(t, nfv2, "nft", "list", "tables"); !strings.Contains(out, "table inet segchain_nf") {
		t.Fatalf("rule set not loaded: %s", out)
	}
	if res, err := ctl.Apply(ctx); err != nil || res.Changes() != 0 {
		t.Fatalf("second apply: %v, %d changes: %+v", err, res.Changes(), res.Diffs)
	}

	send := func() []testutil.Packet {
		c := testutil.StartInboundCapture(t, ns("d"), "eth-egress", "udp", 1)
		testutil.RunScapyIn(t, ns("s"), `
conf.verb = 0
send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=3333, dport=9999)/Raw(b'drop'))
send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=3333, dport=5000)/Raw(b'pass'))
`)
		return testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.src", "udp.dstport")
	}
	pkts := send()
	if len(pkts) != 1 || pkts[0].First("udp.dstport") != "5000" {
		t.Fatalf("at d: %v, want the port 5000 packet only", pkts)
	}
	c := sts[0].Counters
	if sts, err = netfilter.List(nfv2); err != nil || len(sts) != 1 {
		t.Fatal(sts, err)
	}
	c = sts[0].Counters
	if c.Packets != 2 || c.Accepted != 1 || c.DroppedNetfilter != 1 {
		t.Errorf("End.AN.NF counters: %+v, want 2 in, 1 accepted, 1 dropped by netfilter", c)
	}
	out := testutil.Exec(t, nfv2, "nft", "list", "chain", "inet", "segchain_nf", "forward")
	if !strings.Contains(out, "udp dport 9999 counter packets 1 ") || !strings.Contains(out, "udp dport 5000 counter packets 1 ") {
		t.Errorf("rule counters:\n%s", out)
	}

	// Drift: the table deleted by hand is found and loaded again.
	testutil.Exec(t, nfv2, "nft", "delete", "table", "inet", "segchain_nf")
	res, err = ctl.Apply(ctx)
	if err != nil || res.Changes() == 0 {
		t.Fatalf("apply after the table was deleted: %v, %d changes", err, res.Changes())
	}
	if out := testutil.Exec(t, nfv2, "nft", "list", "tables"); !strings.Contains(out, "table inet segchain_nf") {
		t.Fatalf("rule set not reloaded: %s", out)
	}

	if _, err := ctl.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if sts, err := netfilter.List(nfv2); err != nil || len(sts) != 0 {
		t.Errorf("after destroy: %+v, %v", sts, err)
	}
	if out := testutil.Exec(t, nfv2, "nft", "list", "tables"); strings.Contains(out, "segchain_nf") {
		t.Errorf("table left after destroy: %s", out)
	}
	if out, _ := testutil.ExecErr(nfv2, "ip", "link", "show", netfilter.LoopOut); !strings.Contains(out, "does not exist") {
		t.Errorf("netfilter loop left after destroy: %s", out)
	}
}
