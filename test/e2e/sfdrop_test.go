package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/metrics"
	"github.com/segchain/segchain/internal/testutil"
)

// sfDropRules is an SF that forwards nothing and says nothing: the nft
// forward chain's policy drops every packet, no counter, no ICMP.
const sfDropRules = `table inet h4sfdrop {
	chain sfdrop { type filter hook forward priority 0; policy drop; }
}
`

// An SF that drops silently is visible at its proxy: "not-returned" (sent
// to the SF, never came back) rises by exactly the packets sent while the
// SF swallows them — in status (the SID's detail) and as the metric
// segchain_proxy_sf_not_returned_packets — and stops rising once the SF
// forwards again (issue 25, item 5). Before, every counter of the proxy
// looked healthy: in-packets rose, nothing else moved.
func TestSFSilentDropShowsNotReturned(t *testing.T) {
	testutil.RequireTool(t, "nft")
	e := setupMBB(t)
	e.apply()
	sid := e.sid("nfv1-px")
	m := metrics.New(local.NewLocal("nfv1", e.NS("nfv1")), metrics.Build{}, nil)
	// notReturned reads the figure from status (the controller's data,
	// what -o json prints) and from the metric; they must agree.
	notReturned := func() uint64 {
		t.Helper()
		var fromStatus uint64
		var found bool
		for _, n := range e.ctl.Status(context.Background()).Nodes {
			for _, s := range n.SIDs {
				if n.Node == "nfv1" && s.SID.Contains(sid) {
					v, ok := s.Detail["not-returned"]
					if !ok {
						t.Fatalf("status: SID %s has no not-returned figure: %v", s.SID, s.Detail)
					}
					fromStatus, found = v, true
				}
			}
		}
		if !found {
			t.Fatalf("status lists no SID %s on nfv1", sid)
		}
		mfs, err := m.Gather().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var fromMetric float64
		var seen bool
		for _, mf := range mfs {
			if mf.GetName() != "segchain_proxy_sf_not_returned_packets" {
				continue
			}
			for _, mm := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range mm.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["node"] == "nfv1" && labels["sid"] == e.counters("nfv1", sid).SID.String() {
					fromMetric, seen = mm.GetGauge().GetValue(), true
				}
			}
		}
		if !seen || uint64(fromMetric) != fromStatus {
			t.Fatalf("metric segchain_proxy_sf_not_returned_packets = %v (exported: %v), status says %d", fromMetric, seen, fromStatus)
		}
		return fromStatus
	}

	const n = 200
	before := notReturned()
	if r := stream(t, e, 7100, n, 500, nil); r.Unique != n {
		t.Fatalf("healthy SF: %d of %d arrived", r.Unique, n)
	}
	if got := notReturned(); got != before {
		t.Errorf("healthy SF: not-returned moved %d -> %d", before, got)
	}

	rules := filepath.Join(t.TempDir(), "drop.nft")
	if err := os.WriteFile(rules, []byte(sfDropRules), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Exec(t, e.NS("sf1"), "nft", "-f", rules)
	t.Cleanup(func() { _, _ = testutil.ExecErr(e.NS("sf1"), "nft", "delete", "table", "inet", "h4sfdrop") })
	if r := stream(t, e, 7100, n, 500, nil); r.Unique != 0 {
		t.Fatalf("SF with policy drop: %d of %d arrived", r.Unique, n)
	}
	want := before + n
	// The sender is done; the proxy counts as it sends: wait for the
	// figure (a bound on a hang, not a timing check), then it must be
	// exactly what was sent.
	for deadline := time.Now().Add(10 * time.Second); notReturned() < want && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
	}
	dropped := notReturned()
	if dropped != want {
		t.Errorf("SF dropping silently: not-returned %d -> %d, want +%d", before, dropped, n)
	}

	testutil.Exec(t, e.NS("sf1"), "nft", "delete", "table", "inet", "h4sfdrop")
	if r := stream(t, e, 7100, n, 500, nil); r.Unique != n {
		t.Errorf("SF forwarding again: %d of %d arrived", r.Unique, n)
	}
	if got := notReturned(); got != dropped {
		t.Errorf("SF forwarding again: not-returned still moves: %d -> %d", dropped, got)
	}
}
