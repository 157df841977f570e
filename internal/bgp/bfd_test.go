package bgp

import (
	"testing"
	"time"

	"github.com/segchain/segchain/internal/bfd"
)

// When a neighbor's BFD counts as down (its BGP session shut, its routes
// unusable).
func TestBFDVerdict(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ev := func(from, to bfd.State, after time.Duration) bfdEvent {
		return bfdEvent{ev: bfd.Event{From: from, To: to, At: t0.Add(after), Diag: bfd.DiagNeighborDown}}
	}
	expired := ev(bfd.Up, bfd.Down, time.Second)
	expired.ev.Diag = bfd.DiagTimeExpired
	peerExpired := ev(bfd.Up, bfd.Down, time.Second) // one-way: the peer hears us no more
	peerExpired.ev.PeerDiag = bfd.DiagTimeExpired
	adminDown := ev(bfd.Up, bfd.Down, time.Minute)
	adminDown.ev.PeerAdminDown = true
	for _, tc := range []struct {
		name    string
		was     bool
		e       bfdEvent
		now     bfd.State
		down    bool
		recheck time.Duration
	}{
		{"first up", false, ev(bfd.Init, bfd.Up, 0), bfd.Up, false, 0},
		{"down → init never counts", false, ev(bfd.Down, bfd.Init, 0), bfd.Init, false, 0},
		{"init → down (never up)", false, ev(bfd.Init, bfd.Down, time.Minute), bfd.Down, false, 0},
		{"up → down long after up", false, ev(bfd.Up, bfd.Down, time.Minute), bfd.Down, true, 0},
		{"up → down by the peer's AdminDown", false, adminDown, bfd.Down, false, 0},
		{"peer's down within the settle time", false, ev(bfd.Up, bfd.Down, time.Second), bfd.Down, false, bfdSettle - time.Second},
		{"silent within the settle time", false, expired, bfd.Down, true, 0},
		{"silent one way within the settle time", false, peerExpired, bfd.Down, true, 0},
		{"settle over, up again", false, bfdEvent{recheck: true}, bfd.Up, false, 0},
		{"settle over, still down", false, bfdEvent{recheck: true}, bfd.Init, true, 0},
		{"up again after down", true, ev(bfd.Init, bfd.Up, time.Minute), bfd.Up, false, 0},
		{"down, still down", true, ev(bfd.Down, bfd.Init, time.Minute), bfd.Init, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down, recheck := bfdVerdict(tc.was, tc.e, t0, tc.now)
			if down != tc.down || recheck != tc.recheck {
				t.Errorf("down %v recheck %v, want %v %v", down, recheck, tc.down, tc.recheck)
			}
		})
	}
}
