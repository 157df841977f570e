package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/segchain/segchain/internal/bgp"
)

// BFDSource is the agent's BGP speaker: its neighbors' BFD sessions.
type BFDSource interface {
	BFD() []bgp.BFDSession
}

var (
	bfdLabels      = []string{"node", "peer", "neighbor", "dev"}
	descBFDState   = prometheus.NewDesc(ns+"_bfd_session_state", "State of the BFD session with a BGP neighbor, as RFC 5880 numbers it: 0 admin-down, 1 down, 2 init, 3 up.", bfdLabels, nil)
	descBFDDowns   = prometheus.NewDesc(ns+"_bfd_session_downs_total", "Times the BFD session with a BGP neighbor went down from up (each shut the BGP session).", bfdLabels, nil)
	descBFDPackets = prometheus.NewDesc(ns+"_bfd_packets_total", "BFD control packets with a BGP neighbor, by direction (sent, received: accepted).", []string{"node", "peer", "direction"}, nil)
	descBFDDrops   = prometheus.NewDesc(ns+"_bfd_drops_total", "BFD control packets received and dropped, by reason (RFC 5880 6.8.6 checks, hop-limit: not 255, RFC 5881).", []string{"node", "peer", "reason"}, nil)
)

// WatchBFD exports src's BFD sessions.
func (m *Metrics) WatchBFD(node string, src BFDSource) {
	m.reg.MustRegister(&bfdCollector{node: node, src: src})
}

type bfdCollector struct {
	node string
	src  BFDSource
}

func (c *bfdCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBFDState, descBFDDowns, descBFDPackets, descBFDDrops} {
		ch <- d
	}
}

func (c *bfdCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.BFD() {
		ch <- prometheus.MustNewConstMetric(descBFDState, prometheus.GaugeValue, float64(s.State), c.node, s.Peer, s.Node, s.Dev)
		ch <- prometheus.MustNewConstMetric(descBFDDowns, prometheus.CounterValue, float64(s.Downs), c.node, s.Peer, s.Node, s.Dev)
		ch <- prometheus.MustNewConstMetric(descBFDPackets, prometheus.CounterValue, float64(s.Sent), c.node, s.Peer, "sent")
		ch <- prometheus.MustNewConstMetric(descBFDPackets, prometheus.CounterValue, float64(s.Received), c.node, s.Peer, "received")
		for r, n := range s.Drops {
			ch <- prometheus.MustNewConstMetric(descBFDDrops, prometheus.CounterValue, float64(n), c.node, s.Peer, r.String())
		}
	}
}
