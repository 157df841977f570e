package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Sampling is the Prometheus export of continuous O-flag sampling
// (segchain trace --sample N --metrics-listen ADDR, docs/oam.md): per hop
// of each chain sampled, histograms of the sampled packets' latency from
// the previous hop and from the headend, and the headend marker's counts.
// It has its own registry: the process serving it is the CLI, not an
// agent.
type Sampling struct {
	reg        *prometheus.Registry
	step, at   *prometheus.HistogramVec
	packets    *prometheus.CounterVec
	marked     *prometheus.CounterVec
	hmac       *prometheus.CounterVec
	incomplete *prometheus.CounterVec

	mu   sync.Mutex
	last map[string][3]uint64 // chain → the marker's counts last added
}

// Hop names one hop of a sampled chain (its labels).
type Hop struct {
	Index           int
	Kind, Node, SID string
}

var sampleHopLabels = []string{"chain", "hop", "kind", "node", "sid"}

// sampleBuckets: 1 µs to ~16 s, doubling (the CLI report's histogram).
var sampleBuckets = prometheus.ExponentialBuckets(1e-6, 2, 25)

// NewSampling registers the sampling metrics.
func NewSampling() *Sampling {
	s := &Sampling{reg: prometheus.NewRegistry(), last: map[string][3]uint64{}}
	s.step = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "sample", Name: "hop_step_seconds",
		Help:    "Latency of O-flag sampled packets from the previous hop of the chain (the headend's mark for hop 1) to their arrival at this hop; a packet counts once it has been seen at every hop.",
		Buckets: sampleBuckets,
	}, sampleHopLabels)
	s.at = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "sample", Name: "hop_latency_seconds",
		Help:    "Latency of O-flag sampled packets from the headend's mark to their arrival at this hop.",
		Buckets: sampleBuckets,
	}, sampleHopLabels)
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "sample", Name: name, Help: help}, []string{"chain"})
	}
	s.packets = counter("packets_total", "The chain's packets that left the headend while sampling ran.")
	s.marked = counter("marked_total", "The chain's packets the headend marked with the O-flag (1 in the rate).")
	s.hmac = counter("hmac_unmarked_total", "The chain's packets not marked because their SRH carries an HMAC (it covers the flags).")
	s.incomplete = counter("incomplete_total", "Marked packets not seen at every hop of the chain in time (lost, or late).")
	s.reg.MustRegister(s.step, s.at, s.packets, s.marked, s.hmac, s.incomplete)
	return s
}

// Observe adds one sampled packet's latencies (seconds) at hop h of chain.
func (s *Sampling) Observe(chain string, h Hop, step, at float64) {
	l := []string{chain, strconv.Itoa(h.Index), h.Kind, h.Node, h.SID}
	s.step.WithLabelValues(l...).Observe(step)
	s.at.WithLabelValues(l...).Observe(at)
}

// Counts sets the marker's counts of chain since its run started
// (packets, marked, HMAC: cumulative) and adds incomplete packets.
func (s *Sampling) Counts(chain string, packets, marked, hmac, incomplete uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.last[chain]
	for i, v := range []uint64{packets, marked, hmac} {
		c := []*prometheus.CounterVec{s.packets, s.marked, s.hmac}[i]
		if v > last[i] {
			c.WithLabelValues(chain).Add(float64(v - last[i]))
			last[i] = v
		} else {
			c.WithLabelValues(chain) // exported from the start, at 0
		}
	}
	s.last[chain] = last
	s.incomplete.WithLabelValues(chain).Add(float64(incomplete))
}

// Handler serves the exposition.
func (s *Sampling) Handler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}
