package oam

import (
	"testing"
	"time"
)

// heldTap is a tap whose sightings are still on their way (an agent
// that has not read its ring buffer yet, a loaded machine): they reach
// Collect only once it is flushed (or, if it is not a Flusher, never).
type heldTap struct {
	now   []Event // delivered at once
	held  []Event // delivered after Flush
	flush chan struct{}
	quit  chan struct{}
}

func newHeldTap(now, held []Event) *heldTap {
	return &heldTap{now: now, held: held, flush: make(chan struct{}), quit: make(chan struct{})}
}

func (h *heldTap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	var out []Event
	for _, e := range h.now {
		out = append(out, e)
		done(out)
	}
	select {
	case <-h.flush:
		for _, e := range h.held {
			out = append(out, e)
			done(out)
		}
	case <-h.quit:
	}
	return out, nil
}

func (h *heldTap) Flush()       { close(h.flush) }
func (h *heldTap) Close() error { close(h.quit); return nil }

// noFlush hides heldTap's Flush (a tap that cannot be flushed).
type noFlush struct{ Tapper }

func sighting(node string, at time.Duration) Event { return Event{At: at, Point: Point{Node: node}} }

// The probe reached the last hop (d) while an earlier hop's sighting
// (egress, another agent) is still on its way: the trace must get it
// however late, without a margin of time. With a 100 ms grace instead
// of a flush, a loaded machine lost it (and the trace then named a hop
// before it as the break).
func TestMultiTapFlushKeepsLateSightings(t *testing.T) {
	egress := newHeldTap(nil, []Event{sighting("egress", 2)})
	d := newHeldTap([]Event{sighting("d", 3)}, nil)
	m := newMultiTap(egress, wallTap{Tapper: d})
	m.grace = 0
	defer m.Close()
	evs, err := m.Collect(time.Now().Add(time.Minute), func(evs []Event) bool { return evs[len(evs)-1].Point.Node == "d" })
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Point.Node != "egress" || evs[1].Point.Node != "d" {
		t.Fatalf("sightings %+v, want egress then d", evs)
	}
}

// A part that is not a Flusher (the fallback) is read for the grace
// period, then Collect returns without it.
func TestMultiTapGraceForNoFlush(t *testing.T) {
	old := noFlush{newHeldTap(nil, []Event{sighting("egress", 2)})}
	d := newHeldTap([]Event{sighting("d", 3)}, nil)
	m := newMultiTap(old, d)
	m.grace = time.Millisecond
	defer m.Close()
	evs, err := m.Collect(time.Now().Add(time.Minute), func(evs []Event) bool { return evs[len(evs)-1].Point.Node == "d" })
	if err != nil || len(evs) != 1 || evs[0].Point.Node != "d" {
		t.Fatalf("sightings %+v (%v), want d only", evs, err)
	}
}

// No probe at the last hop (a broken chain): at the deadline every part
// is flushed and what it saw is kept.
func TestMultiTapFlushAtDeadline(t *testing.T) {
	a := newHeldTap([]Event{sighting("r1", 1)}, []Event{sighting("nfv1", 2)})
	m := newMultiTap(a)
	defer m.Close()
	evs, err := m.Collect(time.Now().Add(10*time.Millisecond), func(evs []Event) bool { return false })
	if err != nil || len(evs) != 2 {
		t.Fatalf("sightings %+v (%v), want r1 and nfv1", evs, err)
	}
}
