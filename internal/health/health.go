package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Check kinds (health.kind in the domain file).
const (
	Carrier = "carrier" // the SF interface's carrier (IFF_UP and IFF_LOWER_UP)
	Echo    = "echo"    // ICMPv6 echo to the SF's address
	TCP     = "tcp"     // TCP connect to the SF's address and port
	SRv6    = "srv6"    // in-band: a packet through the instance's SID and back
)

// Defaults: 10 ms interval, fall 2, rise 3 (docs/pools.md: ≤ 50 ms of an
// instance's traffic lost; 100 probes/s per instance).
const (
	DefaultInterval = 10 * time.Millisecond
	DefaultFall     = 2
	DefaultRise     = 3
)

// Spec is how an instance is checked.
type Spec struct {
	Kind     string        `json:"kind"`
	Interval time.Duration `json:"interval"`
	Timeout  time.Duration `json:"timeout"` // ≤ Interval; 0: Interval
	Rise     int           `json:"rise"`    // successes that bring a down instance up
	Fall     int           `json:"fall"`    // failures that bring an up instance down
}

func (s Spec) withDefaults() Spec {
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.Timeout <= 0 || s.Timeout > s.Interval {
		s.Timeout = s.Interval
	}
	if s.Rise <= 0 {
		s.Rise = DefaultRise
	}
	if s.Fall <= 0 {
		s.Fall = DefaultFall
	}
	return s
}

// Target is one instance to check and where its liveness goes.
type Target struct {
	Pool     string `json:"pool"`
	PoolID   int    `json:"pool_id"` // the selector's pool index
	Instance int    `json:"instance"`
	Name     string `json:"name"` // the instance's service
	Spec     Spec   `json:"spec"`
	// Netns is where the check runs: the SF's namespace for carrier, the
	// probing node's for the others.
	Netns string `json:"netns"`
	Iface string `json:"iface,omitempty"` // carrier: the SF's interface
	// Addr/Port: echo and tcp's destination.
	Addr netip.Addr `json:"addr,omitempty"`
	Port int        `json:"port,omitempty"`
	// Segs and Src: srv6's SID list in path order (the instance's SID in
	// place of the pool's, then the rest of the chain, its egress last:
	// what a data packet of the instance carries) and the prober's own
	// address. The probe's inner packet is addressed to Src: the egress
	// decapsulates it and routes it back.
	Segs []netip.Addr `json:"segs,omitempty"`
	Src  netip.Addr   `json:"src,omitempty"`
}

// Liveness receives transitions: the selector's pinned map.
type Liveness interface {
	SetInstance(poolID, instance int, up bool) error
}

// Transition is one change of an instance's health.
type Transition struct {
	Pool     string    `json:"pool"`
	Instance string    `json:"instance"`
	Up       bool      `json:"up"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// InstanceStatus is an instance's health as status shows it.
type InstanceStatus struct {
	Pool        string      `json:"pool"`
	Instance    string      `json:"instance"`
	Kind        string      `json:"kind"`
	Up          bool        `json:"up"`
	Checks      uint64      `json:"checks"`
	Failures    uint64      `json:"failures"`
	Transitions uint64      `json:"transitions"`
	Last        *Transition `json:"last,omitempty"`
	// Numbered probes (echo, srv6): the smoothed RTT, the timeout it
	// gives now, the checker's late wake-ups and the answers that came
	// after their probe was counted lost (detector.go).
	SRTT        time.Duration `json:"srtt,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	LateWakeups uint64        `json:"late_wakeups,omitempty"`
	LateAnswers uint64        `json:"late_answers,omitempty"`
}

// Checker runs the checks of a set of targets.
type Checker struct {
	live Liveness
	log  *slog.Logger
	// OnTransition, when set, is called on every transition (metrics),
	// after the liveness is written.
	OnTransition func(Transition)
	// Publish, when set, is called on every transition once Status has
	// it and before the liveness is written: the report status reads
	// goes out first, so a reader that reads the liveness and then the
	// report (datapath's Counters) never sees an instance down without
	// the reason (the data path waits for one small file write).
	Publish func()

	mu    sync.Mutex
	state []*instState
}

type instState struct {
	t       Target
	up      bool
	okRun   int
	failRun int
	st      InstanceStatus
}

// LiveReader is implemented by a Liveness that can say what it holds: a
// checker started on a data path that already has liveness (an agent
// restarted) starts from it, so an instance the last checker took down
// needs Rise successes to come back.
type LiveReader interface {
	Live(poolID int) (uint32, error)
}

// New prepares a checker. Every instance starts as the data path has it
// (LiveReader), else up (the selector's default): a first failing check
// needs Fall failures.
func New(targets []Target, live Liveness, log *slog.Logger) *Checker {
	if log == nil {
		log = slog.Default()
	}
	c := &Checker{live: live, log: log}
	lr, _ := live.(LiveReader)
	for _, t := range targets {
		t.Spec = t.Spec.withDefaults()
		up := true
		if lr != nil {
			if w, err := lr.Live(t.PoolID); err == nil {
				up = w>>t.Instance&1 == 1
			}
		}
		c.state = append(c.state, &instState{t: t, up: up,
			st: InstanceStatus{Pool: t.Pool, Instance: t.Name, Kind: t.Spec.Kind, Up: up}})
	}
	return c
}

// Status is every instance's health.
func (c *Checker) Status() []InstanceStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]InstanceStatus, len(c.state))
	for i, s := range c.state {
		out[i] = s.st
		if s.st.Last != nil {
			l := *s.st.Last
			out[i].Last = &l
		}
	}
	return out
}

// Run checks every target until ctx ends (Start, then wait).
func (c *Checker) Run(ctx context.Context) error {
	wait, err := c.Start(ctx)
	if err != nil {
		return err
	}
	wait()
	return nil
}

// Start opens every check's sockets and handles (an error: one that
// cannot run at all, a namespace or address missing) and runs the checks
// until ctx ends; wait returns when they have stopped.
func (c *Checker) Start(ctx context.Context) (wait func(), err error) {
	probers := make([]any, len(c.state))
	for i, s := range c.state {
		p, err := newProber(s.t)
		if err != nil {
			for _, q := range probers[:i] {
				q.(interface{ Close() error }).Close()
			}
			return nil, fmt.Errorf("health check of %s/%s: %w", s.t.Pool, s.t.Name, err)
		}
		probers[i] = p
	}
	var wg sync.WaitGroup
	for i, s := range c.state {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch p := probers[i].(type) {
			case numberedProber:
				defer p.Close()
				c.probeLoop(ctx, s, p)
			case syncProber:
				defer p.Close()
				c.syncLoop(ctx, s, p)
			}
		}()
	}
	return wg.Wait, nil
}

// syncLoop runs a check that answers at once every interval.
func (c *Checker) syncLoop(ctx context.Context, s *instState, p syncProber) {
	tk := time.NewTicker(s.t.Spec.Interval)
	defer tk.Stop()
	for {
		ok, why := p.check(ctx)
		c.record(s, ok, why)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// probeLoop sends a numbered probe every interval and judges each by its
// deadline (detector.go). It wakes at the next send or the oldest
// probe's deadline, whichever is first; on every wake it first reads the
// answers (with their kernel timestamps). A send slot missed because the
// checker ran late is skipped, not sent in a burst.
func (c *Checker) probeLoop(ctx context.Context, s *instState, p numberedProber) {
	iv := s.t.Spec.Interval
	d := newDetector(s.t.Spec)
	what := "in-band probe"
	if s.t.Spec.Kind == Echo {
		what = "echo request"
	}
	var seq uint64
	next := time.Now()
	planned := next
	tm := time.NewTimer(0)
	defer tm.Stop()
	for {
		now := time.Now()
		p.drain(d.answer)
		for _, r := range d.due(now, now.Sub(planned)) {
			c.record(s, r.ok, what+" "+r.why)
		}
		if !now.Before(next) {
			seq++
			at := time.Now() // not now: judging and logging came between
			if err := p.send(seq); err != nil {
				c.record(s, false, err.Error())
			} else {
				d.sent(seq, at)
			}
			next = next.Add(iv)
			if !next.After(now) {
				next = now.Add(iv)
			}
		}
		c.mu.Lock()
		s.st.SRTT, s.st.Timeout, s.st.LateWakeups, s.st.LateAnswers = d.srtt, d.timeout(), d.late, d.lateAnswers
		c.mu.Unlock()
		planned = next
		if dl := d.next(); !dl.IsZero() && dl.Before(planned) {
			planned = dl
		}
		tm.Reset(time.Until(planned))
		select {
		case <-ctx.Done():
			return
		case <-tm.C:
		}
	}
}

// record counts one result and makes a transition after Rise successes
// or Fall failures in a row.
func (c *Checker) record(s *instState, ok bool, why string) {
	c.mu.Lock()
	s.st.Checks++
	if ok {
		s.okRun++
		s.failRun = 0
	} else {
		s.st.Failures++
		s.failRun++
		s.okRun = 0
	}
	var tr *Transition
	switch {
	case s.up && s.failRun >= s.t.Spec.Fall:
		s.up = false
		tr = &Transition{Pool: s.t.Pool, Instance: s.t.Name, Up: false, At: time.Now(),
			Reason: fmt.Sprintf("%s check failed %d times: %s", s.t.Spec.Kind, s.failRun, why)}
	case !s.up && s.okRun >= s.t.Spec.Rise:
		s.up = true
		tr = &Transition{Pool: s.t.Pool, Instance: s.t.Name, Up: true, At: time.Now(),
			Reason: fmt.Sprintf("%s check passed %d times", s.t.Spec.Kind, s.okRun)}
	}
	if tr != nil {
		s.st.Up = s.up
		s.st.Transitions++
		s.st.Last = tr
	}
	c.mu.Unlock()
	if tr == nil {
		return
	}
	// The report first, then the liveness (Publish); then the log and
	// metrics.
	if c.Publish != nil {
		c.Publish()
	}
	err := c.live.SetInstance(s.t.PoolID, s.t.Instance, tr.Up)
	state := "down"
	if tr.Up {
		state = "up"
	}
	attrs := []any{"pool", tr.Pool, "instance", tr.Instance, "state", state, "reason", tr.Reason}
	if err != nil {
		attrs = append(attrs, "error", err)
		c.log.Error("pool instance transition not written to the data path", attrs...)
	} else if tr.Up {
		c.log.Info("pool instance up", attrs...)
	} else {
		c.log.Warn("pool instance down", attrs...)
	}
	if c.OnTransition != nil {
		c.OnTransition(*tr)
	}
}
