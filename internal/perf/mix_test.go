package perf

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestMixes: a behaviour's mix cost is its per-size medians weighted, the
// ratio the baseline's over it; a behaviour short of a size has no row.
func TestMixes(t *testing.T) {
	ns := func(v float64) *Summary { return &Summary{Median: v} }
	r := &Report{Baseline: "IPv6", Config: Experiment{Sizes: []int{64, 576, 1356}, Mix: []float64{7, 4, 1}}, Results: []Result{
		{Run: 1, Name: "IPv6", Size: 64, NsPerPacket: ns(1000)},
		{Run: 1, Name: "IPv6", Size: 576, NsPerPacket: ns(1200)},
		{Run: 1, Name: "IPv6", Size: 1356, NsPerPacket: ns(1600)},
		{Run: 1, Name: "End", Size: 64, NsPerPacket: ns(2000)},
		{Run: 1, Name: "End", Size: 576, NsPerPacket: ns(2400)},
		{Run: 1, Name: "End", Size: 1356, NsPerPacket: ns(3200)},
		{Run: 1, Name: "short", Size: 64, NsPerPacket: ns(1)},
	}}
	rows := Mixes(r)
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want IPv6 and End", rows)
	}
	want := (7*2000.0 + 4*2400 + 1*3200) / 12
	if rows[1].Name != "End" || math.Abs(rows[1].NsPerPacket-want) > 1e-9 || math.Abs(rows[1].BaselineRatio-0.5) > 1e-9 {
		t.Errorf("End: %+v, want %.1f ns and ratio 0.5", rows[1], want)
	}
	var b bytes.Buffer
	writeMixes(&b, r)
	if !strings.Contains(b.String(), "64 B × 7, 576 B × 4, 1356 B × 1") || !strings.Contains(b.String(), "| End | 2233 | 0.500 |") {
		t.Errorf("table:\n%s", b.String())
	}
}
