package bfd

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// SlowTx is the least transmit interval while a session is not Up (RFC
// 5880 §6.8.3: at least one second).
const SlowTx = time.Second

// Config is a session's parameters.
type Config struct {
	// DesiredMinTx is the transmit interval wanted once Up (before it,
	// at least SlowTx); RequiredMinRx the fastest this end receives.
	DesiredMinTx, RequiredMinRx time.Duration
	// DetectMult: the peer declares the session down after this many
	// intervals without a packet from this end.
	DetectMult uint8
	// LocalDisc is this end's discriminator; 0 picks a random one.
	LocalDisc uint32
}

func (c Config) check() error {
	switch {
	case c.DesiredMinTx <= 0 || c.RequiredMinRx <= 0:
		return fmt.Errorf("bfd: intervals must be positive (tx %v, rx %v)", c.DesiredMinTx, c.RequiredMinRx)
	case c.DesiredMinTx > time.Hour || c.RequiredMinRx > time.Hour:
		return fmt.Errorf("bfd: intervals above an hour (tx %v, rx %v)", c.DesiredMinTx, c.RequiredMinRx)
	case c.DetectMult == 0:
		return errors.New("bfd: detect multiplier must be at least 1")
	}
	return nil
}

// Event is a state change of a session.
type Event struct {
	From, To State
	Diag     Diag // this end's diagnostic after the change
	At       time.Time
	// PeerAdminDown: the peer took the session down administratively
	// (it sent AdminDown). RFC 5882 §3.2: not a failure of the path, so
	// a client should not act on it as one.
	PeerAdminDown bool
	// PeerDiag is the diagnostic of the peer's packet that took the
	// session down (To Down with Diag DiagNeighborDown): why the peer
	// says it is down.
	PeerDiag Diag
}

// Stats is a snapshot of a session.
type Stats struct {
	State, RemoteState    State
	Diag, RemoteDiag      Diag
	LocalDisc, RemoteDisc uint32
	// TxInterval is the agreed transmit interval (before jitter),
	// DetectTime the time without a packet after which the session goes
	// down.
	TxInterval, DetectTime time.Duration
	Sent, Received         uint64
	SendErrors             uint64
	// Drops counts the received packets dropped, by reason.
	Drops map[Reason]uint64
	// Downs counts the transitions from Up to another state.
	Downs      uint64
	LastChange time.Time
}

// machine is the RFC 5880 state machine, timers included, driven by the
// caller's clock: it never reads the time nor sleeps (tests run it on a
// fake clock).
type machine struct {
	cfg Config

	state, remoteState State
	diag, remoteDiag   Diag
	localDisc          uint32
	remoteDisc         uint32
	remoteMinRx        uint32 // µs, the peer's Required Min RX
	remoteTx           uint32 // µs, the peer's Desired Min TX
	remoteMult         uint8
	advTx              uint32 // µs, the Desired Min TX this end sends
	poll               bool   // a Poll Sequence is running
	final              bool   // answer a Poll: the next packet has F
	now                bool   // send a packet without waiting for nextTx
	nextTx             time.Time
	detectAt           time.Time // zero: no packet received yet

	sent, received, sendErrs, downs uint64
	drops                           [numReasons]uint64
	lastChange                      time.Time
	events                          []Event
	jitter                          func() float64 // [0,1)
}

func us(d time.Duration) uint32   { return uint32(d / time.Microsecond) }
func dur(us uint32) time.Duration { return time.Duration(us) * time.Microsecond }

func newMachine(cfg Config, now time.Time, jitter func() float64) *machine {
	m := &machine{cfg: cfg, state: Down, localDisc: cfg.LocalDisc,
		// RFC 5880 §6.8.1: initialised to 1 µs, so that the first
		// packets go out at the slow rate.
		remoteMinRx: 1, jitter: jitter, lastChange: now}
	m.advTx = m.wantTx()
	m.nextTx = now // the first packet at once
	return m
}

// wantTx is the Desired Min TX for the current state: the configured
// one when Up, at least SlowTx otherwise (§6.8.3).
func (m *machine) wantTx() uint32 {
	if m.state == Up || m.cfg.DesiredMinTx >= SlowTx {
		return us(m.cfg.DesiredMinTx)
	}
	return us(SlowTx)
}

// txInterval is the agreed interval: the larger of what this end wants to
// send at and what the peer can receive.
func (m *machine) txInterval() time.Duration {
	return dur(max(m.advTx, m.remoteMinRx))
}

// detectTime is the peer's Detect Mult times the larger of this end's
// Required Min RX and the peer's Desired Min TX (§6.8.4).
func (m *machine) detectTime() time.Duration {
	return time.Duration(m.remoteMult) * dur(max(us(m.cfg.RequiredMinRx), m.remoteTx))
}

func (m *machine) setState(s State, d Diag, now time.Time) {
	if s == m.state {
		return
	}
	if m.state == Up {
		m.downs++
	}
	m.events = append(m.events, Event{From: m.state, To: s, Diag: d, At: now})
	m.state, m.diag, m.lastChange = s, d, now
	// The peer learns the new state at once rather than an interval
	// later (bfdd does the same); it is one packet per change.
	m.now = true
	if s != Up {
		m.poll = false // a Poll Sequence is about Up's parameters
	}
	if tx := m.wantTx(); tx != m.advTx {
		m.advTx = tx
		if s == Up {
			// A changed Desired Min TX while Up is announced with a Poll
			// Sequence (§6.8.3).
			m.poll = true
		}
	}
}

// receive runs the reception rules of §6.8.6 on a packet Parse accepted,
// after the checks that need the session; it returns the drop reason.
func (m *machine) receive(p Packet, now time.Time) Reason {
	if p.YourDisc != 0 && p.YourDisc != m.localDisc {
		return ReasonYourDisc
	}
	if p.YourDisc == 0 && m.state != Down && m.state != AdminDown {
		return ReasonZeroYourDisc
	}
	m.received++
	m.remoteDisc = p.MyDisc
	m.remoteState, m.remoteDiag = p.State, p.Diag
	m.remoteMinRx, m.remoteTx, m.remoteMult = p.RequiredMinRx, p.DesiredMinTx, p.DetectMult
	if p.Final {
		m.poll = false
	}
	// The Detection Time restarts with every packet accepted.
	m.detectAt = now.Add(m.detectTime())
	if m.state == AdminDown {
		return ReasonNone
	}
	if p.State == AdminDown {
		if m.state != Down {
			m.setState(Down, DiagNeighborDown, now)
			m.events[len(m.events)-1].PeerAdminDown = true
			m.events[len(m.events)-1].PeerDiag = p.Diag
		}
	} else {
		switch m.state {
		case Down:
			switch p.State {
			case Down:
				m.setState(Init, DiagNone, now)
			case Init:
				m.setState(Up, DiagNone, now)
			}
		case Init:
			if p.State == Init || p.State == Up {
				m.setState(Up, DiagNone, now)
			}
		case Up:
			if p.State == Down {
				m.setState(Down, DiagNeighborDown, now)
				m.events[len(m.events)-1].PeerDiag = p.Diag
			}
		}
	}
	if p.Poll {
		m.final, m.now = true, true
	}
	return ReasonNone
}

// tick handles the timers at now: the Detection Time, and the packet to
// send, if one is due (nil otherwise).
func (m *machine) tick(now time.Time) *Packet {
	if !m.detectAt.IsZero() && !now.Before(m.detectAt) {
		m.detectAt = time.Time{}
		// §6.8.1: no packet for a Detection Time forgets the peer.
		m.remoteDisc, m.remoteState = 0, Down
		if m.state == Init || m.state == Up {
			m.setState(Down, DiagTimeExpired, now)
		}
	}
	// No periodic packets while the peer asks for none (Required Min
	// RX 0, §6.8.7); a Final is still owed.
	periodic := m.remoteMinRx != 0 && !now.Before(m.nextTx)
	if !periodic && !m.now {
		return nil
	}
	p := &Packet{Version: Version, Diag: m.diag, State: m.state, DetectMult: m.cfg.DetectMult,
		MyDisc: m.localDisc, YourDisc: m.remoteDisc, DesiredMinTx: m.advTx, RequiredMinRx: us(m.cfg.RequiredMinRx)}
	if m.final {
		p.Final = true // never with Poll (§6.5)
	} else if m.poll {
		p.Poll = true
	}
	m.final, m.now = false, false
	// Jitter (§6.8.7): 75–100% of the interval, 75–90% with a detect
	// multiplier of 1 so that one late packet does not end the session.
	j := 0.25
	if m.cfg.DetectMult == 1 {
		j = 0.15
	}
	iv := m.txInterval()
	m.nextTx = now.Add(time.Duration(float64(iv) * (1 - j*m.jitter())))
	return p
}

// next is when tick has work next.
func (m *machine) next() time.Time {
	if m.now {
		return time.Time{}
	}
	t := m.nextTx
	if m.remoteMinRx == 0 { // no periodic packets: only the detection timer
		t = m.nextTx.Add(time.Hour)
	}
	if !m.detectAt.IsZero() && m.detectAt.Before(t) {
		t = m.detectAt
	}
	return t
}

func (m *machine) setAdmin(down bool, now time.Time) {
	switch {
	case down && m.state != AdminDown:
		m.setState(AdminDown, DiagAdminDown, now)
	case !down && m.state == AdminDown:
		m.setState(Down, DiagNone, now)
	}
}

// Session is one BFD session: the state machine with its timers, sending
// through send (the transport) and fed by Receive. Its methods are safe
// for concurrent use.
type Session struct {
	mu       sync.Mutex
	m        *machine
	send     func([]byte) error
	onChange func(Event)
	wake     chan struct{}
	done     chan struct{}
	stop     chan struct{}
	once     sync.Once
}

// NewSession makes a session in state Down; Run starts it. send
// transmits one packet; onChange (may be nil) is called, from the
// session's goroutine and in order, with every state change.
func NewSession(cfg Config, send func([]byte) error, onChange func(Event)) (*Session, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	for cfg.LocalDisc == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		cfg.LocalDisc = binary.BigEndian.Uint32(b[:])
	}
	return &Session{m: newMachine(cfg, time.Now(), mrand.Float64), send: send, onChange: onChange,
		wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}, nil
}

// LocalDisc is this end's discriminator.
func (s *Session) LocalDisc() uint32 { return s.m.cfg.LocalDisc }

// Run sends and times the session until Close.
func (s *Session) Run() {
	defer close(s.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		p := s.m.tick(now)
		evs := s.m.events
		s.m.events = nil
		next := s.m.next()
		s.mu.Unlock()
		if p != nil {
			err := s.send(p.Marshal())
			s.mu.Lock()
			if err != nil {
				s.m.sendErrs++
			} else {
				s.m.sent++
			}
			s.mu.Unlock()
		}
		if s.onChange != nil {
			for _, e := range evs {
				s.onChange(e)
			}
		}
		if p != nil || len(evs) > 0 {
			continue // the state may owe another packet
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(time.Until(next))
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-t.C:
		}
	}
}

// Close stops the session (no AdminDown is sent: SetAdminDown first for
// a graceful end) and waits for Run to return.
func (s *Session) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

func (s *Session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Receive handles one received packet (its UDP payload).
func (s *Session) Receive(b []byte) {
	p, err := Parse(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	var r Reason
	if d, ok := err.(*DropError); ok {
		r = d.Reason
	} else {
		r = s.m.receive(p, time.Now())
	}
	if r != ReasonNone {
		s.m.drops[r]++
		return
	}
	s.poke()
}

// Drop counts a packet the transport dropped (hop limit, source).
func (s *Session) Drop(r Reason) {
	s.mu.Lock()
	s.m.drops[r]++
	s.mu.Unlock()
}

// SetAdminDown takes the session to AdminDown (the peer goes Down with
// diagnostic "neighbor signaled session down") or back to Down.
func (s *Session) SetAdminDown(down bool) {
	s.mu.Lock()
	s.m.setAdmin(down, time.Now())
	s.mu.Unlock()
	s.poke()
}

// Stats returns a snapshot.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	st := Stats{State: m.state, RemoteState: m.remoteState, Diag: m.diag, RemoteDiag: m.remoteDiag,
		LocalDisc: m.localDisc, RemoteDisc: m.remoteDisc, TxInterval: m.txInterval(), DetectTime: m.detectTime(),
		Sent: m.sent, Received: m.received, SendErrors: m.sendErrs, Downs: m.downs, LastChange: m.lastChange,
		Drops: map[Reason]uint64{}}
	for r, n := range m.drops {
		if n > 0 {
			st.Drops[Reason(r)] = n
		}
	}
	return st
}
