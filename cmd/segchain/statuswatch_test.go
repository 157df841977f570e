package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/controller"
)

func sample(at time.Time, packets, bytes, errs uint64) counterSample {
	return counterSample{at: at, nodes: []controller.NodeStatus{{Node: "nfv1", SIDs: []controller.SIDStatus{{
		SIDCounters: agent.SIDCounters{SID: netip.MustParsePrefix("fc00:2::1/128"), Behavior: "End", Counted: true,
			Packets: packets, Bytes: bytes, Errors: errs}, Service: "nfv1-end"}}}}}
}

// TestRates: rates are counter deltas over the measured time; a counter
// that went back counts from zero and is flagged; a SID not seen before
// is flagged too; an unreadable node is listed with its error.
func TestRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name          string
		prev, cur     counterSample
		pps, bps, dps float64
		reset         bool
	}{
		{"steady", sample(t0, 100, 10000, 1), sample(t0.Add(2*time.Second), 300, 30000, 5), 100, 10000, 2, false},
		{"reset", sample(t0, 1000, 100000, 9), sample(t0.Add(time.Second), 40, 4000, 0), 40, 4000, 0, true},
		{"new", counterSample{at: t0}, sample(t0.Add(500*time.Millisecond), 10, 1000, 1), 20, 2000, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rates("d", tc.prev, tc.cur)
			if len(s.SIDs) != 1 {
				t.Fatalf("sids: %+v", s.SIDs)
			}
			r := s.SIDs[0]
			if r.PacketsPerS != tc.pps || r.BytesPerS != tc.bps || r.DropsPerS != tc.dps || r.Reset != tc.reset {
				t.Errorf("got %v pkt/s %v B/s %v drop/s reset %v, want %v %v %v %v", r.PacketsPerS, r.BytesPerS, r.DropsPerS, r.Reset, tc.pps, tc.bps, tc.dps, tc.reset)
			}
		})
	}
	s := rates("d", counterSample{at: t0}, counterSample{at: t0.Add(time.Second), nodes: []controller.NodeStatus{{Node: "r1", Error: "connection refused"}}})
	if s.Errors["r1"] != "connection refused" {
		t.Errorf("errors: %v", s.Errors)
	}
	var b bytes.Buffer
	if err := printRatesLines(&b, rates("d", sample(t0, 0, 0, 0), sample(t0.Add(time.Second), 5, 500, 0))); err != nil {
		t.Fatal(err)
	}
	if want := " nfv1 fc00:2::1/128 End nfv1-end pkt/s=5.0 drop/s=0.0 bytes/s=500 packets=5 drops=0\n"; !strings.HasSuffix(b.String(), want) || strings.Contains(b.String(), "\x1b") {
		t.Errorf("line %q, want suffix %q and no escape codes", b.String(), want)
	}
}
