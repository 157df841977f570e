package main

import (
	"net/netip"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/segchain/segchain/pkg/srv6svc"
)

type flowKey struct {
	sid  netip.Addr
	flow srv6svc.Flow
}

type flowCount struct{ packets, bytes uint64 }

// accounting counts per (SID, inner 5-tuple). Workers share it under one
// mutex: the per-packet work is a map update. It is a Prometheus collector:
// the metrics are built at scrape time, never per packet.
type accounting struct {
	mu       sync.Mutex
	flows    map[flowKey]*flowCount
	max      int
	overflow flowCount // packets of flows beyond max
	other    flowCount // packets without a 5-tuple (e.g. Ethernet inner)
}

func newAccounting(max int) *accounting {
	return &accounting{flows: map[flowKey]*flowCount{}, max: max}
}

func (a *accounting) count(p *srv6svc.Packet) {
	n := uint64(len(p.Inner()))
	f, ok := p.InnerFlow()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !ok {
		a.other.packets++
		a.other.bytes += n
		return
	}
	k := flowKey{p.Outer().Dst, f}
	c := a.flows[k]
	if c == nil {
		if len(a.flows) >= a.max {
			a.overflow.packets++
			a.overflow.bytes += n
			return
		}
		c = &flowCount{}
		a.flows[k] = c
	}
	c.packets++
	c.bytes += n
}

var (
	flowLabels  = []string{"sid", "src", "dst", "proto", "sport", "dport"}
	descPackets = prometheus.NewDesc("segchain_service_flow_packets_total", "Inner packets per SID and inner 5-tuple.", flowLabels, nil)
	descBytes   = prometheus.NewDesc("segchain_service_flow_bytes_total", "Inner packet bytes per SID and inner 5-tuple.", flowLabels, nil)
	descOther   = prometheus.NewDesc("segchain_service_unaccounted_packets_total", "Packets not accounted per flow, by reason.", []string{"reason"}, nil)
	descFlows   = prometheus.NewDesc("segchain_service_flows", "Flows tracked.", nil, nil)
)

func (a *accounting) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPackets
	ch <- descBytes
	ch <- descOther
	ch <- descFlows
}

func (a *accounting) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, c := range a.flows {
		l := []string{k.sid.String(), k.flow.Src.String(), k.flow.Dst.String(), strconv.Itoa(int(k.flow.Proto)),
			strconv.Itoa(int(k.flow.SrcPort)), strconv.Itoa(int(k.flow.DstPort))}
		ch <- prometheus.MustNewConstMetric(descPackets, prometheus.CounterValue, float64(c.packets), l...)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(c.bytes), l...)
	}
	ch <- prometheus.MustNewConstMetric(descOther, prometheus.CounterValue, float64(a.overflow.packets), "overflow")
	ch <- prometheus.MustNewConstMetric(descOther, prometheus.CounterValue, float64(a.other.packets), "no-5-tuple")
	ch <- prometheus.MustNewConstMetric(descFlows, prometheus.GaugeValue, float64(len(a.flows)))
}

// serviceCollector exports the binding's own counters.
type serviceCollector struct{ svc *srv6svc.Service }

var descSvc = prometheus.NewDesc("segchain_service_packets_total", "Packets of the binding by event (srv6svc.Counters).", []string{"event"}, nil)

func (serviceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descSvc }

func (s serviceCollector) Collect(ch chan<- prometheus.Metric) {
	c := s.svc.Counters()
	for ev, v := range map[string]uint64{"steered": c.Steered, "rx": c.RX, "tx": c.TX, "drop_verdict": c.DropVerdict,
		"drop_malformed": c.DropMalformed, "drop_bad_verdict": c.DropBadVerdict, "drop_tx_full": c.DropTxFull,
		"nosocket_drop": c.NoSocketDrop, "nosocket_bypass": c.NoSocketBypass, "too_big": c.TooBig} {
		ch <- prometheus.MustNewConstMetric(descSvc, prometheus.CounterValue, float64(v), ev)
	}
}
