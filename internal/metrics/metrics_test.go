package metrics

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/bfd"
	"github.com/segchain/segchain/internal/bgp"
	"github.com/segchain/segchain/internal/nodestate"
)

// fake is node nfv1 with counted SIDs and boundary counters.
func fake() *agenttest.Agent {
	a := agenttest.New("nfv1")
	a.SIDs = []agent.SIDCounters{
		{SID: netip.MustParsePrefix("fc00:2::1/128"), Behavior: "End.AD", Owned: true, Counted: true, Packets: 3, Bytes: 300,
			Detail: map[string]uint64{"in-packets": 3, "out-packets": 2, "drop-cache-empty": 1, "not-returned": 1}},
		{SID: netip.MustParsePrefix("fc00:2::2/128"), Behavior: "End", Owned: true, Counted: true, Packets: 5},
		{SID: netip.MustParsePrefix("fc00:2::3/128"), Behavior: "End"}, // not counted: not exported
	}
	a.With.Boundary = agenttest.BoundaryFunc(func(context.Context) ([]nodestate.BoundaryCounter, error) {
		return []nodestate.BoundaryCounter{{Iface: "eth0", Direction: "in", Reason: "sid-from-outside", Packets: 4, Bytes: 400}}, nil
	})
	return a
}

type fakeBFD struct{}

func (fakeBFD) BFD() []bgp.BFDSession {
	return []bgp.BFDSession{{Node: "r1", Dev: "eth-r1", Peer: "fc00:25::5", Stats: bfd.Stats{
		State: bfd.Up, Downs: 2, Sent: 20, Received: 10, Drops: map[bfd.Reason]uint64{bfd.ReasonHopLimit: 1}}}}
}

// Every segchain_* metric the agent exports is documented in
// docs/metrics.md, and the values are the agent's.
func TestMetricsDocumented(t *testing.T) {
	m := New(fake(), Build{Version: "v", Commit: "c", Go: "go"}, nil)
	m.Op(agent.Op{Kind: agent.KindRoute}, time.Millisecond, nil)
	m.Execute(1, time.Millisecond, nil)
	m.Reconcile("applied")
	m.WatchBFD("nfv1", fakeBFD{})
	mfs, err := m.Gather().Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "segchain_") {
			continue
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("metric %s is not in docs/metrics.md", name)
		}
		for _, mm := range mf.GetMetric() {
			v := mm.GetCounter().GetValue() + mm.GetGauge().GetValue()
			seen[name] += v
		}
	}
	for name, want := range map[string]float64{
		"segchain_sid_packets_total":             8,
		"segchain_service_packets_total":         5,
		"segchain_service_drops_total":           1,
		"segchain_proxy_sf_not_returned_packets": 1,
		"segchain_boundary_drops_total":          4,
		"segchain_agent_ops_total":               1,
		"segchain_agent_reconciles_total":        1,
		"segchain_node_scrape_success":           1,
		"segchain_agent_build_info":              1,
		"segchain_boundary_dropped_bytes_total":  400,
		"segchain_bfd_session_state":             3,
		"segchain_bfd_session_downs_total":       2,
		"segchain_bfd_packets_total":             30,
		"segchain_bfd_drops_total":               1,
	} {
		if seen[name] != want {
			t.Errorf("%s = %v, want %v", name, seen[name], want)
		}
	}
}
