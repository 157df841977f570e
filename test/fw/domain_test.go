package fw_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// TestFWDomain applies examples/firewall.yaml to a lab: the firewall
// instance comes from the domain file, a re-apply changes nothing, DNS
// skips the IDS while other traffic goes through it, a rule change is one
// firewall op, and destroy removes the instance.
func TestFWDomain(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/firewall.yaml", Prefix: "fwd", Tools: []string{"tcpdump", "tshark"}})
	testutil.RequireScapy(t)
	ns := e.NS
	nfv1 := ns("nfv1")
	t.Cleanup(func() { _ = firewall.Flush(nfv1) }) // if the test fails before destroy
	ctlFor := e.Session
	d := e.Domain
	ctx := context.Background()
	ctl := ctlFor(d)
	res, err := ctl.Apply(ctx)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.Changes() == 0 {
		t.Fatal("first apply changed nothing")
	}
	sts, err := firewall.List(nfv1)
	if err != nil || len(sts) != 1 {
		t.Fatalf("firewall.List(nfv1) = %+v, %v; want one instance", sts, err)
	}
	if got := sts[0].Instance; got.SID.String() != "fc00:2::f1:0/112" || got.ArgsBits != 16 || len(got.Rules) != 4 {
		t.Errorf("instance %+v", got)
	}
	if res, err := ctl.Apply(ctx); err != nil || res.Changes() != 0 {
		t.Fatalf("second apply: %v, %d changes: %+v", err, res.Changes(), res.Diffs)
	}

	// Traffic s → d: DNS skips the IDS (nfv2 forwards it with DA = the
	// egress SID, SL 0); other UDP goes to the IDS SID (SL 1).
	sids, err := d.SIDs()
	if err != nil {
		t.Fatal(err)
	}
	ids, egress := sids["ids"].String(), sids[config.EgressKey("inspected")].String()
	c := testutil.StartInboundCapture(t, ns("nfv2"), "eth-nfv1", "ip6 proto 43", 0)
	testutil.RunScapyIn(t, ns("s"), `
conf.verb = 0
for i in range(3):
    send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=3333, dport=53)/Raw(b'dns'))
    send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=3333, dport=9999)/Raw(b'web'))
`)
	time.Sleep(time.Second)
	var dns, web int
	for _, p := range testutil.Tshark(t, c.Wait(2*time.Second), "ipv6.dst", "ipv6.routing.segleft", "udp.dstport") {
		dst, sl, port := p.First("ipv6.dst"), p.First("ipv6.routing.segleft"), p.First("udp.dstport")
		switch port {
		case "53":
			dns++
			if dst != egress || sl != "0" {
				t.Errorf("DNS at nfv2: DA %s SL %s, want %s SL 0 (skip-next past the IDS)", dst, sl, egress)
			}
		case "9999":
			web++
			if dst != ids || sl != "1" {
				t.Errorf("UDP 9999 at nfv2: DA %s SL %s, want the IDS %s SL 1", dst, sl, ids)
			}
		}
	}
	if dns == 0 || web == 0 {
		t.Errorf("captured %d DNS and %d other packets at nfv2, want both", dns, web)
	}

	// A rule change is one firewall op on nfv1, nothing else.
	raw, err := os.ReadFile("../../examples/firewall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	changed := strings.Replace(string(raw), "policy: accept", "policy: drop", 1)
	if err := os.WriteFile(filepath.Join(dir, "firewall.yaml"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	d2, err := config.Load(filepath.Join(dir, "firewall.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctl2 := ctlFor(d2)
	res, err = ctl2.Apply(ctx)
	if err != nil {
		t.Fatalf("apply changed domain: %v", err)
	}
	if res.Changes() != 1 {
		t.Errorf("policy change made %d changes, want 1: %+v", res.Changes(), res.Diffs)
	}
	if in, ok, err := firewall.Get(nfv1, sts[0].Instance.SID); err != nil || !ok || in.Policy.String() != "drop" {
		t.Errorf("after the change: %+v %v %v", in, ok, err)
	}

	if _, err := ctl2.Destroy(ctx); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if sts, err := firewall.List(nfv1); err != nil || len(sts) != 0 {
		t.Errorf("after destroy: %+v, %v", sts, err)
	}

	// lab down takes the firewall's pinned state with the namespace.
	if _, err := ctl2.Apply(ctx); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	fi, err := os.Stat(filepath.Join("/run/netns", nfv1))
	if err != nil {
		t.Fatal(err)
	}
	root, err := bpfpin.Root()
	if err != nil {
		t.Fatal(err)
	}
	pins := filepath.Join(root, fmt.Sprintf("ns-%d-*", fi.Sys().(*syscall.Stat_t).Ino), "fw")
	if m, _ := filepath.Glob(pins); len(m) == 0 {
		t.Fatalf("no firewall pins at %s after apply", pins)
	}
	if err := lab.Down(e.Name); err != nil {
		t.Fatalf("lab down: %v", err)
	}
	if m, _ := filepath.Glob(pins); len(m) != 0 {
		t.Errorf("firewall pins left after lab down: %v", m)
	}
}
