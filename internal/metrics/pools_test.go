package metrics

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
)

// A pool selector's detail becomes per-instance metrics, documented.
func TestPoolMetrics(t *testing.T) {
	a := agenttest.New("ingress")
	a.SIDs = []agent.SIDCounters{{SID: netip.MustParsePrefix("fc00:2::f1/128"), Behavior: "pool", Owned: true, Counted: true, Packets: 12,
		Detail: map[string]uint64{"inst-fw1": 7, "inst-fw2": 3, "up-fw1": 1, "up-fw2": 0, "transitions-fw2": 1, "moved": 2, "bypass": 0, "drop": 0}}}
	mfs, err := New(a, Build{}, nil).Gather().Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile("../../docs/metrics.md")
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "segchain_pool") {
			continue
		}
		if !strings.Contains(string(doc), "`"+mf.GetName()+"`") {
			t.Errorf("metric %s is not in docs/metrics.md", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "instance" || l.GetName() == "outcome" {
					got[mf.GetName()+" "+l.GetValue()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	for k, want := range map[string]float64{
		"segchain_pool_instance_packets_total fw1": 7, "segchain_pool_instance_packets_total fw2": 3,
		"segchain_pool_instance_up fw1": 1, "segchain_pool_instance_up fw2": 0,
		"segchain_pool_instance_transitions_total fw2": 1, "segchain_pool_packets_total moved": 2,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}
