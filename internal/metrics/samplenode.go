package metrics

import "github.com/prometheus/client_golang/prometheus"

// NodeSample is what one node knows of a chain's kept O-flag sampling
// (chains[].oam.sample, docs/oam.md "Kept by apply"): on the headend the
// marker's counts, on a segment's node the sampled packets that arrived
// there per segment. A per-hop latency needs two nodes' sightings of a
// packet, so it is paired where every node's are (segchain status), not
// here.
type NodeSample struct {
	Chain  string
	Marker bool
	// Packets, Marked, HMAC: the marker's counts (Marker only).
	Packets, Marked, HMAC uint64
	// Arrivals: sampled packets that arrived, by destination (segment).
	Arrivals map[string]uint64
}

var (
	nodeSamplePackets = prometheus.NewDesc(ns+"_sample_node_packets_total",
		"The chain's packets that left this node, its headend, since apply kept its sampling.", []string{"chain", "node"}, nil)
	nodeSampleMarked = prometheus.NewDesc(ns+"_sample_node_marked_total",
		"Of those, marked with the O-flag (1 in chains[].oam.sample).", []string{"chain", "node"}, nil)
	nodeSampleHMAC = prometheus.NewDesc(ns+"_sample_node_hmac_unmarked_total",
		"Of those, not marked: their SRH carries an HMAC (it covers the flags).", []string{"chain", "node"}, nil)
	nodeSampleArrivals = prometheus.NewDesc(ns+"_sample_node_arrivals_total",
		"O-flag sampled packets that arrived at this node with destination sid (a segment of the chain on this node).", []string{"chain", "node", "sid"}, nil)
)

var nodeResponderSIDs = prometheus.NewDesc(ns+"_oam_responder_sids",
	"SID prefixes the node's kept echo responder answers ICMPv6 echo for (chains[].oam.respond); absent when none is kept.", []string{"node"}, nil)

type nodeSampling struct {
	node      string
	snap      func() []NodeSample
	responder func() (bool, int)
}

// NodeSampling exports node's kept samplings, read from snap at each
// scrape, and its kept echo responder (responder: whether one is kept,
// how many SID prefixes it answers).
func NodeSampling(node string, snap func() []NodeSample, responder func() (bool, int)) prometheus.Collector {
	return &nodeSampling{node: node, snap: snap, responder: responder}
}

func (c *nodeSampling) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeSamplePackets, nodeSampleMarked, nodeSampleHMAC, nodeSampleArrivals, nodeResponderSIDs} {
		ch <- d
	}
}

func (c *nodeSampling) Collect(ch chan<- prometheus.Metric) {
	if on, n := c.responder(); on {
		ch <- prometheus.MustNewConstMetric(nodeResponderSIDs, prometheus.GaugeValue, float64(n), c.node)
	}
	for _, s := range c.snap() {
		if s.Marker {
			ch <- prometheus.MustNewConstMetric(nodeSamplePackets, prometheus.CounterValue, float64(s.Packets), s.Chain, c.node)
			ch <- prometheus.MustNewConstMetric(nodeSampleMarked, prometheus.CounterValue, float64(s.Marked), s.Chain, c.node)
			ch <- prometheus.MustNewConstMetric(nodeSampleHMAC, prometheus.CounterValue, float64(s.HMAC), s.Chain, c.node)
		}
		for sid, n := range s.Arrivals {
			ch <- prometheus.MustNewConstMetric(nodeSampleArrivals, prometheus.CounterValue, float64(n), s.Chain, c.node, sid)
		}
	}
}

// Register adds c (e.g. NodeSampling) to the agent's registry.
func (m *Metrics) Register(c prometheus.Collector) { m.reg.MustRegister(c) }
