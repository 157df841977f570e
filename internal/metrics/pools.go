package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Pool selectors (docs/pools.md) report per instance in their SID's
// detail: inst-NAME (packets), up-NAME (liveness), transitions-NAME, and
// moved/bypass/drop for the pool.
var (
	descPoolPackets     = prometheus.NewDesc(ns+"_pool_instance_packets_total", "Packets the headend's pool selector sent to an instance.", []string{"node", "sid", "instance"}, nil)
	descPoolUp          = prometheus.NewDesc(ns+"_pool_instance_up", "1 while the instance is healthy (its bit in the selector's liveness map), else 0.", []string{"node", "sid", "instance"}, nil)
	descPoolTransitions = prometheus.NewDesc(ns+"_pool_instance_transitions_total", "Health transitions of the instance (up→down and down→up) since the checker started.", []string{"node", "sid", "instance"}, nil)
	descPoolOutcome     = prometheus.NewDesc(ns+"_pool_packets_total", "Packets of a pool by outcome other than their first-choice instance: moved (failover), bypass, drop.", []string{"node", "sid", "outcome"}, nil)
	poolDescs           = []*prometheus.Desc{descPoolPackets, descPoolUp, descPoolTransitions, descPoolOutcome}
)

func poolMetric(ch chan<- prometheus.Metric, node, sid, k string, v uint64) {
	switch {
	case strings.HasPrefix(k, "inst-"):
		ch <- prometheus.MustNewConstMetric(descPoolPackets, prometheus.CounterValue, float64(v), node, sid, strings.TrimPrefix(k, "inst-"))
	case strings.HasPrefix(k, "up-"):
		ch <- prometheus.MustNewConstMetric(descPoolUp, prometheus.GaugeValue, float64(v), node, sid, strings.TrimPrefix(k, "up-"))
	case strings.HasPrefix(k, "transitions-"):
		ch <- prometheus.MustNewConstMetric(descPoolTransitions, prometheus.CounterValue, float64(v), node, sid, strings.TrimPrefix(k, "transitions-"))
	case k == "moved", k == "bypass", k == "drop":
		ch <- prometheus.MustNewConstMetric(descPoolOutcome, prometheus.CounterValue, float64(v), node, sid, k)
	}
}
