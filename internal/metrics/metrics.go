package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/segchain/segchain/internal/agent"
)

const ns = "segchain"

// Metrics is the registry of one agent.
type Metrics struct {
	reg   *prometheus.Registry
	opDur *prometheus.HistogramVec
	ops   *prometheus.CounterVec
	apply *prometheus.HistogramVec
	// reconciles counts --reconcile's checks that found drift.
	reconciles *prometheus.CounterVec
	// checks counts every --reconcile check by its decision.
	checks *prometheus.CounterVec
	// denied counts scrapes Guard refused, by reason.
	denied *prometheus.CounterVec
}

// Build labels the build-info metric.
type Build struct{ Version, Commit, Go string }

// New registers the agent's metrics: a's counters are read at each scrape
// (scrapeTimeout bounds it).
func New(a agent.Agent, b Build, log *slog.Logger) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.opDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "agent", Name: "op_duration_seconds",
		Help:    "Time to run one op of an Execute, by op kind and result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"kind", "result"})
	m.ops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "agent", Name: "ops_total",
		Help: "Ops run by the agent, by op kind and result.",
	}, []string{"kind", "result"})
	m.apply = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "agent", Name: "execute_duration_seconds",
		Help:    "Time to run one Execute request (a batch of ops), by result.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"result"})
	m.reconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "agent", Name: "reconciles_total",
		Help: "Checks of segchain agent --reconcile that found the node drifted from its intent, by result: applied (re-applied), failed (re-apply failed, rolled back), skipped (left alone: a controller's lease, a busy lock, a conflict).",
	}, []string{"result"})
	m.checks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "agent", Name: "reconcile_checks_total",
		Help: "Checks of segchain agent --reconcile, by decision: idle (no intent, or suspended), in-sync, repair, skip.",
	}, []string{"decision"})
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "agent", Name: "build_info",
		Help:        "The agent's build: always 1, the labels say which.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.Go, "node": a.Node()},
	})
	info.Set(1)
	m.denied = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "agent", Name: "metrics_denied_total",
		Help: "Scrapes of /metrics refused, by reason: source (not in --metrics-allow) or token (missing or wrong bearer token).",
	}, []string{"reason"})
	m.reg.MustRegister(m.denied)
	m.reg.MustRegister(m.opDur, m.ops, m.apply, m.reconciles, m.checks, info, &nodeCollector{a: a, log: log},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// opKind labels an op: its object kind, and for a services op the
// service kind too ("services/fw").
func opKind(op agent.Op) string {
	if op.Service != "" {
		return string(op.Kind) + "/" + op.Service
	}
	return string(op.Kind)
}

// Op records one op (server.Hooks.Op).
func (m *Metrics) Op(op agent.Op, d time.Duration, err error) {
	m.opDur.WithLabelValues(opKind(op), result(err)).Observe(d.Seconds())
	m.ops.WithLabelValues(opKind(op), result(err)).Inc()
}

// Execute records one Execute (server.Hooks.Execute).
func (m *Metrics) Execute(_ int, d time.Duration, err error) {
	m.apply.WithLabelValues(result(err)).Observe(d.Seconds())
}

// Reconcile counts one reconcile that found drift, by result
// (reconcile.Reconciler.Count).
func (m *Metrics) Reconcile(result string) {
	m.reconciles.WithLabelValues(result).Inc()
}

// ReconcileCheck counts one reconcile check by its decision
// (reconcile.Reconciler.Checked).
func (m *Metrics) ReconcileCheck(decision string) {
	m.checks.WithLabelValues(decision).Inc()
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Guarded serves /metrics to whom a allows (Guard), counting refusals.
func (m *Metrics) Guarded(a Access) http.Handler {
	return Guard(m.Handler(), a, func(reason string) { m.denied.WithLabelValues(reason).Inc() })
}

// Gather is the registry's Gatherer (tests).
func (m *Metrics) Gather() prometheus.Gatherer { return m.reg }

var (
	sidLabels      = []string{"node", "sid", "behavior", "origin"}
	descSIDPackets = prometheus.NewDesc(ns+"_sid_packets_total", "Packets counted at a local SID (seg6local counters or the eBPF service's own).", sidLabels, nil)
	descSIDBytes   = prometheus.NewDesc(ns+"_sid_bytes_total", "Bytes counted at a local SID.", sidLabels, nil)
	descSIDErrors  = prometheus.NewDesc(ns+"_sid_errors_total", "Errors (packets dropped) counted at a local SID.", sidLabels, nil)
	descSvcPackets = prometheus.NewDesc(ns+"_service_packets_total", "Packets through an eBPF service SID (SR proxy, firewall), by direction (in: from the SR domain, out: back into it).", []string{"node", "sid", "behavior", "direction"}, nil)
	descSvcDrops   = prometheus.NewDesc(ns+"_service_drops_total", "Packets an eBPF service SID dropped, by drop reason.", []string{"node", "sid", "behavior", "reason"}, nil)
	descNotRet     = prometheus.NewDesc(ns+"_proxy_sf_not_returned_packets", "Packets an SR proxy SID sent to its SF that never came back (sent less re-encapsulated less dropped on the way back); rises while the SF drops silently.", []string{"node", "sid", "behavior"}, nil)
	descBoundaryP  = prometheus.NewDesc(ns+"_boundary_drops_total", "Packets the SR domain boundary filter dropped, by interface, direction and reason.", []string{"node", "iface", "direction", "reason"}, nil)
	descBoundaryB  = prometheus.NewDesc(ns+"_boundary_dropped_bytes_total", "Bytes the SR domain boundary filter dropped, by interface, direction and reason.", []string{"node", "iface", "direction", "reason"}, nil)
	descUp         = prometheus.NewDesc(ns+"_node_scrape_success", "1 when the node's counters could be read at this scrape, else 0.", []string{"node"}, nil)
)

// nodeCollector reads the node's counters at each scrape.
type nodeCollector struct {
	a   agent.Agent
	log *slog.Logger
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append([]*prometheus.Desc{descSIDPackets, descSIDBytes, descSIDErrors, descSvcPackets, descSvcDrops, descNotRet, descBoundaryP, descBoundaryB, descUp}, poolDescs...) {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node := c.a.Node()
	sids, err := c.a.Counters(ctx)
	up := 1.0
	if err != nil {
		up = 0
		if c.log != nil {
			c.log.Warn("metrics: read counters", "err", err)
		}
	}
	seen := map[string]bool{}
	for _, s := range sids {
		if !s.Counted {
			continue
		}
		sid := s.SID.String()
		origin := s.Origin
		if origin == "" && s.Owned {
			origin = "domain"
		}
		// A SID listed twice (an eBPF service and its route) is
		// exported once, the first (the service's own counters).
		key := sid + " " + s.Behavior
		if seen[key] {
			continue
		}
		seen[key] = true
		ch <- prometheus.MustNewConstMetric(descSIDPackets, prometheus.CounterValue, float64(s.Packets), node, sid, s.Behavior, origin)
		ch <- prometheus.MustNewConstMetric(descSIDBytes, prometheus.CounterValue, float64(s.Bytes), node, sid, s.Behavior, origin)
		ch <- prometheus.MustNewConstMetric(descSIDErrors, prometheus.CounterValue, float64(s.Errors), node, sid, s.Behavior, origin)
		for k, v := range s.Detail {
			switch {
			case k == "in-packets", k == "out-packets":
				ch <- prometheus.MustNewConstMetric(descSvcPackets, prometheus.CounterValue, float64(v), node, sid, s.Behavior, strings.TrimSuffix(k, "-packets"))
			case k == "not-returned":
				ch <- prometheus.MustNewConstMetric(descNotRet, prometheus.GaugeValue, float64(v), node, sid, s.Behavior)
			case strings.HasPrefix(k, "drop-"):
				ch <- prometheus.MustNewConstMetric(descSvcDrops, prometheus.CounterValue, float64(v), node, sid, s.Behavior, strings.TrimPrefix(k, "drop-"))
			case s.Behavior == "pool":
				poolMetric(ch, node, sid, k, v)
			}
		}
	}
	if br := c.a.Caps().Boundary; br != nil && err == nil {
		bc, berr := br.BoundaryCounters(ctx)
		if berr != nil {
			up = 0
			if c.log != nil {
				c.log.Warn("metrics: read boundary counters", "err", berr)
			}
		}
		for _, b := range bc {
			ch <- prometheus.MustNewConstMetric(descBoundaryP, prometheus.CounterValue, float64(b.Packets), node, b.Iface, b.Direction, b.Reason)
			ch <- prometheus.MustNewConstMetric(descBoundaryB, prometheus.CounterValue, float64(b.Bytes), node, b.Iface, b.Direction, b.Reason)
		}
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, node)
}
