package bfd

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pair is two state machines on a fake clock joined by a lossless link
// (cut: everything lost), stepped a millisecond at a time.
type pair struct {
	t    *testing.T
	now  time.Time
	a, b *machine
	cut  bool
	// sent records every packet with when it left, per side.
	sentA, sentB []timed
}

type timed struct {
	at time.Time
	p  Packet
}

func newPair(t *testing.T, ca, cb Config) *pair {
	now := time.Unix(1000, 0)
	if ca.LocalDisc == 0 {
		ca.LocalDisc = 0xa
	}
	if cb.LocalDisc == 0 {
		cb.LocalDisc = 0xb
	}
	half := func() float64 { return 0.5 }
	return &pair{t: t, now: now, a: newMachine(ca, now, half), b: newMachine(cb, now, half)}
}

func cfg(ms int, mult uint8) Config {
	d := time.Duration(ms) * time.Millisecond
	return Config{DesiredMinTx: d, RequiredMinRx: d, DetectMult: mult}
}

// step advances the clock by d, delivering each packet (through the
// codec) in the same millisecond it was sent.
func (p *pair) step(d time.Duration) {
	for end := p.now.Add(d); p.now.Before(end); p.now = p.now.Add(time.Millisecond) {
		for i := 0; i < 4; i++ { // a packet may trigger an answer at once
			pa, pb := p.a.tick(p.now), p.b.tick(p.now)
			if pa == nil && pb == nil {
				break
			}
			if pa != nil {
				p.sentA = append(p.sentA, timed{p.now, *pa})
				p.deliver(p.b, pa)
			}
			if pb != nil {
				p.sentB = append(p.sentB, timed{p.now, *pb})
				p.deliver(p.a, pb)
			}
		}
	}
}

func (p *pair) deliver(to *machine, pk *Packet) {
	if p.cut {
		return
	}
	got, err := Parse(pk.Marshal())
	if err != nil {
		p.t.Fatalf("own packet refused: %v", err)
	}
	if r := to.receive(got, p.now); r != ReasonNone {
		to.drops[r]++
	}
}

// until steps until cond holds, at most limit; it returns the time taken.
func (p *pair) until(limit time.Duration, what string, cond func() bool) time.Duration {
	p.t.Helper()
	start := p.now
	for !cond() {
		if p.now.Sub(start) > limit {
			p.t.Fatalf("%s: not after %v (a %s diag %s, b %s diag %s)", what, limit, p.a.state, p.a.diag, p.b.state, p.b.diag)
		}
		p.step(time.Millisecond)
	}
	return p.now.Sub(start)
}

func bothUp(p *pair) func() bool {
	return func() bool { return p.a.state == Up && p.b.state == Up }
}

func TestHandshakeAndNegotiation(t *testing.T) {
	p := newPair(t, cfg(300, 3), cfg(100, 4))
	p.until(50*time.Millisecond, "three-way handshake", bothUp(p))
	if p.a.remoteDisc != 0xb || p.b.remoteDisc != 0xa {
		t.Errorf("discriminators learned: a %#x b %#x", p.a.remoteDisc, p.b.remoteDisc)
	}
	// Before Up both advertised the slow rate.
	if got := p.sentA[0].p.DesiredMinTx; got != 1000000 {
		t.Errorf("first packet's Desired Min TX %d µs, want 1 s while not Up", got)
	}
	// Up, each announces its own interval with a Poll Sequence, which
	// the other's Final ends.
	p.until(3*time.Second, "poll sequences done", func() bool { return !p.a.poll && !p.b.poll })
	p.step(2 * time.Second)
	// a sends at max(300 own, 100 b's rx) = 300 ms; b at max(100, 300) =
	// 300 ms; a detects after b's mult 4 × max(300, 100) = 1.2 s, b after
	// 3 × max(100, 300) = 900 ms.
	for _, tc := range []struct {
		m            *machine
		tx, detectAt time.Duration
	}{{p.a, 300 * time.Millisecond, 1200 * time.Millisecond}, {p.b, 300 * time.Millisecond, 900 * time.Millisecond}} {
		if got := tc.m.txInterval(); got != tc.tx {
			t.Errorf("disc %#x: tx interval %v, want %v", tc.m.localDisc, got, tc.tx)
		}
		if got := tc.m.detectTime(); got != tc.detectAt {
			t.Errorf("disc %#x: detection time %v, want %v", tc.m.localDisc, got, tc.detectAt)
		}
	}
	var polls, finals int
	for _, s := range p.sentA {
		if s.p.Poll && s.p.Final {
			t.Errorf("a packet with both Poll and Final: %+v", s.p)
		}
		if s.p.Poll {
			polls++
		}
	}
	for _, s := range p.sentB {
		if s.p.Final {
			finals++
		}
	}
	if polls == 0 || finals == 0 {
		t.Errorf("a sent %d polls, b %d finals: want a Poll Sequence", polls, finals)
	}
}

// Packet spacing: periodic packets at 75–100% of the interval (75–90%
// with a detect multiplier of 1), at least 1 s apart before Up.
func TestJitter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mult   uint8
		jitter float64
		factor float64
	}{
		{"mult 3, no reduction", 3, 0, 1},
		{"mult 3, full reduction", 3, 0.999999, 0.75},
		{"mult 1, no reduction", 1, 0, 1},
		{"mult 1, full reduction", 1, 0.999999, 0.85},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			m := newMachine(cfg(200, tc.mult), now, func() float64 { return tc.jitter })
			m.remoteMinRx = us(200 * time.Millisecond)
			if m.tick(now) == nil {
				t.Fatal("no first packet")
			}
			// Not Up: the slow rate.
			if got, want := m.nextTx.Sub(now), time.Duration(float64(time.Second)*tc.factor); absDiff(got, want) > time.Microsecond {
				t.Errorf("next packet in %v while Down, want %v", got, want)
			}
			m.state = Up
			m.advTx = m.wantTx()
			now = m.nextTx
			m.tick(now)
			if got, want := m.nextTx.Sub(now), time.Duration(float64(200*time.Millisecond)*tc.factor); absDiff(got, want) > time.Microsecond {
				t.Errorf("next packet in %v while Up, want %v", got, want)
			}
		})
	}
	// The real jitter source: never below 75% nor above 100%.
	s, err := NewSession(cfg(100, 3), func([]byte) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		j := s.m.jitter()
		if j < 0 || j >= 1 {
			t.Fatalf("jitter %v out of [0,1)", j)
		}
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

// A silent link: each end declares the session Down once the detection
// time passes without a packet (diag 1) and forgets the peer's
// discriminator; the link back, the session comes Up again.
func TestDetectionTimeExpires(t *testing.T) {
	p := newPair(t, cfg(100, 3), cfg(100, 3))
	p.until(50*time.Millisecond, "up", bothUp(p))
	p.until(3*time.Second, "poll done", func() bool { return !p.a.poll && !p.b.poll })
	p.step(time.Second)
	p.cut = true
	took := p.until(2*time.Second, "down after the link is cut", func() bool { return p.a.state == Down && p.b.state == Down })
	// The last packet may have left up to one interval before the cut.
	if took > 300*time.Millisecond || took < 200*time.Millisecond {
		t.Errorf("went down %v after the cut, want within the detection time (300 ms) of the last packet", took)
	}
	for _, m := range []*machine{p.a, p.b} {
		if e := m.events[len(m.events)-1]; e.PeerAdminDown {
			t.Errorf("disc %#x: a silent link taken for the peer's AdminDown: %+v", m.localDisc, e)
		}
		if m.diag != DiagTimeExpired || m.remoteDisc != 0 || m.downs != 1 {
			t.Errorf("disc %#x: diag %s, remote disc %#x, downs %d; want time expired, 0, 1", m.localDisc, m.diag, m.remoteDisc, m.downs)
		}
		if len(m.events) == 0 || m.events[len(m.events)-1].To != Down {
			t.Errorf("disc %#x: events %+v, want the last to Down", m.localDisc, m.events)
		}
	}
	p.cut = false
	p.until(3*time.Second, "up again", bothUp(p))
}

// AdminDown at one end: the other goes Down with diag 3 and stays there;
// back from AdminDown, both come Up.
func TestAdminDown(t *testing.T) {
	p := newPair(t, cfg(100, 3), cfg(100, 3))
	p.until(50*time.Millisecond, "up", bothUp(p))
	p.a.setAdmin(true, p.now)
	p.until(10*time.Millisecond, "b down", func() bool { return p.b.state == Down })
	if p.b.diag != DiagNeighborDown || p.a.diag != DiagAdminDown {
		t.Errorf("diags: a %s b %s", p.a.diag, p.b.diag)
	}
	if e := p.b.events[len(p.b.events)-1]; e.From != Up || e.To != Down || !e.PeerAdminDown {
		t.Errorf("b's event %+v, want Up → Down by the peer's AdminDown", e)
	}
	p.step(3 * time.Second)
	if p.a.state != AdminDown || p.b.state != Down {
		t.Fatalf("a %s b %s after 3 s, want admin-down, down", p.a.state, p.b.state)
	}
	p.a.setAdmin(false, p.now)
	p.until(2*time.Second, "up after admin up", bothUp(p))
}

// The reception state table of RFC 5880 §6.8.6.
func TestReceiveTransitions(t *testing.T) {
	for _, tc := range []struct {
		local, remote State
		want          State
		diag          Diag
	}{
		{Down, AdminDown, Down, DiagNone},
		{Down, Down, Init, DiagNone},
		{Down, Init, Up, DiagNone},
		{Down, Up, Down, DiagNone},
		{Init, AdminDown, Down, DiagNeighborDown},
		{Init, Down, Init, DiagNone},
		{Init, Init, Up, DiagNone},
		{Init, Up, Up, DiagNone},
		{Up, AdminDown, Down, DiagNeighborDown},
		{Up, Down, Down, DiagNeighborDown},
		{Up, Init, Up, DiagNone},
		{Up, Up, Up, DiagNone},
		{AdminDown, Up, AdminDown, DiagNone},
		{AdminDown, Down, AdminDown, DiagNone},
	} {
		t.Run(tc.local.String()+"+"+tc.remote.String(), func(t *testing.T) {
			now := time.Unix(0, 0)
			m := newMachine(cfg(100, 3), now, func() float64 { return 0 })
			m.localDisc, m.state = 5, tc.local
			yours := uint32(5)
			if tc.local == Down || tc.local == AdminDown {
				yours = 0
			}
			if r := m.receive(Packet{Version: 1, Diag: DiagPathDown, State: tc.remote, DetectMult: 3, MyDisc: 9, YourDisc: yours, DesiredMinTx: 1e5, RequiredMinRx: 1e5}, now); r != ReasonNone {
				t.Fatalf("dropped: %s", r)
			}
			if m.state != tc.want || m.diag != tc.diag {
				t.Errorf("%s + received %s → %s (%s), want %s (%s)", tc.local, tc.remote, m.state, m.diag, tc.want, tc.diag)
			}
			if tc.diag == DiagNeighborDown {
				if e := m.events[len(m.events)-1]; e.PeerDiag != DiagPathDown {
					t.Errorf("event %+v: want the peer's diagnostic (path down)", e)
				}
			}
		})
	}
}

func TestReceiveDemuxDrops(t *testing.T) {
	now := time.Unix(0, 0)
	m := newMachine(cfg(100, 3), now, func() float64 { return 0 })
	m.localDisc = 5
	pk := Packet{Version: 1, State: Down, DetectMult: 3, MyDisc: 9, YourDisc: 6, DesiredMinTx: 1e5, RequiredMinRx: 1e5}
	if r := m.receive(pk, now); r != ReasonYourDisc {
		t.Errorf("wrong Your Discriminator: %s", r)
	}
	m.state = Up
	pk.YourDisc = 0
	if r := m.receive(pk, now); r != ReasonZeroYourDisc {
		t.Errorf("zero Your Discriminator while Up: %s", r)
	}
	if m.received != 0 || m.state != Up {
		t.Errorf("a dropped packet changed the session: received %d, state %s", m.received, m.state)
	}
}

// A Poll is answered at once with a Final (and no Poll).
func TestPollAnsweredWithFinal(t *testing.T) {
	now := time.Unix(0, 0)
	m := newMachine(cfg(100, 3), now, func() float64 { return 0 })
	m.localDisc, m.state, m.poll = 5, Up, true
	m.remoteMinRx = us(time.Second)
	m.tick(now) // the periodic packet
	now = now.Add(time.Millisecond)
	if p := m.tick(now); p != nil {
		t.Fatalf("a packet before the interval: %+v", p)
	}
	// (A multiplier of 50: the session stays up until the next periodic
	// packet, a second away.)
	m.receive(Packet{Version: 1, State: Up, Poll: true, DetectMult: 50, MyDisc: 9, YourDisc: 5, DesiredMinTx: 1e5, RequiredMinRx: 1e5}, now)
	p := m.tick(now)
	if p == nil || !p.Final || p.Poll {
		t.Fatalf("answer to a Poll: %+v, want Final without Poll at once", p)
	}
	// The own Poll Sequence goes on in the next periodic packet.
	now = m.nextTx
	if p := m.tick(now); p == nil || !p.Poll {
		t.Errorf("next periodic packet %+v, want Poll", p)
	}
	// Leaving Up ends it: Down's packets carry no Poll.
	m.receive(Packet{Version: 1, State: Down, DetectMult: 50, MyDisc: 9, YourDisc: 5, DesiredMinTx: 1e5, RequiredMinRx: 1e5}, now)
	if p := m.tick(now); p == nil || p.Poll || p.State != Down {
		t.Errorf("packet after going down: %+v, want Down without Poll", p)
	}
}

// Two Sessions (goroutines, real time) over an in-memory link.
func TestSessionsInMemory(t *testing.T) {
	var cut atomic.Bool
	var a, b *Session
	var mu sync.Mutex
	var evA []Event
	var err error
	a, err = NewSession(cfg(20, 3), func(p []byte) error {
		if !cut.Load() {
			go b.Receive(p)
		}
		return nil
	}, func(e Event) { mu.Lock(); evA = append(evA, e); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	b, err = NewSession(cfg(20, 3), func(p []byte) error {
		if !cut.Load() {
			go a.Receive(p)
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go a.Run()
	go b.Run()
	t.Cleanup(func() { a.Close(); b.Close() })
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: a %+v b %+v", what, a.Stats(), b.Stats())
			}
		}
	}
	wait("up", func() bool { return a.Stats().State == Up && b.Stats().State == Up })
	if got := a.Stats().RemoteDisc; got != b.LocalDisc() {
		t.Errorf("a knows b as %#x, b is %#x", got, b.LocalDisc())
	}
	wait("fast rate", func() bool { return a.Stats().TxInterval == 20*time.Millisecond })
	cut.Store(true)
	wait("down", func() bool { return a.Stats().State == Down && b.Stats().State == Down })
	if d := a.Stats().Diag; d != DiagTimeExpired {
		t.Errorf("a's diag %s, want time expired", d)
	}
	cut.Store(false)
	wait("up again", func() bool { return a.Stats().State == Up && b.Stats().State == Up })
	a.Receive([]byte{1, 2, 3})
	if d := a.Stats().Drops[ReasonShort]; d != 1 {
		t.Errorf("short packet counted %d times", d)
	}
	mu.Lock()
	defer mu.Unlock()
	// The events chain (each starts where the last ended) and include
	// the cut's Up → Down. (Not an exact count: on a loaded host a
	// 60 ms detection time may also expire once by itself.)
	var ups, timeouts int
	prev := Down
	for _, e := range evA {
		if e.From != prev {
			t.Errorf("event %+v does not start where the last ended (%s): %+v", e, prev, evA)
		}
		prev = e.To
		if e.To == Up {
			ups++
		}
		if e.From == Up && e.To == Down && e.Diag == DiagTimeExpired {
			timeouts++
		}
	}
	if ups < 2 || timeouts < 1 || prev != Up {
		t.Errorf("a's events %+v: want Up, Down (time expired), Up", evA)
	}
}
